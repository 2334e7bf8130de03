"""``functools.lru_cache``-wrapped functions and methods in compiled code.

The wrapper is called for real at trace time on constant arguments, so the
cache holds what eager's holds and the wrapped body runs as often as in eager
(once per distinct arguments); the constant result is folded. Each program is
run three times eagerly on one fresh cached function and three times compiled
on another: results, the number of times the body ran and the cache's size
must agree, with one graph. What cannot be done that way breaks cleanly.
"""

from __future__ import annotations

import functools
import logging

import pytest
import torch

import bytegraph
from tests.conftest import assert_same_value


def make_cached(maxsize=None):
    runs = []

    @functools.lru_cache(maxsize=maxsize)
    def cached(n, scale=1.0):
        runs.append(n)
        return n * 2 * scale

    return cached, runs


def uses(cached):
    def f(x):
        return x * cached(3) + cached(4, scale=0.5)

    return f


def uses_tuple_result():
    runs = []

    @functools.lru_cache
    def shape_of(n):
        runs.append(n)
        return (n, n + 1)

    def f(x):
        rows, cols = shape_of(2)
        return x.reshape(rows, cols) * 2

    return f, shape_of, runs


class Config:
    def __init__(self, base):
        self.base = base

    @functools.lru_cache  # noqa: B019 (the cache keeps the instance: as in user code)
    def factor(self, n):
        return self.base * n


@pytest.mark.parametrize("maxsize", [None, 8])
def test_cached_function_of_constants(maxsize, counting_backend):
    eager_cached, eager_runs = make_cached(maxsize)
    compiled_cached, compiled_runs = make_cached(maxsize)
    eager_f = uses(eager_cached)
    compiled = bytegraph.compile(uses(compiled_cached), backend=counting_backend, fullgraph=True)
    for _ in range(3):
        x = torch.randn(3)
        assert_same_value(compiled(x), eager_f(x))
    assert compiled_runs == eager_runs == [3, 4]
    assert compiled_cached.cache_info().currsize == eager_cached.cache_info().currsize
    assert counting_backend.calls == 1 and len(compiled.entries) == 1


def test_cached_tuple_result(counting_backend):
    eager_f, _, eager_runs = uses_tuple_result()
    f, _, runs = uses_tuple_result()
    compiled = bytegraph.compile(f, backend=counting_backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(6)
        assert_same_value(compiled(x), eager_f(x))
    assert runs == eager_runs == [2]
    assert counting_backend.calls == 1


def cached_method(x, config):
    return x * config.factor(3)


def test_cached_method_of_a_frame_object(counting_backend):
    compiled = bytegraph.compile(cached_method, backend=counting_backend, fullgraph=True)
    config = Config(1.5)
    for _ in range(2):
        x = torch.randn(3)
        assert_same_value(compiled(x, config), cached_method(x, config))
    assert counting_backend.calls == 1


@pytest.mark.parametrize("pending", [False, True], ids=["nothing pending", "after a store"])
def test_warning_once_is_emitted_once(pending):
    """With nothing pending the helper is called at trace time; after a store (pending
    until the graph has run) it is recorded and called after the graph, in order with
    the store: one warning in both cases, and one graph (NeMo's ASR encoders)."""
    from transformers.utils import logging as hf_logging

    logger = hf_logging.get_logger("bytegraph.tests.lru")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    logger.addHandler(handler)
    try:
        def make(message):
            state = State()

            def f(x):
                y = x + 1
                if pending:
                    state.last = message
                logger.warning_once(message)
                return y * 2

            return f

        eager_f = make(f"eager: once {pending}")  # messages new to the helper's cache
        compiled = bytegraph.compile(
            make(f"compiled: once {pending}"), backend="eager", fullgraph=True
        )
        for _ in range(3):
            x = torch.randn(3)
            assert_same_value(compiled(x), eager_f(x))
    finally:
        logger.removeHandler(handler)
    assert seen.count(f"eager: once {pending}") == seen.count(f"compiled: once {pending}") == 1


def tensor_argument(cached):
    def f(x):
        return cached(x) + 1

    return f


def mutable_result():
    @functools.lru_cache
    def items(n):
        return [n]

    def f(x):
        values = items(2)
        values.append(len(values))
        return x * len(values), values

    return f


def pending_mutation(cached, log):
    def f(x):
        log.append(1)
        return x * cached(5)

    return f


@pytest.mark.parametrize("case", ["tensor_argument", "mutable_result", "pending_mutation"])
def test_breaks_cleanly(case):
    eager_cached, eager_runs = make_cached()
    compiled_cached, compiled_runs = make_cached()
    eager_log, compiled_log = [], []
    if case == "tensor_argument":
        eager_f, f = tensor_argument(eager_cached), tensor_argument(compiled_cached)
        args = [torch.randn(3)] * 3  # one tensor object: eager's cache hits it
    elif case == "mutable_result":
        eager_f, f = mutable_result(), mutable_result()
        args = [torch.randn(3) for _ in range(3)]
    else:
        eager_f, f = pending_mutation(eager_cached, eager_log), pending_mutation(
            compiled_cached, compiled_log)
        args = [torch.randn(3) for _ in range(3)]
    compiled = bytegraph.compile(f, backend="eager")
    for x in args:
        assert_same_value(compiled(x), eager_f(x))
    assert compiled_runs == eager_runs and compiled_log == eager_log
    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(f, backend="eager", fullgraph=True)(args[0])


def reads_a_global_tensor():
    weights = torch.ones(3)

    @functools.lru_cache
    def total(n):
        return float(weights.sum()) * n

    def f(x):
        weights.add_(1)  # in the graph: the real tensor changes only when it runs
        return x * total(2)

    return f, weights


def test_graph_write_before_the_call_breaks():
    eager_f, eager_weights = reads_a_global_tensor()
    f, weights = reads_a_global_tensor()
    compiled = bytegraph.compile(f, backend="eager")
    for _ in range(3):
        x = torch.randn(3)
        assert_same_value(compiled(x), eager_f(x))
        assert torch.equal(weights, eager_weights)


def test_call_inside_a_branch_of_cond_is_not_made_at_trace_time():
    cached, runs = make_cached()

    def f(x):
        return torch.cond(x.sum() > 1e9, lambda t: t * cached(7), lambda t: t - 1, (x,))

    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(f, backend="eager", fullgraph=True)(torch.randn(3))
    assert runs == []  # tracing a branch eager may never run called nothing


class State:
    def __eq__(self, other):
        return vars(self) == vars(other)


def no_argument_call_after_a_mutation():
    state = State()

    @functools.lru_cache
    def scale():
        return getattr(state, "last", 0) + 1.0  # what the trace stored is not real yet

    def f(x):
        state.last = x.shape[0]  # pending while the trace runs
        return x * scale()

    return f, scale, state


@pytest.mark.parametrize("warm", [True, False], ids=["cached before", "cache empty"])
def test_no_argument_call_after_a_mutation(warm, counting_backend):
    """A call without arguments whose cache holds its entry runs nothing: it is folded
    even with mutations pending (Hugging Face's ``is_torch_distributed_available()``
    after its output-capturing context records a collector). With an empty cache the
    function would read the trace's state, which is not real yet: a break, and Python
    makes the call after the append."""
    eager_f, eager_scale, eager_state = no_argument_call_after_a_mutation()
    f, scale, state = no_argument_call_after_a_mutation()
    if warm:
        assert eager_scale() == scale() == 1.0
    compiled = bytegraph.compile(f, backend=counting_backend, fullgraph=warm)
    for _ in range(3):
        x = torch.randn(3)
        assert_same_value(compiled(x), eager_f(x))
    assert state == eager_state and scale() == eager_scale() == (1.0 if warm else 4.0)
    if warm:
        assert counting_backend.calls == 1


def version_check_after_a_mutation(mark):
    state, runs = State(), []

    @functools.lru_cache
    @mark
    def at_least(version, accept_dev=False):  # transformers' is_torch_greater_or_equal
        runs.append(version)
        return version <= "3" and not accept_dev

    def f(x):
        state.last = x.shape[0]  # pending while the trace runs
        if at_least("2.5", accept_dev=True) or at_least("2.5"):
            return x * 2
        return x - 1

    return f, at_least, state, runs


def _mark_constant_for_torch(fn):
    fn._dynamo_marked_constant = True  # what torch.compiler.assume_constant_result leaves
    return fn


@pytest.mark.parametrize(
    "mark", [bytegraph.assume_constant_result, _mark_constant_for_torch],
    ids=["bytegraph's mark", "torch's mark"],
)
def test_promised_constant_is_called_with_mutations_pending(mark, counting_backend):
    """A cached function whose wrapped function is marked constant (transformers marks
    ``is_torch_greater_or_equal`` for torch.compile, under its ``lru_cache``) depends on no
    state the trace changes: called at trace time even with mutations pending, once per
    distinct arguments as in eager (Jamba and Zamba's Mamba path: a break before)."""
    eager_f, eager_at_least, eager_state, eager_runs = version_check_after_a_mutation(mark)
    f, at_least, state, runs = version_check_after_a_mutation(mark)
    compiled = bytegraph.compile(f, backend=counting_backend, fullgraph=True)
    for _ in range(3):
        x = torch.randn(3)
        assert_same_value(compiled(x), eager_f(x))
    assert state == eager_state and runs == eager_runs == ["2.5", "2.5"]
    assert at_least.cache_info().currsize == eager_at_least.cache_info().currsize == 2
    assert counting_backend.calls == 1
