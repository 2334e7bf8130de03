"""Calls made from code run as Python are compiled (runtime.py, translate/routing.py).

Where a break sends a region to Python (a loop whose body breaks, a frame
that cannot break), the calls of user functions, methods and nn.Modules in
that region go through bytegraph: each callee is compiled at its call site
with its own cache entries and guards, as a frame hook would compile it.
Each program is compared with eager (outputs and mutated inputs) and the
graph count asserted, the routed callees' graphs included (the counting
backend counts every graph compiled); a second call must hit every cache.
"""

from __future__ import annotations

import math
import os
import sys
import traceback

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3), [])


def scale(t):
    return t.sin() * 2


def shift(t, by=1.0):
    return t + by


class Stepper:
    def __init__(self, k):
        self.k = k

    def step(self, t):
        return t * self.k + 1

    @classmethod
    def make(cls, t):
        return t.cos()

    @staticmethod
    def twice(t):
        return t * 2


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, t):
        return torch.relu(self.lin(t)) + t


torch.manual_seed(0)
BLOCK = Block()
BLOCKS = torch.nn.ModuleList([Block(), Block(), Block()])
FROZEN = Block().requires_grad_(False)
SEQUENTIAL = torch.nn.Sequential(Block(), torch.nn.Tanh(), Block()).requires_grad_(False)
LINEAR = torch.nn.Linear(3, 3).requires_grad_(False)


@bytegraph.disable
def not_compiled(t):
    return t * 3


def helper_that_cannot_break(t, log):
    try:
        raise ValueError
    except ValueError:
        log.append(1)
        bytegraph.graph_break()  # a break while handling an exception: refused
        return t.exp()


def counter_gen(t):
    yield t.tan()


# Each program's loop body breaks on a tensor's value: the loop runs as Python, and
# the graph count is the graph before the loop (if any), the routed callees' graphs,
# and the graph after the loop.
@add(t3, graphs=3)
def loop_calls_a_function(x, log):
    x = x + 1
    for _ in range(3):
        x = scale(x)
        if bool(x.sum() > 100):
            break
    return x - 1


@add(t3, graphs=4)  # shift twice: ``by`` is a constant of each entry
def loop_calls_with_keywords_and_star_args(x, log):
    x = x + 1
    args = (x,)
    for _ in range(2):
        x = shift(x, by=2.0) + shift(*args)
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=5)
def loop_calls_methods(x, log):
    x = x + 1
    stepper = Stepper(3.0)
    for _ in range(2):
        x = stepper.step(x) + Stepper.make(x) + stepper.twice(x)
        if bool(x.sum() > 1e6):
            break
    return x - 1


# The forward twice: its output requires grad (the parameters do), its first input not.
@add(t3, graphs=4)
def loop_calls_a_module(x, log):
    x = x + 1
    for _ in range(4):
        x = BLOCK(x)
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=4)
def loop_calls_modules_of_one_class(x, log):
    x = x + 1
    for _ in range(2):
        for block in BLOCKS:  # one compiled forward: a module is guarded by its type
            x = block(x)
        if bool(x.sum() > 1e6):
            break
    return x - 1


# SEQUENTIAL compiled; LINEAR, a torch.nn module with no submodules and no hooks, runs as
# it is: torch.compile's hook starts no frame in torch.nn (it compiles nothing here at all).
@add(t3, graphs=3)
def loop_calls_torch_nn_modules(x, log):
    x = x + 1
    for _ in range(2):
        x = SEQUENTIAL(x) + LINEAR(x)
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=3)
def walrus_keeps_the_callable(x, log):
    x = x + 1
    for _ in range(2):
        x = (fn := scale)(x)  # the callable is copied into ``fn``: this call is left alone
        log.append(fn is scale)
        x = fn(x)
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=3)
def nested_function_made_per_call(x, log):
    x = x + 1
    k = 2.0

    def inner(t):
        return t * k

    for _ in range(2):
        x = inner(x)  # the first object of its code is compiled; a later call's one is not
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=2)
def disabled_callee_runs_as_it_is(x, log):
    x = x + 1
    for _ in range(2):
        x = not_compiled(x)
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=3)
def callee_that_cannot_break_runs_as_python(x, log):
    x = x + 1
    for _ in range(2):
        x = helper_that_cannot_break(x, log) + scale(x)
        # Never taken (exp of exp may reach inf, never above it): 3.12+ compiles the code
        # after a loop twice, once for ``break``, and each copy would get its resume function.
        if bool(x.sum() > math.inf):
            break
    return x - 1


@add(t3, graphs=2)
def generator_callee_runs_as_it_is(x, log):
    x = x + 1
    for _ in range(2):
        x = sum(counter_gen(x))
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=3)
def callable_keeps_its_identity(x, log):
    x = x + 1
    for _ in range(2):
        fn = scale
        x = fn(x)
        log.append(fn is scale)
        log.append(len([scale]))
        if bool(x.sum() > 1e6):
            break
    return x - 1


@add(t3, graphs=3)
def routed_callee_raises_into_a_handler(x, log):
    x = x + 1
    for i in range(2):
        try:
            x = scale(x) if i == 0 else shift(x, by="oops")
        except TypeError as error:
            log.append(type(error).__name__)
        if bool(x.sum() > 1e6):
            break
    return x - 1


def _handle_then_call(x, log):
    try:
        raise KeyError("k")
    except KeyError:
        bytegraph.graph_break()  # refused: the whole frame runs as Python
        log.append(0)
    return scale(x) + shift(x)


@add(t3, graphs=2)
def whole_frame_in_python_routes_its_calls(x, log):
    return _handle_then_call(x, log)


def _breaks_on_data(t):
    y = t.sin()
    if y.sum() > 0:  # a data-dependent branch: a break inside the method below
        y = y + 1
    return y * 2


class Encoder:
    def encode(self, t, **options):
        return _breaks_on_data(t.cos()).exp()


ENCODER = Encoder()


@add(t3, graphs=4)
def method_whose_body_breaks_is_compiled(x, log):
    # g1 cos (the method, compiled at the call); g2 sin, sum; g3 + 1, * 2; g4 exp
    return ENCODER.encode(x)


@add(t3, graphs=4)
def method_called_with_keywords_whose_body_breaks(x, log):
    options = {"scale": 2}
    return ENCODER.encode(x, **options)  # CALL_FUNCTION_EX


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_routed_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_whole_frame_in_python_compiles_its_callees(differential, counting_backend) -> None:
    compiled = differential.compile(_handle_then_call)
    differential.check(_handle_then_call, compiled, t3())
    assert counting_backend.calls == 2  # scale and shift, the frame itself as Python
    assert compiled.entries[0].graphs == ()
    differential.check(_handle_then_call, compiled, t3())
    assert counting_backend.calls == 2


def countdown(x, n):
    x = x + 1
    for _ in range(1):
        if n > 0 and bool(x.sum() > -1e9):
            x = countdown(x, n - 1)  # routed back to this compiled function
    return x * 2


def test_recursion_through_a_python_part(differential, counting_backend) -> None:
    runs = []

    def backend(gm, example_inputs):
        counting_backend(gm, example_inputs)
        return lambda *args: (runs.append(1), gm.forward(*args))[1]

    compiled = differential.compile(countdown, backend=backend)
    differential.check(countdown, compiled, (randn(3), 3))
    # ``n`` is read only by the loop, in Python: one entry serves every depth, and
    # each of the four frames runs its two graphs (x + 1, then x * 2).
    assert len(compiled.entries) == 1
    assert counting_backend.calls == 2
    assert len(runs) == 8
    differential.check(countdown, compiled, (randn(3), 3))
    assert counting_backend.calls == 2
    assert len(runs) == 16


def test_module_in_a_loop_compiles_once_then_hits(differential, counting_backend) -> None:
    def run(x, steps):
        for _ in range(steps):
            x = FROZEN(x)
            if bool((x > 1e6).any()):
                break
        return x

    compiled = differential.compile(run)
    differential.check(run, compiled, (randn(3), 5))
    assert counting_backend.calls == 1  # the forward: no graph before or after the loop
    forward = compiled.router.compiled_forward(Block)
    assert len(forward.entries) == 1
    differential.check(run, compiled, (randn(3), 5))
    assert counting_backend.calls == 1


class BreakingBlock(torch.nn.Module):
    """A module whose forward breaks on a data-dependent branch."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x).relu()
        if y.sum() > 0:
            y = y * 2
        return y - 1


def test_module_whose_forward_breaks_is_compiled_at_the_call(differential, counting_backend):
    """The break is inside the module's forward: the Python part calls the module through
    the router, so its forward is compiled (linear .. sum; mul, sub), not run as Python."""
    block = BreakingBlock()

    def step(m, x):
        return m(x) + 1

    compiled = differential.compile(step)
    for _ in range(2):
        differential.check(step, compiled, (block, randn(3)))
    targets = [[n.target for n in g.graph.nodes if n.op == "call_function"]
               for g in counting_backend.graphs]
    assert torch._C._nn.linear in targets[0], targets
    assert counting_backend.calls == 3  # the forward's two graphs, then the caller's add
    assert len(compiled.router.compiled_forward(BreakingBlock).entries) == 1


def test_module_with_a_hook_runs_its_hook(differential, counting_backend) -> None:
    block = Block()
    seen = []
    handle = block.register_forward_hook(lambda mod, args, out: seen.append(out.shape))

    def run(x):
        for _ in range(2):
            x = block(x)
            if bool((x > 1e6).any()):
                break
        return x

    try:
        compiled = differential.compile(run)
        differential.check(run, compiled, (randn(3),))
    finally:
        handle.remove()
    assert seen == [torch.Size([3])] * 4  # eager's two calls and the compiled run's two
    # The hook runs in Python around the compiled forward (module_calls.py): one graph for
    # the first call's input, one for the second's (an output that requires grad).
    assert counting_backend.calls == 2


def test_module_class_patched_after_routing_runs_the_new_forward(differential) -> None:
    class Patched(torch.nn.Module):
        def forward(self, t):
            return t + 1

    module = Patched()

    def run(x):
        for _ in range(2):
            x = module(x)
            if bool((x > 1e6).any()):
                break
        return x

    compiled = differential.compile(run)
    differential.check(run, compiled, (randn(3),))
    original = Patched.forward
    Patched.forward = lambda self, t: t * 10
    try:
        differential.check(run, compiled, (randn(3),))
    finally:
        Patched.forward = original


def test_routed_call_keeps_the_callers_line_in_tracebacks() -> None:
    def bad(t):
        return t + "x"

    def run(x):
        for _ in range(2):
            if bool(x.sum() > 1e9):
                break
            x = bad(x)  # the line a traceback names
        return x

    line = run.__code__.co_firstlineno + 4
    compiled = bytegraph.compile(run, backend="eager")
    with pytest.raises(TypeError) as info:
        compiled(randn(3))
    frames = [(f.name, f.lineno) for f in traceback.extract_tb(info.value.__traceback__)]
    assert ("run", line) in frames


def test_a_routed_call_reuses_the_cached_wrapper() -> None:
    """A routed call site costs a lookup, not a compile: the same wrapper every time
    (the per-call overhead is measured in bench/routing_overhead.py, not asserted)."""

    def callee(t):
        return t

    compiled = bytegraph.compile(callee, backend="eager")
    route = compiled.router.route
    x = torch.ones(1)
    compiled(x)
    assert route(callee) is compiled and route(callee) is compiled
    assert route(abs) is abs  # a builtin comes back as it is
    assert len(compiled.entries) == 1


# -- the greedy-decoding loop of issue 11 ------------------------------------------------
def greedy(model, input_ids, steps, eos):
    for _ in range(steps):
        logits = model(input_ids).logits
        next_token = logits[:, -1, :].argmax(-1, keepdim=True)
        input_ids = torch.cat([input_ids, next_token], dim=1)
        if bool((next_token == eos).all()):
            break
    return input_ids


def test_greedy_decoding_loop_compiles_the_forward(counting_backend) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = pytest.importorskip("transformers")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        torch.manual_seed(0)
        config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100)
        model = transformers.GPT2LMHeadModel(config).eval()
        compiled = bytegraph.compile(greedy, backend=counting_backend)
        prompt = torch.tensor([[1, 2, 3]])
        with torch.no_grad():
            expected = greedy(model, prompt, 3, eos=-1)
            actual = compiled(model, prompt, 3, eos=-1)
            assert torch.equal(actual, expected)
            # The forward, once per sequence length (3, 4, 5); twice where a size change
            # recompiles it size-generic.
            assert counting_backend.calls in (2, 3)
            calls = ("call_function", "call_method")
            ops = [
                sum(node.op in calls for node in g.graph.nodes) for g in counting_backend.graphs
            ]
            assert min(ops) >= 50, ops
            again = compiled(model, prompt, 3, eos=-1)
            assert torch.equal(again, expected)
            assert counting_backend.calls == len(ops)
    finally:
        transformers.logging.set_verbosity(verbosity)
    assert sys.getrecursionlimit() > 0
