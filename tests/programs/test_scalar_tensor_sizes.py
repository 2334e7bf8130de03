"""0-d tensors computed from Python numbers, used as sizes (Longformer/LED's chunking).

``torch.div(seq_len, w, rounding_mode="trunc")`` of two ints is a 0-d tensor with
data, even under the meta device that static traces run on; a later
``view(b, that, ...)`` reads its value, as eager does, and the graph computes the
same value from the same (guarded) constants. The metadata memo rebuilt a repeat
of such an op as a meta tensor without data, so the second chunking of a layer
broke ("view reads a tensor's value"): LED and Longformer made 20 graphs where
torch.compile makes 5. The fixture below memoizes every op (not only the ones
measured slow), so the repeats always meet the memo.
"""

from __future__ import annotations

import pytest
import torch
from _harness import Corpus, check_program, randn

from bytegraph.graph import metadata

corpus = Corpus()
add = corpus.add


@pytest.fixture(autouse=True)
def memoize_every_op(monkeypatch):
    monkeypatch.setattr(metadata, "_MEMO_THRESHOLD_SECONDS", -1.0)
    monkeypatch.setattr(metadata, "_worth_memoizing", {})
    monkeypatch.setattr(metadata, "_memo", {})


def _chunk(x, w):
    return x.view(x.size(0), torch.div(x.size(1), w * 2, rounding_mode="trunc"), w * 2, x.size(2))


def x_and_window() -> tuple:
    return (randn(2, 12, 3), 2)


@add(x_and_window)
def div_size_in_two_views(x, w):
    return _chunk(x, w) * 2, _chunk(x + 1, w)


@add(x_and_window)
def chunk_count_in_new_zeros_and_as_strided(x, w):
    out = []
    for _ in range(2):  # a layer's second chunking repeats every op of the first
        chunks = torch.div(x.size(1), w, rounding_mode="trunc") - 1
        scores = x.new_zeros((x.size(0), chunks + 1, w, x.size(2)))
        strided = x.as_strided(
            size=(x.size(0), chunks + 1, w, x.size(2)),
            stride=(x.stride(0), w * x.stride(1), x.stride(1), x.stride(2)),
        )
        out.append(scores + strided.reshape(x.size(0), chunks + 1, -1, x.size(2)))
    return out


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_scalar_tensor_size_program(prog, differential, counting_backend):
    check_program(prog, differential, counting_backend)


def test_a_result_with_data_is_not_memoized_as_meta():
    args, kwargs = (12, 4), {"rounding_mode": "trunc"}
    for _ in range(2):
        result = metadata.run("call_function", torch.div, args, kwargs)
        assert not result.is_meta and int(result) == 3


def sliced_by_a_tensor(x, n):
    s = slice(None, n)  # a bound that is a tensor: a break, the slice then a frame value
    y = x * 2  # the resume function's graph
    return torch.tanh(y[:, s]) * torch.sigmoid(y[:, n:])


def test_a_slice_with_a_tensor_bound_hits_the_cache(differential, counting_backend):
    """VITS's WaveNet slices by ``torch.IntTensor([h])[0]``: the slice made by the break
    reaches the resume function as a frame value, new on every call. Guarded by
    identity, the resume function compiled again at every call (up to the recompile
    limit); guarded by its parts, later calls hit the cache."""
    compiled = differential.compile(sliced_by_a_tensor)
    differential.check(sliced_by_a_tensor, compiled, (randn(2, 6), torch.tensor(3)))
    graphs = counting_backend.calls
    for _ in range(3):
        differential.check(sliced_by_a_tensor, compiled, (randn(2, 6), torch.tensor(3)))
    assert counting_backend.calls == graphs
