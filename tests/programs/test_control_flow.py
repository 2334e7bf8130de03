"""Control flow decided at trace time: branches, jumps and loops, eager vs compiled.

Every branch here is decided while tracing, on a value the trace knows:
a constant, a tensor's metadata, ``is None``, a type check, a flag or a
module attribute. The graph holds only the path taken, so the guards must
cover whatever the decision read: the recompile tests change each of those
and expect a new graph that again matches eager. Loops unroll, one copy of
the body per iteration. ``test_every_jump_opcode_is_exercised`` checks that
the corpus really contains each of 3.11's jump instructions.
"""

from __future__ import annotations

import dis
import types

import pytest
import torch
from _harness import Corpus, check_program, opnames, randn

import bytegraph

corpus = Corpus()
add = corpus.add

FLAG = True
SCALE = 2.0
CFG = types.ModuleType("cfg")  # a module whose attributes the programs read
CFG.use_relu = True
CFG.depth = 3
MAYBE = None


def t34() -> tuple:
    return (randn(3, 4),)


# --- branches on constants and flags ----------------------------------------------------


@add(t34)
def if_on_constant(x):
    if 3 > 2:
        x = x + 1
    else:
        x = x - 1
    return x


@add(t34)
def if_else_on_global_flag(x):
    if FLAG:
        return x * SCALE
    return x / SCALE


@add(t34)
def if_not_global_flag(x):
    if not FLAG:
        x = x.neg()
    return x + 1


@add(t34)
def module_attribute_flag(x):
    y = torch.relu(x) if CFG.use_relu else torch.tanh(x)
    for _ in range(CFG.depth):
        y = y * 0.5
    return y


@add(lambda: (randn(3), True))
def branch_on_bool_argument(x, flag):
    if flag:
        return x.sin()
    return x.cos()


@add(lambda: (randn(3), 5))
def branch_on_int_argument(x, n):
    if n > 3:
        return x * n
    elif n == 3:
        return x
    else:
        return x - n


@add(lambda: (randn(3), "mean"))
def branch_on_string_argument(x, reduction):
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    return x


@add(lambda: (randn(3), 2, 7))
def chained_comparison(x, lo, hi):
    if lo < 4 < hi:
        x = x + 1
    if 0 <= lo <= 1:
        x = x * 100
    return x


@add(lambda: (randn(3), 0, "", [1]))
def and_or_values(x, zero, empty, one_list):
    a = zero or 5  # JUMP_IF_TRUE_OR_POP
    b = one_list and 7  # JUMP_IF_FALSE_OR_POP
    c = empty or zero or 3
    return x * a + b + c


@add(lambda: (randn(3), True, False))
def boolean_operators_in_if(x, p, q):
    if p and not q:
        x = x + 1
    if p or q:
        x = x * 2
    if not (p and q):
        x = x - 3
    return x


@add(t34)
def conditional_expression(x):
    k = 2 if x.dim() == 2 else 3
    return x * k


@add(t34)
def assert_on_metadata(x):
    assert x.dim() == 2, "expects a matrix"
    assert x.shape[1] == 4
    return x.t()


# --- branches on tensor metadata -----------------------------------------------------------


@add(t34)
def branch_on_shape(x):
    if x.shape[0] > 2:
        return x[:2] * 2
    return x * 3


@add(lambda: (randn(3, 4), randn(4, 3)))
def branch_on_shapes_matching(x, y):
    if x.shape == y.shape:
        return x + y
    if x.shape[1] == y.shape[0]:
        return x @ y
    return x


@add(lambda: (randn(3, 4).double(),))
def branch_on_dtype(x):
    if x.dtype == torch.float64:
        x = x.float()
    if x.dtype is torch.float32:
        return x + 1
    return x


@add(lambda: (randn(2, 3, 4),))
def branch_on_ndim(x):
    if x.ndim == 3:
        x = x.flatten(0, 1)
    if x.dim() != 2:
        x = x.reshape(-1, 1)
    return x


@add(t34)
def branch_on_device(x):
    if x.device.type == "cpu":
        x = x * 2
    if x.is_cuda:
        x = x * 3
    return x


@add(lambda: (randn(3, requires_grad=True),))
def branch_on_requires_grad(x):
    if x.requires_grad:
        return x * 2
    return x * 3


@add(lambda: (torch.randint(0, 5, (4,)),))
def branch_on_floating_point(x):
    if not x.is_floating_point():
        x = x.float()
    if torch.is_floating_point(x):
        x = x / 2
    return x


@add(t34)
def branch_on_numel_and_size(x):
    if x.numel() > 10 and x.size(1) == 4:
        return x.sum(1)
    return x.sum(0)


@add(lambda: (randn(3), randn(3, 3)))
def branch_on_len_of_tensor(x, m):
    if len(x) == len(m):
        return m @ x
    return x


# --- is None, isinstance, type ---------------------------------------------------------------


@add(lambda: (randn(3), None))
def optional_is_none(x, bias):
    if bias is None:
        return x * 2
    return x + bias


@add(lambda: (randn(3), randn(3)))
def optional_is_not_none(x, bias):
    if bias is not None:
        x = x + bias
    return x


@add(lambda: (randn(3),))
def global_is_none(x):
    if MAYBE is None:
        return x + 1
    return x


@add(lambda: (randn(3), [randn(3), randn(3)]))
def isinstance_list_or_tensor(x, ys):
    if isinstance(ys, torch.Tensor):
        ys = [ys]
    if isinstance(ys, (list, tuple)):
        for y in ys:
            x = x + y
    return x


@add(lambda: (randn(3), 2.5))
def type_checks(x, s):
    if type(s) is int:
        return x * s
    if isinstance(s, float):
        return x + s
    return x


@add(lambda: (randn(3), {"w": randn(3)}))
def isinstance_dict(x, params):
    if isinstance(params, dict) and "w" in params:
        return x * params["w"]
    return x


@add(lambda: (randn(3), None, None))
def chain_of_none_defaults(x, a, b):
    a = a if a is not None else x
    b = b if b is not None else a * 2
    return a + b


# --- loops: for ------------------------------------------------------------------------------


@add(t34)
def for_range(x):
    for i in range(3):
        x = x + i
    return x


@add(t34)
def for_range_start_stop_step(x):
    total = x * 0
    for i in range(10, 2, -3):
        total = total + x * i
    return total


@add(lambda: (randn(3), [randn(3), randn(3), randn(3)]))
def for_over_list(x, ys):
    for y in ys:
        x = x * y
    return x


@add(lambda: (randn(3), (randn(3), randn(3))))
def for_over_tuple(x, ys):
    acc = x
    for y in ys:
        acc = acc - y
    return acc


@add(lambda: (randn(3), {"a": randn(3), "b": randn(3)}))
def for_over_dict_keys(x, d):
    for k in d:
        x = x + d[k]
    for k in d.keys():
        x = x * 2 if k == "a" else x
    return x


@add(lambda: (randn(3), {"a": randn(3), "b": randn(3)}))
def for_over_dict_values_and_items(x, d):
    for v in d.values():
        x = x + v
    out = {}
    for k, v in d.items():
        out[k] = v * x
    return out


@add(lambda: (randn(3), [randn(3), randn(3)]))
def for_enumerate(x, ys):
    for i, y in enumerate(ys):
        x = x + y * i
    for i, _ in enumerate(ys, start=10):
        x = x - i
    return x


@add(lambda: ([randn(3), randn(3)], [randn(3), randn(3)]))
def for_zip(xs, ys):
    return [x * y for x, y in zip(xs, ys)], sum(a - b for a, b in zip(xs, ys))


@add(lambda: (randn(3), [1.0, 2.0, 3.0]))
def for_reversed(x, scales):
    out = []
    for s in reversed(scales):
        out.append(x * s)
    for i in reversed(range(2)):
        out.append(x + i)
    return out


@add(lambda: (randn(3), [3, 1, 2], {"b": 1.0, "a": 2.0}))
def for_sorted(x, order, weights):
    for n in sorted(order):
        x = x * n + 1
    for key in sorted(weights, reverse=True):
        x = x - weights[key]
    return x


@add(lambda: (randn(4, 3),))
def for_over_tensor_rows(x):
    rows = []
    for row in x:
        rows.append(row.sum())
    return torch.stack(rows)


@add(lambda: (randn(2, 3, 4),))
def for_over_shape(x):
    n = 1
    for d in x.shape:
        n = n * d
    return x.reshape(n)


@add(lambda: (randn(3), [randn(3), randn(3), randn(3)]))
def for_range_len(x, ys):
    for i in range(len(ys)):
        x = x + ys[i] * i
    return x


@add(t34)
def nested_for_loops(x):
    out = x
    for i in range(2):
        for j in range(3):
            out = out + i * j
    return out


@add(lambda: (randn(3), [randn(3), randn(3)], [1.0, 2.0]))
def nested_loops_over_lists(x, ys, ss):
    acc = []
    for y in ys:
        for s in ss:
            acc.append(y * s + x)
    return acc


@add(t34)
def for_break(x):
    for i in range(10):
        if i == 3:
            break
        x = x + i
    return x


@add(t34)
def for_continue(x):
    for i in range(6):
        if i % 2 == 0:
            continue
        x = x * i
    return x


@add(t34)
def for_else_without_break(x):
    for i in range(2):
        x = x + i
    else:
        x = x * 10
    return x


@add(t34)
def for_else_with_break(x):
    for i in range(5):
        if i == 1:
            break
    else:
        x = x * 10
    return x + i


@add(t34)
def return_from_inside_loop(x):
    for i in range(10):
        x = x * 2
        if i == 2:
            return x
    return x - 1


@add(lambda: (randn(3), [randn(3), randn(3)]))
def loop_appends_to_input_list(x, out):
    for i in range(2):
        out.append(x * i)
    return len(out)


@add(lambda: (randn(3), [1, 2, 3]))
def loop_sees_appends_to_the_list_it_walks(x, steps):
    for s in steps:
        if s < 3:
            steps.append(s + 10)
        x = x + s
    return x


@add(lambda: (randn(3),))
def iter_and_next(x):
    it = iter([1, 2, 3])
    a = next(it)
    b = next(it)
    rest = list(it)
    return x * a + b, rest, next(it, "done")


# --- loops: while ----------------------------------------------------------------------------


@add(t34)
def while_counter(x):
    i = 0
    while i < 4:
        x = x + 1
        i += 1
    return x


@add(t34)
def while_not_done(x):
    done = False
    steps = 0
    while not done:
        x = x * 2
        steps += 1
        done = steps == 3
    return x, steps


@add(lambda: (randn(3), [randn(3), randn(3)]))
def while_list_nonempty(x, ys):
    pending = list(ys)
    while pending:
        x = x + pending.pop()
    return x


@add(t34)
def while_is_not_none(x):
    node = {"next": {"next": None, "w": 2.0}, "w": 3.0}
    while node is not None:
        x = x * node["w"]
        node = node["next"]
    return x


@add(t34)
def while_is_none(x):
    found = None
    candidates = [None, None, 4]
    i = 0
    while found is None:
        found = candidates[i]
        i += 1
    return x * found


@add(t34)
def while_true_break(x):
    n = 0
    while True:
        n += 1
        if n > 3:
            break
        x = x - n
    return x


@add(t34)
def while_continue_and_else(x):
    i = 0
    while i < 5:
        i += 1
        if i == 2:
            continue
        x = x + i
    else:
        x = x * -1
    return x


@add(lambda: (randn(8, 2),))
def while_on_shape(x):
    while x.shape[0] > 1:
        x = x[::2] + x[1::2]
    return x


# --- match statements -----------------------------------------------------------------------


@add(lambda: (randn(3), (2, 3)))
def match_sequence_patterns(x, spec):
    match spec:
        case (n,):
            return x * n
        case (n, m):
            return x * n + m
        case [n, *rest]:
            return x - n - len(rest)
        case _:
            return x


@add(lambda: (randn(3), [1, 2, 3, 4]))
def match_star_pattern(x, spec):
    match spec:
        case [first, *middle, last]:
            return x * first + last, middle
    return x


@add(lambda: (randn(3), {"op": "scale", "by": 3.0, "extra": 1}))
def match_mapping_pattern(x, cmd):
    match cmd:
        case {"op": "shift", "by": by}:
            return x + by
        case {"op": "scale", "by": by, **rest}:
            return x * by, rest
    return x


@add(lambda: (randn(3), 2.5))
def match_class_and_literal_patterns(x, value):
    match value:
        case None:
            return x
        case True:
            return x + 100
        case int(n) | float(n) if n > 1:
            return x * n
        case str():
            return x - 1
    return -x


@add(lambda: (randn(2, 3),))
def match_on_tensor_metadata(x):
    match x.shape:
        case (rows, 3):
            x = x * rows
        case _:
            x = x * 0
    match x:
        case torch.Tensor(ndim=2, dtype=torch.float32):
            return x.t()
        case [a, b]:
            return a + b
    return x


# --- the tests -------------------------------------------------------------------------------


assert len(corpus) >= 50, len(corpus)


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_program_matches_eager(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


# This interpreter's jumps: 3.11 has directional POP_JUMPs and JUMP_IF_*_OR_POP; 3.12+ has
# POP_JUMP_IF_* only. SEND and JUMP_BACKWARD_NO_INTERRUPT are yield from's (test_functions).
JUMPS = {
    dis.opname[op] for op in dis.hasjrel + dis.hasjabs
    if op < 256 and not dis.opname[op].startswith("INSTRUMENTED")
} - {"SEND", "JUMP_BACKWARD_NO_INTERRUPT"}


MATCHING = {"MATCH_SEQUENCE", "MATCH_MAPPING", "MATCH_KEYS", "MATCH_CLASS", "GET_LEN"}


def test_every_jump_opcode_is_exercised() -> None:
    """The corpus covers each jump (JUMP_BACKWARD_NO_INTERRUPT: test_functions' yield from)."""
    used = set().union(*(opnames(p.fn) for p in corpus))
    assert JUMPS | MATCHING <= used, f"not exercised: {sorted(JUMPS | MATCHING - used)}"


# --- guards on what the decisions read: change it, get a new graph that matches eager --------


def _recompiles(differential, counting_backend, fn, calls) -> None:
    """``calls``: (setup, args, graphs expected in total afterwards); each checked vs eager."""
    compiled = differential.compile(fn)
    for setup, args, graphs in calls:
        setup()
        differential.check(fn, compiled, args)
        assert counting_backend.calls == graphs, (setup, counting_backend.calls, graphs)


def _set(name, value):
    return lambda: globals().__setitem__(name, value)


def test_global_flag_change_recompiles(differential, counting_backend) -> None:
    x = randn(3, 4)
    try:
        _recompiles(differential, counting_backend, if_else_on_global_flag, [
            (_set("FLAG", True), (x,), 1),
            (_set("FLAG", False), (x,), 2),
            (_set("FLAG", True), (x,), 2),  # the first entry again
        ])
    finally:
        globals()["FLAG"] = True


def test_global_number_change_recompiles(differential, counting_backend) -> None:
    x = randn(3, 4)
    try:
        _recompiles(differential, counting_backend, if_else_on_global_flag, [
            (_set("SCALE", 2.0), (x,), 1),
            (_set("SCALE", 3.0), (x,), 2),
        ])
    finally:
        globals()["SCALE"] = 2.0


def test_module_attribute_change_recompiles(differential, counting_backend) -> None:
    x = randn(3, 4)

    def setter(use_relu, depth):
        def setup():
            CFG.use_relu, CFG.depth = use_relu, depth
        return setup

    try:
        _recompiles(differential, counting_backend, module_attribute_flag, [
            (setter(True, 3), (x,), 1),
            (setter(False, 3), (x,), 2),
            (setter(False, 1), (x,), 3),
            (setter(True, 3), (x,), 3),
        ])
    finally:
        CFG.use_relu, CFG.depth = True, 3


def test_global_none_change_recompiles(differential, counting_backend) -> None:
    x = randn(3)
    try:
        _recompiles(differential, counting_backend, global_is_none, [
            (_set("MAYBE", None), (x,), 1),
            (_set("MAYBE", 1), (x,), 1),  # no tensor work left: runs as Python, no graph
        ])
        assert global_is_none(x) is x
    finally:
        globals()["MAYBE"] = None


def nothing() -> None:
    pass


@pytest.mark.parametrize(
    ("fn", "first", "second"),
    [
        (branch_on_shape, (randn(3, 4),), (randn(2, 4),)),
        (branch_on_dtype, (randn(3, 4).double(),), (randn(3, 4),)),
        (branch_on_ndim, (randn(2, 3, 4),), (randn(5),)),
        (branch_on_requires_grad, (randn(3, requires_grad=True),), (randn(3),)),
        (branch_on_floating_point, (torch.arange(4),), (randn(4),)),
        (optional_is_none, (randn(3), None), (randn(3), randn(3))),
        (isinstance_list_or_tensor, (randn(3), [randn(3)]), (randn(3), randn(3))),
        (type_checks, (randn(3), 2.5), (randn(3), 2)),
        (branch_on_int_argument, (randn(3), 5), (randn(3), 1)),
        (branch_on_string_argument, (randn(3), "mean"), (randn(3), "sum")),
        (branch_on_bool_argument, (randn(3), True), (randn(3), False)),
        (for_over_list, (randn(3), [randn(3)] * 3), (randn(3), [randn(3)] * 2)),
        (for_over_dict_keys, (randn(3), {"a": randn(3)}), (randn(3), {"b": randn(3)})),
        (while_on_shape, (randn(8, 2),), (randn(4, 2),)),
        (match_sequence_patterns, (randn(3), (2, 3)), (randn(3), (5,))),
        (match_mapping_pattern, (randn(3), {"op": "scale", "by": 2.0}),
         (randn(3), {"op": "shift", "by": 2.0})),
        (match_class_and_literal_patterns, (randn(3), 2.5), (randn(3), "s")),
    ],
    ids=lambda v: v.__name__ if callable(v) else "-",
)
def test_input_change_recompiles(fn, first, second, differential, counting_backend) -> None:
    _recompiles(differential, counting_backend, fn, [
        (nothing, first, 1),
        (nothing, second, 2),
        (nothing, first, 2),
    ])


def test_loop_over_tensor_depends_on_first_dim(differential, counting_backend) -> None:
    compiled = differential.compile(for_over_tensor_rows)
    differential.check(for_over_tensor_rows, compiled, (randn(4, 3),))
    (gm,) = counting_backend.graphs
    sums = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "sum"]
    assert len(sums) == 4, "the loop unrolls once per row"
    differential.check(for_over_tensor_rows, compiled, (randn(2, 3),))
    assert counting_backend.calls == 2


def test_branch_not_taken_leaves_no_node(differential, counting_backend) -> None:
    compiled = differential.compile(optional_is_none)
    differential.check(optional_is_none, compiled, (randn(3), None))
    (gm,) = counting_backend.graphs
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert len(targets) == 1, targets


def test_data_dependent_branch_still_matches_eager(differential) -> None:
    """A branch on a tensor's value cannot be decided while tracing: never a wrong answer."""

    def f(x):
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y - 1

    compiled = differential.compile(f)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(3)):
        differential.check(f, compiled, (x,))


def test_compiled_with_bytegraph_compile_decorator_form(counting_backend) -> None:
    @bytegraph.compile(backend=counting_backend)
    def f(x, n):
        for _ in range(n):
            x = x + 1
        return x

    x = randn(2)
    assert torch.equal(f(x, 3), x + 3)
    assert torch.equal(f(x, 2), x + 2)
    assert counting_backend.calls == 2
