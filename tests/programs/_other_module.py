"""A module whose functions read its own globals (test_protocol_results: another
module's global changed between calls must be seen by the compiled code)."""

import torch

import bytegraph

SCALE = 2
FLAG = True
ITEMS = [1, 2]
WEIGHT = torch.ones(3)


def helper(x):
    if FLAG:
        return x * SCALE
    return x - SCALE


def summed(x):
    return x + sum(ITEMS)


def weighted(x):
    return x * WEIGHT


def with_break(x):
    y = x * SCALE
    bytegraph.graph_break()
    return y + SCALE
