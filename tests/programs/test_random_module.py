"""Python's ``random`` module inside compiled code: values and generator state as eager's.

Each program runs eagerly and compiled from the same seeded state of the
module's generator (and of any generator it is handed); the result, the
inputs, and ``getstate()`` of every generator after the call must be equal.
The second and third calls hit the cache and must draw new numbers, as eager
does: a number drawn at trace time must never be baked into the code.
"""

from __future__ import annotations

import random

import pytest
import torch

import bytegraph
from tests.conftest import assert_same_value, clone_value


def scale_by_random(x):
    return x * random.random()


def random_arithmetic(x):
    a = random.random()
    b = random.uniform(-1.0, 1.0)
    return (a * 2 - 1) * x + b, x - a


def reflected_ops(x):
    r = random.random() + 0.5
    return r / x, r - x, 2 + random.randint(1, 4) * x


def randint_and_randrange(x):
    n = random.randint(1, 10)
    m = random.randrange(0, 100, 5)
    return x * n + m


def returns_draws(x):
    a = random.random()
    y = x.sin()
    b = random.gauss(0.0, 1.0)
    return y, a, b, [a + b]


def seed_inside(x):
    random.seed(1234)
    k = random.randint(1, 5)
    xs = [x * i for i in range(k)]
    random.shuffle(xs)
    return sum(xs[: random.randint(1, k)]) + random.random()


def draw_then_seed(x):
    a = random.random()
    random.seed(7)
    b = random.random()
    return x * a + b


def seeded_instance(x):
    rng = random.Random(3)
    n = rng.randint(1, 4)
    items = [x + i for i in range(5)]
    rng.shuffle(items)
    picked = rng.choice(items)
    sample = rng.sample(items, 2)
    return picked * n + sample[0] - sample[1] * rng.uniform(0, 1)


def seeded_instance_escapes(x):
    rng = random.Random(11)
    rng.random()
    return x + 1, rng


def shuffle_input_list(x, xs):
    random.seed(5)
    random.shuffle(xs)
    return xs[0] * x


def passed_instance(x, rng):
    return x * rng.random() + rng.randint(0, 3)


def passed_instance_seeded(x, rng):
    rng.seed(99)
    return x * rng.random()


def draw_across_break(x):
    a = random.random()
    random.seed(4)
    y = x * a + random.randint(1, 9)
    bytegraph.graph_break()  # (a drawn number live here would be a float argument there)
    return y * random.random(), y + random.random()


PROGRAMS = [
    (scale_by_random, 1), (random_arithmetic, 1), (reflected_ops, 1),
    (randint_and_randrange, 1), (returns_draws, 1), (seed_inside, 1), (draw_then_seed, 1),
    (seeded_instance, 1), (seeded_instance_escapes, 1), (shuffle_input_list, 1),
    (draw_across_break, 2),
]
WITH_GENERATOR = [(passed_instance, 1), (passed_instance_seeded, 1)]


def _inputs(fn):
    x = torch.randn(4)
    if fn is shuffle_input_list:
        return (x, [torch.full((4,), float(i)) for i in range(6)])
    return (x,)


def _same(actual, expected):
    if isinstance(expected, random.Random):
        assert type(actual) is random.Random and actual.getstate() == expected.getstate()
        return
    if isinstance(expected, tuple) and any(isinstance(e, random.Random) for e in expected):
        for a, e in zip(actual, expected, strict=True):
            _same(a, e)
        return
    assert_same_value(actual, expected)


def _run_both(fn, compiled, args, generator=False):
    """Eager then compiled from the same states; compare values and states."""
    seed = random.randrange(10**6)
    results = []
    for f in (fn, compiled):
        random.seed(seed)
        call_args = clone_value(args)
        if generator:
            call_args = (*call_args, random.Random(seed + 1))
        results.append((f(*call_args), call_args, random.getstate()))
    (expected, eager_args, eager_state), (actual, compiled_args, state) = results
    _same(actual, expected)
    assert_same_value(compiled_args[: len(args)], eager_args[: len(args)], "args after")
    if generator:
        assert compiled_args[-1].getstate() == eager_args[-1].getstate(), "passed generator"
    assert state == eager_state, "the module's generator state differs from eager's"
    return actual


@pytest.mark.parametrize(("fn", "graphs"), PROGRAMS + WITH_GENERATOR,
                         ids=lambda p: getattr(p, "__name__", str(p)))
def test_random_program(fn, graphs, counting_backend):
    compiled = bytegraph.compile(fn, backend=counting_backend, fullgraph=graphs == 1)
    generator = (fn, graphs) in WITH_GENERATOR
    for _ in range(3):  # the first call traces, the others hit the cache
        _run_both(fn, compiled, _inputs(fn), generator)
    assert counting_backend.calls == graphs
    assert len(compiled.entries) == 1


def test_new_numbers_every_call():
    compiled = bytegraph.compile(scale_by_random, backend="eager")
    x = torch.ones(3)
    assert not torch.equal(compiled(x), compiled(x))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_drawn_number_reaches_other_backends(backend):
    compiled = bytegraph.compile(random_arithmetic, backend=backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(4)
        random.seed(3)
        expected = random_arithmetic(x)
        state = random.getstate()
        random.seed(3)
        torch.testing.assert_close(compiled(x), expected)
        assert random.getstate() == state


def branch_on_draw(x):
    if random.random() < 2.0:
        return x + 1
    return x - 1


def int_tensor_times_float(x):
    return x * random.random()


def unseeded_instance(x):
    return x * random.Random().random()


@pytest.mark.parametrize(("fn", "x"), [
    (branch_on_draw, torch.ones(3)),
    (int_tensor_times_float, torch.arange(3)),  # int * float: float32, a 0-d f64 gives f64
    (unseeded_instance, torch.ones(3)),
])
def test_breaks_cleanly(fn, x):
    compiled = bytegraph.compile(fn, backend="eager")
    for _ in range(2):
        random.seed(8)
        expected = fn(x)
        state = random.getstate()
        random.seed(8)
        actual = compiled(x)
        if fn is not unseeded_instance:
            assert_same_value(actual, expected)
            assert random.getstate() == state
    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(fn, backend="eager", fullgraph=True)(x)


def huge_int_times_tensor(x):
    # Small values, but nothing bounds them at trace time: no int64 input for them.
    return x * (random.getrandbits(80) % 7), x * (random.randint(1, 3) ** 50 % 5)


def test_ints_that_may_not_fit_an_int64_stay_out_of_the_graph(counting_backend):
    compiled = bytegraph.compile(huge_int_times_tensor, backend=counting_backend)
    x = torch.ones(2, dtype=torch.float64)
    for seed in range(3):
        random.seed(seed)
        expected = huge_int_times_tensor(x)
        state = random.getstate()
        random.seed(seed)
        assert_same_value(compiled(x), expected)
        assert random.getstate() == state
    with pytest.raises(bytegraph.Unsupported, match="random"):
        bytegraph.compile(huge_int_times_tensor, backend="eager", fullgraph=True)(x)


class Noisy:
    """Every attribute read through ``__getattr__`` is counted: the trace must not add any."""

    reads = 0

    def __getattr__(self, name):
        type(self).reads += 1
        raise AttributeError(name)


def touches_noisy(x, noisy):
    return x * random.random(), noisy


def test_wrapping_other_objects_reads_no_attribute():
    Noisy.reads = 0
    compiled = bytegraph.compile(touches_noisy, backend="eager")
    compiled(torch.ones(2), Noisy())
    compiled(torch.ones(2), Noisy())
    assert Noisy.reads == 0


class KeyConfig(dict):
    """Attributes are items: a missing one raises KeyError, not AttributeError."""

    def __getattr__(self, name):
        return self[name]


def reads_key_config(x, cfg):
    return x * cfg.scale


def test_dict_subclass_whose_getattr_raises_key_error():
    compiled = bytegraph.compile(reads_key_config, backend="eager")
    x = torch.randn(2)
    assert_same_value(compiled(x, KeyConfig(scale=2.0)), reads_key_config(x, KeyConfig(scale=2.0)))


def draw_then_fail(x, index):
    y = x * random.random()
    GL.append(random.randint(0, 9))
    return y.index_select(0, index) + random.random()


GL: list = []


def test_graph_failing_after_draws_reruns_from_the_same_state():
    compiled = bytegraph.compile(draw_then_fail, backend="eager")
    x = torch.randn(3)
    for index in (torch.tensor([0, 2]), torch.tensor([5]), torch.tensor([1])):
        outcomes = []
        for f in (draw_then_fail, compiled):
            random.seed(4)
            GL.clear()
            try:
                outcome = f(x, index)
            except IndexError as e:
                outcome = type(e)
            outcomes.append((outcome, list(GL), random.getstate()))
        (expected, eager_list, eager_state), (actual, compiled_list, state) = outcomes
        _same(actual, expected)
        assert compiled_list == eager_list and state == eager_state
