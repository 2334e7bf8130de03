"""Operators on instances of user classes: ``a + b`` with a user ``__add__``, ``a == b``
with a user ``__eq__``.

What ``binary_op1``, ``do_richcompare`` and the ``slot_*`` functions of
CPython do for classes written in Python, for the operator opcodes
(``BINARY_OP``, the unary ones, ``COMPARE_OP``):

1. ``a op b``: if ``type(b)`` is a proper subclass of ``type(a)`` that
   overrides the reflected method, ``b.__rop__(a)`` first; then
   ``a.__op__(b)``; then, for operands of different types, ``b.__rop__(a)``.
   The first result that is not ``NotImplemented`` is the answer; none is a
   TypeError in eager mode (a graph break here).
2. ``a op= b``: ``a.__iop__(b)`` if the class defines it, unless it returns
   ``NotImplemented``; then as ``a op b``.
3. ``-a``, ``+a``, ``~a``: ``type(a).__neg__(a)``...
4. ``a < b`` (and ``==``...): the reflected ``b.__gt__(a)`` first if
   ``type(b)`` is a proper subclass of ``type(a)``, then ``a.__lt__(b)``, then
   the reflected one. A method inherited from ``object`` does what
   ``object``'s does: ``__eq__`` is identity or ``NotImplemented``, ``__ne__``
   inverts ``__eq__``, the orderings are ``NotImplemented``. When every
   answer is ``NotImplemented``, ``==`` and ``!=`` compare identity and the
   orderings raise TypeError (a break).

Each method is inlined like any user method. Only Python functions are
called this way: an operand whose method is a builtin's slot (a subclass of
int or dict that does not override it), or a left operand this model does
not know to refuse the right one (a tensor, a list...), is left to the
generic operator path (``BuiltinVariable``), which breaks where it does not
model the operands.
"""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.user_defined import UserDefinedObjectVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_BINARY = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
    operator.floordiv: "floordiv", operator.mod: "mod", operator.pow: "pow",
    operator.matmul: "matmul", operator.and_: "and", operator.or_: "or", operator.xor: "xor",
    operator.lshift: "lshift", operator.rshift: "rshift",
}
_INPLACE = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
    operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
    operator.ilshift: operator.lshift, operator.irshift: operator.rshift,
}
_UNARY = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__"}
# Left operands whose own method returns NotImplemented for an instance of an
# unrelated user class, so the user's reflected method decides.
_REFUSING_TYPES = (int, float, complex, bool, str, bytes, type(None))


def _user(vt: VariableTracker) -> bool:
    return isinstance(vt, UserDefinedObjectVariable)


def _python_method(tx: Tx, obj: UserDefinedObjectVariable, name: str) -> Any:
    """The class's ``name`` if it is a Python function (or a pending store), else None;
    ``False`` where it is something this model does not call (a builtin's slot)."""
    found = obj.lookup(tx, name)
    if found is None or found.owner is object:
        return None
    if found.pending is None and not isinstance(found.raw, types.FunctionType):
        return False
    return found


def _call(tx: Tx, obj: Any, found: Any, name: str, other: VariableTracker) -> Any:
    """``obj.name(other)``, or None for NotImplemented."""
    result = obj.bind(tx, found, name).call_function(tx, [other], {})
    if result.is_python_constant() and result.as_python_constant() is NotImplemented:
        return None
    return result


def user_operator(tx: Tx, fn: Any, args: tuple[VariableTracker, ...]) -> VariableTracker | None:
    """``fn(*args)`` for an operator with a user-class operand, or None where the
    generic path applies."""
    if not (isinstance(args[0], UserDefinedObjectVariable) or (
            len(args) == 2 and isinstance(args[1], UserDefinedObjectVariable))):
        return None  # the common case, first: no user object, nothing more to look at
    if fn in _UNARY and len(args) == 1:
        found = _python_method(tx, args[0], _UNARY[fn])
        return args[0].bind(tx, found, _UNARY[fn]).call_function(tx, [], {}) if found else None
    if len(args) != 2:
        return None
    if fn in _INPLACE:
        return _inplace(tx, fn, *args)
    if fn in _BINARY:
        return _binary(tx, _BINARY[fn], *args)
    if fn in _COMPARISONS:
        return _compare(tx, fn, *args)
    return None


def _inplace(tx: Tx, fn: Any, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    binary = _BINARY[_INPLACE[fn]]
    if _user(a):
        name = f"__i{binary}__"
        found = _python_method(tx, a, name)
        if found is False:
            return None
        if found:
            result = _call(tx, a, found, name, b)
            if result is not None:
                return result
    return _binary(tx, binary, a, b)


def _binary(tx: Tx, op: str, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    name, reflected = f"__{op}__", f"__r{op}__"
    ta, tb = a.python_type(), b.python_type()
    mine = _python_method(tx, a, name) if _user(a) else None
    theirs = _python_method(tx, b, reflected) if _user(b) and tb is not ta else None
    if mine is False or theirs is False:
        return None
    if not _user(a) and not (type(a) is ConstantVariable and type(a.value) in _REFUSING_TYPES):
        return None  # a tensor, a list...: its own method may accept b
    if _user(a) and not mine and not _user(b) and not isinstance(b, ConstantVariable):
        return None  # the right operand's own reflected method may accept a
    if theirs and issubclass(tb, ta) and getattr(tb, reflected) is not getattr(ta, reflected, None):
        result = _call(tx, b, theirs, reflected, a)
        if result is not None:
            return result
        theirs = None
    if mine:
        result = _call(tx, a, mine, name, b)
        if result is not None:
            return result
    if theirs:
        result = _call(tx, b, theirs, reflected, a)
        if result is not None:
            return result
    if mine or theirs:
        raise Unsupported("operation_raises", f"{name} returned NotImplemented (TypeError)")
    return None


# -- comparisons ------------------------------------------------------------------------

_COMPARISONS = {
    operator.eq: ("__eq__", operator.eq), operator.ne: ("__ne__", operator.ne),
    operator.lt: ("__lt__", operator.gt), operator.gt: ("__gt__", operator.lt),
    operator.le: ("__le__", operator.ge), operator.ge: ("__ge__", operator.le),
}
_NOT_IMPLEMENTED = object()


def _compare(tx: Tx, fn: Any, a: VariableTracker, b: VariableTracker) -> VariableTracker | None:
    reflected = _COMPARISONS[fn][1]
    if not all(_user(v) or _refusing(v) or _refusing_container(v, w) for v, w in ((a, b), (b, a))):
        return None  # a tensor...: its own comparison may accept the other
    if any(_user(v) and _python_method(tx, v, _COMPARISONS[op][0]) is False
           for v, op in ((a, fn), (b, reflected), (a, operator.eq), (b, operator.eq))):
        return None  # a builtin base's comparison (a dict subclass's __eq__)
    checked_reverse = a.python_type() is not b.python_type() and issubclass(
        b.python_type(), a.python_type())
    order = [(b, reflected, a)] if checked_reverse else []
    order.append((a, fn, b))
    if not checked_reverse:
        order.append((b, reflected, a))
    for obj, op, other in order:
        result = _rich(tx, obj, op, other)
        if result is not _NOT_IMPLEMENTED:
            return result
    if fn in (operator.eq, operator.ne):
        from bytegraph.variables.builtin import call

        return call(tx, operator.is_ if fn is operator.eq else operator.is_not, a, b)
    raise Unsupported("operation_raises", f"{_COMPARISONS[fn][0]} not supported (TypeError)")


def _refusing(vt: VariableTracker) -> bool:
    return type(vt) is ConstantVariable and type(vt.value) in _REFUSING_TYPES


_CONTAINERS = (tuple, list, dict, set, frozenset)


def _refusing_container(vt: VariableTracker, other: VariableTracker) -> bool:
    """A builtin container compared with an instance of a class that derives from none:
    its comparison answers NotImplemented."""
    return vt.python_type() in _CONTAINERS and not issubclass(other.python_type(), _CONTAINERS)


def _rich(tx: Tx, obj: VariableTracker, op: Any, other: VariableTracker) -> Any:
    """``type(obj)``'s comparison ``op`` of ``obj`` with ``other``."""
    if not _user(obj):
        return _NOT_IMPLEMENTED  # a constant of a builtin type: another type is no match
    name = _COMPARISONS[op][0]
    found = _python_method(tx, obj, name)
    if found:
        result = _call(tx, obj, found, name, other)
        return _NOT_IMPLEMENTED if result is None else result
    if op is operator.eq:  # object.__eq__
        from bytegraph.variables.builtin import call

        same = call(tx, operator.is_, obj, other)
        return same if same.truth(tx) else _NOT_IMPLEMENTED
    if op is operator.ne:  # object.__ne__: the class's own __eq__, inverted
        equal = _rich(tx, obj, operator.eq, other)
        if equal is _NOT_IMPLEMENTED:
            return equal
        return ConstantVariable(not equal.truth(tx))
    return _NOT_IMPLEMENTED
