"""``super()`` where the first argument is a class: classmethods, and staticmethods
reached through super(). Outputs equal eager's, one graph each, the cache reused."""

from __future__ import annotations

import pytest
import torch

import bytegraph
from tests.programs._harness import Corpus, check_program, randn

corpus = Corpus()


class Base:
    scale = 3.0

    @classmethod
    def m(cls, y):
        return y * cls.scale

    @staticmethod
    def s(y):
        return y - 1

    def plain(self, y):
        return y + 10


class Child(Base):
    scale = 5.0

    @classmethod
    def m(cls, y):
        return super().m(y) * 2

    @classmethod
    def via_static(cls, y):
        return super().s(y) + cls.scale

    @classmethod
    def explicit(cls, y):
        return super().m(y) + 1

    @classmethod
    def unbound_plain(cls, y):
        return super().plain(None, y)

    @classmethod
    def init_subclass_hook(cls, y):
        super().__init_subclass__()
        return y * 2

    def instance_static(self, y):
        return super().s(y) * 3


class GrandChild(Child):
    scale = 7.0

    @classmethod
    def m(cls, y):
        return super().m(y) + 1


@corpus.add(lambda: (randn(3),))
def classmethod_super(x):
    return Child.m(x)


@corpus.add(lambda: (randn(3),))
def classmethod_super_through_instance(x):
    return Child().m(x)


@corpus.add(lambda: (randn(3),))
def classmethod_super_chain(x):
    return GrandChild.m(x)


@corpus.add(lambda: (randn(3),))
def staticmethod_through_super(x):
    return Child.via_static(x) + Child().instance_static(x)


@corpus.add(lambda: (randn(3),))
def explicit_two_argument_super(x):
    return Child.explicit(x)


@corpus.add(lambda: (randn(3),))
def plain_function_through_class_super(x):
    return Child.unbound_plain(x)


@corpus.add(lambda: (randn(3),))
def object_init_subclass_through_super(x):
    return Child.init_subclass_hook(x)


@pytest.mark.parametrize("prog", corpus, ids=lambda p: p.name)
def test_super_of_a_class(prog, differential, counting_backend):
    check_program(prog, differential, counting_backend)


def test_missing_attribute_through_super_breaks():
    class Lonely:
        @classmethod
        def m(cls, y):
            return super().nothing(y)

    def f(x):
        return Lonely.m(x)

    with pytest.raises(AttributeError):
        f(torch.ones(2))
    with pytest.raises(AttributeError):
        bytegraph.compile(f, backend="eager")(torch.ones(2))
