"""Profiler context managers in compiled code (variables/profiler.py).

``record_function`` and ``profile`` blocks are ignored, as torch.compile
ignores them: the block's ops are in the graph, exceptions go through, a
graph break inside the block resumes under a nullcontext's ``__exit__``.
Using the profiler object itself (``prof.key_averages()``) cannot be
served by an ignored profiler: the frame runs in Python, with a real one.
"""

from __future__ import annotations

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def x3() -> tuple:
    return (randn(3),)


@add(x3)
def record_function_block(x):
    with torch.autograd.profiler.record_function("step"):
        y = x + 1
    return y * 2


@add(x3)
def profiler_record_function_bound(x):
    with torch.profiler.record_function("step", "args") as rf:
        y = x.sin()
    return y * 2, rf is not None


@add(x3)
def nested_profile_blocks(x):
    with torch.autograd.profiler.profile(), torch.profiler.profile(record_shapes=True):
        with torch.profiler.record_function("inner"):
            y = x.cos()
        y = y + 1
    return y


@add(x3)
def exception_leaves_record_function(x):
    try:
        with torch.profiler.record_function("step"):
            y = x + 1
            raise ValueError("leave")
    except ValueError:
        return y * 3


@add(x3, graphs=2)
def break_inside_record_function(x):
    with torch.profiler.record_function("step"):
        y = x + 1
        bytegraph.graph_break()
        y = y * 3
    return y - 1


@add(x3, graphs=0)
def profile_object_used(x):
    with torch.profiler.profile() as prof:
        y = x + 1
    return y, isinstance(prof.key_averages(), list)


PROGRAMS = corpus.programs


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_profiler_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)
