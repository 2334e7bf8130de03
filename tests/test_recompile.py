"""Guards and recompilation: what makes a new cache entry, and the recompile limit.

A call whose inputs have the metadata a cache entry was traced with runs
that entry (the backend is not called again); a change of dtype, shape,
stride, requires_grad or a Python scalar's value makes a new entry. After
``config.recompile_limit`` entries the function runs as plain Python, with
one warning naming the guard that kept failing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import bytegraph


def scale_shift(x, n):
    return x * n + 1


def scale(x):
    return (x * 2).sum(0)


def t(*shape: int, **kwargs: Any) -> torch.Tensor:
    return torch.randn(*shape, **kwargs)


# (name, inputs of the first call, inputs with changed metadata)
CHANGES: list[tuple[str, Callable[[], tuple], Callable[[], tuple]]] = [
    ("dtype", lambda: (t(3, 4), 2), lambda: (t(3, 4, dtype=torch.float64), 2)),
    ("dtype_int", lambda: (t(3, 4), 2), lambda: (torch.randint(0, 9, (3, 4)), 2)),
    ("shape", lambda: (t(3, 4), 2), lambda: (t(5, 4), 2)),
    ("rank", lambda: (t(3, 4), 2), lambda: (t(3, 4, 1), 2)),
    ("stride", lambda: (t(4, 3), 2), lambda: (t(3, 4).t(), 2)),
    ("requires_grad", lambda: (t(3, 4), 2), lambda: (t(3, 4, requires_grad=True), 2)),
    ("python_int_value", lambda: (t(3, 4), 2), lambda: (t(3, 4), 3)),
    ("python_float_value", lambda: (t(3, 4), 0.5), lambda: (t(3, 4), 1.5)),
    ("python_scalar_type", lambda: (t(3, 4), 1), lambda: (t(3, 4), True)),
    ("int_to_float", lambda: (t(3, 4), 2), lambda: (t(3, 4), 2.0)),
]


@pytest.mark.parametrize(
    ("first", "changed"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES]
)
def test_metadata_change_recompiles(first, changed, differential, counting_backend) -> None:
    compiled = differential.compile(scale_shift)
    differential.check(scale_shift, compiled, first())
    assert counting_backend.calls == 1
    differential.check(scale_shift, compiled, first())  # new values, same metadata
    assert counting_backend.calls == 1, "same metadata must hit the cache"

    differential.check(scale_shift, compiled, changed())
    assert counting_backend.calls == 2, "changed metadata must recompile"
    assert len(compiled.entries) == 2
    assert compiled.entries[0].graphs == (counting_backend.graphs[1],)

    differential.check(scale_shift, compiled, first())  # both entries stay valid
    differential.check(scale_shift, compiled, changed())
    assert counting_backend.calls == 2
    assert len(compiled.entries) == 2


def test_first_entry_guard_rejects_the_changed_input(counting_backend) -> None:
    compiled = bytegraph.compile(scale_shift, backend=counting_backend)
    compiled(t(3, 4), 2)
    guard = compiled.entries[0].guard
    assert guard.check(t(3, 4), 2)
    assert guard.check(t(3, 4), n=2)
    assert not guard.check(t(3, 4, dtype=torch.float64), 2)
    assert not guard.check(t(4, 4), 2)
    assert not guard.check(t(4, 3).t(), 2)
    assert not guard.check(t(3, 4, requires_grad=True), 2)
    assert not guard.check(t(3, 4), 3)
    assert not guard.check(t(3, 4), 2.0)
    assert not guard.check([1, 2], 2)


def test_values_alone_never_recompile(differential, counting_backend) -> None:
    compiled = differential.compile(scale)
    for _ in range(5):
        differential.check(scale, compiled, (torch.randn(3, 4),))
    differential.check(scale, compiled, (torch.zeros(3, 4),))
    differential.check(scale, compiled, (torch.full((3, 4), float("nan")),))
    assert counting_backend.calls == 1
    assert len(compiled.entries) == 1


def test_grad_mode_is_guarded(differential, counting_backend) -> None:
    compiled = differential.compile(scale)
    x = torch.randn(3, 4, requires_grad=True)
    out = differential.check(scale, compiled, (x,))
    assert out.requires_grad
    with torch.no_grad():
        out = differential.check(scale, compiled, (x,))
        assert not out.requires_grad
    assert counting_backend.calls == 2


def _limit_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if "recompile_limit" in str(w.message)]


def test_recompile_limit_falls_back_to_python_with_one_warning(
    differential, counting_backend
) -> None:
    limit = bytegraph.config.recompile_limit
    assert limit == 8, "the documented default"
    compiled = differential.compile(scale, dynamic=False)  # one entry per size
    for n in range(1, limit + 1):
        differential.check(scale, compiled, (torch.randn(n, 3),))
    assert counting_backend.calls == limit
    assert len(compiled.entries) == limit

    with pytest.warns(UserWarning, match="recompile_limit") as record:
        differential.check(scale, compiled, (torch.randn(limit + 1, 3),))
    (message,) = _limit_warnings(record.list)
    assert "shape" in message, message
    assert "scale" in message, "the warning names the function"
    assert counting_backend.calls == limit
    assert len(compiled.entries) == limit

    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        for n in (limit + 2, limit + 3, 1, 2):  # new shapes run as Python; old ones stay cached
            differential.check(scale, compiled, (torch.randn(n, 3),))
    assert _limit_warnings(later) == [], "the limit warning is given once"
    assert counting_backend.calls == limit
    assert len(compiled.entries) == limit


def test_recompile_limit_is_read_from_config(differential, counting_backend, monkeypatch) -> None:
    monkeypatch.setattr(bytegraph.config, "recompile_limit", 2)
    compiled = differential.compile(scale_shift, dynamic=False)  # one entry per value of n
    differential.check(scale_shift, compiled, (torch.randn(3), 1))
    differential.check(scale_shift, compiled, (torch.randn(3), 2))
    with pytest.warns(UserWarning, match="recompile_limit=2") as record:
        differential.check(scale_shift, compiled, (torch.randn(3), 3))
    (message,) = _limit_warnings(record.list)
    assert "n ==" in message, f"the warning names the failing guard on n: {message}"
    assert counting_backend.calls == 2
    differential.check(scale_shift, compiled, (torch.randn(3), 4))
    assert counting_backend.calls == 2


def test_recompile_limit_is_per_function(differential, counting_backend, monkeypatch) -> None:
    monkeypatch.setattr(bytegraph.config, "recompile_limit", 1)
    first = differential.compile(scale_shift)
    second = differential.compile(scale)
    differential.check(scale_shift, first, (torch.randn(3), 1))
    with pytest.warns(UserWarning, match="recompile_limit"):
        differential.check(scale_shift, first, (torch.randn(4), 1))
    differential.check(scale, second, (torch.randn(3, 2),))  # still compiles
    assert counting_backend.calls == 2
    assert len(second.entries) == 1 and second.entries[0].graphs


def test_reset_clears_the_recompile_limit(differential, counting_backend, monkeypatch) -> None:
    monkeypatch.setattr(bytegraph.config, "recompile_limit", 1)
    compiled = differential.compile(scale)
    differential.check(scale, compiled, (torch.randn(2, 3),))
    with pytest.warns(UserWarning, match="recompile_limit"):
        differential.check(scale, compiled, (torch.randn(3, 3),))
    bytegraph.reset()
    differential.check(scale, compiled, (torch.randn(3, 3),))
    assert counting_backend.calls == 2
    assert len(compiled.entries) == 1


def add_into(x, y):
    x.add_(1)
    return x + y


def test_aliased_inputs_are_guarded(differential, counting_backend) -> None:
    """Tracing f(a, a) assumes x is y; f(a, b) must not reuse that graph."""
    compiled = differential.compile(add_into)
    a = torch.randn(3)
    differential.check(add_into, compiled, (a, a))
    differential.check(add_into, compiled, (torch.randn(3), torch.randn(3)))
    assert counting_backend.calls == 2
    differential.check(add_into, compiled, (a, a))
    differential.check(add_into, compiled, (torch.randn(3), torch.randn(3)))
    assert counting_backend.calls == 2


OFFSET = 1.0
TABLE = torch.arange(3.0)


def add_globals(x):
    return x + OFFSET + TABLE


def test_global_constant_change_recompiles(differential, counting_backend, monkeypatch) -> None:
    compiled = differential.compile(add_globals)
    differential.check(add_globals, compiled, (torch.randn(3),))
    monkeypatch.setitem(globals(), "OFFSET", 2.0)
    differential.check(add_globals, compiled, (torch.randn(3),))
    assert counting_backend.calls == 2


def test_global_tensor_is_read_on_every_call(differential, counting_backend, monkeypatch) -> None:
    compiled = differential.compile(add_globals)
    differential.check(add_globals, compiled, (torch.randn(3),))
    monkeypatch.setitem(globals(), "TABLE", torch.randn(3))  # same metadata, new values
    differential.check(add_globals, compiled, (torch.randn(3),))
    assert counting_backend.calls == 1
    monkeypatch.setitem(globals(), "TABLE", torch.randn(3, dtype=torch.float64))
    differential.check(add_globals, compiled, (torch.randn(3),))
    assert counting_backend.calls == 2


def add_ones(x):
    y = x + torch.ones(3)
    return y, y.dtype, torch.tensor(1.5).dtype


def test_default_dtype_is_guarded(differential, counting_backend) -> None:
    compiled = differential.compile(add_ones)
    differential.check(add_ones, compiled, (torch.randn(3),))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        out, dtype, _ = differential.check(add_ones, compiled, (torch.randn(3),))
    finally:
        torch.set_default_dtype(previous)
    assert out.dtype is dtype is torch.float64  # the folded dtype too, not a memoized float32
    assert counting_backend.calls == 2
    differential.check(add_ones, compiled, (torch.randn(3),))
    assert counting_backend.calls == 2


def cat_all(xs):
    return torch.cat(xs) * 2


def test_list_length_change_recompiles(differential, counting_backend) -> None:
    compiled = differential.compile(cat_all)
    differential.check(cat_all, compiled, ([torch.randn(2), torch.randn(2)],))
    differential.check(cat_all, compiled, ([torch.randn(2), torch.randn(2)],))
    assert counting_backend.calls == 1
    differential.check(cat_all, compiled, ([torch.randn(2), torch.randn(2), torch.randn(1)],))
    assert counting_backend.calls == 2
    differential.check(cat_all, compiled, ((torch.randn(2), torch.randn(2)),))  # a tuple now
    assert counting_backend.calls == 3


def pick(d):
    return d["a"] * d["k"]


def test_dict_inputs_stay_correct_when_keys_or_values_change(differential) -> None:
    compiled = differential.compile(pick)
    differential.check(pick, compiled, ({"a": torch.randn(2), "k": 2},))
    differential.check(pick, compiled, ({"a": torch.randn(2), "k": 3},))
    differential.check(pick, compiled, ({"k": 2, "a": torch.randn(2)},))
    differential.check(pick, compiled, ({"a": torch.randn(2), "k": 2, "extra": None},))
    assert all(len(e.graphs) == 1 for e in compiled.entries)


def scale_in_place(x):
    x.mul_(2)
    return x * 3, x.is_leaf


def test_leafness_of_grad_inputs_is_guarded(counting_backend) -> None:
    """An in-place op is legal on a non-leaf that requires grad, an error on a leaf."""
    compiled = bytegraph.compile(scale_in_place, backend=counting_backend)
    w = torch.randn(3, requires_grad=True)
    for make in (lambda: w * 1, lambda: (torch.randn(4, 3, requires_grad=True) * 1)[1:].t()):
        base = make()
        out, leaf = compiled(base.clone())
        expected, expected_leaf = scale_in_place(base.clone())
        torch.testing.assert_close(out, expected, rtol=0, atol=0)
        assert out.requires_grad and leaf is expected_leaf is False
    assert counting_backend.calls == 2  # the second input has other strides
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad") as eager:
        scale_in_place(torch.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError) as got:
        compiled(torch.randn(3, requires_grad=True))
    assert str(got.value) == str(eager.value)
    out, leaf = compiled(w * 1)  # the first entry still serves non-leaves
    assert leaf is False and counting_backend.calls == 2


def reciprocal_scaled(x, s):
    return 1 / (x * s)


def test_signed_zero_scalar_recompiles(differential, counting_backend) -> None:
    """0.0 == -0.0, but a graph traced with 0.0 computes 1/(x*0.0) = +inf, not -inf."""
    compiled = differential.compile(reciprocal_scaled)
    x = torch.ones(2)
    differential.check(reciprocal_scaled, compiled, (x, 0.0))
    out = differential.check(reciprocal_scaled, compiled, (x, -0.0))
    assert torch.equal(out, torch.full((2,), float("-inf")))
    assert counting_backend.calls == 2
    differential.check(reciprocal_scaled, compiled, (x, 0.0))
    differential.check(reciprocal_scaled, compiled, (x, 0j))
    out = differential.check(reciprocal_scaled, compiled, (x, complex(0.0, -0.0)))
    assert counting_backend.calls == 4


def test_nan_scalar_hits_the_cache(differential, counting_backend) -> None:
    compiled = differential.compile(reciprocal_scaled)
    for _ in range(3):
        differential.check(reciprocal_scaled, compiled, (torch.randn(2), float("nan")))
    assert counting_backend.calls == 1
    differential.check(reciprocal_scaled, compiled, (torch.randn(2), 2.0))
    differential.check(reciprocal_scaled, compiled, (torch.randn(2), float("inf")))
    assert counting_backend.calls == 3


def double_and_layout(x):
    return x * 2, x.is_sparse, x.layout


def test_sparse_input_never_takes_an_entry_traced_for_a_strided_one(counting_backend) -> None:
    """An expanded tensor and a sparse COO one both report strides (0, 0)."""
    compiled = bytegraph.compile(double_and_layout, backend=counting_backend)
    expanded = torch.ones(1).expand(3, 3)
    out, sparse, layout = compiled(expanded)
    assert torch.equal(out, torch.full((3, 3), 2.0)) and (sparse, layout) == (False, torch.strided)
    assert counting_backend.calls == 1
    coo = torch.randn(3, 3).to_sparse()
    csr = torch.randn(3, 3).to_sparse_csr()
    for x in (coo, csr):
        out, sparse, layout = compiled(x)
        expected, expected_sparse, expected_layout = double_and_layout(x)
        assert out.layout is expected_layout is layout and sparse is expected_sparse
        assert torch.equal(out.to_dense(), expected.to_dense())
    assert counting_backend.calls == 1  # non-strided tensors run as Python
    compiled(expanded)
    assert counting_backend.calls == 1


def test_input_whose_op_fails_raises_the_eager_error(counting_backend) -> None:
    q = torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.quint8)
    with pytest.raises(RuntimeError) as eager:
        double_and_layout(q)
    with pytest.raises(RuntimeError) as compiled:
        bytegraph.compile(double_and_layout, backend=counting_backend)(q)
    assert str(compiled.value) == str(eager.value)
