"""With-blocks and decorators that switch grad mode: eager vs compiled.

Grad mode must hold inside the compiled code exactly where it held in
eager: every output's ``requires_grad`` (compared by the differential check)
and the gradients ``backward()`` computes through it must match. After a
call, compiled or not, finished or abandoned mid-block, the caller's grad
mode is what eager leaves. ``torch.inference_mode`` makes inference tensors,
which compiled graphs do not reproduce: it runs in Python, and its results
must still be eager's.
"""

from __future__ import annotations

import pytest
import torch
from _harness import Corpus, check_program, opnames, randn

import bytegraph

corpus = Corpus()
add = corpus.add

TRAINING = False
NO_GRAD = torch.no_grad()


def leaf(*shape: int) -> torch.Tensor:
    return randn(*shape, requires_grad=True)


def x_leaf() -> tuple:
    return (leaf(3),)


def x_w() -> tuple:
    return (leaf(3), leaf(3))


@torch.no_grad()
def no_grad_helper(x, scale=2.0):
    return x * scale


@torch.no_grad
def bare_no_grad_helper(x):
    return x + 1


@torch.enable_grad()
def enable_grad_helper(x):
    return x * x


@torch.set_grad_enabled(False)
def set_grad_disabled_helper(x, *, shift):
    return x - shift


@torch.no_grad()
@torch.enable_grad()
def stacked_grad_helpers(x):
    return x.exp()


def helper_with_block(x, w):
    with torch.no_grad():
        w2 = w * 2
    return x * w2


def switch_grad_off():
    torch.set_grad_enabled(False)


# --- with-blocks -------------------------------------------------------------------------


@add(x_w)
def with_no_grad(x, w):
    with torch.no_grad():
        y = x * w
    z = x * w
    return y, z


@add(x_leaf)
def with_enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
        c = x * 4
    return a, b, c


@add(x_leaf)
def with_set_grad_enabled_false(x):
    with torch.set_grad_enabled(False):
        y = x.sin()
    return y, x.cos()


@add(lambda: (leaf(3), False))
def with_set_grad_enabled_argument(x, mode):
    with torch.set_grad_enabled(mode):
        y = x * 2
    return y + x


@add(x_leaf)
def with_set_grad_enabled_global_flag(x):
    with torch.set_grad_enabled(TRAINING):
        return x * 5


@add(x_leaf)
def with_as_binding(x):
    with torch.no_grad() as entered:
        y = x + 1
    return y, entered


@add(x_leaf)
def return_inside_with(x):
    with torch.no_grad():
        return x * 2


@add(x_w)
def nested_no_grad_blocks(x, w):
    with torch.no_grad():
        with torch.no_grad():
            a = x * w
        b = x + w
    return a, b, x - w


@add(x_leaf)
def with_in_loop_with_break_and_continue(x):
    outs = []
    for i in range(4):
        with torch.no_grad():
            if i == 1:
                continue
            if i == 3:
                break
            outs.append(x * i)
        outs.append(x + i)
    return outs


@add(x_leaf)
def loop_inside_with(x):
    with torch.no_grad():
        for i in range(3):
            x = x + i
    return x


@add(x_leaf)
def is_grad_enabled_folds_inside_with(x):
    flags = [torch.is_grad_enabled()]
    with torch.no_grad():
        flags.append(torch.is_grad_enabled())
        with torch.enable_grad():
            flags.append(torch.is_grad_enabled())
    flags.append(torch.is_grad_enabled())
    return x * len(flags), flags


@add(x_leaf)
def requires_grad_of_intermediate_decides_branch(x):
    with torch.no_grad():
        y = x * 2
    if y.requires_grad:
        return y + 100
    return y - 100, (x * 2).requires_grad


@add(x_w)
def no_grad_parameter_update(x, w):
    loss = (x * x).sum() + w.sum()  # backward needs neither w's old nor new values
    with torch.no_grad():
        w.sub_(0.1 * x)
        w.mul_(0.5)
    return loss


@add(x_leaf)
def global_no_grad_instance(x):
    with NO_GRAD:
        y = x * 2
    return y, x * 3


@add(x_leaf)
def reused_context_instance(x):
    ctx = torch.no_grad()
    with ctx:
        a = x * 2
    with ctx:
        b = x * 3
    return a, b, x * 4


@add(x_leaf)
def explicit_enter_and_exit_calls(x):
    ctx = torch.enable_grad()
    with torch.no_grad():
        ctx.__enter__()
        a = x * 2
        ctx.__exit__(None, None, None)
        b = x * 3
    return a, b


# --- plain calls that switch the mode ------------------------------------------------------


@add(x_leaf)
def set_grad_enabled_call_then_restore(x):
    torch.set_grad_enabled(False)
    a = x * 2
    torch.set_grad_enabled(True)
    return a, x * 3


@add(x_leaf)
def private_set_grad_enabled_call(x):
    torch._C._set_grad_enabled(False)
    a = x * 2
    torch._C._set_grad_enabled(True)
    return a, x * 3


@add(x_leaf)
def switch_in_helper_then_restore(x):
    switch_grad_off()
    a = x * 2
    with torch.enable_grad():
        b = x * 3
    torch.set_grad_enabled(True)
    return a, b, x * 4


# --- decorators --------------------------------------------------------------------------


@add(x_leaf)
def calls_no_grad_decorated(x):
    return no_grad_helper(x) + x, no_grad_helper(x, scale=3.0)


@add(x_leaf)
def calls_bare_no_grad_decorated(x):
    return bare_no_grad_helper(x) * x


@add(x_leaf)
def calls_enable_grad_decorated_inside_no_grad(x):
    with torch.no_grad():
        a = enable_grad_helper(x)
        b = x * 2
    return a, b


@add(x_leaf)
def calls_set_grad_enabled_decorated(x):
    return set_grad_disabled_helper(x, shift=1.0), x * 2


@add(x_leaf)
def calls_stacked_grad_decorators(x):
    return stacked_grad_helpers(x)


@add(x_w)
def calls_helper_with_block(x, w):
    return helper_with_block(x, w)


def no_grad_generator(x):
    with torch.no_grad():
        yield x * 2
        yield x * 3
    yield x * 4


@add(x_leaf)
def generator_with_no_grad_block(x):
    """Grad mode stays off while the generator is paused inside its block, as in eager."""
    return [y * x for y in no_grad_generator(x)]


# --- the tests -------------------------------------------------------------------------------


assert len(corpus) >= 20, len(corpus)


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_program_matches_eager(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def _flat_tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat_tensors(v)]
    return []


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_backward_matches_eager(prog, differential) -> None:
    """Gradients through the compiled code equal eager's, input by input."""
    from conftest import clone_value

    args = prog.make_inputs()
    results = []
    for fn in (prog.fn, differential.compile(prog.fn)):
        inputs = clone_value(args)
        out = fn(*inputs)
        grads = [t for t in _flat_tensors(out) if t.requires_grad]
        if grads:
            sum(g.sum() for g in grads).backward()
        results.append([getattr(t, "grad", None) for t in _flat_tensors(inputs)])
    eager, compiled = results
    assert any(g is not None for g in eager) or prog.name in NO_GRADIENTS, prog.name
    for e, c in zip(eager, compiled):
        assert (e is None) == (c is None)
        if e is not None:
            torch.testing.assert_close(c, e, rtol=0, atol=0)


NO_GRADIENTS = {  # every output is computed with grad off: nothing to differentiate
    "return_inside_with", "with_set_grad_enabled_global_flag", "with_as_binding",
    "loop_inside_with", "requires_grad_of_intermediate_decides_branch",
}


def test_graph_switches_grad_mode_where_eager_does(differential, counting_backend) -> None:
    compiled = differential.compile(with_no_grad)
    differential.check(with_no_grad, compiled, x_w())
    (gm,) = counting_backend.graphs
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    switches = [(i, n.args) for i, n in enumerate(calls) if n.target is torch._C._set_grad_enabled]
    assert switches == [(0, (False,)), (2, (True,))], gm.code


def test_no_switch_recorded_when_mode_is_already_set(differential, counting_backend) -> None:
    def f(x):
        with torch.enable_grad():
            return x * 2

    differential.check(f, differential.compile(f), x_leaf())
    (gm,) = counting_backend.graphs
    assert torch._C._set_grad_enabled not in [n.target for n in gm.graph.nodes]


def test_caller_grad_mode_is_guarded(differential, counting_backend) -> None:
    """Compiled with grad on, called under no_grad: a new trace, eager's results."""
    compiled = differential.compile(with_enable_grad_inside_no_grad)
    differential.check(with_enable_grad_inside_no_grad, compiled, x_leaf())
    with torch.no_grad():
        differential.check(with_enable_grad_inside_no_grad, compiled, x_leaf())
        assert not torch.is_grad_enabled()
    assert counting_backend.calls == 2
    differential.check(with_enable_grad_inside_no_grad, compiled, x_leaf())
    assert counting_backend.calls == 2


def test_mode_argument_and_global_flag_recompile(differential, counting_backend) -> None:
    global TRAINING
    compiled = differential.compile(with_set_grad_enabled_argument)
    for mode in (False, True, False):
        differential.check(with_set_grad_enabled_argument, compiled, (leaf(3), mode))
    assert counting_backend.calls == 2
    compiled = differential.compile(with_set_grad_enabled_global_flag)
    try:
        for TRAINING in (False, True):  # noqa: B007
            differential.check(with_set_grad_enabled_global_flag, compiled, x_leaf())
    finally:
        TRAINING = False
    assert counting_backend.calls == 4


def test_set_grad_enabled_without_restore_leaves_mode_like_eager(differential) -> None:
    def f(x):
        torch.set_grad_enabled(False)
        return x * 2

    compiled = differential.compile(f)
    for _ in range(2):
        x = leaf(3)
        try:
            expected = f(x)
            eager_mode = torch.is_grad_enabled()
        finally:
            torch.set_grad_enabled(True)
        try:
            actual = compiled(x)
            compiled_mode = torch.is_grad_enabled()
        finally:
            torch.set_grad_enabled(True)
        assert compiled_mode is eager_mode is False
        assert actual.requires_grad is expected.requires_grad is False
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert len(compiled.entries) == 1, "the entry guards the mode the call began with"


def test_global_instance_state_is_replayed(differential) -> None:
    """``no_grad.__enter__`` stores the mode it found on the instance, like eager."""
    compiled = differential.compile(global_no_grad_instance)
    with torch.no_grad():
        NO_GRAD.prev = "sentinel"
        global_no_grad_instance(leaf(3))
        eager_prev = NO_GRAD.prev
        NO_GRAD.prev = "sentinel"
        compiled(leaf(3))
        assert NO_GRAD.prev is eager_prev is False
    NO_GRAD.prev = False


def unsupported_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("unsupported while grad is off", file=_SINK)
        z = y + x
    return z, x * 3


class _Sink:
    def write(self, text):
        pass


_SINK = _Sink()


def data_dependent_inside_set_grad(x):
    torch.set_grad_enabled(False)
    y = x * 2
    if y.sum() > 0:
        y = y + 1
    torch.set_grad_enabled(True)
    return y, x * 3


def break_then_unsupported_inside_no_grad(x):
    y = x * 2
    print("a graph break before the block", file=_SINK)
    with torch.no_grad():
        z = y * 3
        print("and one inside it", file=_SINK)
    return z, y * 4


def break_then_switch_then_data_dependent(x):
    y = x * 2
    print("a graph break before the switch", file=_SINK)
    torch.set_grad_enabled(False)
    z = y * 3
    if z.sum() > 0:
        z = z + 1
    torch.set_grad_enabled(True)
    return z, y * 4


@pytest.mark.parametrize("fn", [
    unsupported_inside_no_grad, data_dependent_inside_set_grad,
    break_then_unsupported_inside_no_grad, break_then_switch_then_data_dependent,
])
def test_aborted_trace_restores_grad_mode(fn, differential) -> None:
    compiled = differential.compile(fn)
    for _ in range(2):
        differential.check(fn, compiled, x_leaf())
        assert torch.is_grad_enabled(), "the trace left grad mode off"
    with pytest.raises(bytegraph.Unsupported):
        differential.compile(fn, fullgraph=True)(leaf(3))
    assert torch.is_grad_enabled(), "the aborted trace left grad mode off"


def inference_block(x):
    with torch.inference_mode():
        y = x * 2
    return y, x + 1


@torch.inference_mode()
def inference_helper(x):
    return x * 2


def calls_inference_helper(x):
    return inference_helper(x), x + 1


@pytest.mark.parametrize("fn", [inference_block, calls_inference_helper])
def test_inference_mode_runs_like_eager(fn, differential) -> None:
    compiled = differential.compile(fn)
    for _ in range(2):
        x = leaf(3)
        expected, actual = fn(x), compiled(x)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=0, atol=0)
            assert a.is_inference() == e.is_inference()
            assert a.requires_grad == e.requires_grad
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    with pytest.raises(bytegraph.Unsupported, match="inference"):
        differential.compile(fn, fullgraph=True)(leaf(3))


def test_with_opcodes_are_exercised() -> None:
    used = set().union(*(opnames(p.fn) for p in corpus))
    assert {"BEFORE_WITH", "CALL", "POP_TOP"} <= used
    assert "BEFORE_WITH" in opnames(no_grad_helper)  # the decorator's wrapper is traced


def abandons_generator_inside_no_grad(x):
    for y in no_grad_generator(x):  # noqa: B007 (y is the point)
        break
    return y, x * 5


def test_generator_abandoned_inside_no_grad_runs_like_eager(
    differential, counting_backend
) -> None:
    """Eager restores grad mode when the dropped generator is closed: no trace can time that."""
    compiled = differential.compile(abandons_generator_inside_no_grad)
    for _ in range(2):
        out = differential.check(abandons_generator_inside_no_grad, compiled, x_leaf())
        assert torch.is_grad_enabled()
    assert out[1].requires_grad
    assert counting_backend.calls == 0, "the frame runs as Python"
