"""Object protocols real libraries lean on: custom ``__getattribute__``/``__setattr__``,
dict subclasses with attributes, enums, the sequence protocol, imports, signatures.

The shapes are those of Hugging Face's configs (``attribute_map`` remapping in
``__getattribute__``/``__setattr__``), ModelOutputs (an OrderedDict subclass
that is a dataclass, whose ``__setattr__`` and ``__setitem__`` keep fields and
items in step) and the per-layer config view (a ``collections.abc.Sequence``
that ends with IndexError), written small. Each program goes through
``_state.check_state_program`` (complete state after two calls on each side,
graph count, one cache entry); a construct that cannot be modelled exactly
must break, never differ.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import inspect
from collections.abc import Sequence

import pytest
import torch
from _state import StateCorpus, check_state_program

import bytegraph

corpus = StateCorpus()
add = corpus.add


def t3() -> tuple:
    return (torch.randn(3),)


# -- a config: custom __getattribute__ and __setattr__ ---------------------------------------


class Config:
    attribute_map = {"hidden": "width"}

    def __init__(self, width, scale=2.0, **extra):
        self.width = width
        self.scale = scale
        for key, value in extra.items():
            setattr(self, key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    @property
    def doubled(self):
        return self.scale * 2

    def factor(self, x):
        return x * self.scale


class ForgivingConfig(Config):
    """Its __getattribute__ catches the AttributeError itself: that needs the exception path."""

    def __getattribute__(self, key):
        try:
            return super().__getattribute__(key)
        except AttributeError:
            if key == "missing":
                return 10.0
            raise


class FallbackConfig(Config):
    def __getattr__(self, key):
        if key == "missing":
            return 7.0
        raise AttributeError(key)


class DictConfig:
    """Reads its own __dict__ in __getattribute__ (Hugging Face's heterogeneity mixin)."""

    def __init__(self, scale):
        self.scale = scale

    def __getattribute__(self, key):
        spec = object.__getattribute__(self, "__dict__").get("_spec")
        if spec is not None and key in spec:
            return spec[key]
        return object.__getattribute__(self, key)


def config_inputs() -> tuple:
    return torch.randn(3), Config(4, use_cache=True)


@add(config_inputs)
def config_reads_remapped_and_plain_attributes(x, cfg):
    return x * cfg.hidden + cfg.width * cfg.scale


@add(config_inputs)
def config_missing_attribute_default_and_hasattr(x, cfg):
    missing = getattr(cfg, "is_causal", None)
    y = x + (1 if missing is None else 2)
    if hasattr(cfg, "use_cache") and not hasattr(cfg, "nope"):
        y = y * cfg.use_cache
    return y


@add(config_inputs)
def config_property_and_method(x, cfg):
    return cfg.factor(x) + cfg.doubled


@add(lambda: (torch.randn(3), ForgivingConfig(2)), graphs=2)
def config_catching_its_own_attribute_error_breaks(x, cfg):
    # The AttributeError inside ForgivingConfig.__getattribute__ is caught by its own
    # try: the exception path is not traced, so the read runs in Python. g1: add; g2: mul.
    y = x + 1
    return y * getattr(cfg, "missing", 5.0)


@add(lambda: (torch.randn(3), FallbackConfig(2)))
def config_getattr_fallback(x, cfg):
    return x * cfg.missing + cfg.width


@add(lambda: (torch.randn(3), DictConfig(3.0)))
def config_reading_its_own_dict(x, cfg):
    return x * cfg.scale + len(cfg.__dict__)


@add(t3)
def config_made_in_the_trace_with_custom_setattr(x):
    cfg = Config(5)
    cfg.hidden = 6  # __setattr__ remaps to width
    return x * cfg.width, cfg


@add(config_inputs)
def config_store_on_an_existing_object(x, cfg):
    # __setattr__ is inlined; the raw store it makes is replayed by object.__setattr__
    # (Hugging Face's ``self.config.problem_type = ...`` in a classification head).
    y = x * 2
    cfg.hidden = 9
    return y + cfg.width


SETATTR_CALLS: list[str] = []


class CountingSetattr:
    def __init__(self):
        object.__setattr__(self, "value", 1)

    def __setattr__(self, key, value):
        SETATTR_CALLS.append(key)
        object.__setattr__(self, key, value * 10)


@add(lambda: (torch.randn(3), CountingSetattr()))
def counting_setattr_on_an_existing_object_runs_once(x, obj):
    SETATTR_CALLS.clear()
    obj.value = 3
    obj.other = obj.value + 1
    return x * obj.value, list(SETATTR_CALLS)


@add(t3)
def counting_setattr_on_an_object_that_escapes_runs_once(x):
    SETATTR_CALLS.clear()
    obj = CountingSetattr()
    obj.value = 2
    return x + obj.value, obj, list(SETATTR_CALLS)


# -- a ModelOutput: an OrderedDict subclass that is a dataclass ------------------------------


class Output(collections.OrderedDict):
    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = self.__dict__.get(field.name)
            if value is not None:
                self[field.name] = value

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class HiddenOutput(Output):
    last: torch.Tensor | None = None
    pooled: torch.Tensor | None = None
    cache: object = None


@add(t3)
def output_built_and_returned(x):
    return HiddenOutput(last=x * 2, pooled=x + 1)


@add(t3)
def output_read_by_key_index_attribute(x):
    out = HiddenOutput(last=x * 2, pooled=None)
    return out["last"] + out[0] + out.last, len(out), "pooled" in out, list(out.keys())


@add(t3)
def output_to_tuple_and_iteration(x):
    out = HiddenOutput(last=x, pooled=x * 3)
    total = x * 0
    for key in out:
        total = total + out[key]
    return total, out.to_tuple()


@add(t3)
def output_item_added_later(x):
    out = HiddenOutput(last=x)
    out["attentions"] = (x * 4,)
    return out


@add(lambda: (torch.randn(3), HiddenOutput(last=torch.randn(3), pooled=torch.randn(3))))
def output_from_the_frame_is_read(x, out):
    return x + out["pooled"] + out.last + out[1], out.get("cache")


@add(lambda: (torch.randn(3), HiddenOutput(last=torch.randn(3))), graphs=2)
def output_from_the_frame_mutated_breaks(x, out):
    # Its items would be replayed through clear()/update(), which subclasses may
    # forbid: the store runs in Python. g1: mul; g2: add.
    y = x * 2
    out["extra"] = y
    return out["extra"] + 1


class Registry(dict):
    def get(self, key):
        return super().get(str(key)) or {}


REGISTRY = Registry(a={"x": 2.0})


@add(t3)
def dict_subclass_global_with_super_get(x):
    return x * REGISTRY.get("a")["x"], REGISTRY.get("b")


# -- enums ------------------------------------------------------------------------------


class Action(str, enum.Enum):  # noqa: UP042  (transformers' ExplicitEnum is this shape)
    NONE = "none"
    RAISE = "raise"


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@add(t3)
def enum_members_compared(x):
    action = Action.NONE
    y = x + 1 if action == Action.NONE and action != Action.RAISE else x
    color = Color.BLUE
    return y * color.value if color is Color.BLUE and color in (Color.BLUE,) else y


@add(lambda: (torch.randn(3), Color.RED))
def enum_member_input(x, color):
    return x * (3 if color == Color.RED else 4), color.name


# -- the sequence protocol ----------------------------------------------------------------


class Layers(Sequence):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i < 0 or i >= self.n:
            raise IndexError("list index out of range")
        return i + 1


class OldStyle:
    def __init__(self, values):
        self.values = values

    def __getitem__(self, i):
        return self.values[i] * 2  # the list's IndexError leaves from a deeper frame


class Guarded(Layers):
    def __getitem__(self, i):
        try:
            return super().__getitem__(i)
        except IndexError:
            raise IndexError("again") from None


@add(lambda: (torch.randn(3), Layers(3)))
def sequence_iterated_until_index_error(x, layers):
    total = 0
    for value in layers:
        total += value
    return x * total, list(layers), 2 in layers


@add(lambda: (torch.randn(3), Guarded(2)))
def sequence_whose_index_error_is_caught_and_raised_again(x, layers):
    # The IndexError passes through a try in __getitem__, traced (ops/exceptions.py).
    y = x + 1
    return y * sum(layers)


@add(lambda: (torch.randn(3), OldStyle([1, 2])))
def old_style_sequence_whose_index_error_leaves_a_deeper_frame(x, seq):
    # The IndexError is raised by list indexing inside __getitem__, a raise the trace
    # knows eager makes (list index out of range).
    y = x + 1
    return y * sum(seq), 4 in seq


@add(lambda: (torch.randn(3), Layers(2)))
def membership_by_the_sequence_protocol(x, layers):
    return x * (2 in layers) + (5 in layers)


# -- imports, signatures, hasattr on tensors, numbers += tensors ---------------------------


@add(t3)
def imports_of_loaded_modules(x):
    from math import pi

    import torch.nn.functional

    return torch.nn.functional.relu(x) * pi


def callback(a, b, *, c=1):
    return a


@add(t3)
def signature_of_a_callback(x):
    params = inspect.signature(callback).parameters
    return x * len(params), list(params), "c" in params


@add(lambda: (torch.randn(3), torch.randn(2)))
def hasattr_on_tensors(x, y):
    return x * 2 if hasattr(x, "shape") and not hasattr(y, "jax") else x


@add(t3)
def number_plus_equals_tensor(x):
    buckets = 0
    buckets += (x > 0).to(torch.long) * 4
    scale = 1.5
    scale *= x
    return buckets, scale


@add(t3)
def environ_reads(x):
    import os

    flag = os.environ.get("BYTEGRAPH_TEST_FLAG", "0") == "1"
    return x * 2 if not flag and "BYTEGRAPH_TEST_FLAG" not in os.environ else x


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(3))

    def forward(self, x):
        for layer in self.layers[:2]:
            x = layer(x)
        return x, len(self.layers[1:])


STACK = Stack()


@add(t3)
def module_list_slice(x):
    return STACK(x)


PROGRAMS = corpus.programs


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_protocol_program(prog, counting_backend) -> None:
    check_state_program(prog, counting_backend)


# -- beyond the recipe ------------------------------------------------------------------------


def test_output_rebuilt_with_its_attributes(counting_backend) -> None:
    def f(x):
        out = HiddenOutput(last=x * 2)
        out["extra"] = x + 1
        return out

    x = torch.randn(3)
    expected = f(x)
    actual = bytegraph.compile(f, backend=counting_backend)(x)
    assert type(actual) is HiddenOutput and list(actual) == list(expected)
    assert list(vars(actual)) == list(vars(expected))
    assert all(torch.equal(actual[k], expected[k]) for k in expected)
    assert actual.pooled is None and actual.last is dict.__getitem__(actual, "last")
    assert counting_backend.calls == 1


def test_config_value_changes_are_guarded(counting_backend) -> None:
    def f(x, cfg):
        return x * cfg.hidden if getattr(cfg, "extra", None) is None else x - 1

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.ones(2)
    cfg = Config(2)
    assert compiled(x, cfg).tolist() == [2.0, 2.0]
    cfg.width = 3
    assert compiled(x, cfg).tolist() == [3.0, 3.0]
    cfg.extra = True
    assert compiled(x, cfg).tolist() == [0.0, 0.0]
    del cfg.extra
    Config.attribute_map["hidden"] = "scale"  # the remapping itself is guarded
    try:
        assert compiled(x, cfg).tolist() == [2.0, 2.0]
    finally:
        Config.attribute_map["hidden"] = "width"


def test_sequence_length_change_is_guarded(counting_backend) -> None:
    def f(x, layers):
        return x * sum(layers)

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.ones(2)
    assert compiled(x, Layers(2)).tolist() == [3.0, 3.0]
    assert compiled(x, Layers(3)).tolist() == [6.0, 6.0]


def test_is_compiling_is_true_while_tracing(counting_backend) -> None:
    def f(x):
        return x + 1 if torch.compiler.is_compiling() else x - 1

    assert f(torch.zeros(1)).item() == -1
    assert bytegraph.compile(f, backend=counting_backend)(torch.zeros(1)).item() == 1


def test_environment_variable_change_is_guarded(counting_backend, monkeypatch) -> None:
    import os

    def f(x):
        return x * 2 if os.environ.get("BYTEGRAPH_TEST_FLAG") == "1" else x + 2

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.ones(1)
    monkeypatch.delenv("BYTEGRAPH_TEST_FLAG", raising=False)
    assert compiled(x).item() == 3
    monkeypatch.setenv("BYTEGRAPH_TEST_FLAG", "1")
    assert compiled(x).item() == 2
    assert counting_backend.calls == 2


def test_keys_view_of_an_output_is_a_view_of_that_object(counting_backend) -> None:
    def f(x):
        out = HiddenOutput(last=x * 2)
        return out, out.keys()

    out, keys = bytegraph.compile(f, backend=counting_backend)(torch.ones(2))
    out["late"] = 1
    assert list(keys) == ["last", "late"]
    assert counting_backend.calls == 1


def test_signature_follows_a_change_of_defaults(counting_backend) -> None:
    def g(a, b=1):
        return a

    def f(x):
        return x * inspect.signature(g).parameters["b"].default

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.ones(1)
    assert compiled(x).item() == 1
    g.__defaults__ = (5,)
    assert compiled(x).item() == 5
