"""What CPython checks around a user's special methods, compiled exactly as eager.

CPython checks what a special method returns (``__bool__`` must return a
bool, ``__len__`` a non-negative int, ``__index__`` an int, ``__iter__`` an
iterator...) and raises TypeError with its own message otherwise; it honours
a metaclass's ``__instancecheck__``/``__subclasscheck__``; it calls a key's
``__hash__`` a set number of times; it refuses to resume a running
generator. Each program catches what eager raises and returns the message,
so the comparison (``_state.check_state_program``: result, inputs, globals
and class attributes after two calls on each side) sees the exception too.
"""

from __future__ import annotations

import abc
import collections

import pytest
import torch
from _state import StateCorpus, check_state_program

import bytegraph

corpus = StateCorpus()
add = corpus.add


def t3() -> tuple:
    return (torch.randn(3),)


def caught(fn, *args):
    """``fn(*args)``, or the type and message of what it raised."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001  (the programs compare any exception)
        return type(e).__name__, str(e)


# -- return types of special methods ---------------------------------------------------------


class BoolInt:
    def __bool__(self):
        return 1


class BoolNone:
    def __bool__(self):
        return None


class LenFloat:
    def __len__(self):
        return 2.0


class LenNegative:
    def __len__(self):
        return -1


class LenHuge:
    def __len__(self):
        return 2**70


class LenBool:
    def __len__(self):
        return True


class LenIntSub:
    class Small(int):
        pass

    def __len__(self):
        return LenIntSub.Small(2)


class IndexFloat:
    def __index__(self):
        return 1.5


class IndexInt:
    def __index__(self):
        return 1


class HashStr:
    def __hash__(self):
        return "a"


class IterNotIterator:
    def __iter__(self):
        return 5


class IterList:
    def __iter__(self):
        return [1, 2]


class ContainsZero:
    def __contains__(self, item):
        return 0


class ContainsList:
    def __contains__(self, item):
        return [item]


class IntFloat:
    def __int__(self):
        return 2.5


class FloatInt:
    def __float__(self):
        return 2


class BoolAndLen:
    def __bool__(self):
        return True

    def __len__(self):
        return 0


@add(t3)
def bool_returns_int(x):
    def f():
        return x + 1 if BoolInt() else x - 1

    return caught(f), x * 2


@add(t3)
def bool_returns_none_in_not(x):
    return caught(lambda: not BoolNone()), x + 1


@add(t3)
def bool_builtin_returns_int(x):
    return caught(bool, BoolInt()), x + 1


@add(t3)
def bool_in_and_or(x):
    return caught(lambda: BoolInt() and x + 1), caught(lambda: BoolInt() or x), x * 2


@add(t3)
def bool_beats_len(x):
    return x + 1 if BoolAndLen() else x - 1


@add(t3)
def len_returns_float(x):
    return caught(len, LenFloat()), caught(lambda: bool(LenFloat())), x + 1


@add(t3)
def len_returns_negative(x):
    return caught(len, LenNegative()), caught(lambda: x if LenNegative() else x + 1), x * 2


@add(t3)
def len_returns_huge(x):
    return caught(len, LenHuge()), x + 1


@add(t3, fullgraph=False)  # a graph break, then Python's own check
def len_returns_bool_or_int_subclass(x):
    return len(LenBool()), len(LenIntSub()), type(len(LenIntSub())).__name__, x + 1


@add(t3, fullgraph=False)  # a graph break, then Python's own check
def index_returns_float(x):
    return caught(lambda: [1, 2, 3][IndexFloat()]), x + 1


@add(t3, fullgraph=False)  # a graph break, then Python's own check
def index_returns_int(x):
    return [1, 2, 3][IndexInt()], x + 1


@add(t3, fullgraph=False)  # a graph break, then Python's own check
def hash_returns_str(x):
    return caught(hash, HashStr()), x + 1


@add(t3)
def iter_returns_non_iterator(x):
    return caught(list, IterNotIterator()), caught(iter, IterList()), x + 1


@add(t3)
def contains_returns_truthy(x):
    return 1 in ContainsZero(), 1 in ContainsList(), 1 not in ContainsList(), x + 1


@add(t3, fullgraph=False)  # a graph break, then Python's own check
def int_float_return_types(x):
    return caught(int, IntFloat()), caught(float, FloatInt()), x + 1


# -- isinstance / issubclass hooks on the metaclass -------------------------------------------


class QuackMeta(type):
    def __instancecheck__(cls, inst):
        return hasattr(inst, "quack")

    def __subclasscheck__(cls, sub):
        return hasattr(sub, "quack")


class Duck(metaclass=QuackMeta):
    pass


class Quacks:
    quack = 1


class Silent:
    pass


class Never(type):
    def __instancecheck__(cls, inst):
        return False

    def __subclasscheck__(cls, sub):
        return False


class NeverBase(metaclass=Never):
    pass


class NeverChild(NeverBase):
    pass


class Registered(abc.ABC):  # noqa: B024  (a registry of virtual subclasses only)
    pass


Registered.register(int)


def quack_inputs():
    return torch.randn(3), Quacks(), Silent()


@add(quack_inputs)
def instancecheck_hook_on_input(x, o, s):
    return (x + 1 if isinstance(o, Duck) else x - 1), isinstance(s, Duck)


@add(quack_inputs)
def instancecheck_hook_in_tuple(x, o, s):
    return (x + 1 if isinstance(o, (str, Duck)) else x - 1), isinstance(s, (int, Duck))


@add(quack_inputs)
def subclasscheck_hook(x, o, s):
    return issubclass(Quacks, Duck), issubclass(Silent, (Duck,)), issubclass(type(o), Duck), x + 1


class LambdaHook(type):
    __instancecheck__ = lambda cls, inst: getattr(inst, "quack", 0) == 1  # noqa: E731


class Goose(metaclass=LambdaHook):
    pass


def quacking_object():
    o = Silent()
    o.quack = 1
    return torch.randn(3), o, Silent()


@add(quacking_object)
def instancecheck_lambda_hook_reads_the_instance(x, o, s):
    first = x + 1 if isinstance(o, Goose) else x - 1
    return first, isinstance(s, (str, Goose)), isinstance(o, (Goose, int))


@add(t3)
def instancecheck_hook_says_no_to_a_subclass(x):
    return isinstance(NeverChild(), NeverBase), issubclass(NeverChild, NeverBase), x + 1


@add(t3)
def legacy_tensor_types(x):  # torch's C hook: the dtype and device decide (test_tensor_types)
    checks = (torch.FloatTensor, torch.DoubleTensor, torch.LongTensor, torch.cuda.FloatTensor)
    floats = [isinstance(x, cls) for cls in checks]
    longs = [isinstance(x.long(), cls) for cls in checks]
    return floats, longs, isinstance(x, (int, torch.FloatTensor)), isinstance(3, torch.FloatTensor)


@add(t3)
def abc_registered_class(x):
    registered = isinstance(3, Registered), issubclass(int, Registered)
    return registered, isinstance("a", Registered), x + 1


HOOK_LOG: list = []


class Logging(type):
    def __instancecheck__(cls, inst):
        HOOK_LOG.append(type(inst) is int)
        return type(inst) is int


@add(t3, globals_=("HOOK_LOG",), graphs=3)
def instancecheck_hook_of_a_class_made_here(x):
    HOOK_LOG.clear()
    y = x * 2

    class Local(metaclass=Logging):  # a class statement: a graph break
        pass

    r = isinstance(1, Local), isinstance(x, Local)
    return y + 1, r, list(HOOK_LOG)


class Logged(metaclass=Logging):
    pass


@add(t3, globals_=("HOOK_LOG",))
def instancecheck_hook_side_effects(x):
    HOOK_LOG.clear()
    r = isinstance(1, Logged), isinstance(x, (str, Logged)), isinstance(Logged(), Logged)
    return x + 1, r, list(HOOK_LOG)


# -- objects made by a subclass's __new__ -----------------------------------------------------


class ListNew(list):
    def __new__(cls, *args):
        return super().__new__(cls, *args)


@add(t3, graphs=2)  # a break at the call; the resume guards the new object's identity
def list_subclass_new_through_super(x):
    items = ListNew([1, 2])
    items.append(3)
    return x + 1, type(items).__name__, list(items)


class PairBase(collections.namedtuple("PairBase", "a b")):
    pass


# An instance with attributes of its own is no TupleVariable: guarded by identity, so
# each call's new object compiles again (recompiles, never a wrong attribute).
@add(t3, graphs=4)
def namedtuple_subclass_attribute_set_here(x):
    n = PairBase(1, 2)
    n.extra = 5
    return x + n.extra + n.a, n.extra


@add(lambda: (torch.randn(3), PairBase(1, 2)), graphs=3)
def namedtuple_subclass_attribute_set_on_input(x, n):
    n.extra = 5
    return x + n.extra + n.a


# -- generators resumed while running ----------------------------------------------------------


@add(t3)
def generator_next_of_itself(x):
    def g():
        yield next(it)

    it = g()
    return caught(next, it), x + 1


@add(t3)
def generator_send_to_itself(x):
    def g():
        yield g2.send(None)

    g2 = g()
    return caught(next, g2), x + 1


# The generator cannot be rebuilt around a break in its own body (it is running): the
# whole frame runs as Python.
@add(t3, graphs=0)
def generator_referring_to_itself_breaks_in_its_body(x):
    def g():
        bytegraph.graph_break()
        yield it.gi_running

    it = g()
    return next(it), x + 1


# Paused at its yield, it is rebuilt there: a graph on each side of the break.
@add(t3, graphs=2)
def generator_referring_to_itself_across_a_break(x):
    def g():
        yield 1
        yield it.gi_running

    it = g()
    next(it)
    y = x * 2
    bytegraph.graph_break()
    return next(it), y + 1


PROGRAMS = corpus.programs


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_protocol_result(prog, counting_backend) -> None:
    check_state_program(prog, counting_backend)
