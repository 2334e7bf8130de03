"""The memo of a dynamic trace's op results (graph/fake_memo.py).

A repeated call on the same symbolic metadata is built from the memo instead of
running on fake tensors again; the compiled program must still equal eager at
every size, new tensors and views alike (a memoized view shares its input's
memory, so writes through it reach the base).
"""

from __future__ import annotations

import pytest
import torch

from bytegraph.graph import metadata


def layers(x, w):
    for _ in range(3):  # the same ops on the same sizes, three times
        h = x.view(x.shape[0], -1, 4).transpose(1, 2)
        x = torch.relu(h.reshape(x.shape[0], -1) @ w) + x
    return x


def views_of_a_view(x):
    y = x * 2
    a = y.view(-1)
    b = y.view(-1)  # the same view again: built from the memo, still a view of y
    b.add_(1)  # writes through to y and a
    first, second = y.split(2, dim=1)
    third, fourth = y.split(2, dim=1)
    fourth.mul_(3)  # writes through to y, a, b and second
    return y, a, b, first, second, third


def writes_through_an_input_view(x):
    a = x[1:]
    b = x[1:]
    b.mul_(2)  # the input itself changes
    return a.sum(), x.t().t() + 1, x.t().t()


def count_uncached(monkeypatch) -> list[str]:
    """The ops that ran on fake tensors (not from the memo), by name."""
    ran: list[str] = []
    run = metadata._run_fake_uncached

    def counting(fake_mode, kind, target, args, kwargs):
        ran.append(getattr(target, "__name__", str(target)))
        return run(fake_mode, kind, target, args, kwargs)

    monkeypatch.setattr(metadata, "_run_fake_uncached", counting)
    return ran


def test_repeated_layers_run_each_op_once(differential, counting_backend, monkeypatch) -> None:
    ran = count_uncached(monkeypatch)
    compiled = differential.compile(layers)  # static, then the batch dynamic
    w = torch.randn(8, 8) * 0.1
    for b in (3, 5, 9):
        differential.check(layers, compiled, (torch.randn(b, 8), w), exact=False)
    assert counting_backend.calls == 2
    # view, transpose, reshape, matmul, relu, add: once each, not three times
    assert sorted(ran) == sorted(["view", "transpose", "reshape", "matmul", "relu", "add"])


@pytest.mark.parametrize("fn, once", [
    (views_of_a_view, {"view": 1, "split": 1}),
    (writes_through_an_input_view, {"getitem": 1, "t": 2}),
])
def test_memoized_views_alias_their_base(
    fn, once, differential, counting_backend, monkeypatch
) -> None:
    ran = count_uncached(monkeypatch)
    compiled = differential.compile(fn, dynamic=True)
    for b in (3, 4, 7):
        differential.check(fn, compiled, (torch.randn(b, 4),))
    assert counting_backend.calls == 1
    assert {name: ran.count(name) for name in once} == once  # the repeats: from the memo


def test_a_view_of_a_tensor_that_requires_grad_is_not_memoized(monkeypatch) -> None:
    """Autograd refuses in-place writes to some views by how they were made (under
    no_grad, one of several outputs): those views always come from the op itself."""
    import bytegraph

    ran = count_uncached(monkeypatch)

    def f(x):
        return x.view(-1) * 2, x.view(-1) * 3

    compiled = bytegraph.compile(f, dynamic=True, backend="eager")
    x = torch.randn(3, 4, requires_grad=True)
    for got, want in zip(compiled(x), f(x)):
        torch.testing.assert_close(got, want)
    assert ran.count("view") == 2 and ran.count("mul") == 2


def grad_layers(x, w):
    for _ in range(3):
        h = x @ w  # requires grad through w: not a leaf
        h.relu_()  # legal in place on a non-leaf, also when built from the memo
        x = h + x
    return x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_memoized_results_that_require_grad(backend, monkeypatch) -> None:
    import bytegraph

    ran = count_uncached(monkeypatch)
    compiled = bytegraph.compile(grad_layers, backend=backend)
    w = (torch.randn(6, 6) * 0.1).requires_grad_()
    for b in (3, 5, 8):
        x = torch.randn(b, 6)
        want = grad_layers(x, w)
        (want_grad,) = torch.autograd.grad(want.sum(), w)
        got = compiled(x, w)
        (got_grad,) = torch.autograd.grad(got.sum(), w)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_grad, want_grad)
    assert len(compiled.entries) == 2
    dynamic = compiled.entries[0]  # newest first
    assert not dynamic.breaks and len(dynamic.graphs) == 1
    # The first layer's x needs no grad, the later ones do: the third layer is memoized,
    # but for the in-place relu_, which never is.
    assert {name: ran.count(name) for name in ("matmul", "add", "relu_")} == {
        "matmul": 2, "add": 2, "relu_": 3
    }
