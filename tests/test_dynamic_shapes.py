"""Dynamic shapes (graph/shapes.py, variables/symbolic.py): eager vs compiled at every size.

Shapes start static; a size that changes between calls makes that dimension
dynamic, so a sweep of sizes compiles twice: the static entry, then one
size-generic entry that serves every later size. ``dynamic=True`` is
size-generic from the first call, ``dynamic=False`` never, ``mark_dynamic``
skips the first recompile. What the trace decides about a size is guarded
as a relation (``2 <= x.size()[0]``), or, where a Python value is needed, as
that size (a specialisation).
"""

from __future__ import annotations

import pytest
import torch

import bytegraph


def mlp(x, w1, w2):
    h = torch.relu(x @ w1)
    return (h @ w2).softmax(-1)


def shape_math(x):
    b, n = x.shape
    y = x.view(b, -1, 2).sum(-1)  # a computed view
    z = y[: b // 2 + 1]  # slicing with a computed bound
    pos = torch.arange(x.size(1))  # a factory sized by a symbol
    return z * 2, pos.sum(), len(x), x.numel() * 3


def branch_on_relation(x):
    if x.shape[0] > 4:
        return x[:4] * 2
    return x + 1


def two_inputs(x, y):
    return x + y, x.size(0) == y.size(0)


def loop_over_rows(x):
    total = torch.zeros(x.shape[1])
    for i in range(x.shape[0]):  # the trip count: specialised, guarded
        total = total + x[i] * i
    return total


def sizes(x, lo, hi):
    return [torch.randn(n, 6).mul_(0) + x.sum() for n in range(lo, hi)]


@pytest.mark.parametrize("dynamic, compiles", [(None, 2), (True, 1)])
def test_a_size_sweep_compiles_at_most_twice(dynamic, compiles, differential, counting_backend):
    compiled = differential.compile(mlp, dynamic=dynamic)
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    for b in range(2, 21, 2):
        differential.check(mlp, compiled, (torch.randn(b, 8), w1, w2), exact=False)
    assert counting_backend.calls == compiles
    assert len(compiled.entries) == compiles


def test_dynamic_false_compiles_per_size(differential, counting_backend) -> None:
    compiled = differential.compile(mlp, dynamic=False)
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    for b in (2, 3, 4):
        differential.check(mlp, compiled, (torch.randn(b, 8), w1, w2), exact=False)
    assert counting_backend.calls == 3


def test_shape_arithmetic_stays_symbolic(differential, counting_backend) -> None:
    compiled = differential.compile(shape_math, dynamic=True, fullgraph=True)
    for b, n in ((3, 4), (5, 8), (8, 6), (4, 10)):
        differential.check(shape_math, compiled, (torch.randn(b, n),))
    assert counting_backend.calls == 1
    graph = compiled.entries[0].graphs[0].code
    assert "size" in graph and "view(" in graph


def test_a_branch_on_a_size_guards_the_relation(differential, counting_backend) -> None:
    compiled = differential.compile(branch_on_relation, dynamic=True)
    for b in (6, 9, 12):  # all take the > 4 branch: one entry
        differential.check(branch_on_relation, compiled, (torch.randn(b, 3),))
    assert counting_backend.calls == 1
    assert "4 < x.size()[0]" in str(compiled.entries[0].guard) or (
        "5 <= x.size()[0]" in str(compiled.entries[0].guard)
    )
    for b in (2, 3):  # the other branch: a second entry, correct for both
        differential.check(branch_on_relation, compiled, (torch.randn(b, 3),))
    assert counting_backend.calls == 2


def test_equal_sizes_are_guarded_equal(differential, counting_backend) -> None:
    compiled = differential.compile(two_inputs, dynamic=True)
    differential.check(two_inputs, compiled, (torch.randn(5, 2), torch.randn(5, 2)))
    differential.check(two_inputs, compiled, (torch.randn(7, 2), torch.randn(7, 2)))
    assert counting_backend.calls == 1
    guard = str(compiled.entries[0].guard)
    assert "x.size()[0] == y.size()[0]" in guard or "y.size()[0] == x.size()[0]" in guard
    differential.check(two_inputs, compiled, (torch.randn(3, 2), torch.randn(1, 2)))  # broadcast
    assert counting_backend.calls == 2


def test_a_trip_count_specialises(differential, counting_backend) -> None:
    compiled = differential.compile(loop_over_rows, dynamic=True)
    differential.check(loop_over_rows, compiled, (torch.randn(3, 4),))
    differential.check(loop_over_rows, compiled, (torch.randn(3, 4),))
    differential.check(loop_over_rows, compiled, (torch.randn(5, 4),))
    assert counting_backend.calls == 2  # one entry per trip count, each guarded


def _marked_calls(compiled, sizes, mark):
    """Call with tensors marked as given (``differential.check`` would copy them,
    dropping the marks) and compare with eager."""
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    for b in sizes:
        x = torch.randn(b, 8)
        mark(x)
        torch.testing.assert_close(compiled(x, w1, w2), mlp(x, w1, w2))


def test_mark_dynamic_avoids_the_first_recompile(counting_backend) -> None:
    compiled = bytegraph.compile(mlp, backend=counting_backend)
    _marked_calls(compiled, (3, 5, 7), lambda x: bytegraph.mark_dynamic(x, 0))
    assert counting_backend.calls == 1


def test_mark_dynamic_bounds_are_guarded(counting_backend) -> None:
    compiled = bytegraph.compile(mlp, backend=counting_backend)
    _marked_calls(compiled, (4,), lambda x: bytegraph.mark_dynamic(x, 0, min=2, max=6))
    assert "x.size()[0] <= 6" in str(compiled.entries[0].guard)
    _marked_calls(compiled, (9,), lambda x: None)  # outside the bounds: a new entry
    assert len(compiled.entries) == 2


def test_mark_static_keeps_a_dimension_static(counting_backend) -> None:
    compiled = bytegraph.compile(mlp, backend=counting_backend, dynamic=True)
    _marked_calls(compiled, (3, 5), lambda x: bytegraph.mark_static(x, 0))
    assert counting_backend.calls == 2


def test_bad_marks_raise_clear_errors() -> None:
    with pytest.raises(IndexError, match="out of range"):
        bytegraph.mark_dynamic(torch.randn(3), 1)
    with pytest.raises(TypeError, match="takes a tensor"):
        bytegraph.mark_static([1, 2], 0)
    with pytest.raises(ValueError, match="greater than max"):
        bytegraph.mark_dynamic(torch.randn(3), 0, min=5, max=2)
    with pytest.raises(TypeError, match="dynamic must be"):
        bytegraph.compile(mlp, dynamic="yes")


def test_the_recompile_log_names_the_dimension(caplog) -> None:
    bytegraph.set_logs("recompiles")
    compiled = bytegraph.compile(mlp, backend="eager")
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    compiled(torch.randn(3, 8), w1, w2)
    compiled(torch.randn(5, 8), w1, w2)
    messages = [r.getMessage() for r in caplog.records if r.name == "bytegraph.recompiles"]
    assert any("x.size(0) changed 3 -> 5: now dynamic" in m for m in messages), messages


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_with_varying_batch_sizes(backend) -> None:
    """One static entry, then one size-generic entry (AOTAutograd's joint graph, or
    Inductor code over a symbolic batch) whose gradients equal eager's at every size.
    Inductor compiles take seconds: one small model, three sizes."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 12), torch.nn.GELU(), torch.nn.LayerNorm(12), torch.nn.Linear(12, 2)
    )
    compiled = bytegraph.compile(model, backend=backend)
    for b in (4, 7, 10):
        x = torch.randn(b, 6)
        model.zero_grad()
        model(x).pow(2).mean().backward()
        want = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        compiled(x).pow(2).mean().backward()
        got = [p.grad.clone() for p in model.parameters()]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert len(compiled._compiled_forward.entries) == 2


def scaled_prefix(x, n):
    y = x * n + n
    return y[:n], n * 2


def test_an_int_argument_that_changes_becomes_symbolic(differential, counting_backend) -> None:
    compiled = differential.compile(scaled_prefix)
    for n in (2, 3, 4, 5):
        differential.check(scaled_prefix, compiled, (torch.randn(6), n))
    assert counting_backend.calls == 2  # n == 2, then one entry for every n in 0..6
    guard = str(compiled.entries[0].guard)
    assert "type(n) is int" in guard and "0 <= n and n <= 6" in guard  # the slice's bounds
    for n in (1, 0):  # an int is no size: 0 and 1 stay symbolic
        differential.check(scaled_prefix, compiled, (torch.randn(6), n))
    assert counting_backend.calls == 2
    differential.check(scaled_prefix, compiled, (torch.randn(6), 9))  # past the bound
    assert counting_backend.calls == 3
    differential.check(scaled_prefix, compiled, (torch.randn(6), True))  # a bool is no int


class SlidingCache:
    """A KV cache layer's shape (transformers' DynamicSlidingWindowLayer): a length
    counted in an int attribute, a window, and keys that grow."""

    def __init__(self, window):
        self.window, self.length, self.keys = window, 0, torch.zeros(0, 2)

    def update(self, new):
        self.length += new.shape[0]
        self.keys = torch.cat([self.keys, new])[-self.window + 1:]
        offset = max(self.length - self.window + 1, 0)
        return self.keys * 2, offset, min(self.length, self.window)


def sliding_step(cache, x):
    keys, offset, visible = cache.update(x)
    return keys.sum(0) + offset, visible


def test_an_int_attribute_of_an_argument_that_changes_becomes_symbolic(
    differential, counting_backend
) -> None:
    """``cache.length`` changes every step of a generation loop: after one recompile it
    is symbolic, and ``max(length - window + 1, 0)`` stays symbolic instead of fixing it
    again (Mistral's generate() compiled a graph per token)."""
    compiled = bytegraph.compile(sliding_step, backend=counting_backend)
    eager_cache, cache = SlidingCache(50), SlidingCache(50)
    for step in range(8):
        x = torch.randn(5 if step == 0 else 1, 2)
        out, expected = compiled(cache, x), sliding_step(eager_cache, x)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1] == expected[1]
        assert cache.length == eager_cache.length and torch.equal(cache.keys, eager_cache.keys)
    assert counting_backend.calls == 2  # the prefill, then one entry for every later step


def offset_by_sum(x, lst):
    total = int(x.sum())  # a break: the resume function receives the int
    lst.append(total)
    return x + total


def test_negative_ints_become_symbolic_too(differential, counting_backend) -> None:
    """An int that changes between calls is made symbolic whatever its sign (a size's
    symbol would assume it positive). Fuzz seed 31, indices 106 and 189."""
    compiled = differential.compile(offset_by_sum)
    for value in (2.0, -3.0, -7.0, 5.0):
        differential.check(offset_by_sum, compiled, (torch.full((3,), value), []))


# Strides: a non-contiguous input whose sizes change, or whose strides change (a slice of
# a growing tensor), is made dynamic like a size. ``differential.check`` clones its
# arguments densely, so these call both functions on the very same views.


def scaled_rows(x):
    return (x * 2).sum(0) + x.shape[1]


def _same_at_every_call(fn, compiled, inputs) -> None:
    for step, x in enumerate(inputs):
        torch.testing.assert_close(compiled(x), fn(x), msg=lambda m, s=step: f"call {s}: {m}")


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_slice_of_a_buffer_swept_over_sizes_compiles_twice(backend) -> None:
    """``x[:, :n]`` of a fixed buffer: strides (30, 1) whatever n, so its stride 0 is
    a symbol of its own in the dynamic entry (it was made static: one entry per n)."""
    buffer = torch.randn(4, 30)
    compiled = bytegraph.compile(scaled_rows, backend=backend)
    _same_at_every_call(scaled_rows, compiled, [buffer[:, :n] for n in range(3, 13)])
    assert len(compiled.entries) == 2
    guard = str(compiled.entries[0].guard)
    assert "x.stride()[1] == 1" in guard and "is_contiguous" not in guard


def test_a_transposed_input_swept_over_sizes_compiles_twice(counting_backend) -> None:
    compiled = bytegraph.compile(scaled_rows, backend=counting_backend)
    _same_at_every_call(scaled_rows, compiled, [torch.randn(n, 4).t() for n in range(3, 13)])
    assert counting_backend.calls == 2


def test_a_strided_slice_swept_over_sizes_compiles_twice(counting_backend) -> None:
    buffer = torch.randn(8, 30)
    compiled = bytegraph.compile(scaled_rows, backend=counting_backend)
    _same_at_every_call(scaled_rows, compiled, [buffer[::2, :n] for n in range(3, 13)])
    assert counting_backend.calls == 2


def _growing(steps):
    """``ids[:, -1:]`` of an ids tensor one column longer each step: shape (2, 1)
    always, stride (n, 1) and storage offset n - 1 changing."""
    ids, tokens = torch.randint(0, 9, (2, 3)).float(), []
    for _ in range(steps):
        ids = torch.cat([ids, ids[:, -1:] + 1], 1)
        tokens.append(ids[:, -1:])
    return tokens


def test_a_stride_that_changes_becomes_dynamic(counting_backend, caplog) -> None:
    bytegraph.set_logs("recompiles")
    compiled = bytegraph.compile(scaled_rows, backend=counting_backend)
    _same_at_every_call(scaled_rows, compiled, _growing(10))
    assert counting_backend.calls <= 2
    messages = [r.getMessage() for r in caplog.records if r.name == "bytegraph.recompiles"]
    assert any("x.stride(0) changed 4 -> 5: now dynamic" in m for m in messages), messages
    guard = str(compiled.entries[0].guard)
    assert "x.shape == (2, 1)" in guard and "x.stride()[1] == 1" in guard


def stride_values(x):
    return x * x.stride(0) + x.stride(1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_reading_a_dynamic_stride_gives_eagers_value(backend) -> None:
    compiled = bytegraph.compile(stride_values, backend=backend)
    _same_at_every_call(stride_values, compiled, _growing(5))
    assert len(compiled.entries) == 2
    buffer = torch.randn(4, 30)
    _same_at_every_call(stride_values, compiled, [buffer[:, :n] for n in (3, 4, 5)])


def all_strides(x):
    row, col = x.stride()
    return x * row - col


def test_reading_all_strides_at_once_stays_in_the_graph(counting_backend) -> None:
    """``x.stride()`` of a tensor with a symbolic stride: a tuple whose symbolic item is
    an ``x.stride(0)`` node (it was a graph break at the call), eager's value each call."""
    compiled = bytegraph.compile(all_strides, backend=counting_backend)
    _same_at_every_call(all_strides, compiled, _growing(6))
    assert counting_backend.calls == 2 and len(compiled.entries) == 2
    dynamic = counting_backend.graphs[-1]
    assert [n.args[1:] for n in dynamic.graph.nodes if n.target == "stride"] == [(0,)]
    assert not compiled.entries[-1].breaks


def contiguous_or_not(x):
    return x.view(-1) * 2 if x.is_contiguous() else x.sum(0)


def test_an_input_turning_contiguous_and_back_stays_correct(counting_backend) -> None:
    buffer = torch.randn(4, 30)
    inputs = [
        buffer[:, :5], buffer[:, :5].contiguous(), buffer[:, 5:10], torch.randn(4, 5),
        buffer[:, :6], torch.randn(4, 6), buffer[:, :7], torch.randn(4, 8), buffer[:, :2],
    ]
    for fn in (contiguous_or_not, scaled_rows):
        compiled = bytegraph.compile(fn, backend=counting_backend)
        _same_at_every_call(fn, compiled, inputs)
        # Two static entries, then one size-generic entry each for contiguous inputs
        # (x.stride()[0] == x.size()[1]) and for the others (!=).
        assert len(compiled.entries) == 4


def test_a_contiguous_dynamic_entry_guards_its_strides(counting_backend) -> None:
    """Symbolic sizes make the strides expressions of them: the guard checks the
    relation (``x.stride()[0] == x.size()[1]``), and a slice with the same sizes fails it."""
    compiled = bytegraph.compile(scaled_rows, backend=counting_backend, dynamic=True)
    _same_at_every_call(scaled_rows, compiled, [torch.randn(3, 4), torch.randn(5, 7)])
    assert counting_backend.calls == 1
    assert "x.stride()[0] == x.size()[1]" in str(compiled.entries[0].guard)
    view = torch.randn(5, 30)[:, :7]
    assert not compiled.entries[0].guard.check(view)
    _same_at_every_call(scaled_rows, compiled, [view])


def offset_times(x):
    return x * x.storage_offset()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_storage_offset_read_is_never_stale(backend) -> None:
    """No tensor guard compares storage offsets, so a program that reads one guards it:
    slices at new offsets recompile (Inductor would read a symbolic one as 0)."""
    compiled = bytegraph.compile(offset_times, backend=backend)
    base = torch.arange(40.0).view(4, 10)
    inputs = [base.view(-1)[1:5], base.view(-1)[2:6], *_growing(3)]
    inputs += [base[:, n : 2 * n] for n in (2, 3, 4)]
    _same_at_every_call(offset_times, compiled, inputs)


def moved_to_float(x, layer):
    layer = layer.to(torch.float32)  # nn.Module.to reads torch._C._nn._parse_to's dtype
    return layer(x)


def test_an_op_returning_a_dtype_in_a_dynamic_trace(counting_backend) -> None:
    """In a dynamic trace the check for data-dependent results looked for symbols in a
    dtype: an internal error (Switch Transformers' router calls ``self.classifier.to``)."""
    layer = torch.nn.Linear(3, 2)
    compiled = bytegraph.compile(moved_to_float, backend=counting_backend, dynamic=True)
    for rows in (2, 5):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(compiled(x, layer), moved_to_float(x, layer))


def scaled_branch(x, k):
    if k * 1.0 == 3.0:  # once k is dynamic: (1.0*torch.sym_float(k)) == 5.0
        return x + 1
    return x - 1


def test_a_float_relation_guard_holds_on_an_identical_call(counting_backend) -> None:
    """A SHAPE guard the ShapeEnv writes with ``torch.sym_float`` (or ``math.floor``)
    raised NameError in the guard function, which has no ``torch``: the guard failed on
    every call and each identical call compiled again (EnCodec's transposed convolutions,
    ``math.ceil(padding_total * trim_right_ratio)``)."""
    compiled = bytegraph.compile(scaled_branch, backend=counting_backend, dynamic=True)
    x = torch.randn(4)
    for k in (3, 3, 5, 5, 5):
        torch.testing.assert_close(compiled(x, k), scaled_branch(x, k), rtol=0, atol=0)
    assert len(compiled.entries) == counting_backend.calls == 2
    assert "torch.sym_float(k)" in str(compiled.entries[0].guard)
