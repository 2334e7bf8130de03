"""The public API: argument checking, decorator forms, backends, reset, and hygiene.

Every compiled call is still compared with eager; these tests add what the
user sees around it: errors with clear messages, decorators on functions and
methods, the three built-in backends, frames that stay plain Python, and a
transformed function that leaves the user's module untouched.
"""

from __future__ import annotations

import pytest
import torch

import bytegraph
from bytegraph.graph.backends import BACKENDS


def affine(x, w, b):
    return torch.relu(x @ w + b) * 2


def affine_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(4, 8), torch.randn(8, 3), torch.randn(3)


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [42, "f", None.__class__, torch.randn(2)], ids=repr)
def test_compile_rejects_what_it_cannot_compile(bad) -> None:
    with pytest.raises(TypeError) as info:
        bytegraph.compile(bad)
    message = str(info.value)
    assert "\n" not in message, "a one-line message"
    assert type(bad).__name__ in message
    assert "function" in message


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        bytegraph.compile(affine, backend="no_such_backend")
    message = str(info.value)
    assert "no_such_backend" in message
    for name in ("eager", "aot_eager", "inductor"):
        assert name in message
    assert set(BACKENDS) == {"eager", "aot_eager", "inductor"}


def test_backend_returning_non_callable_raises_backend_error_on_first_call() -> None:
    def broken_backend(gm, example_inputs):
        return 42

    compiled = bytegraph.compile(affine, backend=broken_backend)  # lazy: nothing traced yet
    assert compiled.entries == []
    with pytest.raises(bytegraph.BackendError) as info:
        compiled(*affine_inputs())
    message = str(info.value)
    assert "broken_backend" in message
    assert "int" in message and "callable" in message
    assert isinstance(info.value, bytegraph.BytegraphError)


def test_backend_that_raises_is_wrapped_in_backend_error() -> None:
    def failing_backend(gm, example_inputs):
        raise RuntimeError("no luck")

    compiled = bytegraph.compile(affine, backend=failing_backend)
    with pytest.raises(bytegraph.BackendError, match="failing_backend.*RuntimeError: no luck"):
        compiled(*affine_inputs())


def test_fullgraph_raises_unsupported_at_the_users_line() -> None:
    def f(x):
        y = x * 2
        return y.tolist()

    with pytest.raises(bytegraph.Unsupported) as info:
        bytegraph.compile(f, backend="eager", fullgraph=True)(torch.randn(()))
    message = str(info.value)
    assert f"{__file__}:{f.__code__.co_firstlineno + 2}" in message
    assert "y.tolist()" in message


# --- decorator forms -------------------------------------------------------------------


def test_bare_decorator_compiles_with_inductor(differential) -> None:
    """The one Inductor test (it compiles C++): the bare decorator's default backend."""

    @bytegraph.compile
    def f(x, y):
        return torch.sin(x) + y * 2

    assert isinstance(f, bytegraph.api.CompiledFunction)
    assert f.__name__ == "f"
    assert f.backend is bytegraph.compile(affine, backend="inductor").backend
    differential.check(f.fn, f, (torch.randn(8), torch.randn(8)), exact=False)
    differential.check(f.fn, f, (torch.randn(8), torch.randn(8)), exact=False)
    assert len(f.entries) == 1 and len(f.entries[0].graphs) == 1


def test_decorator_with_arguments(differential) -> None:
    @bytegraph.compile(backend="eager")
    def f(x, y):
        return torch.sin(x) + y

    assert f.__name__ == "f"
    differential.check(f.fn, f, (torch.randn(3), torch.randn(3)))
    assert len(f.entries) == 1 and len(f.entries[0].graphs) == 1


class Scaler:
    def __init__(self, factor: float) -> None:
        self.factor = factor

    def plain(self, x):
        return x * self.factor + 1

    @bytegraph.compile(backend="eager")
    def double(self, x):
        return x * 2 + 1

    @bytegraph.compile(backend="eager")
    def scaled(self, x):
        return x * self.factor + 1


def test_compiled_method_without_self_attributes(differential) -> None:
    a, b = Scaler(2.0), Scaler(3.0)
    x = torch.randn(3)
    differential.check(lambda s, x: x * 2 + 1, Scaler.double, (a, x))
    torch.testing.assert_close(a.double(x), x * 2 + 1, rtol=0, atol=0)
    torch.testing.assert_close(b.double(x), x * 2 + 1, rtol=0, atol=0)
    assert isinstance(Scaler.__dict__["double"], bytegraph.api.CompiledFunction)
    entries = Scaler.__dict__["double"].entries
    assert len(entries) == 1 and len(entries[0].graphs) == 1


def test_compiled_method_reading_self_attribute(differential) -> None:
    compiled = Scaler.__dict__["scaled"]
    for obj in (Scaler(2.0), Scaler(3.0), Scaler(2.0)):
        x = torch.randn(3)
        differential.check(Scaler.plain, compiled, (obj, x))
        torch.testing.assert_close(obj.scaled(x), obj.plain(x), rtol=0, atol=0)
    assert compiled.entries and all(len(e.graphs) == 1 for e in compiled.entries)


def test_compile_bound_method(counting_backend) -> None:
    obj = Scaler(2.0)
    compiled = bytegraph.compile(obj.plain, backend=counting_backend)
    assert compiled.__self__ is obj
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), obj.plain(x), rtol=0, atol=0)


# --- built-in backends -----------------------------------------------------------------


def test_aot_eager_backend_matches_eager() -> None:
    compiled = bytegraph.compile(affine, backend="aot_eager")
    x, w, b = affine_inputs()
    torch.testing.assert_close(compiled(x, w, b), affine(x, w, b), rtol=0, atol=0)
    assert len(compiled.entries) == 1 and len(compiled.entries[0].graphs) == 1


def test_aot_eager_backward_matches_eager_grads() -> None:
    def loss_fn(x, w, b):
        h = torch.nn.functional.gelu(x @ w + b)
        return (h * h).mean(), h.detach()

    compiled = bytegraph.compile(loss_fn, backend="aot_eager")
    for _ in range(2):  # the second call runs the cached entry
        x, w, b = affine_inputs()
        w.requires_grad_()
        b.requires_grad_()
        ew, eb = w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        loss, h = compiled(x, w, b)
        eager_loss, eager_h = loss_fn(x, ew, eb)
        assert loss.requires_grad and not h.requires_grad
        torch.testing.assert_close(loss, eager_loss)
        torch.testing.assert_close(h, eager_h)
        loss.backward()
        eager_loss.backward()
        torch.testing.assert_close(w.grad, ew.grad)
        torch.testing.assert_close(b.grad, eb.grad)
    assert len(compiled.entries) == 1


# --- plain Python frames, globals, reset -----------------------------------------------


def test_frame_without_tensor_ops_runs_as_python(counting_backend) -> None:
    def f(a, b):
        return a * b + 1, [a, b]

    compiled = bytegraph.compile(f, backend=counting_backend)
    assert compiled(3, 4) == (13, [3, 4])
    assert compiled(3, 4) == (13, [3, 4])
    assert compiled(2.5, 2) == (6.0, [2.5, 2])
    assert counting_backend.calls == 0
    assert compiled.entries and all(e.graphs == () for e in compiled.entries)


def test_frame_returning_its_tensor_untouched_runs_as_python(counting_backend) -> None:
    def f(x):
        return x

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.randn(3)
    assert compiled(x) is x
    assert counting_backend.calls == 0
    assert compiled.entries[0].graphs == ()


SCALE = 3.0


def module_level(x, y):
    z = torch.cat([x, y]) * SCALE
    return z.sum(0), {"z": z}


def test_transformed_function_writes_no_module_globals(differential) -> None:
    module_globals = globals()
    before = dict(module_globals)
    compiled = differential.compile(module_level)
    differential.check(module_level, compiled, (torch.randn(2, 3), torch.randn(1, 3)))
    differential.check(module_level, compiled, (torch.randn(2, 3), torch.randn(1, 3)))
    differential.check(module_level, compiled, (torch.randn(2, 4), torch.randn(2, 4)))  # recompile
    assert len(compiled.entries) == 2
    assert module_globals.keys() == before.keys()
    assert all(module_globals[k] is v for k, v in before.items())


def test_reset_makes_the_next_call_retrace(differential, counting_backend) -> None:
    compiled = differential.compile(affine)
    args = affine_inputs()
    differential.check(affine, compiled, args)
    differential.check(affine, compiled, args)
    assert counting_backend.calls == 1
    old_entry = compiled.entries[0]
    bytegraph.reset()
    assert compiled.entries == []
    differential.check(affine, compiled, args)
    assert counting_backend.calls == 2
    assert len(compiled.entries) == 1 and compiled.entries[0] is not old_entry


def test_compiled_function_keeps_signature_and_defaults(differential, counting_backend) -> None:
    def f(x, y=None, *, scale=2.0):
        return x * scale if y is None else (x + y) * scale

    compiled = differential.compile(f)
    x, y = torch.randn(3), torch.randn(3)
    differential.check(f, compiled, (x,))
    differential.check(f, compiled, (x, y))
    differential.check(f, compiled, (x,), {"scale": 0.5})
    differential.check(f, compiled, (x,), {"y": y, "scale": 0.5})
    assert counting_backend.calls == 4  # {y None, y tensor} x {scale 2.0, scale 0.5}


def test_varargs_and_varkw_signatures(differential, counting_backend) -> None:
    def f(x, /, *rest, scale=1.0, **extra):
        out = x * scale
        for_sum = rest[0] + rest[-1] if rest else x
        return out + for_sum + extra.get("bias", 0), len(rest), sorted(extra)

    compiled = differential.compile(f)
    x, y, z = torch.randn(3), torch.randn(3), torch.randn(3)
    differential.check(f, compiled, (x, y, z))
    differential.check(f, compiled, (x, y, z), {"scale": 2.0, "bias": torch.ones(3)})
    differential.check(f, compiled, (x,), {"bias": 1.5})
    differential.check(f, compiled, (x, y, z))  # the first entry again
    assert counting_backend.calls == 3
    assert all(len(e.graphs) == 1 for e in compiled.entries)


def test_package_never_imports_torch_dynamo() -> None:
    """bytegraph is its own tracer: no module of it imports ``torch._dynamo`` (torch's
    internals may, on their own; we neither configure nor call it)."""
    import ast
    import pathlib

    offenders = []
    for path in pathlib.Path(bytegraph.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(n == "torch._dynamo" or n.startswith("torch._dynamo.") for n in names):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
