"""``id()`` of objects from the frame, and calls bound by the code's own signature.

The ``kernels`` package (transformers 5.25 wraps layers with it) keys a
registry by ``id(fn)`` on every call and reads it back with
``.get(id(self))``; a function stands in for another through a
``__signature__`` it sets on ``forward(self, *args, **kwargs)``. Each program
runs eagerly and compiled on equal inputs (results and every object's state
compared) with its graph count asserted; ``id()`` of an object from the frame
folds to a constant under an identity guard, ``id()`` of anything else is a
break, and arguments bind as CPython binds them, whatever ``__signature__``
says.
"""

from __future__ import annotations

import inspect

import torch

import bytegraph
from tests.conftest import assert_same_value


class Registry:
    """A context-variable stand-in: what is active, set around a call and reset."""

    def __init__(self):
        self.active = None
        self.in_use = False

    def set(self, value):
        previous, self.active, self.in_use = self.active, value, True
        return previous

    def reset(self, token):
        self.active, self.in_use = token, token is not None


def make_routed_layer():
    """A layer that routes a module-level function object through a registry keyed by id."""
    registry = Registry()

    class Scale(torch.nn.Module):
        def forward(self, *args, **kwargs):
            if (funcs := registry.active) is not None:
                if (chosen := funcs.get(id(self))) is not None:
                    replacement, forward = chosen
                    if forward is not type(self).forward:
                        return forward(self, *args, **kwargs)
            return args[0] * 2 + kwargs.get("shift", 0)

    scale = Scale()

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.__dict__["own"] = {"scale": Scale()}

        def forward(self, x):
            funcs = dict(registry.active or {})
            mine = self.own["scale"]
            funcs[id(scale)] = (mine, mine.forward.__func__)
            token = registry.set(funcs)
            try:
                return scale(self.lin(x), shift=1) - 1
            finally:
                registry.reset(token)

    return Layer, registry


def test_registry_keyed_by_id_is_one_graph(counting_backend):
    layer_class, registry = make_routed_layer()
    torch.manual_seed(0)
    layer = layer_class()
    compiled = bytegraph.compile(layer, backend=counting_backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, 4)
        assert_same_value(compiled(x), layer(x))
        assert registry.active is None and registry.in_use is False
    assert counting_backend.calls == 1 and len(compiled._compiled_forward.entries) == 1


class Tagged:
    pass


TAG = Tagged()


def keyed_by_global(x, table):
    return x * table[id(TAG)]


def test_id_of_a_global_is_guarded_by_identity(counting_backend):
    global TAG
    compiled = bytegraph.compile(keyed_by_global, backend=counting_backend)
    table = {id(TAG): 3.0}
    x = torch.randn(3)
    assert_same_value(compiled(x, table), keyed_by_global(x, table))
    old, TAG = TAG, Tagged()
    try:
        table = {id(old): 3.0, id(TAG): 5.0}
        assert_same_value(compiled(x, table), keyed_by_global(x, table))  # a new object: new id
        assert len(compiled.entries) == 2
    finally:
        TAG = old


def id_of_a_made_object(x):
    made = Tagged()
    return x + 1, id(made) != 0


def id_of_a_tensor(x):
    return x + 1, id(x) == id(x)


def test_id_of_what_the_trace_made_or_a_tensor_breaks(differential):
    for fn in (id_of_a_made_object, id_of_a_tensor):
        differential.check(fn, differential.compile(fn), (torch.randn(3),))
        report = bytegraph.explain(fn)(torch.randn(3))
        assert report.break_reasons
        assert all(b.reason.startswith("id() of ") for b in report.break_reasons)


def scaled_difference(x, a, b):
    return x * (a - b)


# It advertises its parameters in another order: a library's stand-in signature.
scaled_difference.__signature__ = inspect.Signature([
    inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in ("x", "b", "a")
])


def test_arguments_bind_by_the_code_not_by_signature_attribute(differential, counting_backend):
    compiled = differential.compile(scaled_difference)
    differential.check(scaled_difference, compiled, (torch.ones(2), 3, 1))
    differential.check(scaled_difference, compiled, (torch.ones(2), 3, 1))
    assert counting_backend.calls == 1 and len(compiled.entries) == 1
