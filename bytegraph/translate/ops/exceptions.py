"""Raising and catching: CPython 3.11's zero-cost exception model, traced.

``try: body except KeyError as e: handler`` compiles (3.11) to the body, with
no setup instruction, and an exception-table entry covering it::

    body ...                       # covered: on error, unwind to depth d, jump to H
    H: PUSH_EXC_INFO               (exc -- prev exc)       exc becomes "being handled"
       LOAD_GLOBAL KeyError
       CHECK_EXC_MATCH             (exc type -- exc bool)
       POP_JUMP_IF_FALSE R
       STORE_FAST e; handler; POP_EXCEPT (prev -- ): prev is "being handled" again
    R: RERAISE 0                   (exc -- ): no match, keep propagating
    cleanup (lasti entry): COPY 3; POP_EXCEPT; RERAISE 1

The trace runs the same way:

1. ``RAISE_VARARGS`` (or a traced builtin that certainly raises, such as a
   dict lookup of an absent constant key) makes an exception VT and raises
   ``ObservedRaise`` (``variables/exceptions.py``) carrying it, vetted for
   the current translator and instruction.
2. The translator's ``step`` catches it and calls ``tx.handle_raise``: the
   decoded exception table's entry covering the current instruction says
   where to go. The symbolic stack is cut to the entry's depth, lasti is
   pushed if the entry says so, then the exception, and the trace jumps to
   the handler. The handler's opcodes below then run like any others.
3. No entry in an inlined frame: ``ObservedRaise`` leaves the child's
   ``run()``; ``inline_call`` notes the caller, and the caller's CALL
   (``vet_call``) vets it when CPython would pass it straight through (a
   call of a user function or method), so step 2 runs at the call
   instruction. Anything in between that might catch it in CPython (FOR_ITER
   and StopIteration, a builtin calling back into user code) does not vet
   it, and the unvetted raise becomes a graph break.
4. No entry in the root frame: the trace ends there, and the transformed
   code rebuilds the exception and raises it after the graph and the side
   effects (``escapes.py``).

The exception being handled (CPython's ``exc_info``, one per thread) lives on
the root translator: PUSH_EXC_INFO and POP_EXCEPT swap it, bare ``raise``
re-raises it and a new raise takes it as ``__context__``. What the caller of
the compiled frame was handling is unknown (``OuterExceptionVariable``).
A generator frame has its own (CPython's ``gi_exc_state``): while it runs it
is stacked over its caller's (``running_generators`` on the root), so
PUSH_EXC_INFO and POP_EXCEPT swap the innermost one, and a raise takes the
innermost exception any of them holds. What a generator's frame raises
reaches its consumer through the iterator protocol (``variables/
generators.py``): ``pass_from_iterator`` marks it, and ``next()``, the
generator's methods, FOR_ITER and SEND vet it (``vet_iteration``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from bytegraph.exc import Unsupported
from bytegraph.translate.registry import handler
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import TupleVariable
from bytegraph.variables.exceptions import (
    ExceptionInstanceVariable,
    ObservedRaise,
    OuterExceptionVariable,
    mark_raised,
)
from bytegraph.variables.objects import ClassVariable
from bytegraph.variables.raising import ExceptionClassVariable, is_builtin_exception_class
from bytegraph.variables.user_defined import MissingAttribute

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


# -- making and raising exception VTs ----------------------------------------------------


def as_exception(tx: Tx, value: VariableTracker) -> ExceptionInstanceVariable:
    """``raise value``'s exception object: a class is called with no arguments."""
    if isinstance(value, ExceptionClassVariable):
        value = value.call_function(tx, [], {})
    if not isinstance(value, ExceptionInstanceVariable):
        raise Unsupported("exception_value", f"raise of {value} (TypeError, or unknown here)")
    return value


def raise_new(tx: Tx, exc: ExceptionInstanceVariable) -> None:
    """Raise ``exc`` as CPython's ``_PyErr_SetObject`` does: it takes the exception
    being handled as its ``__context__``."""
    handled = exc_info(tx)
    context_unknown = isinstance(handled, OuterExceptionVariable)
    if isinstance(handled, ExceptionInstanceVariable) and handled is not exc:
        if _in_context_chain(tx, handled, exc):
            raise Unsupported("exception_value", "a raise that makes a __context__ cycle")
        tx.output.side_effects.store_attr(exc, "__context__", handled)
    root_inst = _root(tx).current_inst
    mark_raised(tx, exc, context_unknown, root_inst.lineno if root_inst else None)
    raise ObservedRaise(exc, vetted=tx)


def _in_context_chain(tx: Tx, start: ExceptionInstanceVariable, exc: VariableTracker) -> bool:
    """``exc`` is in ``start``'s ``__context__`` chain: CPython cuts such a cycle; rare
    enough to leave to Python."""
    seen: set[int] = set()
    node: VariableTracker = start
    while isinstance(node, ExceptionInstanceVariable):
        if id(node) in seen:
            return True
        seen.add(id(node))
        try:
            node = node.var_getattr(tx, "__context__")
        except Unsupported:  # the caller's exception: it cannot hold one made in the trace
            return False
        if node is exc:
            return True
    return False


def raise_builtin(
    tx: Tx,
    exc_type: type[BaseException],
    *args: VariableTracker,
    attrs: dict[str, VariableTracker] | None = None,
) -> NoReturn:
    """A traced builtin raises ``exc_type(*args)`` (with ``attrs``, such as an
    AttributeError's ``name`` and ``obj``, stored on it); its opcode handler vets it."""
    exc = ExceptionClassVariable(exc_type).call_function(tx, list(args), {})
    for name, value in (attrs or {}).items():
        tx.output.side_effects.store_attr(exc, name, value)
    try:
        raise_new(tx, exc)
    except ObservedRaise as e:
        e.vetted = None
        e.left = "builtin"
        raise


# Raised by a builtin run at trace time, these tell of the process, not the arguments.
_ENVIRONMENTAL = (MemoryError, RecursionError, SystemError, OSError, Warning)
# Attributes a builtin exception carries besides args, that a raise copies (3.11).
_EXTRA_ATTRS = {AttributeError: ("name", "obj"), NameError: ("name",)}


def raise_python_error(tx: Tx, error: Exception, what: str) -> NoReturn:
    """A builtin run at trace time on constants raised ``error``: eager raises the same
    exception there, so the trace raises a copy (type, args and attributes) of it.

    The message is CPython's own, since CPython made it. Anything the copy could not
    equal (a class with more state, arguments that are no constants) stays a break.
    """
    from bytegraph.variables.builder import wrap_constant_result
    from bytegraph.variables.constant import is_constant_value

    # Its traceback holds this trace's frames, and through them (f_back) the user's
    # frame that called the compiled function: kept as the raise's __context__, it
    # would keep that frame, and the generators in it, alive past the call.
    error.__traceback__ = None
    exc_type = type(error)
    extra = next((v for k, v in _EXTRA_ATTRS.items() if issubclass(exc_type, k)), ())
    values = [*error.args, *(getattr(error, n) for n in extra)]
    if (
        not is_builtin_exception_class(exc_type)
        or issubclass(exc_type, _ENVIRONMENTAL)
        or error.__cause__ is not None
        or hasattr(error, "__notes__")
        or not all(is_constant_value(v) for v in values)
    ):
        detail = f"{what} raised {exc_type.__name__}: {error}"
        raise Unsupported("operation_raises", detail) from error
    args = [wrap_constant_result(a) for a in error.args]
    attrs = {n: wrap_constant_result(getattr(error, n)) for n in extra}
    raise_builtin(tx, exc_type, *args, attrs=attrs)


def raise_as_eager(tx: Tx, what: str, fn: Callable[..., Any], *values: Any) -> NoReturn:
    """Raise what CPython raises for a call the trace found certain to fail: ``fn(*values)``
    is a stand-in that fails the same way (``[].index(3)`` for a list without 3), so
    the message is CPython's own."""
    try:
        fn(*values)
    except Exception as e:
        raise_python_error(tx, e, what)
    raise Unsupported("operation_raises", f"{what}: the stand-in call did not raise")


def raise_in_handler(tx: Tx, what: str, fn: Callable[..., Any], *values: Any) -> NoReturn:
    """``raise_as_eager`` from an opcode handler's own work (UNPACK_SEQUENCE of too few
    values): the handler's instruction raises it, as in CPython."""
    try:
        raise_as_eager(tx, what, fn, *values)
    except ObservedRaise as error:
        error.vetted = tx
        raise


def getattr_raising(tx: Tx, obj: VariableTracker, name: str) -> VariableTracker:
    """``obj.name`` (LOAD_ATTR, ``getattr`` without a default): where the attribute is
    certainly missing, the AttributeError CPython raises, raised in the trace."""
    try:
        return obj.var_getattr(tx, name)
    except MissingAttribute as missing:
        if missing.guarded:
            _raise_missing_attribute(tx, obj, name, missing)
        raise
    except Unsupported:
        if isinstance(obj, ConstantVariable) and not hasattr(obj.value, name):
            raise_as_eager(tx, "getattr", getattr, obj.value, name)
        raise


def _raise_missing_attribute(
    tx: Tx, obj: VariableTracker, name: str, missing: Unsupported
) -> NoReturn:
    """AttributeError(message, name=name, obj=obj) of a user object or class; the message
    is CPython's, from the same lookup on a stand-in class of the same name."""
    from bytegraph.variables.user_defined import (
        UserDefinedClassVariable,
        UserDefinedObjectVariable,
    )

    if type(obj) is UserDefinedClassVariable:
        stand_in: Any = type(obj.value.__name__, (), {})
    elif type(obj) is UserDefinedObjectVariable:
        stand_in = type(obj.cls.__name__, (), {"__slots__": ()})()
    else:
        raise missing
    try:
        getattr(stand_in, name)
    except AttributeError as e:
        message = str(e)
    else:
        raise missing from None
    attrs = {"name": ConstantVariable(name), "obj": obj}
    raise_builtin(tx, AttributeError, ConstantVariable(message), attrs=attrs)


def vet(tx: Tx, error: ObservedRaise, from_callee: bool, from_builtin: bool) -> ObservedRaise:
    """Let ``tx`` handle ``error`` if it came straight from a callee or builtin of its own."""
    if (from_callee and error.left is tx) or (from_builtin and error.left == "builtin"):
        error.vetted = tx
    return error


# -- the exception being handled ------------------------------------------------------


def _root(tx: Tx) -> Tx:
    while getattr(tx, "parent", None) is not None:
        tx = tx.parent
    return tx


root_translator = _root


def _exc_states(tx: Tx) -> list[Tx]:
    """The frames whose ``handled_exception`` is stacked now, innermost first: the
    running generators (each has its own, CPython's ``gi_exc_state``), then the root."""
    root = _root(tx)
    return [*reversed(root.running_generators), root]


def exc_info(tx: Tx) -> VariableTracker:
    """The exception being handled (CPython's ``_PyErr_GetTopmostException``): the
    innermost state that holds one; None VT if none."""
    for frame in _exc_states(tx):
        handled = frame.handled_exception
        if not (handled.is_python_constant() and handled.as_python_constant() is None):
            return handled
    return ConstantVariable(None)


def own_exc_info(tx: Tx) -> VariableTracker:
    """The innermost state's own value, None included: what PUSH_EXC_INFO saves."""
    return _exc_states(tx)[0].handled_exception


def set_exc_info(tx: Tx, value: VariableTracker) -> None:
    _exc_states(tx)[0].handled_exception = value


# -- the handlers -----------------------------------------------------------------------


@handler("RAISE_VARARGS")
def RAISE_VARARGS(tx: Tx, inst: Instruction) -> None:
    """(exc? cause? -- ): raise; bare ``raise`` re-raises the exception being handled."""
    if inst.arg == 0:
        handled = exc_info(tx)
        if not isinstance(handled, ExceptionInstanceVariable):
            raise Unsupported("exception_value", "bare raise of an exception unknown here")
        raise ObservedRaise(handled, vetted=tx)
    cause = tx.pop() if inst.arg == 2 else None
    exc = as_exception(tx, tx.pop())
    if cause is not None:
        if not (cause.is_python_constant() and cause.as_python_constant() is None):
            cause = as_exception(tx, cause)
        exc.var_setattr(tx, "__cause__", cause)
    raise_new(tx, exc)


@handler("LOAD_ASSERTION_ERROR")
def LOAD_ASSERTION_ERROR(tx: Tx, inst: Instruction) -> None:
    """( -- AssertionError): a failed ``assert`` raises it next."""
    tx.push(ExceptionClassVariable(AssertionError))


@handler("RERAISE")
def RERAISE(tx: Tx, inst: Instruction) -> None:
    """(lasti? exc -- ): keep propagating; lasti only moves the traceback's line."""
    exc = tx.pop()
    if not isinstance(exc, ExceptionInstanceVariable):
        raise Unsupported("exception_value", f"RERAISE of {exc}")
    raise ObservedRaise(exc, vetted=tx)


@handler("PUSH_EXC_INFO")
def PUSH_EXC_INFO(tx: Tx, inst: Instruction) -> None:
    """(exc -- prev exc): ``exc`` becomes the exception being handled."""
    exc = tx.pop()
    tx.push(own_exc_info(tx))
    tx.push(exc)
    set_exc_info(tx, exc)


@handler("POP_EXCEPT")
def POP_EXCEPT(tx: Tx, inst: Instruction) -> None:
    """(prev -- ): ``prev`` is the exception being handled again."""
    set_exc_info(tx, tx.pop())


@handler("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(tx: Tx, inst: Instruction) -> None:
    """(exc type -- exc bool): ``isinstance(exc, type)`` for a class or tuple of classes."""
    match = tx.pop()
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionInstanceVariable):
        raise Unsupported("exception_value", f"matching {exc}")
    tx.push(ConstantVariable(issubclass(exc.exc_type, _match_classes(match))))


def _match_classes(match: VariableTracker) -> tuple[type, ...]:
    """The classes of an ``except`` clause; Unsupported where CPython raises TypeError."""
    items = match.items if isinstance(match, TupleVariable) else (match,)
    classes = []
    for item in items:
        cls = item.value if isinstance(item, ClassVariable) else None
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise Unsupported("exception_value", f"except clause of {item}")
        classes.append(cls)
    return tuple(classes)


# -- vetting: where CPython passes an exception straight through ---------------------------


def _is_user_function(tx: Tx, fn: VariableTracker) -> bool:
    from bytegraph.variables.functions import BaseFunctionVariable
    from bytegraph.variables.user_defined import UserDefinedClassVariable, UserMethodVariable
    from bytegraph.variables.user_exceptions import UserExceptionClassVariable, has_python_init

    if isinstance(fn, UserMethodVariable):
        fn = fn.fn
    if type(fn) is UserDefinedClassVariable:
        return _init_is_the_only_frame(tx, fn)
    if isinstance(fn, UserExceptionClassVariable):  # its __init__, if a Python function
        return has_python_init(fn.value)
    return isinstance(fn, BaseFunctionVariable)


def _init_is_the_only_frame(tx: Tx, cls_vt: VariableTracker) -> bool:
    """``Cls(...)`` of a plain class runs no user code but its ``__init__`` function."""
    import types

    from bytegraph.variables.user_defined import lookup_class_attr, mapping_base

    cls = cls_vt.value
    if mapping_base(cls) is not None:
        return False
    found = lookup_class_attr(tx, cls, cls_vt._source(tx), "__init__")
    return found is not None and found.pending is None and isinstance(
        found.raw, types.FunctionType
    )


def vet_call(tx: Tx, error: ObservedRaise, fn: VariableTracker) -> None:
    """A CALL of a user function, method or plain class passes on what its frame raised;
    a CALL of a builtin function or of a builtin container's method, what it raised
    itself (not what a builtin it called on the way raised: ``list(map(next, its))``)."""
    depth = _builtin_depth(fn)
    from_builtin = depth is not None and error.builtin_frames == depth
    vet(tx, error, from_callee=_is_user_function(tx, fn), from_builtin=from_builtin)
    if _passes_iteration(fn):
        vet_iteration(tx, error, stop_iteration=True)
    elif _consumes_iteration(fn):
        vet_iteration(tx, error, stop_iteration=False)


def vet_item_method(tx: Tx, error: ObservedRaise, container: VariableTracker) -> None:
    """``del container[index]`` (DELETE_SUBSCR): a builtin container's own KeyError or
    IndexError."""
    vet(tx, error, from_callee=False,
        from_builtin=_is_builtin_container(container) and error.builtin_frames == 0)


def vet_attribute(tx: Tx, error: ObservedRaise) -> None:
    """LOAD_ATTR/LOAD_METHOD passes on the AttributeError of the lookup itself (what a
    property or ``__getattr__`` raised may be caught by the protocol: a break)."""
    vet(tx, error, from_callee=False, from_builtin=error.builtin_frames == 0)


def vet_truth(tx: Tx, error: ObservedRaise) -> None:
    """A jump on a value's truth passes on what CPython's check of ``__bool__``'s or
    ``__len__``'s result raised (``variables/protocol_results.py``)."""
    vet(tx, error, from_callee=False, from_builtin=error.builtin_frames == 0)


def vet_operator(tx: Tx, error: ObservedRaise) -> None:
    """An operator opcode (BINARY_OP...) passes on what its builtin operator raised."""
    vet(tx, error, from_callee=False, from_builtin=error.builtin_frames == 1)


def _builtin_depth(fn: VariableTracker) -> int | None:
    """The builtin calls a raise of ``fn``'s own leaves on its way out: 1 through a
    BuiltinVariable, 0 from a builtin container's method; None for anything else."""
    from bytegraph.variables.base import BoundMethodVariable
    from bytegraph.variables.builtin import BuiltinVariable

    if isinstance(fn, BuiltinVariable):
        return 1
    if isinstance(fn, BoundMethodVariable) and _is_builtin_container(fn.receiver):
        return 0
    return None


def _is_builtin_container(vt: VariableTracker) -> bool:
    """A list, tuple, dict or set VT of exactly a builtin type (no user subclass)."""
    import collections

    from bytegraph.variables.containers import ListVariable
    from bytegraph.variables.deques import DequeVariable
    from bytegraph.variables.dicts import DictVariable
    from bytegraph.variables.sets import SetVariable

    kinds = (ListVariable, TupleVariable, DictVariable, SetVariable, DequeVariable,
             ConstantVariable)
    builtin_types = (list, tuple, dict, collections.OrderedDict, collections.defaultdict,
                     set, frozenset, str, bytes, range, collections.deque)
    return type(vt) in kinds and vt.python_type() in builtin_types


def vet_subscript(tx: Tx, error: ObservedRaise, container: VariableTracker) -> None:
    """``container[index]``: a dict, list or tuple's own lookup error, or what a user
    class's ``__getitem__`` function raised."""
    import types

    from bytegraph.variables.containers import ListVariable
    from bytegraph.variables.dicts import DictVariable
    from bytegraph.variables.user_defined import UserDefinedObjectVariable

    builtin = (
        type(container) in (DictVariable, ListVariable, TupleVariable, ConstantVariable)
        and error.builtin_frames == 1
    )
    callee = False
    if type(container) is UserDefinedObjectVariable:
        found = container.lookup(tx, "__getitem__")
        callee = found is not None and isinstance(found.raw, types.FunctionType)
    vet(tx, error, from_callee=callee, from_builtin=builtin)


# -- the iterator protocol: what a generator's frame raises, and what next() raises ----------

# ``ObservedRaise.left`` of an exception the iterator protocol passes on to its consumer.
FROM_ITERATOR = "iterator"


def pass_from_iterator(error: ObservedRaise) -> ObservedRaise:
    """``error`` leaves a generator's ``__next__``/``send``/``throw``/``close`` as it is."""
    error.vetted = None
    error.left = FROM_ITERATOR
    return error


def new_exception(tx: Tx, exc_type: type[BaseException], *args: VariableTracker):
    """``exc_type(*args)``, made as the protocol's C code makes it."""
    return ExceptionClassVariable(exc_type).call_function(tx, list(args), {})


def raise_from_iterator(
    tx: Tx,
    exc_type: type[BaseException],
    *args: VariableTracker,
    attrs: dict[str, VariableTracker] | None = None,
) -> NoReturn:
    """The generator protocol raises ``exc_type(*args)`` (StopIteration of a finished
    generator, with its ``value``); the consumer's opcode vets it."""
    exc = new_exception(tx, exc_type, *args)
    for name, value in (attrs or {}).items():
        tx.output.side_effects.store_attr(exc, name, value)
    try:
        raise_new(tx, exc)
    except ObservedRaise as error:
        raise pass_from_iterator(error) from None


def mark_thrown(tx: Tx, exc: ExceptionInstanceVariable) -> None:
    """``exc`` is raised again (thrown into a generator): it gets a traceback."""
    root_inst = _root(tx).current_inst
    mark_raised(tx, exc, False, root_inst.lineno if root_inst else None)


def raise_in_generator(child: Tx, exc: ExceptionInstanceVariable) -> NoReturn:
    """``throw``: raise ``exc`` in the running generator ``child`` at its current
    instruction. CPython chains it only to what the generator itself is handling
    (``_PyErr_ChainStackItem``), not to what its consumer is."""
    own = own_exc_info(child)
    if isinstance(own, ExceptionInstanceVariable) and own is not exc:
        raise_new(child, exc)  # the innermost state holds ``own``: it is the context
    mark_thrown(child, exc)
    raise ObservedRaise(exc, vetted=child)


def vet_iteration(tx: Tx, error: ObservedRaise, *, stop_iteration: bool) -> None:
    """Let ``tx`` handle what the iterator protocol passed on: FOR_ITER and SEND pass
    everything but StopIteration (the end of the loop), ``next()`` everything."""
    if error.left != FROM_ITERATOR:
        return
    if stop_iteration or not issubclass(error.exc.exc_type, StopIteration):
        error.vetted = tx


# Builtins that consume an iterable whole and keep nothing of it if it raises.
_CONSUMERS = frozenset({list, tuple, sorted, sum, min, max, any, all, set, frozenset})


def _consumes_iteration(fn: VariableTracker) -> bool:
    """``list(gen)``, ``sum(gen)``...: they pass on what the generator raised."""
    from bytegraph.variables.builtin import BuiltinVariable

    return isinstance(fn, BuiltinVariable) and fn.fn in _CONSUMERS


def _passes_iteration(fn: VariableTracker) -> bool:
    """``next`` or a generator's own method: they pass on what the generator raised."""
    from bytegraph.variables.base import BoundMethodVariable
    from bytegraph.variables.builtin import BuiltinVariable
    from bytegraph.variables.generators import GeneratorVariable

    if isinstance(fn, BuiltinVariable):
        return fn.fn is next
    return isinstance(fn, BoundMethodVariable) and isinstance(fn.receiver, GeneratorVariable)
