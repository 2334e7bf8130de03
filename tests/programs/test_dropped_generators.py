"""A store that lets go of a generator paused inside a with/try block (bytegraph/dropped_values.py).

CPython closes such a generator the moment its last reference goes, which runs
its ``finally`` / ``__exit__`` there: in the middle of the frame that replaced
it. The fuzz campaign's programs (seed 2002 index 793, seed 2005 index 1198)
kept a started generator in a global dict and replaced it on the next call;
compiled, the old generator's ``finally`` ran inside the replay after the graph
and the replay then overwrote what it appended (``GL``: 2 items where eager has
3). Each program here runs three calls eagerly, then three compiled from the
same state, and compares the results and the log the generators write.
"""

from __future__ import annotations

import contextlib
import gc
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

import bytegraph

LOG: list[Any] = []
SLOTS: dict[str, Any] = {}
SLOT_LIST: list[Any] = [None]
GEN: Any = None


class Holder:
    gen: Any = None


HOLDER = Holder()


def in_try(t):
    try:
        yield t + 1
        yield t + 2
    finally:
        LOG.append("closed")


def in_with(t):
    with Logged():
        yield t + 1
        yield t + 2


def plain(t):
    yield t + 1
    yield t + 2


class Logged:
    def __enter__(self) -> Logged:
        return self

    def __exit__(self, *exc: Any) -> None:
        LOG.append("exited")


def into_dict(x, gen):
    y = x * 2
    SLOTS["gen"] = gen
    LOG.append(len(LOG))
    return y + len(LOG)


def into_list(x, gen):
    y = x * 2
    SLOT_LIST[0] = gen
    LOG.append(len(LOG))
    return y + len(LOG)


def into_attribute(x, gen):
    y = x * 2
    HOLDER.gen = gen
    LOG.append(len(LOG))
    return y + len(LOG)


def into_global(x, gen):
    global GEN
    y = x * 2
    GEN = gen
    LOG.append(len(LOG))
    return y + len(LOG)


def made_here_into_dict(x, gen):  # the fuzz campaign's form: started in the frame itself
    y = x + 1
    made = in_try(x)
    y = y + next(made)
    SLOTS["gen"] = made
    LOG.append(len(LOG))
    return y


def made_here_in_a_with_block(x, gen):  # fuzz seed 90210 index 341: the break in a with
    y = x + 1
    with contextlib.suppress(KeyError):
        made = in_try(x)
        y = y + next(made)
        SLOTS["gen"] = made
    LOG.append(len(LOG))
    return y


def _reset() -> None:
    global GEN
    SLOTS.clear()
    SLOT_LIST[0] = None
    HOLDER.gen = None
    GEN = None
    gc.collect()
    LOG.clear()


def _started(make: Callable[[torch.Tensor], Any], t: torch.Tensor) -> Any:
    gen = make(t)
    next(gen)
    return gen


def _run(fn: Callable[..., Any], makers: list[Callable[..., Any]]) -> tuple[list[Any], list[Any]]:
    """Results and the log of one call per maker (each passes a new started generator),
    the log read after each call and emptied before the next (so no guard on it fails)."""
    _reset()
    results, logs = [], []
    for n, make in enumerate(makers):
        x = torch.arange(3.0) + n
        results.append(fn(x, _started(make, x)))
        logs.append(list(LOG))
        LOG.clear()
    _reset()
    return results, logs


def _check(fn: Callable[..., Any], makers: list[Callable[..., Any]], backend: Any) -> None:
    expected, expected_log = _run(fn, makers)
    actual, log = _run(bytegraph.compile(fn, backend=backend), makers)
    assert log == expected_log
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=0, atol=0)


@pytest.mark.parametrize("fn", [into_dict, into_list, into_attribute, into_global])
@pytest.mark.parametrize("make", [in_try, in_with])
def test_replacing_a_generator_paused_in_a_try_closes_it_at_the_store(
    fn, make, counting_backend
) -> None:
    _check(fn, [make, make, make], counting_backend)
    # Call 1 replaces no generator: one graph. Calls 2 and 3 break at the store (the
    # graph before it, the resume's after it), one trace for both.
    assert counting_backend.calls == 3


def test_the_fuzz_campaigns_program(counting_backend) -> None:
    _check(made_here_into_dict, [plain, plain, plain], counting_backend)
    log = _run(made_here_into_dict, [plain, plain, plain])[1]
    assert log == [[0], ["closed", 1], ["closed", 1]]


@pytest.mark.parametrize(
    "fn, graphs", [(into_dict, 2), (into_list, 2), (into_attribute, 1), (into_global, 1)]
)
def test_replacing_a_generator_with_nothing_pending_is_one_graph(
    fn, graphs, counting_backend
) -> None:
    _check(fn, [plain, plain, plain], counting_backend)
    # No break. A dict's keys and a list item's type change after call 1 (one more trace);
    # an attribute's or a global's old value is guarded only to close quietly.
    assert counting_backend.calls == graphs


@pytest.mark.parametrize("fn", [into_dict, into_list, into_attribute, into_global])
def test_a_slot_that_later_holds_a_paused_try_is_traced_again(fn, counting_backend) -> None:
    # Call 2 replaces a quiet generator (no break); call 3 replaces one paused in a try:
    # the guard on what the store lets go of fails, and the new trace breaks at the store.
    _check(fn, [in_try, plain, in_try, plain], counting_backend)


def test_the_guard_reads_the_generators_state() -> None:
    from bytegraph.dropped_values import closes_quietly

    gen = in_try(torch.zeros(()))
    assert closes_quietly(gen)  # not started
    next(gen)
    assert not closes_quietly(gen)
    assert isinstance(gen, types.GeneratorType) and closes_quietly(_started(plain, torch.zeros(())))
    gen.close()
    assert closes_quietly(gen) and LOG == ["closed"]
    LOG.clear()


def test_a_retrace_frees_the_generator_it_refused_before_the_store(counting_backend) -> None:
    # Call 3's new input size traces again, and the trace refuses the store again; its own
    # objects (cycles: the translator, VTs) held the old generator until the collector
    # ran, so it closed late (fuzz seed 90210 index 341: ``GL`` one item short). The
    # collector is off here, so that only bytegraph's own collection can free them.
    def run(fn: Callable[..., Any]) -> list[list[Any]]:
        _reset()
        logs = []
        for n in (3, 3, 4):
            fn(torch.arange(float(n)), None)
            logs.append(list(LOG))
            LOG.clear()
        _reset()
        return logs

    expected = run(made_here_in_a_with_block)
    gc.disable()
    try:
        actual = run(bytegraph.compile(made_here_in_a_with_block, backend=counting_backend))
    finally:
        gc.enable()
    assert actual == expected == [[0], ["closed", 1], ["closed", 1]]
