"""Started generators handed to Python paused where the trace left them.

A generator started in the trace and then returned, or live across a graph
break, is rebuilt paused at its yield (``variables/paused_generators.py``):
the frame is one graph, and the rest of the generator's body runs only when
the caller asks, as in eager. Each program runs eagerly and compiled (the
trace, then a cache hit); then ``drive`` works the returned generators
(next, send, throw, close) and records every answer and exception. The
results, the log the generators write (right after the call, and at the
end) and the graph count must match eager's.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch

import bytegraph


def logged(t, log):
    log.append("start")
    got = yield t.sin()
    log.append(("got", got))
    yield t.cos()
    log.append("end")
    return "done"


def looping(t, log):
    for i in range(3):
        got = yield t * i
        log.append((i, got))
    return len(log)


def one_item(t, log):
    yield t + 1
    log.append("after")
    return 7


def inner(t):
    got = yield t + 1
    yield t * (got or 2)


def delegating(t, log):
    got = yield from inner(t)
    log.append(("delegated", got))
    yield t - 1


def flat(t, log):
    yield from [t, t + 1]
    log.append("flat")
    yield t + 2


def guarded(t, log):
    try:
        yield t + 1
        yield t + 2
    except ValueError as e:
        log.append(("caught", str(e)))
        yield t + 3


def appending(t, items):
    items.append(1)
    yield t * 2
    items.append(2)
    yield t * 3


def returned_after_next(x, log):
    gen = logged(x * 2, log)
    first = next(gen)
    return gen, first + 1


def returned_paused_in_a_loop(x, log):
    gen = looping(x + 1, log)
    return gen, next(gen), gen.send("a")


def returned_at_its_last_yield(x, log):
    gen = one_item(x.relu(), log)
    return gen, next(gen)


def returned_twice(x, log):
    gen = logged(x, log)
    next(gen)
    return gen, gen


def sharing_a_list_with_the_caller(x, log):
    items = []
    gen = appending(x, items)
    next(gen)
    return gen, items


def live_across_a_break(x, log):
    gen = logged(x, log)
    a = next(gen)
    bytegraph.graph_break()
    b = next(gen)
    return a + b, gen


def paused_in_yield_from(x, log):
    gen = delegating(x + 1, log)
    first = next(gen)
    return gen, first * 2


def paused_in_yield_from_a_list(x, log):
    gen = flat(x * 3, log)
    first = next(gen)
    return gen, first * 2


def paused_in_a_try(x, log):
    gen = guarded(x + 1, log)
    first = next(gen)
    return gen, first * 2


def _answer(call: Callable[[], Any]) -> Any:
    try:
        return ("value", call())
    except Exception as e:  # noqa: BLE001  (the generator's own exceptions are answers)
        return ("raised", type(e).__name__, str(e), getattr(e, "value", None))


def drain(gen: Any) -> list:
    return [_answer(lambda: next(gen)) for _ in range(4)]


def send_then_drain(gen: Any) -> list:
    return [_answer(lambda: gen.send(5)), *drain(gen)]


def throw_then_drain(gen: Any) -> list:
    return [_answer(lambda: gen.throw(ValueError("thrown"))), *drain(gen)]


def throw_stop_iteration(gen: Any) -> list:
    return [_answer(lambda: gen.throw(StopIteration)), *drain(gen)]


def close_then_drain(gen: Any) -> list:
    return [_answer(gen.close), inspect.getgeneratorstate(gen), *drain(gen)]


def describe(gen: Any) -> list:
    state = inspect.getgeneratorstate(gen)
    return [gen.__name__, gen.__qualname__, state, gen.gi_yieldfrom is None, *drain(gen)]


PROTOCOLS = [drain, send_then_drain, throw_then_drain, throw_stop_iteration, close_then_drain,
             describe]

# (program, graphs): the frame is one graph where the generator is rebuilt (in yield
# from too, with the sub-generator it delegates to); a break makes two. A generator
# paused in a try block is not rebuilt: the frame breaks where it first resumed it, a
# graph before and one after. So is one paused in yield from on 3.12+, where a handler
# (CLEANUP_THROW) covers that yield.
IN_YIELD_FROM = 1 if sys.version_info < (3, 12) else 2
PROGRAMS = [
    (returned_after_next, 1), (returned_paused_in_a_loop, 1), (returned_at_its_last_yield, 1),
    (live_across_a_break, 2), (paused_in_yield_from, IN_YIELD_FROM),
    (paused_in_yield_from_a_list, IN_YIELD_FROM), (paused_in_a_try, 2),
]


def _generators(value: Any) -> list:
    if inspect.isgenerator(value):
        return [value]
    if isinstance(value, (tuple, list)):
        return [g for v in value for g in _generators(v)]
    return []


def _tensors_and_log(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", value.tolist())
    if isinstance(value, (tuple, list)):
        return [_tensors_and_log(v) for v in value]
    if inspect.isgenerator(value):
        return "generator"
    return value


def _outcome(fn: Callable[..., Any], protocol: Callable[[Any], list]) -> Any:
    log: list = []
    result = fn(torch.arange(3.0), log)
    at_return = list(log)
    answers = [_tensors_and_log(protocol(g)) for g in _generators(result)]
    return _tensors_and_log(result), at_return, answers, log


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=[p.__name__ for p in PROTOCOLS])
@pytest.mark.parametrize("fn, graphs", PROGRAMS, ids=[fn.__name__ for fn, _ in PROGRAMS])
def test_started_generator_rebuilt_paused(fn, graphs, protocol, counting_backend):
    expected = _outcome(fn, protocol)
    compiled = bytegraph.compile(fn, backend=counting_backend)
    for _ in range(2):  # the trace, then the cache hit
        assert _outcome(compiled, protocol) == expected
    assert counting_backend.calls == graphs


def test_one_generator_returned_twice_is_one_object(counting_backend):
    log: list = []
    first, second = bytegraph.compile(returned_twice, backend=counting_backend)(
        torch.ones(2), log
    )
    assert first is second and counting_backend.calls == 1
    assert [t.tolist() for t in first] == [torch.ones(2).cos().tolist()]


def test_a_list_the_generator_holds_is_the_one_returned(counting_backend):
    gen, items = bytegraph.compile(sharing_a_list_with_the_caller, backend=counting_backend)(
        torch.ones(2), []
    )
    assert items == [1] and counting_backend.calls == 1
    assert [t.tolist() for t in gen] == [[3.0, 3.0]]
    assert items == [1, 2]
