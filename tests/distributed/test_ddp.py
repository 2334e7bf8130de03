"""Compiled models under DDP and FSDP2: gloo on the CPU, 2 ranks (4 in one test).

One world of 2 ranks runs every scenario of ``ddp_scenarios.py`` (starting
processes is most of the cost); each test reads its scenario's result. On
every rank, the compiled model trains beside uncompiled DDP with losses,
gradients and parameters equal after every step (the scenario asserts
that); here the tests assert the graph counts, which must also be the same on
every rank (each rank compiles the same graphs for the same inputs).

The graph counts: DDP cuts its gradients into buckets of ``bucket_cap_mb``
(``ddp_buckets``, read from DDP's own logging data), and a graph compiled
inside DDP's forward is cut into one piece per bucket (graph/ddp.py).
"""

from __future__ import annotations

import datetime
import time

import pytest
from ddp_scenarios import SCENARIOS, raise_on_rank_one, run_scenarios
from world import WorldFailed, agreed_result, run_world

torch_distributed = pytest.importorskip("torch.distributed")
if not torch_distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)


@pytest.fixture(scope="module")
def world_of_two() -> dict[str, list[dict]]:
    """Every scenario's results, by name, one dict per rank."""
    names = list(SCENARIOS)
    by_rank = run_world(run_scenarios, 2, names, deadline=240.0)
    return {name: [results[name] for results in by_rank] for name in names}


result = agreed_result


@pytest.mark.parametrize("name", ["inner_eager", "inner_aot_eager", "outer_eager",
                                  "outer_aot_eager", "outer_hooked", "inductor"])
def test_compiled_ddp_trains_as_ddp_one_graph_per_bucket(world_of_two, name):
    found = result(world_of_two, name)
    assert found["ddp_buckets"] == 2
    assert found["graphs"] == 2


def test_several_buckets_give_as_many_graphs(world_of_two):
    found = result(world_of_two, "several_buckets")
    assert found["ddp_buckets"] >= 3
    assert found["graphs"] == found["ddp_buckets"]


def test_bucket_cap_mb_decides_the_split(world_of_two):
    found = result(world_of_two, "one_big_bucket")
    assert found == {"graphs": 1, "ddp_buckets": 1}


def test_split_off_compiles_one_graph(world_of_two):
    found = result(world_of_two, "split_off")
    assert found["ddp_buckets"] >= 3
    assert found["graphs"] == 1


@pytest.mark.parametrize("name", ["unused_inner", "unused_outer"])
def test_find_unused_parameters(world_of_two, name):
    # Steps without the extra layer: one bucket's worth of parameters, one graph; with it,
    # two pieces: 3 graphs in all. The layer never called is never in a graph.
    assert result(world_of_two, name)["graphs"] == 3


@pytest.mark.parametrize("name", ["fsdp_eager", "fsdp_aot_eager"])
def test_fsdp2_layers_compile_with_fsdps_hooks_around_them(world_of_two, name):
    # compile(model) of a model sharded per Linear and at the root: the root's forward
    # breaks at each sharded layer (module hooks); each layer is called through its hooks
    # (FSDP's all-gather before, reshard after) with its forward compiled: one graph per
    # Linear, no recompile over 3 steps. The ReLUs, torch.nn modules with no submodules and
    # no hooks, run as they are (torch.compile starts no frame in torch.nn either).
    assert result(world_of_two, name) == {"graphs": 3}


def test_world_of_four():
    by_rank = run_world(run_scenarios, 4, ["outer_eager"], deadline=240.0)
    found = result({"outer_eager": [r["outer_eager"] for r in by_rank]}, "outer_eager")
    assert found == {"graphs": 2, "ddp_buckets": 2}


def test_a_rank_that_raises_ends_the_world_with_its_error():
    started = time.monotonic()
    with pytest.raises(WorldFailed, match="(?s)rank 1 raised.*rank 1 failed on purpose"):
        run_world(
            raise_on_rank_one, 2, deadline=60.0, pg_timeout=datetime.timedelta(seconds=20)
        )
    assert time.monotonic() - started < 60.0
