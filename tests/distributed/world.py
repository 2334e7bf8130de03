"""A gloo world on the CPU for tests: ranks started by torch.multiprocessing, bounded in time.

``run_world(entry, world_size, *args)`` starts ``world_size`` processes, each
calling ``entry(rank, world_size, *args)`` after joining one gloo process
group (``init_method`` a file in a fresh temporary folder, so concurrent test
runs never share a port). Every rank returns a picklable value through a
queue; ``run_world`` returns them by rank.

Nothing can hang the test run:
* the process group has a timeout (``PG_TIMEOUT``): a collective that a
  peer never joins raises in the waiting rank;
* the parent waits at most ``deadline`` seconds for all results, then kills
  every rank still alive (by its own process id) and raises ``WorldFailed``;
* a rank that raises sends its traceback, and ``WorldFailed`` names the rank
  and the error, so a failure reads as the failing rank's own traceback.
"""

from __future__ import annotations

import datetime
import os
import queue
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp

PG_TIMEOUT = datetime.timedelta(seconds=30)


class WorldFailed(AssertionError):
    """A rank raised, died, or the world ran past its deadline."""


def run_world(
    entry: Callable[..., Any], world_size: int, *args: Any, deadline: float = 120.0,
    pg_timeout: datetime.timedelta = PG_TIMEOUT,
) -> list[Any]:
    """``entry(rank, world_size, *args)`` on every rank of a gloo world; the results by rank."""
    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "store")
        ranks = [
            context.Process(
                target=_rank_main,
                args=(entry, rank, world_size, store, pg_timeout, results, args),
                daemon=True,
            )
            for rank in range(world_size)
        ]
        for process in ranks:
            process.start()
        try:
            return _collect(ranks, results, world_size, time.monotonic() + deadline)
        finally:
            for process in ranks:
                if process.is_alive():
                    process.kill()
                process.join(timeout=10)


def _collect(ranks: list[Any], results: Any, world_size: int, end: float) -> list[Any]:
    by_rank: dict[int, Any] = {}
    while len(by_rank) < world_size:
        item = _receive(results, 1.0)
        if item is None:
            item = _check_running(ranks, by_rank, results, end)
            if item is None:
                continue
        rank, ok, value = item
        if not ok:
            raise WorldFailed(_failures(rank, value, results))
        by_rank[rank] = value
    return [by_rank[rank] for rank in range(world_size)]


def _failures(rank: int, error: str, results: Any) -> str:
    """Every rank's failure within a short grace: the rank that raised first may be a peer
    whose collective failed because the rank at fault left the process group."""
    failures = {rank: error}
    while (item := _receive(results, 2.0)) is not None:
        if not item[1]:
            failures[item[0]] = item[2]
    return "\n".join(f"rank {r} raised:\n{text}" for r, text in sorted(failures.items()))


def _receive(results: Any, timeout: float) -> Any:
    try:
        return results.get(timeout=timeout)
    except queue.Empty:
        return None


def _check_running(ranks: list[Any], by_rank: dict[int, Any], results: Any, end: float) -> Any:
    """A result that arrived late, or WorldFailed for a dead rank or a passed deadline."""
    missing = [rank for rank in range(len(ranks)) if rank not in by_rank]
    dead = [rank for rank in missing if not ranks[rank].is_alive()]
    if dead:
        late = _receive(results, 2.0)  # sent just before it exited
        if late is not None:
            return late
        code = ranks[dead[0]].exitcode
        raise WorldFailed(f"rank {dead[0]} exited (code {code}) without a result")
    if time.monotonic() > end:
        raise WorldFailed(f"ranks {missing} still running at the deadline")
    return None


def _rank_main(
    entry: Callable[..., Any], rank: int, world_size: int, store: str,
    pg_timeout: datetime.timedelta, results: Any, args: tuple,
) -> None:
    import torch.distributed as dist

    import bytegraph

    bytegraph.config.strict = True  # as tests/conftest.py sets it in the test process
    try:
        dist.init_process_group(
            "gloo", init_method=f"file://{store}", rank=rank, world_size=world_size,
            timeout=pg_timeout,
        )
        try:
            value = entry(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (any failure goes to the parent, as text)
        results.put((rank, False, traceback.format_exc()))
        return
    results.put((rank, True, value))


def run_named(scenarios: dict[str, Callable[[int], Any]], rank: int, names: list[str]) -> dict:
    """On one rank: each named scenario's result, or ``{"error": traceback}``; the ranks
    start every scenario together, each with bytegraph's caches empty."""
    import torch.distributed as dist

    import bytegraph

    results = {}
    for name in names:
        bytegraph.reset()
        try:
            results[name] = scenarios[name](rank)
        except Exception:  # noqa: BLE001  (reported to the parent, which fails that test)
            results[name] = {"error": traceback.format_exc()}
        dist.barrier()
    return results


def agreed_result(world: dict[str, list[dict]], name: str) -> dict:
    """The scenario's result, the same on every rank; a rank's failure fails the test."""
    import pytest

    per_rank = world[name]
    for rank, value in enumerate(per_rank):
        if "error" in value:
            pytest.fail(f"rank {rank}, scenario {name}:\n{value['error']}", pytrace=False)
    assert all(value == per_rank[0] for value in per_rank), f"ranks disagree: {per_rank}"
    return per_rank[0]
