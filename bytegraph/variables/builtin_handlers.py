"""Handlers of builtin functions and types: introspection, iteration, constructors.

Each handler takes ``(tx, args, kwargs)`` and returns the result VT, or None
when the arguments are not its case (BuiltinVariable then tries a graph node
and constant folding). Instance handlers (``itemgetter(1)``, ``str.join``)
also receive the callable itself.
"""

from __future__ import annotations

import builtins
import collections
import functools
import operator
import types
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value
from bytegraph.variables.containers import (
    NEW_VALUE,
    ListVariable,
    TraceTimeKey,
    TupleVariable,
    is_python_constant_now,
    python_constant,
    sort_items,
)
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.iterators import (
    EnumerateIteratorVariable,
    FilterIteratorVariable,
    IteratorVariable,
    MapIteratorVariable,
    ZipIteratorVariable,
    iterate,
    iterate_reversed,
)

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


def _call(tx: Tx, fn: Any, *args: VariableTracker) -> VariableTracker:
    from bytegraph.variables.builtin import call

    return call(tx, fn, *args)


def _is_tensor(vt: VariableTracker) -> bool:
    from bytegraph.variables.tensor import TensorVariable

    return isinstance(vt, TensorVariable)


# -- introspection ------------------------------------------------------------------


def _len(tx: Tx, args, kwargs) -> VariableTracker | None:
    (value,) = args
    if _is_tensor(value):
        if not value.shape:
            raise Unsupported("operation_raises", "len() of a 0-d tensor (raises in eager)")
        from bytegraph.variables.symbolic import size_item

        return size_item(tx, value.node, 0, value.shape[0])
    if isinstance(value, ConstantVariable):
        return None  # fold: len("abc"), len(range(3))
    if not hasattr(value.python_type(), "__len__"):
        raise Unsupported("operation_raises", f"len() of {value} (TypeError in eager)")
    from bytegraph.variables.user_defined import UserDefinedObjectVariable

    if isinstance(value, UserDefinedObjectVariable):  # CPython checks what __len__ returns
        return ConstantVariable(value.length(tx))
    return value.call_method(tx, "__len__", [], {})


def isinstance_of(value: VariableTracker, classes: Any) -> bool:
    """``isinstance`` decided from the VT's Python type."""
    return issubclass(value.python_type(), classes)


def _isinstance(tx: Tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.instance_checks import hooked_isinstance

    value, classes = args
    try:
        hooked = hooked_isinstance(tx, value, classes)
        if hooked is not None:
            return hooked
        return ConstantVariable(isinstance_of(value, python_constant(tx, classes)))
    except TypeError as e:
        raise Unsupported("operation_raises", f"isinstance raised {e}") from None


def _issubclass(tx: Tx, args, kwargs) -> VariableTracker | None:
    """Folded from constants, unless a user's ``__subclasscheck__`` is involved."""
    from bytegraph.variables.instance_checks import hooked_issubclass

    if len(args) != 2 or kwargs:
        return None
    try:
        return hooked_issubclass(tx, *args)
    except TypeError as e:
        raise Unsupported("operation_raises", f"issubclass raised {e}") from None


def _type(tx: Tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.builder import wrap_constant_result
    from bytegraph.variables.exceptions import ExceptionInstanceVariable

    if len(args) != 1 or kwargs:
        raise Unsupported("object_creation", "type() making a class")
    if isinstance(args[0], ExceptionInstanceVariable):  # a user class, read through its source
        return args[0].class_vt()
    return wrap_constant_result(args[0].python_type())


def _getattr(tx: Tx, args, kwargs) -> VariableTracker:
    obj, name = args[0], args[1].as_python_constant()
    try:
        return obj.var_getattr(tx, name)
    except Unsupported:
        if len(args) == 3 and _known_absent(obj, name):
            return args[2]
        raise


def _hasattr(tx: Tx, args, kwargs) -> VariableTracker:
    obj, name = args[0], args[1].as_python_constant()
    try:
        obj.var_getattr(tx, name)
    except Unsupported:
        if _known_absent(obj, name):
            return ConstantVariable(False)
        raise
    return ConstantVariable(True)


def _known_absent(obj: VariableTracker, name: str) -> bool:
    """True if ``obj`` certainly has no attribute ``name`` (so getattr's default applies)."""
    from bytegraph.variables.containers import BaseSequenceVariable
    from bytegraph.variables.dicts import DictVariable
    from bytegraph.variables.sets import SetVariable

    if obj.is_python_constant():
        return not hasattr(obj.as_python_constant(), name)
    if not isinstance(obj, (BaseSequenceVariable, DictVariable, SetVariable, IteratorVariable)):
        return False
    cls = obj.python_type()  # instances without a __dict__: their attributes are the type's
    fields = getattr(cls, "_fields", ())
    return cls.__dictoffset__ == 0 and not hasattr(cls, name) and name not in fields


def _callable(tx: Tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.base import BoundMethodVariable
    from bytegraph.variables.functions import BaseFunctionVariable, PartialVariable

    value = args[0]
    if isinstance(value, (BaseFunctionVariable, PartialVariable, BoundMethodVariable)):
        return ConstantVariable(True)
    cls = value.python_type()  # instances are callable if their class defines __call__
    return ConstantVariable(any("__call__" in vars(k) for k in cls.__mro__))


def _refuse_tensor(what: str):
    def handler(tx: Tx, args, kwargs) -> VariableTracker | None:
        if any(_is_tensor(a) for a in args):
            raise Unsupported("scalar_conversion", f"{what}() of a tensor reads its value")
        return None  # fold

    return handler


def _exception_text(fn: Any):
    """``str(exc)``/``repr(exc)`` (``format(exc)`` for ``f"{exc}"``) of an exception
    made in the trace: a user class's override inlined, else BaseException's text,
    which reads only the class and the args (``variables/user_exceptions.py``)."""
    refuse = _refuse_tensor(fn.__name__)

    def handler(tx: Tx, args, kwargs) -> VariableTracker | None:
        from bytegraph.variables.exceptions import ExceptionInstanceVariable
        from bytegraph.variables.user_exceptions import exception_text

        if args and not kwargs and isinstance(args[0], ExceptionInstanceVariable):
            rest = [a.as_python_constant() if a.is_python_constant() else None for a in args[1:]]
            if fn is not format and not rest or fn is format and rest in ([], [""]):
                return exception_text(tx, args[0], repr if fn is repr else str)
        return refuse(tx, args, kwargs)

    return handler


# -- iteration --------------------------------------------------------------------


def _iter(tx: Tx, args, kwargs) -> VariableTracker | None:
    return iterate(tx, args[0]) if len(args) == 1 and not kwargs else None


def _builtin_iterators() -> tuple[type, ...]:
    """Iterators of lists, tuples, ranges, dicts and sets: exhausted, ``next`` raises a
    bare StopIteration."""
    from bytegraph.variables import iterators

    return (iterators.IteratorVariable, iterators.ListIteratorVariable,
            iterators.ListReverseIteratorVariable, iterators.DictIteratorVariable,
            iterators.SetIteratorVariable)


def _next(tx: Tx, args, kwargs) -> VariableTracker:
    from bytegraph.variables.generators import GeneratorVariable

    iterator = args[0]
    if isinstance(iterator, GeneratorVariable):  # StopIteration carries its return value
        return iterator.call_next(tx, args[1] if len(args) == 2 else None)
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported("unknown_iteration", f"next() of {iterator}")
    item = iterator.next_item(tx)
    if item is None:
        if len(args) == 2:
            return args[1]
        if type(iterator) not in _builtin_iterators():  # a generator's may carry a value
            raise Unsupported("operation_raises", "next() of an exhausted iterator")
        from bytegraph.translate.ops.exceptions import raise_as_eager

        raise_as_eager(tx, "next", next, iter(()))
    return item


def _enumerate(tx: Tx, args, kwargs) -> VariableTracker:
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    if not isinstance(start.as_python_constant(), int):
        raise Unsupported("not_a_constant", "enumerate start is not an int")
    state = (iterate(tx, args[0]), ConstantVariable(start.as_python_constant()))
    return EnumerateIteratorVariable(state, mutation_type=NEW_VALUE)


def _zip(tx: Tx, args, kwargs) -> VariableTracker:
    kwargs = dict(kwargs)
    strict = kwargs.pop("strict", ConstantVariable(False))
    if kwargs:
        raise Unsupported("builtin_arguments", "zip() with unknown keywords")
    iterators = tuple(iterate(tx, a) for a in args)
    strict_flag = ConstantVariable(bool(strict.as_python_constant()))
    return ZipIteratorVariable((strict_flag, *iterators), mutation_type=NEW_VALUE)


def _map(tx: Tx, args, kwargs) -> VariableTracker:
    if len(args) < 2 or kwargs:
        raise Unsupported("builtin_arguments", "map() needs a function and iterables")
    state = (args[0], *(iterate(tx, a) for a in args[1:]))
    return MapIteratorVariable(state, mutation_type=NEW_VALUE)


def _filter(tx: Tx, args, kwargs) -> VariableTracker:
    fn, iterable = args
    return FilterIteratorVariable((fn, iterate(tx, iterable)), mutation_type=NEW_VALUE)


def _reversed(tx: Tx, args, kwargs) -> VariableTracker:
    (value,) = args
    cls = value.python_type()
    sequence = hasattr(cls, "__getitem__") and hasattr(cls, "__len__")
    if not (hasattr(cls, "__reversed__") or sequence):
        raise Unsupported("operation_raises", f"reversed() of a {cls.__name__} (TypeError)")
    if isinstance(value, IteratorVariable):
        raise Unsupported("operation_raises", "reversed() of an iterator (TypeError)")
    return iterate_reversed(tx, value)


# -- constructors -------------------------------------------------------------------


def _list(tx: Tx, args, kwargs) -> VariableTracker | None:
    if kwargs or len(args) > 1:
        return None
    items = tuple(iterate(tx, args[0]).unpack_sequence(tx)) if args else ()
    return ListVariable(items, mutation_type=NEW_VALUE)


def _tuple(tx: Tx, args, kwargs) -> VariableTracker | None:
    if kwargs or len(args) > 1:
        return None
    return TupleVariable(tuple(iterate(tx, args[0]).unpack_sequence(tx)) if args else ())


def _dict_of(dict_type: type):
    def handler(tx: Tx, args, kwargs) -> VariableTracker | None:
        if len(args) > 1:
            return None
        new = DictVariable({}, dict_type, mutation_type=NEW_VALUE)
        new.call_method(tx, "update", list(args), kwargs)
        return new

    return handler


def _defaultdict(tx: Tx, args, kwargs) -> VariableTracker | None:
    if not args or len(args) > 2:
        return None
    factory = args[0]
    if not (factory.is_python_constant() and factory.as_python_constant() is None):
        if not _callable(tx, [factory], {}).value:
            raise Unsupported("operation_raises", "defaultdict factory is not callable")
    new = DictVariable({}, collections.defaultdict, factory, mutation_type=NEW_VALUE)
    new.call_method(tx, "update", list(args[1:]), kwargs)
    return new


def _set(tx: Tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.sets import SetRecipe, SetVariable, _create, iterable_argument

    if kwargs or len(args) > 1:
        return None
    if not args:
        return SetVariable.create(SetRecipe.new(_create, set))
    return SetVariable.create(SetRecipe.new(_create, set, iterable_argument(tx, args[0])))


def _frozenset(tx: Tx, args, kwargs) -> VariableTracker | None:
    from bytegraph.variables.sets import SetRecipe, iterable_argument

    if kwargs or len(args) > 1:
        return None
    if not args:
        return ConstantVariable(frozenset())
    value = iterable_argument(tx, args[0])
    if isinstance(value, SetRecipe):
        if not value.exact:
            raise Unsupported("set_order_unknown", "frozenset of a set whose table is unknown")
        value = value.build()
    return ConstantVariable(frozenset(value))


# -- reductions ---------------------------------------------------------------------


def _items(tx: Tx, iterable: VariableTracker) -> list[VariableTracker]:
    return iterate(tx, iterable).unpack_sequence(tx)


def _sum(tx: Tx, args, kwargs) -> VariableTracker:
    start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
    items = _items(tx, args[0])
    if all(is_python_constant_now(tx, v) for v in (*items, start)):
        from bytegraph.variables.builtin import fold

        return fold(tx, builtins.sum, [ListVariable(tuple(items)), start], {})
    total = start
    for item in items:
        total = _call(tx, operator.add, total, item)
    return total


def _min_max(pick: Any):
    def handler(tx: Tx, args, kwargs) -> VariableTracker | None:
        kwargs = dict(kwargs)
        key = kwargs.pop("key", None)
        default = kwargs.pop("default", None)
        if kwargs or (default is not None and len(args) > 1):
            raise Unsupported("builtin_arguments", f"{pick.__name__}() with these arguments")
        items = _items(tx, args[0]) if len(args) == 1 else list(args)
        if not items:
            if default is None:
                from bytegraph.translate.ops.exceptions import raise_as_eager

                raise_as_eager(tx, pick.__name__, pick, [])
            return default
        keys = items if key is None else [key.call_function(tx, [i], {}) for i in items]
        if all(is_python_constant_now(tx, k) for k in keys):
            values: list[Any] = [python_constant(tx, k) for k in keys]
        else:  # compared at trace time item by item; a tensor comparison is unsupported
            values = [TraceTimeKey(tx, k) for k in keys]
        better = operator.gt if pick is max else operator.lt
        best = 0
        for i in range(1, len(values)):  # strictly better only: the first extreme wins
            if better(values[i], values[best]):
                best = i
        return items[best]

    return handler


def _any_all(want: bool):
    def handler(tx: Tx, args, kwargs) -> VariableTracker:
        iterator = iterate(tx, args[0])
        while (item := iterator.next_item(tx)) is not None:
            if item.truth(tx) is want:
                return ConstantVariable(want)
        return ConstantVariable(not want)

    return handler


def _sorted(tx: Tx, args, kwargs) -> VariableTracker:
    if len(args) != 1 or set(kwargs) - {"key", "reverse"}:
        raise Unsupported("builtin_arguments", "sorted() with unexpected arguments")
    items = sort_items(tx, _items(tx, args[0]), kwargs.get("key"), kwargs.get("reverse"))
    return ListVariable(tuple(items), mutation_type=NEW_VALUE)


def _reduce(tx: Tx, args, kwargs) -> VariableTracker:
    if kwargs or not 2 <= len(args) <= 3:
        raise Unsupported("builtin_arguments", "functools.reduce with unexpected arguments")
    fn, iterator = args[0], iterate(tx, args[1])
    total = args[2] if len(args) == 3 else iterator.next_item(tx)
    if total is None:
        from bytegraph.translate.ops.exceptions import raise_as_eager

        raise_as_eager(tx, "reduce", functools.reduce, operator.add, [])
    while (item := iterator.next_item(tx)) is not None:
        total = fn.call_function(tx, [total, item], {})
    return total


def _abs(tx: Tx, args, kwargs) -> VariableTracker:
    return _call(tx, operator.abs, *args)


def _pow(tx: Tx, args, kwargs) -> VariableTracker | None:
    """``pow(a, b)`` is ``a ** b`` (a tensor operand makes it a graph node)."""
    if len(args) == 2 and not kwargs and any(_is_tensor(a) for a in args):
        return _call(tx, operator.pow, *args)
    return None


# -- operator's callables ----------------------------------------------------------------


def _make_getter(cls: type):
    def handler(tx: Tx, args, kwargs) -> VariableTracker:
        from bytegraph.variables.builtin import BuiltinVariable

        values = [python_constant(tx, a) for a in args]
        kw_values = {k: python_constant(tx, v) for k, v in kwargs.items()}
        if not all(is_constant_value(v) for v in (*values, *kw_values.values())):
            raise Unsupported("not_a_constant", f"{cls.__name__} of non-constants")
        return BuiltinVariable(cls(*values, **kw_values))

    return handler


def _apply_itemgetter(tx: Tx, getter: Any, args, kwargs) -> VariableTracker:
    keys = getter.__reduce__()[1]
    (obj,) = args
    values = [_call(tx, operator.getitem, obj, ConstantVariable(k)) for k in keys]
    return values[0] if len(values) == 1 else TupleVariable(tuple(values))


def _apply_attrgetter(tx: Tx, getter: Any, args, kwargs) -> VariableTracker:
    (obj,) = args
    values = []
    for dotted in getter.__reduce__()[1]:
        value = obj
        for name in dotted.split("."):
            value = value.var_getattr(tx, name)
        values.append(value)
    return values[0] if len(values) == 1 else TupleVariable(tuple(values))


def _apply_methodcaller(tx: Tx, caller: Any, args, kwargs) -> VariableTracker:
    from bytegraph.variables.builder import wrap_constant_result

    maker, rest = caller.__reduce__()
    if maker is operator.methodcaller:
        name, *call_args = rest
        call_kwargs: dict[str, Any] = {}
    else:  # partial(methodcaller, name, **kwargs), args
        name, call_args, call_kwargs = maker.args[0], list(rest), maker.keywords
    (obj,) = args
    method = obj.var_getattr(tx, name)
    return method.call_function(
        tx,
        [wrap_constant_result(a) for a in call_args],
        {k: wrap_constant_result(v) for k, v in call_kwargs.items()},
    )


def _apply_descriptor(tx: Tx, descriptor: Any, args, kwargs) -> VariableTracker:
    """``str.join(sep, xs)``, ``list.append(xs, x)``: the method of the first argument."""
    if not args or not isinstance_of(args[0], descriptor.__objclass__):
        raise Unsupported("call_raises_type_error", f"{descriptor} on {args} (TypeError in eager)")
    return args[0].var_getattr(tx, descriptor.__name__).call_function(tx, args[1:], kwargs)


HANDLERS: dict[Any, Any] = {
    builtins.len: _len,
    builtins.isinstance: _isinstance,
    builtins.issubclass: _issubclass,
    builtins.type: _type,
    builtins.getattr: _getattr,
    builtins.hasattr: _hasattr,
    builtins.callable: _callable,
    builtins.abs: _abs,
    builtins.pow: _pow,
    builtins.iter: _iter,
    builtins.next: _next,
    builtins.enumerate: _enumerate,
    builtins.zip: _zip,
    builtins.map: _map,
    builtins.filter: _filter,
    builtins.reversed: _reversed,
    builtins.list: _list,
    builtins.tuple: _tuple,
    builtins.dict: _dict_of(dict),
    collections.OrderedDict: _dict_of(collections.OrderedDict),
    collections.defaultdict: _defaultdict,
    builtins.set: _set,
    builtins.frozenset: _frozenset,
    builtins.sum: _sum,
    builtins.min: _min_max(min),
    builtins.max: _min_max(max),
    builtins.any: _any_all(True),
    builtins.all: _any_all(False),
    builtins.sorted: _sorted,
    functools.reduce: _reduce,
    operator.itemgetter: _make_getter(operator.itemgetter),
    operator.attrgetter: _make_getter(operator.attrgetter),
    operator.methodcaller: _make_getter(operator.methodcaller),
    builtins.str: _exception_text(builtins.str),
    builtins.repr: _exception_text(builtins.repr),
    builtins.format: _exception_text(builtins.format),
    **{fn: _refuse_tensor(fn.__name__) for fn in (
        builtins.int, builtins.float, builtins.complex,
        builtins.ascii, builtins.round, builtins.hash, builtins.divmod,
    )},
}

INSTANCE_HANDLERS: dict[type, Any] = {
    operator.itemgetter: _apply_itemgetter,
    operator.attrgetter: _apply_attrgetter,
    operator.methodcaller: _apply_methodcaller,
    types.MethodDescriptorType: _apply_descriptor,
    types.WrapperDescriptorType: _apply_descriptor,
}
