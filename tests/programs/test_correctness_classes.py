"""Programs from failure classes found by outside programs: each compiled result equals eager.

Classes: ``dict.fromkeys``/``defaultdict`` paths, ``tensor.new`` with a
torch.Size, CPython's TypeError for container methods called with wrong
arguments, ``list.extend`` of an iterator that reads the list, exception
objects keeping attributes stored on them, attributes stored then deleted
on input objects, and programs drawing from ``random``.
"""

from __future__ import annotations

import collections
import random
from collections import OrderedDict, defaultdict
from typing import Any

import pytest
import torch

import bytegraph

X = torch.ones(2, 3)


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What calling ``fn`` did: its result, or its exception's type and message."""
    try:
        return "returned", fn(*args)
    except Exception as e:  # noqa: BLE001  (the program's own exception is the result)
        return type(e).__name__, str(e)


# -- 2: dict.fromkeys and defaultdict ------------------------------------------------


def fromkeys_on_instance(x):
    d = {"a": 1}
    return x + 1, d.fromkeys(["a", "b"], 0)


def fromkeys_ordered(x):
    return x + 1, OrderedDict.fromkeys(["a", "b"])


def fromkeys_defaultdict(x):
    return x + 1, defaultdict.fromkeys(["a", "b"], 2)


def fromkeys_tensor_keys(x):
    d = dict.fromkeys([x, 1])
    return x + 1, len(d)


def fromkeys_input_defaultdict(x, d):
    e = d.fromkeys(["p"], 1)
    return x + 1, e, type(e) is defaultdict, e.default_factory is None


def fromkeys_generator_keys(x):
    return x + 1, dict.fromkeys(k for k in "ab")


def fromkeys_ordered_keyword(x):
    return x + 1, collections.OrderedDict.fromkeys("ab", value=3)


def setdefault_defaultdict_built(x):
    d = defaultdict(list)
    d.setdefault("k", [5]).append(1)
    d["j"].append(x)
    return x + 1, dict(d)


def setdefault_defaultdict_input(x, d):
    d.setdefault("k", []).append(1)
    v = d.setdefault("a", [9])
    return x + len(v)


def setdefault_unbound(x, d):
    defaultdict.setdefault(d, "z", 0)
    return x + 1


@pytest.mark.parametrize("fn", [
    fromkeys_on_instance, fromkeys_ordered, fromkeys_defaultdict, fromkeys_tensor_keys,
    fromkeys_generator_keys, fromkeys_ordered_keyword, setdefault_defaultdict_built,
])
def test_fromkeys_and_defaultdict(differential, fn):
    differential.check(fn, differential.compile(fn), (X,))


@pytest.mark.parametrize("fn", [
    fromkeys_input_defaultdict, setdefault_defaultdict_input, setdefault_unbound,
])
def test_defaultdict_input(fn):
    eager_d, compiled_d = defaultdict(list, {"a": [1]}), defaultdict(list, {"a": [1]})
    expected = fn(X, eager_d)
    actual = bytegraph.compile(fn, backend="eager")(X, compiled_d)
    assert str(actual) == str(expected)
    assert compiled_d == eager_d and compiled_d.default_factory is eager_d.default_factory


def test_fromkeys_escapes_as_the_real_classmethod():
    def fn(x):
        f = dict.fromkeys
        return x + 1, f([1]), f

    _, d, f = bytegraph.compile(fn, backend="eager")(X)
    assert d == {1: None} and f == dict.fromkeys


@pytest.mark.parametrize("call", [
    lambda: dict.fromkeys(), lambda: dict.fromkeys([1], value=2),
    lambda: defaultdict.fromkeys([1], 2, 3), lambda: OrderedDict.fromkeys(),
])
def test_fromkeys_wrong_arguments_raise_as_eager(call):
    def fn(x):
        y = x + 1
        return y, call()

    assert _outcome(bytegraph.compile(fn, backend="eager"), X) == _outcome(fn, X)


# -- 4: tensor.new ---------------------------------------------------------------------


@pytest.mark.parametrize("fn", [
    lambda x: x.new(x.shape).fill_(1),
    lambda x: x.new(torch.Size([3])).fill_(2),
    lambda x: x.new(x.size()).fill_(1) + x,
    lambda x: x.new(x.shape[1:]).fill_(1),
    lambda x: x.new(torch.Size([])).fill_(1),
    lambda x: x.long().new(x.shape).fill_(1),
    lambda x: x.new(2, 3).fill_(1) + x,
    lambda x: x.new([1.0, 2.0]) + 1,
    lambda x: x.new([1, 2]),
    lambda x: x.new(),
    lambda x: x.new((2, 3)) + 1,
    lambda x: x.new(4).fill_(1),
    lambda x: x.new(*x.shape).fill_(1),
    lambda x: torch.Tensor(x.shape).fill_(1) + x,
    lambda x: torch.Tensor((2, 3)) + 1,
])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tensor_new(differential, counting_backend, fn, dtype):
    differential.check(fn, differential.compile(fn), (X.to(dtype),))
    assert counting_backend.calls == 1


# -- 5: container methods with wrong arguments ----------------------------------------

_WRONG_CALLS = [
    "d.update({'b': 2}, {'c': 3})", "d.update({'b': 2}, {'c': 3}, {'d': 4})", "d.get()",
    "d.get('a', default=2)", "d.pop()", "d.popitem(1)", "d.popitem(last=True)",
    "d.setdefault(1, 2, 3)", "d.clear(1)", "d.keys(1)", "d.copy(1)", "d.__ior__()",
    "l.append()", "l.append(1, 2)", "l.append(x=1)", "l.extend(1, 2)", "l.insert(1)",
    "l.pop(1, 2)", "l.sort(1)", "l.sort(key=None, rev=1)", "l.index()", "l.count(1, 2)",
    "l.copy(1)", "l.index(x=1)", "l.__setitem__(1)", "t.count()", "t.index(1, 2, 3, 4)",
    "s.add()", "s.add(1, 2)", "s.remove(1, 2)", "s.pop(1)", "s.isdisjoint(1, 2)",
    "dict.update(d, {}, {})", "list.append(l)",
]


@pytest.mark.parametrize("call", _WRONG_CALLS)
def test_wrong_arguments_raise_as_eager(call):
    namespace: dict[str, Any] = {}
    exec(  # noqa: S102  (one program per call form)
        "def fn(x):\n"
        "    l = [1, 2, 3]; d = {'a': 1}; s = {1, 2}; t = (1, 2)\n"
        "    y = x + 1\n"
        f"    r = {call}\n"
        "    return y, r, l, d, s\n",
        namespace,
    )
    fn = namespace["fn"]
    expected = _outcome(fn, X)
    assert expected[0] == "TypeError"
    assert _outcome(bytegraph.compile(fn, backend="eager"), X) == expected


@pytest.mark.parametrize("call", ["d.update(a=1, b=2)", "d.update({'z': 1}, q=2)",
                                  "l.sort(reverse=True)", "l.index(2, 0, 3)"])
def test_right_arguments_still_traced(differential, counting_backend, call):
    namespace: dict[str, Any] = {}
    exec(  # noqa: S102
        "def fn(x):\n    l = [1, 2, 3]; d = {'a': 1}\n"
        f"    r = {call}\n    return x + 1, r, l, d\n",
        namespace,
    )
    fn = namespace["fn"]
    differential.check(fn, differential.compile(fn, fullgraph=True), (X,))
    assert counting_backend.calls == 1


# -- 6: list.extend of an iterator reading the list ------------------------------------


def extend_generator(x, y):
    y.extend(v + 1 for v in y if len(y) < 6)
    return x + 1


def iadd_generator(x, y):
    y += (v * 2 for v in y if len(y) < 5)
    return x + 1, y


def extend_zip(x, y):
    y.extend(zip(y, range(3)))
    return x + 1


def extend_map(x, y):
    y.extend(map(lambda v: len(y), [0, 0, 0]))
    return x + 1


def extend_self(x, y):
    y.extend(y)
    y += y
    return x + 1


def extend_tensors(x, y):
    y.extend(x * v + len(y) for v in y[:2])
    return x + 1


def extend_iterator_of_self(x, y):
    it = iter(y)
    y.extend(v for v in it if len(y) < 5)
    return x + 1


@pytest.mark.parametrize("fn", [
    extend_generator, iadd_generator, extend_zip, extend_map, extend_self, extend_tensors,
    extend_iterator_of_self,
])
def test_extend_appends_as_it_iterates(differential, counting_backend, fn):
    differential.check(fn, differential.compile(fn), (X, [1, 2]))
    assert counting_backend.calls == 1


def test_extend_with_an_endless_iterator_of_itself_is_a_graph_break():
    def fn(x, y):
        y.extend(iter(y))
        return x + 1

    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(fn, backend="eager", fullgraph=True)(X, [1])


# -- 7: exception objects built in the trace -----------------------------------------


def _describe(value: Any) -> Any:
    """An exception as comparable data: type, args, chained exceptions, flags, __dict__."""
    if isinstance(value, BaseException):
        return (type(value).__name__, _describe(value.args), _describe(value.__context__),
                _describe(value.__cause__), value.__suppress_context__,
                value.__traceback__ is None, {k: _describe(v) for k, v in vars(value).items()})
    if isinstance(value, (tuple, list)):
        return [_describe(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.tolist()
    return value


def exception_context(x):
    e = ValueError("outer")
    e.__context__ = KeyError("inner")
    return x + 1, e


def exception_cause(x):
    e = ValueError("outer", 2)
    e.__cause__ = TypeError("c")
    return x + 1, e, e.__suppress_context__


def exception_suppress(x):
    e = RuntimeError("r")
    e.__cause__ = TypeError("c")
    e.__suppress_context__ = False
    return x + 1, e


def exception_chain(x):
    e = ValueError("a")
    e.__context__ = e2 = KeyError("b")
    e2.__context__ = IndexError("c")
    return x + 1, e, e.__context__ is e2


def exception_traceback_and_attrs(x):
    e = ValueError("outer")
    e.__traceback__ = None
    e.code = 5
    e.payload = [1, 2]
    return x + 1, e


def exception_read_back(x):
    e = ValueError("a")
    e.__cause__ = KeyError("b")
    return x + 1, e.__suppress_context__, e.__cause__.args, e.__context__


def exception_tensor_arg(x):
    e = ValueError(x + 1)
    e.__context__ = KeyError(x * 2)
    return e


@pytest.mark.parametrize("fn", [
    exception_context, exception_cause, exception_suppress, exception_chain,
    exception_traceback_and_attrs, exception_read_back, exception_tensor_arg,
])
def test_exception_attributes(counting_backend, fn):
    compiled = bytegraph.compile(fn, backend=counting_backend, fullgraph=True)
    assert _describe(compiled(X)) == _describe(fn(X))
    assert counting_backend.calls == 1


def test_exception_context_identity():
    def fn(x):
        inner = KeyError("inner")
        e = ValueError("outer")
        e.__context__ = inner
        return x + 1, e, inner

    _, e, inner = bytegraph.compile(fn, backend="eager")(X)
    assert e.__context__ is inner


@pytest.mark.parametrize("value", ["1", "'text'", "KeyError"])
def test_exception_bad_slot_value_raises_as_eager(value):
    namespace: dict[str, Any] = {}
    exec(  # noqa: S102
        f"def fn(x):\n    y = x + 1\n    e = ValueError()\n    e.__context__ = {value}\n"
        "    return y, e\n",
        namespace,
    )
    fn = namespace["fn"]
    assert _outcome(bytegraph.compile(fn, backend="eager"), X) == _outcome(fn, X)


# -- 8: an attribute stored and deleted in one call -----------------------------------


class Plain:
    def __init__(self) -> None:
        self.a = 1


class DictSubclass(dict):
    pass


def set_then_delete(x, o):
    o.tmp = x + 1
    y = o.tmp * 2
    del o.tmp
    return y


def set_existing_then_delete(x, o):
    o.a = 5
    del o.a
    return x + 1


def delete_then_set(x, o):
    del o.a
    o.a = x
    return x + 1


def set_delete_twice(x, o):
    o.tmp = 1
    del o.tmp
    o.tmp = 2
    del o.tmp
    return x + 1, hasattr(o, "tmp")


def set_delete_set(x, o):
    o.tmp = 1
    del o.tmp
    o.tmp = 2
    return x + 1


def _state(obj: Any) -> Any:
    return {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in vars(obj).items()}


@pytest.mark.parametrize("fn", [
    set_then_delete, set_existing_then_delete, delete_then_set, set_delete_twice, set_delete_set,
])
@pytest.mark.parametrize("make", [Plain, lambda: DictSubclass(a=1)])
def test_attribute_set_and_deleted(counting_backend, fn, make):
    eager_obj, compiled_obj = make(), make()
    if isinstance(eager_obj, DictSubclass):
        eager_obj.a = compiled_obj.a = 1
    expected = fn(X, eager_obj)
    actual = bytegraph.compile(fn, backend=counting_backend)(X, compiled_obj)
    assert str(actual) == str(expected)
    assert _state(compiled_obj) == _state(eager_obj)
    assert list(vars(compiled_obj)) == list(vars(eager_obj))
    assert counting_backend.calls == 1


def module_set_then_delete(x, m):
    m.tmp = 3
    del m.tmp
    return m(x)


def module_delete_then_set(x, m):
    del m.inplace
    m.inplace = False
    return m(x)


@pytest.mark.parametrize("fn", [module_set_then_delete, module_delete_then_set])
def test_module_attribute_set_and_deleted(counting_backend, fn):
    eager_m, compiled_m = torch.nn.ReLU(), torch.nn.ReLU()
    expected = fn(X, eager_m)
    actual = bytegraph.compile(fn, backend=counting_backend)(X, compiled_m)
    torch.testing.assert_close(actual, expected)
    assert vars(compiled_m) == vars(eager_m)
    assert list(vars(compiled_m)) == list(vars(eager_m))


# -- 9: random -------------------------------------------------------------------------


def random_index(x):
    values = [0] * 5
    values[random.randint(0, 4)] = 1
    return x + 1, values


def random_index_in_loop(x):
    values = [0] * 5
    for i in range(3):
        values[random.randint(0, 4)] += i
    return x + 1, values


def random_index_of_input(x, values):
    values[random.randint(0, len(values) - 1)] = 7
    return x + 1


def random_choice_index(x):
    values = [1, 2, 3]
    c = random.choice(values)
    values[c - 1] = 9
    return x + c, values


def random_comparison(x):
    if random.random() < 0.5:
        return x + 1
    return x - 1


def random_loop_choice(x):
    values = [0, 0, 0]
    for v in range(4):
        if random.random() < 0.5:
            values[random.choice([0, 1, 2])] += v
    return x + 1, values


def random_across_break(x):
    values = [0, 0]
    values[random.randint(0, 1)] = 1
    bytegraph.graph_break()
    values[random.randint(0, 1)] = 2
    return x + 1, values


@pytest.mark.parametrize("fn", [
    random_index, random_index_in_loop, random_choice_index, random_comparison,
    random_loop_choice, random_across_break,
])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_random_draws_as_eager(fn, seed):
    compiled = bytegraph.compile(fn, backend="eager")
    for _ in range(3):  # state carried across calls
        random.seed(seed)
        expected = str(fn(X)), random.random()
        random.seed(seed)
        actual = str(compiled(X)), random.random()
        assert actual == expected
        seed += 1


def test_random_index_of_input_list():
    compiled = bytegraph.compile(random_index_of_input, backend="eager")
    for seed in range(3):
        eager_values, compiled_values = [1, 2, 3], [1, 2, 3]
        random.seed(seed)
        random_index_of_input(X, eager_values)
        after_eager = random.random()
        random.seed(seed)
        compiled(X, compiled_values)
        assert compiled_values == eager_values and random.random() == after_eager


def random_loop_after_break(x, values):
    bytegraph.graph_break()
    for v in [1, 2, 3]:
        values[random.randint(0, 2)] = v
    return x + 1


def random_loop_over_input_after_break(x, values):
    y = x + 1
    bytegraph.graph_break()
    for v in values[:]:
        values[random.randint(0, len(values) - 1)] += v
    return y


@pytest.mark.parametrize("fn", [random_loop_after_break, random_loop_over_input_after_break])
def test_random_index_in_resumed_loop(fn):
    compiled = bytegraph.compile(fn, backend="eager")
    for seed in range(4):
        eager_values, compiled_values = [1, 2, 3], [1, 2, 3]
        random.seed(seed)
        expected = fn(X, eager_values), random.random()
        random.seed(seed)
        actual = compiled(X, compiled_values), random.random()
        assert compiled_values == eager_values and actual[1] == expected[1]
        torch.testing.assert_close(actual[0], expected[0])
