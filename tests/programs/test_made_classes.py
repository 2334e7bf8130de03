"""Class statements inside compiled functions (variables/made_classes.py).

The corpus defines classes in the compiled function and uses them there:
methods, class attributes, closures over the function's variables,
``super()``, bases from the module, an nn.Module subclass. Every program is
one graph (and compiles with ``fullgraph=True``), equal to eager. The tests
after it let the class escape: each call must return a new class, as eager's
class statement makes one per call, with the same namespace, its methods'
``__class__`` cell filled (``super()`` works on it afterwards), and class
stores made after the statement applied. Metaclasses other than ``type`` and
``ABCMeta``, and abstract classes, run in Python.
"""

from __future__ import annotations

import abc

import pytest
import torch
from _harness import Corpus, check_program, randn
from torch import nn

import bytegraph

corpus = Corpus()
add = corpus.add


def x3() -> tuple:
    return (randn(3),)


class ModuleBase:
    offset = 7

    def shifted(self, y):
        return y - self.offset


@add(x3)
def class_with_methods_and_attributes(x):
    class Affine:
        scale = 3

        def __init__(self, bias):
            self.bias = bias

        def apply(self, y):
            return y * self.scale + self.bias

    return Affine(2).apply(x) + 1


@add(x3)
def class_closing_over_locals(x):
    k = 5

    class Scaled:
        factor = k + 1

        def run(self, y):
            return y * k + self.factor

    return Scaled().run(x)


@add(x3)
def subclass_calls_super(x):
    class Inner:
        def g(self, y):
            return y + 1

    class Outer(Inner):
        def g(self, y):
            return super().g(y) * 2

    return Outer().g(x), isinstance(Outer(), Inner), type(Outer()) is Outer


@add(x3)
def subclass_of_a_module_class(x):
    class Shifted(ModuleBase):
        offset = 2

    return Shifted().shifted(x), ModuleBase().shifted(x)


@add(x3)
def nn_module_defined_and_called(x):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU()

        def forward(self, y):
            return self.act(y) * 2

    return Block()(x)


@add(x3)
def class_attribute_changed_after(x):
    class Counter:
        n = 1

    Counter.n += 1
    c = Counter()
    c.n += 10
    return x * Counter.n + c.n


@add(x3)
def annotated_class_body(x):
    class Annotated:
        size: int = 2
        name: str

    return x * Annotated.size, len(Annotated.__annotations__)


PROGRAMS = corpus.programs


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_made_class_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


# -- classes that escape ------------------------------------------------------------------


def _escaping(x):
    class Pair:
        kind = "pair"

        def __init__(self, v):
            self.v = v

        def total(self, y):
            return y * self.v

    class Named(Pair):
        def total(self, y):
            return super().total(y) + 1

    Pair.extra = 3
    p = Named(2)
    return p.total(x), p, Named, Pair


def _shape(result):
    """What the class statement made, with the class objects themselves left out."""
    out, obj, named, pair = result
    return (
        out, named.__qualname__, sorted(vars(named)), sorted(vars(pair)), vars(obj),
        type(obj) is named, named.__mro__[1] is pair, pair.extra, pair.kind,
    )


def test_escaping_class_matches_eager_and_is_new_each_call(counting_backend) -> None:
    x = torch.randn(3)
    compiled = bytegraph.compile(_escaping, backend=counting_backend)
    first, second = compiled(x), compiled(x)
    expected = _shape(_escaping(x))
    for got in (first, second):
        shape = _shape(got)
        assert torch.equal(shape[0], expected[0])
        assert shape[1:] == expected[1:]
    assert first[2] is not second[2], "eager makes a new class on every call"
    assert counting_backend.calls == 1 and len(compiled.entries) == 1
    # The methods' __class__ cell holds the rebuilt class: super() works outside the trace.
    assert torch.equal(first[2](4).total(x), x * 4 + 1)


def _metaclass_of_its_own(x):
    class Meta(type):
        def __new__(mcs, name, bases, ns):
            ns["size"] = len(name)
            return super().__new__(mcs, name, bases, ns)

    class Thing(metaclass=Meta):
        size = 2

    return x * Thing.size


def _instancecheck_metaclass(x):
    class Meta(type):
        def __instancecheck__(cls, obj):
            return True

    class Anything(metaclass=Meta):
        pass

    return x + 1 if isinstance(3, Anything) else x - 1


def _abstract(x):
    class Shape(abc.ABC):
        @abc.abstractmethod
        def area(self): ...

    try:
        Shape()
    except TypeError:
        return x * 2
    return x


@pytest.mark.parametrize("fn", [_metaclass_of_its_own, _instancecheck_metaclass, _abstract])
def test_what_the_trace_does_not_model_runs_as_eager(fn, differential) -> None:
    differential.check(fn, differential.compile(fn), (torch.randn(3),))
