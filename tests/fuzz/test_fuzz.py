"""The fuzzer in CI: a bounded, fixed-seed campaign that must find nothing, plus its own checks.

``test_fuzz_campaign`` runs ``CI_PROGRAMS`` programs of seed ``CI_SEED`` in
two worker processes with a hard timeout each (about 20 s on the 2-core
development machine) and asserts no wrong result, internal error, timeout or
crash; on failure its message is the report with shrunk reproducers. The
other tests check the fuzzer itself, in process: generation is a pure
function of (seed, index), rendered programs compile, the runner sees a
planted difference, and the shrinker keeps the failure while cutting.
"""

from __future__ import annotations

import pytest

import bytegraph
from tests.fuzz.campaign import run_campaign
from tests.fuzz.grammar import generate
from tests.fuzz.runner import (
    Observed,
    Outcome,
    compare,
    compare_world,
    load,
    normalize,
    observe,
    run_source,
)
from tests.fuzz.shrink import shrink
from tests.fuzz.tree import PRELUDE, Program, count_nodes

CI_SEED = 0
CI_PROGRAMS = 200
CI_TIMEOUT = 15.0


def test_fuzz_campaign() -> None:
    report = run_campaign(
        CI_SEED, CI_PROGRAMS, jobs=2, timeout=CI_TIMEOUT, shrink_per_category=1, shrink_budget=80
    )
    assert len(report.outcomes) == CI_PROGRAMS
    if report.failures:
        pytest.fail(report.render(), pytrace=False)


def test_generation_is_deterministic() -> None:
    for index in range(20):
        assert generate(7, index).source() == generate(7, index).source()
    assert generate(7, 0).source() != generate(7, 1).source()


def test_generated_programs_compile() -> None:
    for index in range(200):
        compile(generate(3, index).source(), f"fuzz_3_{index}.py", "exec")


INPUTS = '''
def inputs_1():
    return torch.ones(2), None, None, 0, [], {}, Obj(0, None)

inputs_2 = inputs_3 = inputs_1
'''


FAMILIES = [
    "match ", "yield", "lambda", "sorted(", "enumerate(", "zip(", "isinstance(", "getattr(",
    "setattr(", "delattr(", "divmod(", "round(", ".format(", 'f"', ".join(", ".split(",
    ", *", ":=", "Stats(", "Child(", "Slotted(", "Config(", "dataclasses.replace", "Point(",
    "Mode.", "Key(", "@traced", "@scaled", "star_sum(", "affine(", "rec(", "gen_more(",
    "make_counter()", "nonlocal", "mod(", "mod.training", "register_buffer", ".backward()",
    "w.grad", "torch.no_grad()", "scatter", "gather", "index_add", "topk", "sort(", ".tolist()",
    "unbind", "chunk(", "split(", "F.", ".T", "permute", "raise", "from None", "assert ",
    "else:", "finally:", "while True:", "del ", "return x", "opt is None",
    # the exception, generator and with-block families (errors.py)
    "except:", "except (", ") from e", "from None", "raise\n", "CodedError(", "via_three(",
    "lookup(", "gen_guard(", "gen_acc(", "gen_delegate(", "gen_stop(", "gen_break(", ".send(",
    ".throw(", ".close()", "next(g", "contextlib.suppress(", "contextlib.nullcontext(",
    "logged(", "converted()", "swallowing(", "Guard(", "bytegraph.graph_break()", ".shape ==",
    "lst.index(", "obj.missing", "int(['3', 'x'",
    # issue 20's families: protocol return types, hashing, infinite iterators left
    # part-consumed, collections, numpy, objects made in the trace
    "OddBool(", "OddLen(", "OddIndex(", "OddHash(", "Hashed(", "next(TICKS)", "LETTERS",
    "itertools.cycle(", "collections.defaultdict(", "collections.OrderedDict(",
    "collections.Counter(", "np.", "torch.nn.ReLU()", "class Made",
]


def test_grammar_reaches_every_family() -> None:
    programs = [generate(3, index) for index in range(300)]
    sources = "\n".join(program.source() for program in programs)
    missing = [marker for marker in FAMILIES if marker not in sources]
    assert not missing, missing
    inputs = [program.calls[2] for program in programs]
    assert any(c.x_double for c in inputs) and any(c.x_grad for c in inputs)
    assert any(c.alias for c in inputs) and any(not c.opt for c in inputs)


def test_runner_compares_grads_and_namedtuples() -> None:
    import collections

    import torch

    a, b = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    a.grad, b.grad = torch.ones(2), torch.zeros(2)
    assert compare_world(((a,), {}, None), ((b,), {}, None))[0] == "wrong:grad"
    point = collections.namedtuple("Point", "a b")
    assert normalize(point(1, [2]), {}) == ("Point", 1, [2])


def test_runner_reads_grads_of_views_invalidated_in_place() -> None:
    """Reading ``is_leaf`` of such a view raises: equal on both sides, no difference (1007/421)."""
    import torch

    def invalidated_view() -> torch.Tensor:
        y = torch.ones(2, 2) + torch.ones(2, 2, requires_grad=True)
        view = y.unbind(0)[0]
        y.clamp_(-2.0, 2.0)
        return view

    world = ((invalidated_view(),), {}, None)
    assert compare_world(world, ((invalidated_view(),), {}, None)) is None
    assert compare_world(world, ((torch.ones(2),), {}, None))[0].startswith("wrong:")


def test_runner_agrees_on_a_correct_program() -> None:
    source = PRELUDE + INPUTS + '''
def f(x, y, w, n, lst, dct, obj):
    global G
    G += 1
    obj.a += 1
    lst.append(len(lst))
    print("x")
    return x + G, lst
'''
    outcome = run_source(source, "agree.py")
    assert outcome.category is None and outcome.graphs >= 1, outcome


def test_runner_sees_a_planted_difference() -> None:
    # The caller's frame differs: eager is called by the runner, compiled code by bytegraph.
    source = PRELUDE + INPUTS + '''
import sys

def f(x, y, w, n, lst, dct, obj):
    return x + 1, sys._getframe(1).f_code.co_name
'''
    outcome = run_source(source, "planted.py")
    assert outcome.category == "wrong:result", outcome
    assert outcome.detail.startswith("call 1: AssertionError: result[1]"), outcome


def test_compare_names_what_differs() -> None:
    world = ((), {}, 1)
    eager = Observed(None, "a\n", True, world, [])
    assert compare(eager, Observed(None, "b\n", True, world, []), "p.py")[0] == "wrong:stdout"
    assert compare(eager, Observed(None, "a\n", True, ((), {}, 2), []), "p.py")[0] == (
        "wrong:result"
    )
    internal = Observed(bytegraph.InternalError("bug"), "a\n", True, world, [])
    assert compare(eager, internal, "p.py")[0] == "internal:InternalError"
    warned = Observed(None, "a\n", True, world, ["bytegraph: internal error in f"])
    assert compare(eager, warned, "p.py")[0] == "internal:warning"


def test_shrinker_keeps_the_failure_and_cuts() -> None:
    program = generate(0, 5)

    def evaluate(batch: list[Program]) -> list[Outcome]:
        return [Outcome("wrong:result" if "global G" in p.source() else None) for p in batch]

    shrunk = shrink(program, Outcome("wrong:result"), evaluate, jobs=2, budget=2000)
    smaller = shrunk.program
    assert "global G" in smaller.source()
    assert count_nodes(smaller) < count_nodes(program)
    assert shrunk.runs <= 2000
    assert len(smaller.module) == 1 and not smaller.module[0].clauses[0].body


def test_compare_reads_the_exception_chain() -> None:
    world = ((), {}, None)

    def raised(cause: BaseException | None, code: int = 1) -> Observed:
        error = KeyError("k")
        error.__cause__, error.code = cause, code
        return Observed(error, "", True, world, [])

    eager = raised(ValueError(1))
    assert compare(eager, raised(ValueError(1)), "p.py") is None
    assert compare(eager, raised(ValueError(2)), "p.py")[0] == "wrong:exception_chain"
    assert compare(eager, raised(None), "p.py")[0] == "wrong:exception_chain"
    assert compare(eager, raised(ValueError(1), 2), "p.py")[0] == "wrong:exception_chain"


# A generator that logs its closing: when it runs tells when the frame's locals went.
CLOSING_GENERATOR = '''
def gen(log):
    try:
        yield 1
    finally:
        log.append('closed')
'''


def test_runner_reads_the_state_once_an_escaping_exception_is_dropped() -> None:
    """The generator closes when its frame's locals go, not when the collector runs."""
    source = PRELUDE + INPUTS + CLOSING_GENERATOR + '''
def f(x, y, w, n, lst, dct, obj):
    g = gen(GL)
    next(g)
    raise KeyError('k')
'''
    namespace = load(source, "dropped.py", "fuzz_dropped")
    seen = observe(namespace, namespace["f"], 1)
    assert isinstance(seen.error, KeyError) and seen.internal is False
    assert seen.world[1]["GL"] == ["closed"]


def test_runner_compares_after_collection_where_eager_depends_on_it() -> None:
    """An exception stored in a local list holds its traceback, hence the frame, hence
    the list: a cycle. The generator local then closes whenever the cyclic collector
    runs (at random on either side); the state is compared once both have collected
    (fuzz seed 9001, index 259)."""
    source = PRELUDE + INPUTS + CLOSING_GENERATOR + '''
def f(x, y, w, n, lst, dct, obj):
    acc = []
    try:
        raise KeyError(1)
    except KeyError as e:
        acc.append(e)
    g = gen(GL)
    next(g)
    return x + 1
'''
    namespace = load(source, "cycle.py", "fuzz_cycle")
    seen = observe(namespace, namespace["f"], 1)
    assert seen.world[1]["GL"] == [] and seen.world_collected[1]["GL"] == ["closed"]
    assert run_source(source, "cycle.py").category is None


def test_compare_still_checks_prompt_finalization() -> None:
    """Where eager's state does not depend on the collector, a compiled run whose
    generator closes only when collected is a difference."""
    closed = ((), {"GL": ["closed"]}, None)
    open_ = ((), {"GL": []}, None)
    eager = Observed(None, "", True, closed, [], world_collected=closed)
    late = Observed(None, "", True, open_, [], world_collected=closed)
    assert compare(eager, late, "p.py")[0] == "wrong:globals"
    assert compare(eager, Observed(None, "", True, closed, [], world_collected=closed),
                   "p.py") is None
