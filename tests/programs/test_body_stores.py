"""Attribute stores that a checkpoint body makes on outside objects and undoes.

A context-variable stand-in set around a call and reset in ``finally`` (the
``kernels`` package does it around every layer call of transformers 5.25's
models, inside the layers' checkpoints) leaves the object as it found it:
the body is one higher-order op and nothing is replayed. A store that the
body does not undo, or undoes to a value the object does not hold on the
next call, is still a break; each program compares results, gradients and
the object's state with eager's, and asserts its graph count.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

import bytegraph
from tests.conftest import assert_same_value


class Context:
    def __init__(self, value=None, busy=False):
        self.value = value
        self.busy = busy

    def set(self, value):
        previous, self.value, self.busy = self.value, value, True
        return previous

    def reset(self, token):
        self.value, self.busy = token, token is not None


def make_program(context, undo=True):
    def body(x):
        token = context.set({"scale": 3.0})
        try:
            return x.sin() * context.value["scale"]
        finally:
            if undo:
                context.reset(token)

    def program(x):
        return checkpoint(body, x, use_reentrant=False).sum()

    return program


def run_both(counting_backend, contexts, undo=True, fullgraph=False):
    """Eager on one context, compiled on a twin, per (value, busy) start; states compared."""
    eager_context, compiled_context = Context(), Context()
    eager = make_program(eager_context, undo)
    compiled = bytegraph.compile(
        make_program(compiled_context, undo), backend=counting_backend, fullgraph=fullgraph
    )
    for start in contexts:
        eager_context.__dict__.update(start)
        compiled_context.__dict__.update(start)
        x = torch.randn(4, requires_grad=True)
        y = x.detach().clone().requires_grad_()
        expected, actual = eager(x), compiled(y)
        assert_same_value(actual, expected)
        expected.backward()
        actual.backward()
        assert_same_value(y.grad, x.grad)
        assert compiled_context.__dict__ == eager_context.__dict__
    return compiled


def test_a_store_the_body_undoes_is_no_break(counting_backend):
    compiled = run_both(counting_backend, [{}, {}], fullgraph=True)
    assert counting_backend.calls == 1 and len(compiled.entries) == 1


def test_the_state_the_undo_relies_on_is_guarded(counting_backend):
    # busy=True at the start: the body's reset leaves busy False (token is None), as eager.
    run_both(counting_backend, [{}, {"busy": True}, {"value": None, "busy": False}])


def test_a_store_left_changed_breaks(counting_backend):
    compiled = run_both(counting_backend, [{}, {"value": None, "busy": False}], undo=False)
    report = bytegraph.explain(make_program(Context(), undo=False))(torch.randn(4))
    assert report.graph_break_count >= 1
    assert any("not set back" in b.reason for b in report.break_reasons)
    assert compiled.entries
