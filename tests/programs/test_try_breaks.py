"""Graph breaks inside try blocks (translate/resume.py, regions.refuse_reason): eager vs compiled.

A break inside a ``try`` costs one break, not the whole frame: the graph
before it, the Python part and the resume function each run where the try's
handler still covers them. Each program must compile to the graph count
given (a regression to "the whole frame runs as Python" shows as fewer
graphs), and equal eager on outputs and every mutated input. An except
block running when the break comes is the one place a break stays refused.
"""

from __future__ import annotations

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3), [])


class Recorder:
    """A user context manager: __exit__ records, and swallows KeyError."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", None if kind is None else kind.__name__))
        return kind is KeyError


def helper_that_breaks(x, log):
    bytegraph.graph_break()
    log.append("helper")
    return x * 3


@add(t3, graphs=2)
def break_in_try_body(x, log):
    try:
        y = x + 1
        bytegraph.graph_break()
        y = y * 2
    except KeyError:
        y = x
    return y


@add(t3, graphs=2)
def break_then_raise_caught(x, log):
    try:
        y = x.sin()
        bytegraph.graph_break()
        log.append(y)
        raise KeyError("after the break")
    except KeyError as e:
        y = y + len(e.args)
    return y


@add(t3, graphs=2)
def break_then_builtin_raise_caught(x, log):
    try:
        y = x.cos()
        bytegraph.graph_break()
        table = {"a": y}
        y = table["b"]
    except KeyError:
        y = y - 1
        log.append("missing")
    return y


@add(t3, graphs=2)
def break_in_try_finally(x, log):
    try:
        y = x * 2
        bytegraph.graph_break()
        y = y + 1
    finally:
        log.append("finally")
    return y


@add(t3, graphs=2)
def break_in_try_else(x, log):
    try:
        y = x - 1
        bytegraph.graph_break()
    except ValueError:
        y = x
    else:
        y = y * 5
        log.append("else")
    return y


@add(t3, graphs=2)
def break_in_nested_try(x, log):
    try:
        try:
            y = x * 2
            bytegraph.graph_break()
            raise ValueError("inner")
        except KeyError:
            y = x
    except ValueError as e:
        log.append(str(e))
        y = y + 1
    return y


@add(t3, graphs=3)  # before the call, the helper's after its break, the caller's resume
def break_in_helper_called_in_try(x, log):
    try:
        y = helper_that_breaks(x + 1, log)
        y = y.exp()
    except IndexError:
        y = x
    return y


@add(t3, graphs=2)
def print_in_try(x, log):
    try:
        y = x.abs()
        print("traced code prints", end="")
        y = y + 2
    except KeyError:
        y = x
    return y


@add(t3, graphs=2)
def break_in_user_with_swallowing(x, log):
    with Recorder(log):
        y = x * 4
        bytegraph.graph_break()
        log.append("body")
        {}["swallowed"]
    return y + 1


@add(t3, graphs=2)
def break_in_with_inside_try(x, log):
    try:
        with Recorder(log):
            y = x * 4
            bytegraph.graph_break()
            raise ValueError("passes the with")
    except ValueError:
        y = x - 3
    return y


@add(t3, graphs=2)
def break_in_try_inside_loop(x, log):
    total = x
    for i in range(3):
        try:
            total = total + i
            if i == 1:
                raise KeyError(i)
        except KeyError:
            log.append(i)
    bytegraph.graph_break()
    return total * 2


@add(t3, graphs=2)
def break_before_a_try(x, log):
    y = x + 1
    bytegraph.graph_break()
    try:
        y = y * 2
        raise IndexError
    except IndexError:
        y = y - 1
    return y


@add(t3, graphs=0)
def break_in_except_block_stays_python(x, log):
    y = x * 2
    try:
        raise KeyError("k")
    except KeyError:
        log.append(len(log))
        bytegraph.graph_break()
        y = y + 1
    return y


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_break_in_try_program(prog, differential, counting_backend, capsys) -> None:
    check_program(prog, differential, counting_backend)


def test_data_error_after_a_break_reaches_the_handler(differential, counting_backend) -> None:
    """The graph after the break fails on data at run time: it reruns as Python,
    where the try's handler catches the error as in eager."""

    def gathers(x, idx, log):
        try:
            y = x * 2
            bytegraph.graph_break()
            log.append("past the break")
            y = torch.gather(y, 0, idx)
        except RuntimeError:
            log.append("caught")
            y = x.sum()
        return y

    compiled = differential.compile(gathers)
    differential.check(gathers, compiled, (torch.ones(3), torch.tensor([0, 1]), []))
    differential.check(gathers, compiled, (torch.ones(3), torch.tensor([0, 7]), []))
    assert counting_backend.calls == 2


def test_try_finally_does_not_need_a_rerun(differential, counting_backend) -> None:
    """A finally block never swallows the error: a graph writing into an input under
    try/finally stays one graph (Hugging Face wraps every forward in one)."""

    def writes(x, log):
        try:
            x.add_(1)
            y = x * 2
        finally:
            log.append("reset")
        return y

    compiled = differential.compile(writes)
    differential.check(writes, compiled, (torch.ones(3), []))
    assert counting_backend.calls == 1


def test_graph_under_try_that_cannot_rerun_stays_python(differential, counting_backend) -> None:
    """An in-place write into an input under a try: if the graph failed after it, the
    handler could not see the error with eager's state, so the frame runs as Python."""

    def writes(x, idx):
        try:
            x.add_(1)
            y = torch.gather(x, 0, idx)
        except RuntimeError:
            y = x.sum()
        return y

    compiled = differential.compile(writes)
    differential.check(writes, compiled, (torch.ones(3), torch.tensor([0, 1])))
    differential.check(writes, compiled, (torch.ones(3), torch.tensor([0, 9])))
    assert counting_backend.calls == 0
    reasons = [str(b) for b in compiled.entries[0].breaks]
    assert any("cannot rerun as Python" in r for r in reasons), reasons


def test_op_in_a_generator_resumed_under_a_try_needs_a_rerun(differential, counting_backend):
    """A generator's frame runs below whoever resumes it (not the frame that made it):
    its ops run under the consumer's try block."""

    def gathers(x, idx):
        x.add_(1)
        yield torch.gather(x, 0, idx)

    def first(g, x):
        try:
            return next(g)
        except RuntimeError:
            return x.sum()

    def consumes(x, idx):
        return first(gathers(x, idx), x)

    compiled = differential.compile(consumes)
    differential.check(consumes, compiled, (torch.ones(3), torch.tensor([0, 1])))
    differential.check(consumes, compiled, (torch.ones(3), torch.tensor([0, 9])))
    assert counting_backend.calls == 0
