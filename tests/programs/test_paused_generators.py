"""Generators left paused inside a try block when the frame ends.

CPython runs such a generator's ``finally`` when the generator is collected:
at once when the frame drops it, later when it is returned or stored. The
trace cannot rebuild a started frame, so the compiled frame breaks where the
generator is first resumed; it is made and run in Python from there, and the
tensor work before and after is still captured. Each program is checked
against eager: result, arguments (the log of ``finally`` runs) right after the
call, and again once the returned generator is dropped.
"""

from __future__ import annotations

import gc

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def paused(log, tag="g"):
    try:
        yield 1
        yield 2
    finally:
        log.append(f"finally {tag}")


def x_log() -> tuple:
    return (randn(3), [])


@add(x_log, graphs=2)
def dropped_at_return(x, log):
    y = x.sin()
    gen = paused(log)
    first = next(gen)
    return y * first + 1


def loop_left_by_break(x, log):
    y = x * 2
    for v in paused(log, "loop"):
        if v == 1:
            break
    log.append("after the loop")
    return y + v


def helper_drops_its_generator(t, log):
    gen = paused(log, "helper")
    return t * next(gen)


@add(x_log, graphs=3)  # the helper runs as its own compiled function
def dropped_in_an_inlined_helper(x, log):
    y = helper_drops_its_generator(x.relu(), log)
    log.append("back in the caller")
    return y.exp()


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_paused_generator_program(prog, differential, counting_backend):
    check_program(prog, differential, counting_backend)


def test_loop_left_by_break_closes_at_the_break(differential, counting_backend):
    """Eager closes the generator when the loop drops it, before the next statement."""
    compiled = differential.compile(loop_left_by_break)
    for _ in range(2):
        x, log = x_log()
        differential.check(loop_left_by_break, compiled, (x, log))
    assert counting_backend.calls == 1


def returned_paused(x, log):
    y = x + 1
    gen = paused(log, "returned")
    next(gen)
    return y * 2, gen


def test_returned_generator_finalizes_when_dropped(counting_backend):
    """The caller holds it: no finally yet; it resumes where eager's would; dropping it
    runs the finally then, on both sides."""
    compiled = bytegraph.compile(returned_paused, backend=counting_backend)
    for fn in (returned_paused, compiled, compiled):  # the last one from the cache
        x, log = randn(3), []
        y, gen = fn(x, log)
        assert torch.equal(y, (x + 1) * 2) and log == []
        assert next(gen) == 2 and log == []
        del gen
        gc.collect()
        assert log == ["finally returned"]
    assert counting_backend.calls == 2
    assert len(compiled.entries) == 1, "a generator argument of the resume function missed"


def test_break_names_the_generator():
    report = bytegraph.explain(returned_paused)(randn(3), [])
    assert report.graph_count == 2, str(report)
    assert any("left paused" in b.reason for b in report.break_reasons), str(report)


class Finalized:
    def __init__(self, log):
        self.log = log

    def __del__(self):
        self.log.append("finalized")


def raises_holding_a_new_object(x, log):
    y = x + 1
    raise ValueError(Finalized(log), y)


def test_escaping_exception_frees_its_objects_at_once():
    """The generated code keeps no local holding the exception it raises: with one, the
    traceback's frame and the exception make a cycle, freed only by the collector."""
    compiled = bytegraph.compile(raises_holding_a_new_object, backend="eager")
    for fn in (raises_holding_a_new_object, compiled):
        log = []
        with pytest.raises(ValueError):
            fn(randn(2), log)
        assert log == ["finalized"]
