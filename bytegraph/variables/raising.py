"""Callees that end by raising, where a protocol in C catches it; exception classes.

Raises in traced code follow CPython's exception model
(``translate/ops/exceptions.py``): an ``ObservedRaise`` reaches the handler
the exception table names. A few protocols are different: CPython's own C
code catches an exception leaving a callee, which no exception table shows:
``__getattribute__`` raising AttributeError (then ``__getattr__``, ``hasattr``
or ``getattr``'s default take over), and ``__getitem__`` raising IndexError
(the end of the sequence iteration protocol, which ``iter()`` uses for
classes without ``__iter__`` and ``collections.abc.Sequence.__iter__``
implements). ``inline_frame`` inlines one callee and reports such an ending
as ``FrameRaised``, but only when it is certain: the exception was raised by
the callee's own frame (a ``raise`` statement, or an attribute lookup that
fails there), at an instruction no ``try`` or ``with`` of that frame covers,
so it leaves the frame exactly as in eager mode. Everything else stays the
graph break it was.

Builtin exception classes are instantiated in the trace
(``ExceptionClassVariable``; user subclasses in ``user_exceptions.py``). The
objects they make are ``ExceptionInstanceVariable`` (exceptions.py).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bytegraph import config
from bytegraph.exc import Unsupported
from bytegraph.variables.base import AttributeMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.exceptions import ExceptionInstanceVariable, ObservedRaise
from bytegraph.variables.objects import ClassVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_CO_GENERATOR_OR_ASYNC = 0x20 | 0x80 | 0x200
# Iterating by the sequence protocol stops at IndexError; give up on runaway sequences.
_MAX_SEQUENCE_ITEMS = 10_000


class FrameRaised(Exception):
    """An inlined callee certainly raised ``exc_type`` out of its frame.

    ``unsupported`` is the graph break to report if the caller does not
    handle that exception.
    """

    def __init__(self, exc_type: type[BaseException], unsupported: Unsupported) -> None:
        super().__init__(exc_type.__name__)
        self.exc_type = exc_type
        self.unsupported = unsupported


def inline_frame(tx: Tx, fn: VariableTracker, args: list[VariableTracker]) -> VariableTracker:
    """Inline the user function ``fn(*args)``; FrameRaised if it certainly raised."""
    from bytegraph.translate.inline import bind_arguments
    from bytegraph.translate.translator import InliningInstructionTranslator

    code = fn.code()
    if code.co_flags & _CO_GENERATOR_OR_ASYNC:
        raise Unsupported("coroutine_call", f"{code.co_name} is a generator or coroutine")
    if tx.inline_depth >= config.inline_depth_limit:
        raise Unsupported("inline_depth", f"inlining {code.co_name} at depth {tx.inline_depth}")
    positional, keyword = fn.defaults(tx)
    symbolic_locals = bind_arguments(code, args, {}, positional, keyword)
    child = InliningInstructionTranslator(
        code, symbolic_locals, fn.f_globals(), fn.cells(tx), tx.output,
        inline_depth=tx.inline_depth + 1, parent=tx,
    )
    try:
        child.run()
    except ObservedRaise as e:
        name = e.exc.exc_type.__name__
        detail = f"{name} raised by {code.co_name}, which a protocol may catch"
        raise FrameRaised(e.exc.exc_type, Unsupported("protocol_exception", detail)) from None
    except Unsupported as e:
        raised = _raised_here(child, e)
        if raised is not None:
            raise FrameRaised(raised, e) from None
        raise
    return child.return_value


def _raised_here(child: Any, error: Unsupported) -> type[BaseException] | None:
    """The exception type leaving ``child``'s frame for certain, if that is how it stopped."""
    from bytegraph.variables.user_defined import MissingAttribute

    inst = child.current_inst
    if inst is None or child.decoded.runs_code_on_error(inst.index):
        return None
    context = error.__context__
    if isinstance(context, MissingAttribute) and not context.frames:
        return AttributeError
    return None


def call_catching(
    tx: Tx, fn: VariableTracker, args: list[VariableTracker], exc_type: type[BaseException]
) -> VariableTracker | None:
    """``fn(*args)``, or None if it raised ``exc_type`` (any other raise stays a break)."""
    try:
        return inline_frame(tx, fn, args)
    except FrameRaised as e:
        if issubclass(e.exc_type, exc_type):
            return None
        raise e.unsupported from None


def sequence_items(tx: Tx, getitem: VariableTracker, obj: VariableTracker) -> list[VariableTracker]:
    """``obj[0], obj[1], ...`` until ``__getitem__`` raises IndexError (the sequence protocol)."""
    items = []
    for index in range(_MAX_SEQUENCE_ITEMS):
        item = call_catching(tx, getitem, [obj, ConstantVariable(index)], IndexError)
        if item is None:
            return items
        items.append(item)
    raise Unsupported("size_limit", f"a sequence of over {_MAX_SEQUENCE_ITEMS} items")


# -- exception objects ----------------------------------------------------------------


def is_builtin_exception_class(value: Any) -> bool:
    return (
        isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == "builtins"
    )


# What a class statement puts in every class dict; anything else dunder customises it.
# What a class statement puts in every class's dict (3.13 adds the last two).
_PLAIN_CLASS_DICT = frozenset({
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
    "__firstlineno__", "__static_attributes__",
})
# Builtin exceptions whose constructor or str() does more than store args.
_SPECIAL_BASES = (OSError, SyntaxError, ImportError, AttributeError, NameError, StopIteration,
                  SystemExit, UnicodeError, BaseExceptionGroup)


# Builtin exceptions whose constructor checks its arguments or picks another class.
_CONSTRUCTOR_CHECKS = (UnicodeError, BaseExceptionGroup)


def is_plain_exception_class(value: Any) -> bool:
    """A builtin exception class, or a class statement over one that adds no dunder
    (so ``Cls(*args)`` stores args and ``str()`` is BaseException's)."""
    if not (isinstance(value, type) and issubclass(value, BaseException)):
        return False
    if is_builtin_exception_class(value):
        return True
    if type(value) is not type or issubclass(value, _SPECIAL_BASES):
        return False
    for klass in value.__mro__:
        if is_builtin_exception_class(klass) or klass is object:
            continue
        if any(n.startswith("__") and n not in _PLAIN_CLASS_DICT for n in vars(klass)):
            return False
    return True


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ExceptionClassVariable(ClassVariable):
    """A builtin exception class: calling it makes an exception object; its
    ``__init__`` is BaseException's (``Exception.__init__(self, msg)`` in a user
    subclass's, user_exceptions.py)."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name == "__init__" and not issubclass(self.value, _SPECIAL_BASES):
            from bytegraph.variables.user_exceptions import BaseExceptionInitVariable

            return BaseExceptionInitVariable(self.value)
        return super().var_getattr(tx, name)

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if kwargs:
            raise Unsupported("exception_construction", f"{self.value.__name__}() with keywords")
        if issubclass(self.value, _CONSTRUCTOR_CHECKS) or (
            issubclass(self.value, OSError) and len(args) >= 2
        ):
            raise Unsupported(  # OSError(2, "x") makes a FileNotFoundError, for one
                "exception_construction", f"{self.value.__name__}(): its constructor checks or maps"
            )
        mutation = tx.output.side_effects.new_mutation(AttributeMutationNew)
        return ExceptionInstanceVariable(self.value, tuple(args), mutation_type=mutation)
