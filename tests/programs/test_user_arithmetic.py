"""Operators on instances of user classes (variables/user_arithmetic.py): eager vs compiled.

``a + b``, ``1 + a``, ``-a``, ``a += b`` without ``__iadd__``, ``a == b``,
``a != b`` through ``__eq__``, ``a < b`` through the reflected ``__gt__``, in
CPython's order (a subclass's reflected method first, NotImplemented passed
on, identity for ``==`` when nobody answers). One graph each; where eager
raises TypeError, the trace breaks and Python raises it.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3),)


class Vec:
    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        if isinstance(other, Vec):
            return Vec(self.v + other.v)
        if isinstance(other, (int, float)):
            return Vec(self.v + other)
        return NotImplemented

    def __radd__(self, other):
        return Vec(self.v * 10 + other)

    def __neg__(self):
        return Vec(-self.v)

    def __mul__(self, other):
        return NotImplemented

    def __eq__(self, other):
        return isinstance(other, Vec) and self.v is other.v

    def __lt__(self, other):
        return NotImplemented

    def __gt__(self, other):
        return "gt called"

    __hash__ = None


class SubVec(Vec):
    def __radd__(self, other):
        return Vec(other.v - 100)


class Scale:
    def __init__(self, k):
        self.k = k

    def __rmul__(self, other):
        return Vec(other.v * self.k)


class Plain:
    pass


@dataclasses.dataclass
class Point:
    x: int
    y: int


@add(t3)
def add_same_class_and_constants(x):
    a, b = Vec(x), Vec(x * 2)
    return (a + b).v, (a + 1).v, (2 + a).v, (-a).v


@add(t3)
def subclass_reflected_method_first(x):
    return (Vec(x) + SubVec(x)).v, (SubVec(x) + Vec(x)).v


@add(t3)
def not_implemented_passes_to_reflected(x):
    return (Vec(x) * Scale(3)).v


@add(t3)
def inplace_falls_back_to_binary(x):
    a = Vec(x)
    b = a
    a += Vec(1)
    return a.v, b.v, a is b


@add(t3)
def equality_and_its_inverse(x):
    a = Vec(x)
    same, other = Vec(a.v), Vec(x + 1)
    return x + 1, a == same, a != same, a == other, a != other, a == 3, 3 == a


@add(t3)
def ordering_reflected(x):
    return x + 1, Vec(x) < Vec(x), 1 < Vec(x)


@add(t3)
def default_equality_is_identity(x):
    p, q = Plain(), Plain()
    return x + 1, p == p, p == q, p != q, p != p, p == None  # noqa: E711


@add(t3)
def dataclass_equality(x):
    return x + 1, Point(1, 2) == Point(1, 2), Point(1, 2) != Point(2, 1), Point(1, 2) == 3


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_user_operator_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_no_operator_method_raises_as_eager(differential) -> None:
    def unsupported(x):
        y = x + 1
        try:
            y = y + (Plain() < Plain())
        except TypeError as e:
            return y, str(e)
        return y

    compiled = differential.compile(unsupported)
    differential.check(unsupported, compiled, (torch.ones(2),))
    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(unsupported, backend="eager", fullgraph=True)(torch.ones(2))
