"""BuiltinVariable: Python builtins and the ``operator`` functions.

Every BINARY_OP, COMPARE_OP and unary opcode becomes a call of the matching
``operator`` function through this class. With a tensor operand the call is a
graph node; with constant operands it folds; on sequences it is modelled
item by item. Anything else is an unsupported call, never a guess.
"""

from __future__ import annotations

import builtins
import dataclasses
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase

Handler = Callable[
    ["InstructionTranslatorBase", list[VariableTracker], dict[str, VariableTracker]],
    "VariableTracker | None",
]

_PURE_MODULES = frozenset({"builtins", "operator", "_operator", "math"})
_BUILTIN_TYPES = frozenset({
    int, float, bool, complex, str, bytes, tuple, list, dict, set, frozenset, range,
    slice, type, object, enumerate, zip, map, filter, reversed,
})

# Operators that, given a tensor operand, are recorded as one graph node.
TENSOR_OPERATORS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.matmul, operator.and_, operator.or_,
    operator.xor, operator.lshift, operator.rshift, operator.iadd, operator.isub,
    operator.imul, operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow,
    operator.imatmul, operator.iand, operator.ior, operator.ixor, operator.ilshift,
    operator.irshift, operator.neg, operator.pos, operator.invert, operator.abs,
    operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge,
    operator.getitem,
})


def is_builtin_callable(value: Any) -> bool:
    """A builtin whose result depends only on its arguments."""
    if isinstance(value, type):
        return value in _BUILTIN_TYPES
    if not isinstance(value, types.BuiltinFunctionType):
        return False
    owner = value.__self__
    if isinstance(owner, types.ModuleType):
        return owner.__name__ in _PURE_MODULES
    return is_constant_value(owner)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BuiltinVariable(VariableTracker):
    fn: Any

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        from bytegraph.variables.tensor import TensorVariable, tensor_op

        handler = _HANDLERS.get(self.fn)
        if handler is not None:
            result = handler(tx, args, kwargs)
            if result is not None:
                return result
        if self.fn in TENSOR_OPERATORS and any(isinstance(a, TensorVariable) for a in args):
            return tensor_op(tx, "call_function", self.fn, args, kwargs)
        if all(a.is_python_constant() for a in (*args, *kwargs.values())):
            return _fold(self.fn, args, kwargs)
        raise Unsupported("unsupported_call", f"{_name(self.fn)} on {args}")

    def __repr__(self) -> str:
        return f"BuiltinVariable({_name(self.fn)})"


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))


def _fold(fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    from bytegraph.variables.builder import wrap_constant_result

    values = [a.as_python_constant() for a in args]
    kw_values = {k: v.as_python_constant() for k, v in kwargs.items()}
    try:
        result = fn(*values, **kw_values)
    except Exception as e:  # the program raises here in eager too
        raise Unsupported(
            "unsupported_value", f"{_name(fn)} raised {type(e).__name__}: {e}"
        ) from e
    return wrap_constant_result(result)


def _sequence_add(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.containers import BaseSequenceVariable

    a, b = args
    if isinstance(a, BaseSequenceVariable) and isinstance(b, BaseSequenceVariable):
        if issubclass(a.python_type(), tuple) and issubclass(b.python_type(), tuple):
            return a.with_items(a.items + b.items)
        if a.python_type() is b.python_type() is list:
            return a.with_items(a.items + b.items)
    return None


def _sequence_mul(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.containers import BaseSequenceVariable

    seq, count = args
    if isinstance(count, BaseSequenceVariable):
        seq, count = count, seq
    if isinstance(seq, BaseSequenceVariable) and isinstance(count, ConstantVariable):
        return seq.with_items(seq.items * count.value)
    return None


def _getitem(tx, args, kwargs) -> VariableTracker | None:
    container, index = args
    getitem = getattr(container, "getitem", None)
    return getitem(tx, index) if getitem is not None else None


def _contains(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.containers import BaseSequenceVariable, DictVariable

    container, item = args
    if isinstance(container, DictVariable):
        return ConstantVariable(item.as_python_constant() in container.items)
    if isinstance(container, BaseSequenceVariable):
        for candidate in container.items:
            same = _identity(tx, [candidate, item], {})
            if same is not None and same.value:
                return ConstantVariable(True)
        if item.is_python_constant() and all(i.is_python_constant() for i in container.items):
            return ConstantVariable(item.as_python_constant() in container.as_python_constant())
    return None


def _identity(tx, args, kwargs) -> ConstantVariable | None:
    """``a is b`` when it can be decided at trace time."""
    from bytegraph.variables.tensor import TensorVariable

    a, b = args
    if a is b:
        return ConstantVariable(True)
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        # Distinct inputs are distinct objects (aliases share one VT, guarded).
        return ConstantVariable(False)
    if a.is_python_constant() and b.is_python_constant():
        return ConstantVariable(a.as_python_constant() is b.as_python_constant())
    try:
        if a.python_type() is not b.python_type():
            return ConstantVariable(False)
    except Unsupported:
        return None
    return None


def _is_not(tx, args, kwargs) -> ConstantVariable | None:
    same = _identity(tx, args, kwargs)
    return None if same is None else ConstantVariable(not same.value)


def _truth(tx, args, kwargs) -> VariableTracker:
    return ConstantVariable(args[0].truth(tx))


def _not(tx, args, kwargs) -> VariableTracker:
    return ConstantVariable(not args[0].truth(tx))


def _len(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.tensor import TensorVariable

    (value,) = args
    if isinstance(value, TensorVariable):
        if not value.shape:
            raise Unsupported("unsupported_value", "len() of a 0-d tensor (raises in eager)")
        return ConstantVariable(value.shape[0])
    return ConstantVariable(len(value.unpack_sequence(tx)))


def _isinstance(tx, args, kwargs) -> VariableTracker:
    value, classes = args
    return ConstantVariable(isinstance_of(value, classes.as_python_constant()))


def isinstance_of(value: VariableTracker, classes: Any) -> bool:
    """``isinstance`` decided from the VT's Python type."""
    return issubclass(value.python_type(), classes)


def _type(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.builder import wrap_constant_result

    if len(args) != 1 or kwargs:
        return None
    return wrap_constant_result(args[0].python_type())


def _getattr(tx, args, kwargs) -> VariableTracker:
    obj, name = args[0], args[1].as_python_constant()
    try:
        return obj.var_getattr(tx, name)
    except Unsupported:
        if len(args) == 3 and _known_absent(obj, name):
            return args[2]
        raise


def _hasattr(tx, args, kwargs) -> VariableTracker:
    obj, name = args[0], args[1].as_python_constant()
    try:
        obj.var_getattr(tx, name)
    except Unsupported:
        if _known_absent(obj, name):
            return ConstantVariable(False)
        raise
    return ConstantVariable(True)


def _known_absent(obj: VariableTracker, name: str) -> bool:
    return obj.is_python_constant() and not hasattr(obj.as_python_constant(), name)


def _sequence_iadd(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.containers import ListVariable

    if isinstance(args[0], ListVariable):  # in place: the same list, extended
        args[0].call_method(tx, "__iadd__", [args[1]], {})
        return args[0]
    return _sequence_add(tx, args, kwargs)


def _items(tx, iterable: VariableTracker) -> list[VariableTracker]:
    return iterable.unpack_sequence(tx)


def _iterator(items: list[VariableTracker]) -> VariableTracker:
    from bytegraph.variables.containers import NEW_VALUE, IteratorVariable

    return IteratorVariable(tuple(items), mutation_type=NEW_VALUE)


def _enumerate(tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.containers import TupleVariable

    start = (args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0)))
    first = start.as_python_constant()
    return _iterator([
        TupleVariable((ConstantVariable(first + i), item))
        for i, item in enumerate(_items(tx, args[0]))
    ])


def _zip(tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.containers import TupleVariable

    columns = [_items(tx, a) for a in args]
    strict = kwargs.get("strict", ConstantVariable(False)).as_python_constant()
    if strict and len({len(c) for c in columns}) > 1:
        raise Unsupported("unsupported_value", "zip(strict=True) of unequal lengths (raises)")
    return _iterator([TupleVariable(tuple(row)) for row in zip(*columns)])


def _reversed(tx, args, kwargs) -> VariableTracker:
    return _iterator(list(reversed(_items(tx, args[0]))))


def _iter(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.translate.ops.iter import make_iterator

    return make_iterator(tx, args[0]) if len(args) == 1 else None


def _next(tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.containers import IteratorVariable

    iterator = args[0]
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported("unsupported_value", f"next() of {iterator}")
    item = iterator.next_item(tx)
    if item is None:
        if len(args) == 2:
            return args[1]
        raise Unsupported("unsupported_value", "next() of an exhausted iterator (StopIteration)")
    return item


def _map(tx, args, kwargs) -> VariableTracker:
    fn, columns = args[0], [_items(tx, a) for a in args[1:]]
    return _iterator([fn.call_function(tx, list(row), {}) for row in zip(*columns)])


def _filter(tx, args, kwargs) -> VariableTracker:
    fn, items = args[0], _items(tx, args[1])
    if fn.is_python_constant() and fn.as_python_constant() is None:
        return _iterator([i for i in items if i.truth(tx)])
    return _iterator([i for i in items if fn.call_function(tx, [i], {}).truth(tx)])


def _list(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.containers import NEW_VALUE, ListVariable

    if kwargs or len(args) > 1:
        return None
    items = tuple(_items(tx, args[0])) if args else ()
    return ListVariable(items, mutation_type=NEW_VALUE)


def _tuple(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.containers import TupleVariable

    if kwargs or len(args) > 1:
        return None
    return TupleVariable(tuple(_items(tx, args[0])) if args else ())


def _dict(tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.containers import NEW_VALUE, DictVariable

    if len(args) > 1:
        return None
    new = DictVariable({}, mutation_type=NEW_VALUE)
    new.call_method(tx, "update", list(args), kwargs)
    return new


def _sum(tx, args, kwargs) -> VariableTracker:
    total = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    for item in _items(tx, args[0]):
        total = BuiltinVariable(operator.add).call_function(tx, [total, item], {})
    return total


def _min_max(pick: Any) -> Handler:
    def handler(tx, args, kwargs) -> VariableTracker | None:
        items = _items(tx, args[0]) if len(args) == 1 else list(args)
        key = kwargs.pop("key", None)
        default = kwargs.pop("default", None)
        if kwargs:
            return None
        if not items:
            if default is None:
                raise Unsupported("unsupported_value", f"{pick.__name__}() of nothing (raises)")
            return default
        keys = items if key is None else [key.call_function(tx, [i], {}) for i in items]
        if not all(k.is_python_constant() for k in keys):
            raise Unsupported("data_dependent", f"{pick.__name__}() compares non-constants")
        values = [k.as_python_constant() for k in keys]
        return items[values.index(pick(values))]

    return handler


def _any_all(want: bool) -> Handler:
    def handler(tx, args, kwargs) -> VariableTracker:
        for item in _items(tx, args[0]):
            if item.truth(tx) is want:
                return ConstantVariable(want)
        return ConstantVariable(not want)

    return handler


def _sorted(tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.containers import NEW_VALUE, ListVariable

    items = _items(tx, args[0])
    key = kwargs.get("key")
    reverse = kwargs.get("reverse", ConstantVariable(False)).as_python_constant()
    keys = items if key is None else [key.call_function(tx, [i], {}) for i in items]
    if not all(k.is_python_constant() for k in keys):
        raise Unsupported("data_dependent", "sorted() compares non-constants")
    order = sorted(range(len(items)), key=lambda i: keys[i].as_python_constant(), reverse=reverse)
    return ListVariable(tuple(items[i] for i in order), mutation_type=NEW_VALUE)


def _callable(tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.base import BoundMethodVariable
    from bytegraph.variables.functions import BaseFunctionVariable, PartialVariable

    value = args[0]
    if isinstance(value, (BaseFunctionVariable, PartialVariable, BoundMethodVariable)):
        return ConstantVariable(True)
    return ConstantVariable(callable(value.python_type()) and _instances_callable(value))


def _instances_callable(value: VariableTracker) -> bool:
    return hasattr(value.python_type(), "__call__")


def _abs(tx, args, kwargs) -> VariableTracker:
    return BuiltinVariable(operator.abs).call_function(tx, args, kwargs)


def _to_scalar(fn: Any) -> Handler:
    def handler(tx, args, kwargs) -> VariableTracker | None:
        from bytegraph.variables.tensor import TensorVariable

        if args and isinstance(args[0], TensorVariable):
            raise Unsupported("data_dependent", f"{fn.__name__}() of a tensor reads its value")
        return None

    return handler


_HANDLERS: dict[Any, Handler] = {
    operator.add: _sequence_add,
    operator.iadd: _sequence_iadd,
    operator.mul: _sequence_mul,
    operator.getitem: _getitem,
    operator.contains: _contains,
    operator.is_: _identity,
    operator.is_not: _is_not,
    operator.truth: _truth,
    operator.not_: _not,
    builtins.bool: _truth,
    builtins.len: _len,
    builtins.isinstance: _isinstance,
    builtins.type: _type,
    builtins.getattr: _getattr,
    builtins.hasattr: _hasattr,
    builtins.enumerate: _enumerate,
    builtins.zip: _zip,
    builtins.reversed: _reversed,
    builtins.iter: _iter,
    builtins.next: _next,
    builtins.map: _map,
    builtins.filter: _filter,
    builtins.list: _list,
    builtins.tuple: _tuple,
    builtins.dict: _dict,
    builtins.sum: _sum,
    builtins.min: _min_max(min),
    builtins.max: _min_max(max),
    builtins.any: _any_all(True),
    builtins.all: _any_all(False),
    builtins.sorted: _sorted,
    builtins.callable: _callable,
    builtins.abs: _abs,
    builtins.int: _to_scalar(int),
    builtins.float: _to_scalar(float),
    builtins.complex: _to_scalar(complex),
}
