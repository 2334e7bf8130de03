"""Collectives inside compiled code: gloo on the CPU, 2 ranks, one world for the whole file.

Each program of ``collective_scenarios.py`` runs eager and compiled on every
rank, with outputs and written inputs equal (the scenario asserts that); here
the tests assert the graphs: one per program, holding the functional
collective and its wait, the same on every rank, and no recompile on the
second call. The refused forms break cleanly (``collective_call`` under
fullgraph) with eager's results.
"""

from __future__ import annotations

import pytest
import torch
from collective_scenarios import SCENARIOS, run_scenarios
from world import agreed_result, run_world

import bytegraph

torch_distributed = pytest.importorskip("torch.distributed")
if not torch_distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

CAPTURED_GRAPHS = {
    "reduce_then_add": [["all_reduce", "wait_tensor"]],
    "reduce_on_world": [["all_reduce", "wait_tensor"]],
    "gather_into": [["all_gather_into_tensor", "wait_tensor"]],
    "gather_world_size": [["all_gather_into_tensor", "wait_tensor"]],
    "reduce_scatter": [["reduce_scatter_tensor", "wait_tensor"]],
    "broadcast_input": [["broadcast", "wait_tensor"]],
    "functional_reduce": [["all_reduce", "wait_tensor"]],
    "functional_others": [[
        "all_gather_into_tensor", "wait_tensor", "reduce_scatter_tensor", "wait_tensor",
        "broadcast", "wait_tensor",
    ]],
    "functional_ops": [["all_reduce", "wait_tensor"]],
    "reduce_if_initialized": [["all_reduce", "wait_tensor"]],
}


@pytest.fixture(scope="module")
def world_of_two() -> dict[str, list[dict]]:
    names = list(SCENARIOS)
    by_rank = run_world(run_scenarios, 2, names, deadline=300.0)
    return {name: [results[name] for results in by_rank] for name in names}


result = agreed_result


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_collectives_are_captured_as_functional_collectives(world_of_two, backend):
    found = result(world_of_two, backend)
    assert {name: value["graphs"] for name, value in found.items()} == CAPTURED_GRAPHS


def test_collectives_under_inductor(world_of_two):
    found = result(world_of_two, "inductor")
    assert {name: value["graphs"] for name, value in found.items()} == {
        name: CAPTURED_GRAPHS[name] for name in found
    }
    assert len(found) == 3


def test_each_reduce_op_is_its_own_graph(world_of_two):
    # SUM, AVG, PRODUCT, MIN, MAX passed as an argument: guarded by identity, five graphs.
    assert result(world_of_two, "reduce_ops")["graphs"] == [["all_reduce", "wait_tensor"]] * 5


def test_a_process_group_from_the_frame(world_of_two):
    assert result(world_of_two, "on_group")["graphs"] == [["all_reduce", "wait_tensor"]]


@pytest.mark.parametrize("name", ["dead_reduce_dce", "dead_reduce_inductor"])
def test_a_collective_nothing_reads_still_runs(world_of_two, name):
    # Rank 0 compiled, rank 1 eager, then a check all-reduce: a dropped collective pairs
    # rank 1's with rank 0's check (a wrong sum, then a timeout).
    assert result(world_of_two, name) == {"graphs": [["all_reduce", "wait_tensor"]], "kept": True}


def test_a_graph_that_communicates_is_not_rerun_when_it_raises(world_of_two):
    assert result(world_of_two, "raising_graph") == {"graphs": [["all_reduce", "wait_tensor"]]}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_collectives_in_a_trace_with_dynamic_shapes(world_of_two, backend):
    # Sizes 4, 6, 8: a static graph, then one with a dynamic size that the third call
    # reuses; both hold the collectives.
    found = result(world_of_two, f"dynamic_{backend}")
    assert {name: value["graphs"] for name, value in found.items()} == {
        name: CAPTURED_GRAPHS[name] * 2 for name in found
    }
    assert len(found) == 4


def test_refused_forms_break_cleanly(world_of_two):
    found = result(world_of_two, "refused")
    assert {name: value["fullgraph"] for name, value in found.items()} == {
        "reduce_async": "collective_call",
        "gather_object": "collective_call",
        "send_recv": "collective_call",
        "reduce_on_rank_list": "collective_call",
        "reduce_requires_grad": "collective_call",
    }
    # The tensor work around the break still compiles, with no collective in a graph.
    assert found["reduce_async"]["graphs"] == [[]]
    assert found["send_recv"]["graphs"] == [[], []]
    assert found["reduce_requires_grad"]["graphs"] == [[], []]


def test_a_call_eager_refuses_raises_eagers_error(world_of_two):
    assert result(world_of_two, "eagers_errors") == {
        "functional_group_none": ["ValueError", "ValueError"],
        "maximum_of_complex_numbers": ["ValueError", "ValueError"],
    }


def test_a_tensor_that_requires_grad_breaks_with_eagers_gradients(world_of_two):
    assert result(world_of_two, "gradients") == {"graphs": [[], []]}


def test_queries_fold_where_no_process_group_exists(counting_backend):
    # In this (the test) process torch.distributed is not initialized: is_initialized()
    # is False, guarded, and the frame is one graph without a collective.
    from torch import distributed as dist

    def scaled(x):
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(x)
            return x / dist.get_world_size()
        return x * 2

    assert not dist.is_initialized()
    x = torch.arange(3.0)
    compiled = bytegraph.compile(scaled, backend=counting_backend, fullgraph=True)
    assert torch.equal(compiled(x), scaled(x))
    assert counting_backend.calls == 1
