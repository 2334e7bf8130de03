"""``f(**m)``, ``{**m}`` and ``dict.update(m)`` of mappings that are not plain dicts
(variables/dicts.py mapping_items): as CPython's dict merge reads them, a dict
subclass that keeps dict's ``__iter__`` by its storage, any other mapping through
its own ``keys()`` and ``__getitem__`` (transformers' ``ModelOutput``, an
OrderedDict dataclass passed as ``**outputs`` into the next module). One graph
each, the calls to the user's methods counted in a global and compared with eager.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses

import pytest
import torch
from _harness import Corpus, check_program, randn

corpus = Corpus()
add = corpus.add
CALLS: list[str] = []


def t3() -> tuple:
    return (randn(3),)


def takes(a, b=None, **rest):
    return a * 2 + (0 if b is None else b), sorted(rest)


class Counted(collections.abc.Mapping):
    """A user mapping: ``**`` calls keys() once and __getitem__ per key."""

    def __init__(self, **items):
        self._items = items

    def keys(self):
        CALLS.append("keys")
        return list(self._items)

    def __getitem__(self, key):
        CALLS.append(f"get {key}")
        return self._items[key] + 1

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)


class Shifted(collections.OrderedDict):
    """An OrderedDict subclass: its __getitem__ is what ``**`` reads."""

    def __getitem__(self, key):
        CALLS.append(f"get {key}")
        return super().__getitem__(key) * 3


class OwnKeys(dict):
    """A dict subclass keeping dict's __iter__: ``**`` reads the storage, not keys()."""

    def keys(self):
        CALLS.append("keys")
        return ["a"]


@dataclasses.dataclass
class Output(collections.OrderedDict):
    """A ModelOutput-like dataclass: fields set to None are not items."""

    a: torch.Tensor | None = None
    b: torch.Tensor | None = None
    c: torch.Tensor | None = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __getitem__(self, key):
        CALLS.append(f"get {key}")
        return dict(self.items())[key]


@add(t3)
def user_mapping_as_keywords(x):
    CALLS.clear()
    return takes(**Counted(a=x, b=x.cos())), list(CALLS)


@add(t3)
def ordered_dict_subclass_as_keywords_and_display(x):
    CALLS.clear()
    m = Shifted(a=x, c=x.sin())
    return takes(**m), {**m, "d": 1}, list(CALLS)


@add(t3)
def dict_subclass_storage_not_its_keys(x):
    CALLS.clear()
    m = OwnKeys(a=x, b=x + 1, extra=2)
    return takes(**m), {**m}, list(CALLS)


@add(t3)
def model_output_into_the_next_call(x):
    CALLS.clear()
    out = Output(a=x.sin(), c=x.exp())
    merged = {}
    merged.update(out)
    return takes(**out), merged, list(CALLS)


@add(t3)
def mapping_then_keywords(x):
    CALLS.clear()
    return takes(**Counted(a=x), b=x * 4), list(CALLS)


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_mapping_unpacking_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)
