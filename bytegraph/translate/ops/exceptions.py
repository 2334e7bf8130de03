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
4. No entry in the root frame: a graph break before the raising
   instruction, so the code raises in Python.

The exception being handled (CPython's ``exc_info``, one per thread) lives on
the root translator: PUSH_EXC_INFO and POP_EXCEPT swap it, bare ``raise``
re-raises it and a new raise takes it as ``__context__``. What the caller of
the compiled frame was handling is unknown (``OuterExceptionVariable``).
Generator frames keep their own ``exc_info`` in CPython; a raise in one is
unsupported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from bytegraph.variables.raising import ExceptionClassVariable

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


# -- making and raising exception VTs ----------------------------------------------------


def as_exception(tx: Tx, value: VariableTracker) -> ExceptionInstanceVariable:
    """``raise value``'s exception object: a class is called with no arguments."""
    if isinstance(value, ExceptionClassVariable):
        value = value.call_function(tx, [], {})
    if not isinstance(value, ExceptionInstanceVariable):
        raise Unsupported("unsupported_value", f"raise of {value} (TypeError, or unknown here)")
    return value


def raise_new(tx: Tx, exc: ExceptionInstanceVariable) -> None:
    """Raise ``exc`` as CPython's ``_PyErr_SetObject`` does: it takes the exception
    being handled as its ``__context__``."""
    handled = exc_info(tx)
    context_unknown = isinstance(handled, OuterExceptionVariable)
    if isinstance(handled, ExceptionInstanceVariable) and handled is not exc:
        if _in_context_chain(tx, handled, exc):
            raise Unsupported("unsupported_value", "a raise that makes a __context__ cycle")
        tx.output.side_effects.store_attr(exc, "__context__", handled)
    mark_raised(tx, exc, context_unknown)
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


def raise_builtin(tx: Tx, exc_type: type[BaseException], *args: VariableTracker) -> None:
    """A traced builtin raises ``exc_type(*args)``; its opcode handler vets it."""
    exc = ExceptionClassVariable(exc_type).call_function(tx, list(args), {})
    try:
        raise_new(tx, exc)
    except ObservedRaise as e:
        e.vetted = None
        e.left = "builtin"
        raise


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


def exc_info(tx: Tx) -> VariableTracker:
    """The exception being handled (CPython's thread ``exc_info``), None VT if none."""
    return _root(tx).handled_exception


def set_exc_info(tx: Tx, value: VariableTracker) -> None:
    _root(tx).handled_exception = value


# -- the handlers -----------------------------------------------------------------------


@handler("RAISE_VARARGS")
def RAISE_VARARGS(tx: Tx, inst: Instruction) -> None:
    """(exc? cause? -- ): raise; bare ``raise`` re-raises the exception being handled."""
    if inst.arg == 0:
        handled = exc_info(tx)
        if not isinstance(handled, ExceptionInstanceVariable):
            raise Unsupported("unsupported_value", "bare raise of an exception unknown here")
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
        raise Unsupported("unsupported_value", f"RERAISE of {exc}")
    raise ObservedRaise(exc, vetted=tx)


@handler("PUSH_EXC_INFO")
def PUSH_EXC_INFO(tx: Tx, inst: Instruction) -> None:
    """(exc -- prev exc): ``exc`` becomes the exception being handled."""
    if getattr(tx, "is_generator", False):
        raise Unsupported("unsupported_opcode", "an except block in a generator")
    exc = tx.pop()
    tx.push(exc_info(tx))
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
        raise Unsupported("unsupported_value", f"matching {exc}")
    tx.push(ConstantVariable(issubclass(exc.exc_type, _match_classes(match))))


def _match_classes(match: VariableTracker) -> tuple[type, ...]:
    """The classes of an ``except`` clause; Unsupported where CPython raises TypeError."""
    items = match.items if isinstance(match, TupleVariable) else (match,)
    classes = []
    for item in items:
        cls = item.value if isinstance(item, ClassVariable) else None
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise Unsupported("unsupported_value", f"except clause of {item}")
        classes.append(cls)
    return tuple(classes)


# -- vetting: where CPython passes an exception straight through ---------------------------


def _is_user_function(tx: Tx, fn: VariableTracker) -> bool:
    from bytegraph.variables.functions import BaseFunctionVariable
    from bytegraph.variables.user_defined import UserDefinedClassVariable, UserMethodVariable

    if isinstance(fn, UserMethodVariable):
        fn = fn.fn
    if type(fn) is UserDefinedClassVariable:
        return _init_is_the_only_frame(tx, fn)
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
    """A CALL of a user function, method or plain class passes on what its frame raised."""
    vet(tx, error, from_callee=_is_user_function(tx, fn), from_builtin=False)


def vet_subscript(tx: Tx, error: ObservedRaise, container: VariableTracker) -> None:
    """``container[index]``: a dict, list or tuple's own lookup error, or what a user
    class's ``__getitem__`` function raised."""
    import types

    from bytegraph.variables.containers import ListVariable
    from bytegraph.variables.dicts import DictVariable
    from bytegraph.variables.user_defined import UserDefinedObjectVariable

    builtin = type(container) in (DictVariable, ListVariable, TupleVariable)
    callee = False
    if type(container) is UserDefinedObjectVariable:
        found = container.lookup(tx, "__getitem__")
        callee = found is not None and isinstance(found.raw, types.FunctionType)
    vet(tx, error, from_callee=callee, from_builtin=builtin)
