"""``copy.copy`` and ``copy.deepcopy`` inside the trace (variables/object_copies.py).

Every program runs eagerly and compiled on equal inputs: results, the objects
passed in (their state after the call) and the identities the program reports
(``c.a is c.b``, ``copy is original``) must match. The copy module's own code
keys its memo by ``id()``, which breaks the trace on the first element; the
modelled forms compile to one graph (``fullgraph=True``); forms outside the
model (an own ``__deepcopy__``, ``__slots__``, tensors, a list that contains
itself) run the copy module's code as before and still match eager.
"""

from __future__ import annotations

import copy

import torch

import bytegraph
from tests.conftest import assert_same_value


class Compared:
    """Objects equal when their attributes are (so results and inputs compare by state)."""

    def __eq__(self, other):
        return type(self) is type(other) and self._state() == other._state()

    def _state(self):
        return {k: "<self>" if v is self else v for k, v in self.__dict__.items()}

    __hash__ = None


class Options(Compared):
    def __init__(self, scale, names):
        self.scale = scale
        self.names = names
        self.extra = {"bias": 1.5, "tags": ["a"]}
        self.kind = "mlp"


class Config(Compared):
    def __init__(self):
        self.hidden = 4
        self.layers = [1, 2]
        self.sub = Options(2, ["x", "y"])
        self.dtype = torch.float32
        self.flag = None


class MappedConfig(Config):
    """Like a Hugging Face config: attribute reads go through ``__getattribute__``."""

    attribute_map = {"width": "hidden"}

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def deep_edit(x, config):
    c = copy.deepcopy(config)
    c.layers.append(3)
    c.sub.names[0] = "z"
    c.sub.extra["tags"].append("b")
    c.hidden = 8
    return x * c.hidden + len(c.layers) + c.sub.scale, c, c.sub is config.sub


def shallow_edit(x, config):
    c = copy.copy(config)
    c.layers.append(3)  # shared with the original
    c.hidden = 8  # the copy's own
    return x * c.hidden + len(config.layers), c, c.layers is config.layers


def copies_of_containers(x, config):
    items = [1, (2, 3), {"k": [4]}, config.sub]
    deep = copy.deepcopy(items)
    deep[2]["k"].append(5)
    shallow = copy.copy(items)
    shallow.append(6)
    pair = (1, "a", (2.0, None))
    return (
        x + len(deep[2]["k"]) + len(items[2]["k"]) + len(shallow) + len(items),
        deep[3] is config.sub, shallow[3] is config.sub, copy.deepcopy(pair) is pair,
    )


def check(fn, make_args, counting_backend, graphs=1, calls=2, **options):
    """Eager and compiled on equal fresh arguments (objects are not shared between the
    two runs): equal results and equal arguments after the call; ``graphs`` compiled."""
    compiled = bytegraph.compile(fn, backend=counting_backend, **options)
    for _ in range(calls):
        torch.manual_seed(0)
        eager_args = make_args()
        expected = fn(*eager_args)
        torch.manual_seed(0)
        compiled_args = make_args()
        assert_same_value(compiled(*compiled_args), expected)
        assert_same_value(compiled_args, eager_args, "args after the call")
    assert counting_backend.calls == graphs


def test_deepcopy_of_an_object_is_one_graph(counting_backend):
    check(deep_edit, lambda: (torch.randn(3), Config()), counting_backend, fullgraph=True)


def test_copy_of_an_object_shares_its_values(counting_backend):
    check(shallow_edit, lambda: (torch.randn(3), Config()), counting_backend, fullgraph=True)


def test_copies_of_lists_dicts_and_tuples(counting_backend):
    check(copies_of_containers, lambda: (torch.randn(3), Config()), counting_backend,
          fullgraph=True)


def test_shared_and_self_references_are_copied_once(counting_backend):
    def fn(x, config):
        c = copy.deepcopy(config)
        c.layers.append(9)
        return x + len(c.other), c.other is c.layers, c.me is c, c.me is config

    def make_args():
        config = Config()
        config.other = config.layers
        config.me = config
        return torch.randn(3), config

    check(fn, make_args, counting_backend, fullgraph=True)


def test_an_object_with_a_custom_getattribute(counting_backend):
    def fn(x, config):
        c = copy.deepcopy(config)
        c.hidden = 6
        shallow = copy.copy(config)
        shallow.sub = None
        return x * c.width + config.width, c, shallow

    check(fn, lambda: (torch.randn(3), MappedConfig()), counting_backend, fullgraph=True)


def test_a_class_gaining_deepcopy_later_recompiles(counting_backend):
    class Plain:
        def __init__(self):
            self.n = 2

    def fn(x, obj):
        return x * copy.deepcopy(obj).n

    compiled = bytegraph.compile(fn, backend=counting_backend)
    x = torch.ones(2)
    assert_same_value(compiled(x, Plain()), fn(x, Plain()))

    def own_deepcopy(self, memo):
        clone = Plain()
        clone.n = 5
        return clone

    Plain.__deepcopy__ = own_deepcopy
    assert_same_value(compiled(x, Plain()), x * 5)


class Slotted:
    __slots__ = ("n",)

    def __init__(self):
        self.n = 3


class OwnCopy:
    def __init__(self):
        self.n = 3

    def __deepcopy__(self, memo):
        clone = OwnCopy()
        clone.n = self.n + 1
        return clone


def test_forms_outside_the_model_match_eager(counting_backend):
    def fn(x, slotted, own, tensors):
        looped = [1]
        looped.append(looped)
        copied = copy.deepcopy(looped)
        t = copy.deepcopy(tensors)
        t["w"].add_(1)
        return (x * copy.deepcopy(slotted).n + copy.deepcopy(own).n + t["w"],
                copied[1] is copied)

    def make_args():
        return torch.randn(3), Slotted(), OwnCopy(), {"w": torch.ones(3)}

    compiled = bytegraph.compile(fn, backend=counting_backend)
    torch.manual_seed(0)
    expected = fn(*make_args())
    torch.manual_seed(0)
    assert_same_value(compiled(*make_args()), expected)
