"""``contextlib.redirect_stdout`` and ``io.StringIO`` in compiled code.

Entering ``redirect_stdout`` sets ``sys.stdout``, which the trace does not model,
and no resume function could hold the block's ``__exit__``: the whole ``with``
statement runs in Python (``regions.with_region``), the tensor work before and
after it compiled. Every program is checked against eager: result, what the
StringIO holds, and what reached the real stdout (nothing printed twice, nothing
printed where eager did not), with ``reorderable_logging`` on and off.
"""

from __future__ import annotations

import contextlib
import io
import sys

import pytest
import torch
from _harness import randn

import bytegraph

# 3.12+ lays the exit handler out after the function's body: no with statement there
# qualifies as a region (regions.with_regions), and the frame runs as Python, still
# checked against eager here; the graph counts are 3.11's.
WITH_REGIONS = sys.version_info < (3, 12)


def into_argument(x, sink):
    y = x.sin() * 2
    with contextlib.redirect_stdout(sink):
        print("inside", 1)
        y = y.cos()
    print("outside")
    return y - 1


def made_inside(x):
    y = x + 1
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer) as target:
        print("captured", target is buffer)
    return y * 2, buffer.getvalue()


def nested_in_a_with(x, sink):
    y = x.relu()
    with torch.no_grad():
        z = y * 3
        with contextlib.redirect_stdout(sink):
            print("no grad:", torch.is_grad_enabled())
        z = z + 1
    return y + 1, z


def suppressed_inside(x, sink):
    y = x * 2
    with contextlib.redirect_stdout(sink):
        try:
            print("before the raise")
            raise KeyError("k")
        except KeyError:
            print("caught")
    return y + 1


def _sink_value(args: tuple) -> list[str]:
    return [a.getvalue() for a in args if isinstance(a, io.StringIO)]


CASES = [
    (into_argument, lambda: (randn(3), io.StringIO()), 2),
    (made_inside, lambda: (randn(3),), 2),
    (nested_in_a_with, lambda: (randn(3, requires_grad=True), io.StringIO()), 2),
    (suppressed_inside, lambda: (randn(3), io.StringIO()), 2),
]


@pytest.mark.parametrize("switch", [False, True])
@pytest.mark.parametrize("fn,make,graphs", CASES, ids=[c[0].__name__ for c in CASES])
def test_redirect_matches_eager(fn, make, graphs, switch, monkeypatch, capsys, counting_backend):
    monkeypatch.setattr(bytegraph.config, "reorderable_logging", switch)
    compiled = bytegraph.compile(fn, backend=counting_backend)
    for _ in range(2):  # the second call from the cache
        eager_args, compiled_args = make(), None
        compiled_args = tuple(
            a.clone() if isinstance(a, torch.Tensor) else io.StringIO() for a in eager_args
        )
        capsys.readouterr()
        expected = fn(*eager_args)
        expected_out = capsys.readouterr().out
        actual = compiled(*compiled_args)
        actual_out = capsys.readouterr().out
        assert actual_out == expected_out
        assert _sink_value(compiled_args) == _sink_value(eager_args)
        for got, want in zip(torch.utils._pytree.tree_leaves(actual),
                             torch.utils._pytree.tree_leaves(expected)):
            if isinstance(want, torch.Tensor):
                assert torch.equal(got, want) and got.requires_grad == want.requires_grad
            else:
                assert got == want
    assert counting_backend.calls == graphs or not WITH_REGIONS


@pytest.mark.skipif(not WITH_REGIONS, reason="3.11's with-statement layout only")
def test_the_with_statement_runs_as_python_the_rest_compiled():
    report = bytegraph.explain(into_argument)(randn(3), io.StringIO())
    assert report.graph_count == 2, str(report)
    assert "the frame ran as Python" not in str(report), str(report)


class Noisy:
    """A context manager whose enter and exit print: with the switch off, a break."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        print("enter")
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        print("exit")
        self.log.append(("exit", exc[0]))
        return True


def user_manager(x, log):
    y = x.sin()
    with Noisy(log):
        y = y * 2
        log.append(len(log))
    return y + 1


def returns_inside(x, log, early):
    y = x.sin()
    with Noisy(log):
        if early:
            return y * 3
        y = y * 2
    return y + 1


@pytest.mark.parametrize("fn,extra,graphs", [
    (user_manager, (), 2), (returns_inside, (True,), 1), (returns_inside, (False,), 2),
])
def test_break_in_a_user_manager_runs_the_statement_as_python(
    fn, extra, graphs, differential, counting_backend, capsys
):
    compiled = differential.compile(fn)
    for _ in range(2):
        capsys.readouterr()
        differential.check(fn, compiled, (randn(3), [], *extra))
        out = capsys.readouterr().out
        assert out == "enter\nexit\n" * 2  # once eager, once compiled
    assert counting_backend.calls == graphs or not WITH_REGIONS
