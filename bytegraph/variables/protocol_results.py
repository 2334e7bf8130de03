"""What CPython checks of a user's special method's result, checked on the traced result.

CPython's C slots do not take a user method's result on trust: ``bool(obj)``
wants exactly a bool from ``__bool__``, ``len(obj)`` an int that fits an index
and is not negative from ``__len__``, ``iter(obj)`` an iterator from
``__iter__``; otherwise they raise TypeError, ValueError or OverflowError with
their own message. Some convert on the way: ``len`` of a ``__len__`` that
returns True is 1, an int subclass comes back a plain int.

The trace runs CPython's own check on a stand-in::

    class Sized:                      # the user's class, by name only
        def __len__(self): return value   # the traced result's constant value
    len(Sized())                      # -> the converted value, or CPython's exception

so the exception (type and message) and the converted value are CPython's; the
exception is raised in the trace where eager raises it
(``translate/ops/exceptions.raise_python_error``). A result that is no constant
passes only where its type alone settles the check (a SymBool from ``__bool__``,
a generator from ``__iter__``); anything else is a graph break, never a guess.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


def _stand_in(owner: type, method: str, value: Any) -> Any:
    """An instance of a class named like ``owner`` whose ``method`` returns ``value``."""
    return type(owner.__name__, (), {method: lambda self: value})()


def run_check(
    tx: Tx, protocol: Callable[[Any], Any], owner: type, method: str, value: Any
) -> Any:
    """``protocol`` (``bool``, ``len``, ``iter``...) on a stand-in returning ``value``:
    its result, or the exception CPython raises there, raised in the trace."""
    from bytegraph.translate.ops.exceptions import raise_python_error

    try:
        return protocol(_stand_in(owner, method, value))
    except (TypeError, ValueError, OverflowError) as e:
        raise_python_error(tx, e, f"{owner.__name__}.{method}")


def _constant(result: VariableTracker) -> tuple[bool, Any]:
    if result.is_python_constant():
        try:
            return True, result.as_python_constant()
        except Unsupported:
            pass
    return False, None


def checked_bool(tx: Tx, owner: type, result: VariableTracker) -> bool:
    """``bool(obj)`` from what ``owner.__bool__`` returned."""
    known, value = _constant(result)
    if known:
        return run_check(tx, bool, owner, "__bool__", value)
    if result.python_type() is bool:  # a symbolic bool: its truth is its value
        return result.truth(tx)
    raise Unsupported("operation_raises", f"__bool__ returned a {result.python_type().__name__}")


def checked_len(tx: Tx, owner: type, result: VariableTracker) -> int:
    """``len(obj)`` from what ``owner.__len__`` returned (an int >= 0 that fits an index)."""
    known, value = _constant(result)
    if not known:
        raise Unsupported("operation_raises", f"__len__ returned a {result.python_type().__name__}")
    return run_check(tx, len, owner, "__len__", value)


def checked_iterator(tx: Tx, owner: type, result: VariableTracker) -> VariableTracker:
    """``iter(obj)`` from what ``owner.__iter__`` returned: an iterator, else TypeError."""
    kind = result.python_type()
    if hasattr(kind, "__next__"):
        return result
    known, value = _constant(result)
    if not known:
        if getattr(builtins, kind.__name__, None) is not kind:
            raise Unsupported("operation_raises", f"__iter__ returned a {kind.__name__}")
        value = type(kind.__name__, (), {})()  # iter() reads its type's name only
    run_check(tx, iter, owner, "__iter__", value)
    raise Unsupported("operation_raises", f"__iter__ returned a {kind.__name__}")
