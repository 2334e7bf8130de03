"""Graph breaks everywhere a program can break, eager vs compiled.

Each program breaks the graph at least once (or, where no break is
possible, runs as Python): ``print`` and ``logging``, calls into C
functions, data-dependent control flow, ``.item()``/``.tolist()``,
unsupported opcodes, ``bytegraph.graph_break()``, breaks inside loops,
``with`` blocks, ``try`` blocks and inlined callees, live stack values and
locals of every kind crossing the break, and side effects on either side.

The recipe for each program (``check``):

* run it eagerly and compiled on clones of the same inputs, each run
  starting from the same global state and the same ``random`` seed, and
  compare the results, the inputs after the call, what it printed (stdout
  and stderr) and logged, the globals it mutated, and the grad mode after;
* assert the number of graphs compiled, worked out by hand in the comment
  of each program ("g1", "g2"... name the graphs in the order they run);
* call it again on fresh inputs: the resume functions and compiled callees
  are cached, so no graph may be compiled again. Programs whose Python
  values are computed from tensor data (``same_values``) are guarded on
  those values: their second call uses the same values, and a third call
  with new values only has to match eager.

A resume function, or a compiled callee, whose trace has no tensor op
compiles no graph; a frame that cannot break runs as Python and compiles
none either.
"""

from __future__ import annotations

import binascii
import dataclasses
import logging
import operator
import os
import random
import sys
import time
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

import bytegraph
from bytegraph.bytecode.compat import COMPARE_OP_TO_BOOL_BIT

LOG_NAME = "bytegraph_tests.breaks"
LOG = logging.getLogger(LOG_NAME)

# Globals the programs mutate; ``reset_globals`` puts them back before every run.
SEEN: list = []
STATS: dict = {}
COUNTER = 0
BOX = types.SimpleNamespace()


def reset_globals() -> None:
    global COUNTER
    SEEN.clear()
    STATS.clear()
    COUNTER = 0
    BOX.__dict__.clear()


def freeze(value: Any) -> Any:
    """A comparable copy: tensors become (dtype, shape, requires_grad, values)."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, tuple(value.shape), value.requires_grad,
                value.detach().tolist())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [freeze(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, freeze(v)) for k, v in value.items()])
    if isinstance(value, types.SimpleNamespace):
        return ("namespace", freeze(vars(value)))
    return value


@dataclasses.dataclass(frozen=True)
class Observation:
    """What one run did besides returning: output, logs, globals, grad mode after."""

    stdout: str
    stderr: str
    logs: tuple[str, ...]
    globals: Any
    grad_enabled: bool


def observed(fn: Callable[..., Any], sink: list[Observation], capsys, caplog) -> Callable:
    """``fn`` run from reset globals, recording what it printed, logged and mutated."""

    def run(*args: Any, **kwargs: Any) -> Any:
        reset_globals()
        random.seed(1234)
        capsys.readouterr()
        caplog.clear()
        result = fn(*args, **kwargs)
        captured = capsys.readouterr()
        logs = tuple(
            f"{r.levelname}:{r.getMessage()} from {r.pathname}:{r.lineno} in {r.funcName}"
            for r in caplog.records if r.name in (LOG_NAME, "root")
        )
        sink.append(Observation(
            captured.out, captured.err, logs, freeze((SEEN, STATS, COUNTER, BOX)),
            torch.is_grad_enabled(),
        ))
        return result

    return run


# --- the corpus ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple]
    graphs: int | tuple[int, ...]  # a tuple: the counts that are each right (see with-blocks)
    same_values: bool = False  # Python values computed from tensor data cross a break


PROGRAMS: list[Program] = []


def program(
    make_inputs: Callable[[], tuple],
    graphs: int | tuple[int, ...],
    *,
    name: str | None = None,
    same_values: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        PROGRAMS.append(Program(name or fn.__name__, fn, make_inputs, graphs, same_values))
        return fn

    return register


def t(*shape: int, requires_grad: bool = False) -> Callable[[], tuple]:
    return lambda: (torch.randn(*shape, requires_grad=requires_grad),)


def positive(*shape: int) -> Callable[[], tuple]:
    return lambda: (torch.rand(*shape) + 0.1,)


def negative(*shape: int) -> Callable[[], tuple]:
    return lambda: (-torch.rand(*shape) - 0.1,)


def small(*shape: int) -> Callable[[], tuple]:
    """Values in [0, 0.5): below every threshold the programs test."""
    return lambda: (torch.rand(*shape) * 0.5,)


# --- helpers the programs call (module level, so breaks in them compile them) --------------


def report(t):
    print("report", tuple(t.shape))
    return t + 1


def report_twice_removed(t):
    u = t - 1
    v = report(u)
    return v * 2


def helper_graph_break(t):
    t = t + 1
    bytegraph.graph_break()
    return t * 2


def outer_graph_break(t):
    return helper_graph_break(t - 1) / 2


def clamp_if_large(t):
    if t.abs().max() > 10:
        return t.clamp(-10, 10)
    return t


def log_and_scale(t):
    LOG.info("scaling %s", tuple(t.shape))
    return t * 2


def helper_loop_prints(t):
    u = t * 2
    for i in range(2):
        print("helper loop", i)
    return u


def combine(a, b):
    return a * 2 + b


# --- print and logging ---------------------------------------------------------------------


@program(t(3, 4), 2)
def seed_print_shape(x):
    # The seed example (8.2). g1: x + 1 ends at print; g2: y * 2.
    y = x + 1
    print(y.shape)
    z = y * 2
    return z


@program(t(3), 2)
def print_tensor_value(x):
    # g1: relu; print runs on the real tensor; g2: sum.
    y = x.relu()
    print(y)
    return y.sum()


@program(t(2, 3), 2)
def print_with_keywords(x):
    # KW_NAMES before the broken CALL. g1: mul; g2: sub.
    y = x * 2
    print("shape", tuple(y.shape), sep="|", end="!\n")
    return y - 1


@program(t(3), 3)
def print_twice(x):
    # g1: add; g2: mul; g3: sub.
    y = x + 1
    print("a")
    y = y * 2
    print("b")
    return y - 3


@program(t(3), 1)
def print_first(x):
    # Nothing before the break, so no graph; g1: exp.
    print("start")
    return x.exp()


@program(t(3), 1)
def print_last(x):
    # g1: cos; the resume function only returns y: no graph.
    y = x.cos()
    print("done")
    return y


@program(t(3, 3), 2)
def print_fstring_of_metadata(x):
    # The f-string folds from metadata at trace time. g1: matmul, transpose; g2: trace.
    y = x @ x.T
    print(f"{y.shape[0]} rows of {y.dtype}")
    return y.trace()


@program(t(4), 2, same_values=True)
def print_fstring_of_item(x):
    # .item() ends g1 (abs, sum); formatting and print run in resume functions
    # without tensor ops; g2: mul.
    y = x.abs()
    print(f"total {y.sum().item():.3f}")
    return y * 2


@program(t(3), 2)
def print_to_stderr(x):
    # g1: add; g2: neg.
    y = x + 1
    print("to stderr", y.shape, file=sys.stderr)
    return -y


@program(t(3), 2)
def logging_get_logger_warning(x):
    # getLogger and warning run in Python (a compiled getLogger has no tensor op).
    # g1: add; g2: mul.
    y = x + 1
    logging.getLogger(LOG_NAME).warning("shape %s", tuple(y.shape))
    return y * 2


@program(t(3), 2)
def module_logger_info_of_tensor(x):
    # The whole LOG.info(...) call runs in Python, y.mean() included.
    # g1: mul; g2: add.
    y = x * 3
    LOG.info("mean %s", y.mean())
    return y + 1


@program(t(3), 2)
def logging_module_function(x):
    # logging.warning (the root logger) breaks inside the standard library, which runs
    # as is: the record names this line, as in eager. g1: add; g2: mul.
    y = x + 1
    logging.warning("module-level %s", tuple(y.shape))
    return y * 2


@program(t(3), 3)
def logging_in_helper(x):
    # The logging call breaks inside log_and_scale (depth 1), which is compiled:
    # g1: add; log_and_scale: the call first (no graph), g2: mul; the root: g3: sum.
    y = x + 1
    return log_and_scale(y).sum()


@program(t(3), 3)
def print_in_helper(x):
    # Break inside report (depth 1): the root calls report compiled.
    # g1: mul; report: print first (no graph), g2: t + 1; root resume g3: mul.
    y = x * 2
    z = report(y)
    return z * 3


@program(t(3), 5)
def print_in_helper_depth_two(x):
    # Break two calls deep. g1: sin; report_twice_removed compiled: g2: t - 1;
    # report compiled: g3: t + 1; report_twice_removed resumes: g4: v * 2;
    # the root resumes: g5: cos.
    y = x.sin()
    r = report_twice_removed(y)
    return r.cos()


# --- calls into C functions --------------------------------------------------------------


@program(t(3), 2)
def time_time_result_unused(x):
    # The float is stored in Python and never read again: it is no resume input.
    # g1: add; g2: mul.
    y = x + 1
    start = time.time()  # noqa: F841
    return y * 2


@program(t(3), 2)
def time_sleep_zero(x):
    # g1: mul; g2: add.
    y = x * 2
    time.sleep(0)
    return y + 1


@program(t(3), 1)
def random_random_scale(x):
    # One graph: r is drawn by the transformed code before it (random_draws.py).
    y = x + 1
    r = random.random()
    return y * r


@program(t(3), 2)
def os_getpid_modulo(x):
    # g1: add; g2: mul (pid is the same on every call).
    y = x + 1
    pid = os.getpid()
    return y * (pid % 5 + 1)


@program(t(3), 2)
def sys_recursion_limit(x):
    # g1: neg; g2: add.
    y = -x
    limit = sys.getrecursionlimit()
    return y + (limit > 10)


@program(t(3), 2)
def binascii_checksum(x):
    # g1: mul; g2: add.
    y = x * 0.5
    checksum = binascii.crc32(b"bytegraph")
    return y + checksum % 7


@program(t(3), 2)
def eval_builtin(x):
    # g1: add; g2: mul.
    y = x + 1
    k = eval("2 + 3")
    return y * k


# --- data-dependent control flow ---------------------------------------------------------


def branch_on_sum(x):
    # g1: mul, sum, gt up to the jump; g2: the branch taken (add or sub), relu.
    y = x * 2
    if y.sum() > 0:
        y = y + 1
    else:
        y = y - 1
    return y.relu()


PROGRAMS.append(Program("if_sum_positive_then_branch", branch_on_sum, positive(3), 2))
PROGRAMS.append(Program("if_sum_positive_else_branch", branch_on_sum, negative(3), 2))


@program(positive(4), 2)
def if_tensor_any(x):
    # g1: gt, any; g2: mul.
    if (x > 0.05).any():
        return x * 2
    return x * 3


@program(positive(3), 2)
def ternary_on_mean(x):
    # g1: mean, gt; g2: mul.
    return x * 2 if x.mean() > 0 else x * 3


@program(small(3), 2)
def while_max_below_one(x):
    # The loop runs in Python (x changes each iteration); g1: mul; g2: mul after it.
    y = x * 2
    while x.max() < 1:
        x = x + 0.25
    return y * x


@program(positive(3), 2, same_values=True)
def while_counting_iterations(x):
    # g1: abs, add; the loop runs in Python; g2: add with n, an int from the data.
    x = x.abs() + 1
    n = 0
    while x.sum() < 100:
        x = x * 2
        n += 1
    return x + n


@program(positive(3), 2)
def bool_of_tensor(x):
    # bool() runs in Python; the resume function branches on its (stable) result.
    # g1: sum, gt; g2: mul.
    if bool(x.sum() > 0):
        return x * 2
    return x * 3


@program(positive(3), 2)
def assert_on_tensor(x):
    # g1: ge, all; g2: sqrt.
    assert (x >= 0).all(), "negative input"
    return x.sqrt()


@program(small(3), 3)
def data_dependent_in_helper(x):
    # g1: mul; clamp_if_large compiled: g2: abs, max, gt; its resume returns t (no op);
    # the root resumes: g3: add.
    y = x * 3
    z = clamp_if_large(y)
    return z + 1


@program(small(3), 3)
def and_condition(x):
    # Two jumps on tensors. g1: sum, gt; g2: max, lt; g3: mul.
    if x.sum() > 0 and x.max() < 5:
        return x * 2
    return x


# --- .item() and .tolist() ----------------------------------------------------------------


@program(t(3), 2, same_values=True)
def item_scales_tensor(x):
    # The call .item() runs in Python. g1: sum; g2: mul by the float.
    s = x.sum().item()
    return x * s


@program(lambda: (torch.tensor([3.0, 1.0, 2.0]) + torch.rand(3) * 0.1,), 2, same_values=True)
def item_sets_loop_count(x):
    # g1: select; the loop unrolls n = 3 times in g2: three adds.
    n = int(x[0].item())
    out = x
    for _ in range(n):
        out = out + 1
    return out


@program(t(3), 2, same_values=True)
def item_in_condition(x):
    # g1: max; the comparison of the float folds in the resume function; g2: mul.
    if x.max().item() > 0.5:
        return x * 2
    return x * 3


@program(t(3), 2, same_values=True)
def tolist_summed(x):
    # g1: mul; tolist runs in Python; g2: add.
    y = x * 2
    total = sum(y.tolist())
    return x + total


@program(t(4), 2, same_values=True)
def tolist_counts_flags(x):
    # g1: gt; g2: mul by the count.
    flags = (x > 0).tolist()
    count = flags.count(True)
    return x * count


# --- unsupported opcodes ------------------------------------------------------------------


@program(t(3), 1)
def import_inside(x):
    # math is loaded already: IMPORT_NAME is a lookup in sys.modules, traced. g1: add, mul.
    y = x + 1
    import math

    return y * math.pi


@program(t(3), 1)
def from_import_inside(x):
    # IMPORT_NAME and IMPORT_FROM of a loaded module are traced. g1: mul, add, add.
    y = x * 2
    from math import e, tau

    return y + e + tau


@program(t(3), 1)
def class_statement(x):
    # The class statement is traced (variables/made_classes.py): one graph, sub and mul.
    y = x - 1

    class Box:  # noqa: F841
        scale = 2

    return y * 3


@program(t(3), 1)
def try_except_around_print(x):
    # A break inside try: print runs in Python, the rest of the try is one graph.
    try:
        print("inside try")
        y = x * 2
    except ValueError:
        y = x
    return y + 1


@program(t(3), 1)
def try_finally_graph_break(x):
    # A break inside try/finally: one graph before it; the finally block runs after.
    y = x + 1
    try:
        z = y * 2
        bytegraph.graph_break()
    finally:
        SEEN.append("finally")
    return z


@program(positive(3), 2)
def try_except_data_dependent(x):
    # A data-dependent jump inside try: the graph before it, the jump in Python, a resume.
    try:
        if x.sum() > 0:
            x = x * 2
    except RuntimeError:
        pass
    return x


@program(t(3), 2)
def frame_with_closure_cells(x):
    # The frame owns a cell (k): the Python part and the resume function receive it.
    k = 2.0

    def scale(u):
        return u * k

    y = scale(x)
    print("cells")
    return y + 1


@program(t(3), 2)
def nested_helper_runs_as_python(x):
    # inner is made during the trace (no compiled wrapper): it runs as Python.
    # g1: add; g2: sub.
    def inner(u):
        print("inner")
        return u * 2

    y = x + 1
    return inner(y) - 1


# --- explicit graph_break() ----------------------------------------------------------------


@program(t(3), 2)
def graph_break_once(x):
    # g1: mul; g2: add.
    y = x * 2
    bytegraph.graph_break()
    return y + 1


@program(t(3), 3)
def graph_break_twice(x):
    # g1: mul; g2: add; g3: sub.
    y = x * 2
    bytegraph.graph_break()
    y = y + 1
    bytegraph.graph_break()
    return y - 1


@program(t(3), 1)
def graph_break_first(x):
    # No graph before the break; g1: mul.
    bytegraph.graph_break()
    return x * 2


@program(t(3), 4)
def graph_break_in_helper(x):
    # g1: neg; helper_graph_break compiled: g2: t + 1, g3: t * 2; the root resumes: g4: sum.
    return helper_graph_break(x.neg()).sum()


@program(t(3), 5)
def graph_break_in_helper_depth_two(x):
    # g1: mul; outer_graph_break compiled: g2: t - 1; helper_graph_break: g3: add,
    # g4: mul; outer resumes: g5: div; the root resumes only to return (no graph).
    y = x * 3
    return outer_graph_break(y)


# --- breaks inside loops -----------------------------------------------------------------


@program(t(3), 2)
def print_in_for_range(x):
    # The loop runs in Python. g1: mul; g2: sum.
    y = x * 2
    for i in range(3):
        print("step", i)
        y = y + i
    return y.sum()


@program(lambda: ([torch.randn(3) for _ in range(3)],), 2)
def graph_break_in_for_list(xs):
    # g1: mul (total = xs[0] * 0); the loop runs in Python; g2: mul.
    total = xs[0] * 0
    for u in xs:
        bytegraph.graph_break()
        total = total + u
    return total * 2


@program(t(3), 2)
def print_in_while(x):
    # g1: add; the loop runs in Python; g2: sub.
    i = 0
    y = x + 1
    while i < 3:
        print("while", i)
        y = y * 2
        i += 1
    return y - 1


@program(t(3), 1)
def loop_local_bound_only_inside(x):
    # last is assigned only in the loop and read after: everything from the loop
    # on runs as Python, where its boundness is exact. g1: mul.
    y = x * 2
    for i in range(2):
        last = y + i
        print(i)
    return last * 3


@program(t(3), 2)
def nested_loops_print_inner(x):
    # The outermost loop runs in Python. g1: add; g2: mul.
    y = x + 1
    for i in range(2):
        for j in range(2):
            print(i, j)
            y = y + i * j
    return y * 2


@program(t(3), 2)
def loop_with_break_statement(x):
    # g1: exp; the loop (with its break) runs in Python; g2: mul.
    y = x.exp()
    for i in range(10):
        print("i", i)
        if i == 2:
            break
    return y * 2


@program(t(3), 2)
def data_dependent_in_loop(x):
    # g1: sum, mul; the loop runs in Python; g2: mul.
    out = x.sum() * 0
    for i in range(3):
        if x[i] > 0:
            out = out + x[i]
    return out * 2


@program(lambda: ([torch.randn(2) for _ in range(3)], [torch.randn(2) for _ in range(3)]), 2)
def print_in_enumerate_zip(xs, ys):
    # g1: mul (acc = xs[0] * 0); the loop runs in Python; g2: add.
    acc = xs[0] * 0
    for i, (a, b) in enumerate(zip(xs, ys)):
        print("pair", i)
        acc = acc + a * b
    return acc + 1


@program(lambda: ({"a": torch.randn(2), "b": torch.randn(2)},), 2)
def print_in_dict_items(d):
    # g1: mul (acc); the loop runs in Python; g2: mul.
    acc = d["a"] * 0
    for k, v in d.items():
        print("key", k)
        acc = acc + v
    return acc * 3


# --- breaks inside with-blocks -----------------------------------------------------------
# Ideally the grad-mode context is rebuilt across the break: two graphs. Where it
# cannot be rebuilt yet, the frame runs as Python: no graph. Either way the results,
# the grad mode inside (returned) and after (checked) must be eager's.


@program(t(3, requires_grad=True), (2, 0))
def no_grad_print_inside(x):
    # g1: mul, set_grad_enabled(False), mul; g2: add, set_grad_enabled(True), mul.
    y = x * 2
    with torch.no_grad():
        z = x * 3
        print("in no_grad", torch.is_grad_enabled())
        w = z + 1
        inside = torch.is_grad_enabled()
    return y * w, inside, torch.is_grad_enabled()


@program(t(3, requires_grad=True), (2, 0))
def no_grad_graph_break_inside(x):
    # g1: set_grad_enabled(False), mul; g2: add, set_grad_enabled(True), add.
    with torch.no_grad():
        z = x * 3
        bytegraph.graph_break()
        w = z + x
    return w + x, w.requires_grad


@program(t(3, requires_grad=True), (2, 0))
def set_grad_enabled_false_print_inside(x):
    # g1: set_grad_enabled(False), mul; g2: add, set_grad_enabled(True), mul.
    with torch.set_grad_enabled(False):
        z = x * 2
        print("grad", torch.is_grad_enabled())
        z = z + 1
    return z * x


@program(t(3, requires_grad=True), (2, 0))
def enable_grad_inside_no_grad(x):
    # g1: switches, mul; g2: add, switches back, mul.
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
            print("enabled", torch.is_grad_enabled())
            y = y + 1
        z = x * 3
    return y, z


@program(t(3, requires_grad=True), (3, 0))
def no_grad_break_in_helper(x):
    # g1: mul, set_grad_enabled(False); report compiled (under no_grad): print, then
    # g2: t + 1; the root resumes: g3: mul, set_grad_enabled(True), mul.
    y = x * 2
    with torch.no_grad():
        z = report(y)
        w = z * 2
    return w * y


class Tracked:
    """A user context manager that records each enter and exit in SEEN."""

    def __init__(self, tag):
        self.tag = tag

    def __enter__(self):
        SEEN.append(("enter", self.tag))
        return self

    def __exit__(self, *exc):
        SEEN.append(("exit", self.tag))
        return False


TRACKED = Tracked("global")


@program(t(3), (2, 0))
def user_context_manager_print_inside(x):
    # Entered and exited exactly once (SEEN is compared with eager's).
    # g1: mul; g2: add, mul.
    y = x * 2
    with Tracked("local") as ctx:
        print("inside", ctx.tag)
        z = y + 1
    return z * y


@program(t(3), (2, 0))
def global_context_manager_graph_break_inside(x):
    # g1: sin; g2: cos.
    with TRACKED:
        y = x.sin()
        bytegraph.graph_break()
        y = y.cos()
    return y


# --- live stack values across a break -----------------------------------------------------


@program(t(3), 3)
def cat_with_printing_helper(x):
    # Stack at the call of report: NULL, torch.cat, x, x + 1. g1: add; report: g2;
    # the root resumes: g3: cat.
    return torch.cat([x, x + 1, report(x)])


@program(t(3), 2)
def print_or_value_as_argument(x):
    # A NULL in the middle of the stack: combine's NULL below print's.
    # g1: mul; the resume function: g2: combine's mul, add.
    y = x * 2
    return combine(x, print("side") or y)


@program(t(3), 3)
def method_receiver_on_stack(x):
    # y.add is on the stack while report runs. g1: mul; report: g2; g3: add.
    y = x * 2
    return y.add(report(x))


@program(t(3), 3)
def keyword_call_across_break(x):
    # torch.clamp(y, min=...) with the keyword value from a broken call.
    # g1: sub; report: g2: add; g3: min, clamp.
    y = x - 0.5
    return torch.clamp(y, min=report(x).min())


@program(t(3), 3)
def binary_operand_on_stack(x):
    # (x * 2) waits on the stack. g1: mul; report: g2; g3: add.
    return (x * 2) + report(x)


@program(t(3), 3)
def dict_literal_across_break(x):
    # Keys and values wait on the stack (BUILD_CONST_KEY_MAP after the call).
    # g1: add; report: g2; g3: mul.
    d = {"a": x + 1, "b": report(x)}
    return d["a"] * d["b"]


@program(t(3), 3)
def tuple_unpacked_after_break(x):
    # g1: mul; report: g2; g3: sub.
    a, b = x * 2, report(x)
    return a - b


# --- locals of every kind across a break --------------------------------------------------


@program(t(3), 2)
def locals_of_every_kind(x):
    # Tensors, a list, a dict, an int, None, a tuple of tensors, a str and a float
    # cross the break. g1: add, mul, neg; g2: everything after the print.
    t1 = x + 1
    lst = [x, t1]
    d = {"k": t1 * 2, "n": 3}
    n = 5
    nothing = None
    pair = (t1, x.neg())
    s = "str"
    f = 1.5
    print("break")
    extra = 0 if nothing is None else 1
    return t1 + lst[1] + d["k"] * d["n"] + n + extra + pair[1] + len(s) * f


@program(t(3), 2)
def list_built_before_appended_after(x):
    # g1: mul; g2: add; the list (new, returned) is rebuilt across the break.
    out = [x * 2]
    print("mid")
    out.append(x + 1)
    return out


@program(t(3), 2)
def deleted_local_before_break(x):
    # y is deleted before the break: it must not be passed on. g1: add, mul; g2: sub.
    y = x + 1
    z = y * 2
    del y
    print("deleted")
    return z - 1


@program(t(3), 2)
def input_mutated_before_break(x):
    # g1: in-place mul on the input; g2: add.
    x.mul_(2)
    print("mutated")
    return x + 1


@program(t(2, 3), 2)
def view_mutated_after_break(x):
    # g1: view; g2: in-place add through the view, which eager makes visible in x.
    y = x.view(-1)
    print("view")
    y.add_(1)
    return x * 2


@program(t(3), 2)
def same_tensor_twice_across_break(x):
    # One tensor in two locals: both are the same object after the break.
    # g1: mul; g2: add, is-check folded.
    y = x * 2
    z = y
    print("alias")
    return y + z, y is z


# --- side effects before and after a break ------------------------------------------------


@program(lambda: (torch.randn(3), []), 2)
def list_append_around_break(x, out):
    # g1: mul; g2: add; both appends reach the caller's list.
    out.append(x * 2)
    print("mid")
    out.append(x + 1)
    return len(out)


@program(lambda: (torch.randn(3), {}), 2)
def dict_set_around_break(x, d):
    # g1: sum; g2: add.
    d["a"] = x.sum()
    bytegraph.graph_break()
    d["b"] = d["a"] + 1
    return d


@program(t(3), 2)
def global_list_append_around_break(x):
    # g1: sum; g2: mean.
    SEEN.append(x.sum())
    print("mid")
    SEEN.append(x.mean())
    return len(SEEN)


@program(t(3), 2)
def global_counter_around_break(x):
    # STORE_GLOBAL on both sides. g1: mul; g2: add.
    global COUNTER
    COUNTER += 1
    y = x * COUNTER
    print("count", COUNTER)
    COUNTER += 1
    return y + COUNTER


@program(t(3), 2)
def global_dict_around_break(x):
    # g1: norm; g2: div.
    STATS["norm"] = x.norm()
    bytegraph.graph_break()
    STATS["calls"] = STATS.get("calls", 0) + 1
    return x / STATS["norm"]


@program(t(3), 2)
def attribute_store_around_break(x):
    # STORE_ATTR on an object that exists before the call. g1: mul; g2: add.
    BOX.before = x * 2
    print("box")
    BOX.after = BOX.before + 1
    return BOX.after


@program(lambda: (torch.randn(3), [torch.zeros(3)]), 2)
def mutation_then_print_then_read(x, acc):
    # The list is mutated in g1's frame (replayed before the print runs) and read after.
    # g1: add; g2: mul.
    acc[0] = acc[0] + x
    print("len", len(acc))
    return acc[0] * 2


# --- more shapes of code around a break ---------------------------------------------------


@program(t(3, requires_grad=True), (2, 0))
def print_in_loop_inside_no_grad(x):
    # The loop (inside the block) runs in Python with grad disabled.
    # g1: set_grad_enabled(False), mul; g2: set_grad_enabled(True), mul.
    with torch.no_grad():
        y = x * 2
        for i in range(2):
            print("no grad loop", i, torch.is_grad_enabled())
            y = y + i
    return y * x


@program(t(3), 3)
def loop_break_inside_helper(x):
    # helper_loop_prints is compiled: its loop runs in Python.
    # g1: add; helper: g2: mul (before its loop), its resume after the loop: no op;
    # the root resumes: g3: sub.
    y = x + 1
    z = helper_loop_prints(y)
    return z - 1


@program(lambda: (torch.randn(3), [1, 2, 3]), 2)
def walrus_in_logged_call(x, xs):
    # The whole LOG.info call (with the walrus store) runs in Python; n is read after.
    # g1: mul; g2: mul by n.
    y = x * 2
    LOG.info("%d items", (n := len(xs)))
    return y * n


@program(t(3), 2)
def logging_keyword_arguments(x):
    # LOAD_METHOD ... KW_NAMES ... CALL runs in Python. g1: add; g2: mul.
    y = x + 1
    LOG.info("with extra %s", tuple(y.shape), extra={"tag": "kw"}, stacklevel=1)
    return y * 2


@program(lambda: (torch.randn(3), True), (2, 0))
def conditional_argument_of_logged_call(x, flag):
    # A jump inside the call's arguments: it is no straight line. g1: mul; g2: add
    # (or the frame runs as Python).
    y = x * 2
    LOG.info("flag %s", "on" if flag else "off")
    return y + 1


@program(t(3), 2)
def keyword_only_and_defaults(x, *, scale=3.0, shift=1):
    # g1: mul; g2: add.
    y = x * scale
    print("scale", scale)
    return y + shift


@program(lambda: (torch.randn(3), torch.randn(3)), 2)
def varargs_across_break(*args, **kwargs):
    # args (a tuple of tensors) and kwargs (a dict) cross the break.
    # g1: add; g2: mul, add.
    total = args[0] + args[1]
    print("nargs", len(args), sorted(kwargs))
    return total * 2 + args[0], len(kwargs)


@program(t(3), 2)
def tuple_literal_with_print(x):
    # (x * 2, None, ...) is built around the call. g1: mul; g2: add.
    return (x * 2, print("middle"), x + 1)


# 3.13 compiles ``if a < b`` as one COMPARE_OP that also converts to bool, so each
# comparison runs with its jump in Python: g1: sum; g2: mul.
@program(positive(3), 2 if COMPARE_OP_TO_BOOL_BIT else 3)
def chained_comparison_on_tensor(x):
    # 0 < s < 10 compares twice, each a jump on a tensor.
    # g1: sum, gt; g2: lt; g3: mul.
    s = x.sum()
    if 0 < s < 10:
        return x * 2
    return x


@program(small(3), 2)
def while_true_with_data_dependent_break(x):
    # g1: mul; the loop runs in Python; g2: add.
    y = x * 2
    while True:
        x = x + 0.3
        if x.min() > 1:
            break
    return y + x


@program(t(3), 2)
def return_print_or_value(x):
    # print's None feeds an or. g1: mul; g2: mul.
    y = x * 2
    return print("or") or y * 3


@program(t(3), 3)
def two_breaks_on_one_line(x):
    # g1: add; g2: mul; g3: sub.
    y = x + 1
    print("a"); y = y * 2; print("b")  # noqa: E702
    return y - 1


@program(t(3), 2)
def locals_of_odd_kinds(x):
    # A slice, a range, a dtype, a device, a function, a module and a class cross.
    # g1: mul; g2: slice, to, relu, add.
    sl = slice(0, 2)
    rg = range(3)
    dt = torch.float64
    dev = torch.device("cpu")
    act = torch.relu
    mod = torch.nn.functional
    cls = torch.Tensor
    y = x * 2
    print("odd locals")
    z = act(y[sl].to(dtype=dt, device=dev))
    return z + len(rg), mod.__name__, cls.__name__


@program(t(3), 2)
def global_written_before_read_after(x):
    # The store is replayed before the print; the resume function reads the new value.
    # g1: mul; g2: add.
    global COUNTER
    COUNTER = 5
    y = x * 2
    print("counter", COUNTER)
    return y + COUNTER


@program(lambda: (torch.randn(3), [torch.randn(3), torch.randn(3)]), 2)
def input_list_mutated_then_read(x, xs):
    # g1: mul; g2: add of the three.
    xs.append(x * 2)
    print("len", len(xs))
    return xs[0] + xs[1] + xs[2]


@program(lambda: ((torch.randn(3), torch.randn(3)),), 2)
def tuple_input_unpacked_after_break(pair):
    # g1: add; g2: sub.
    s = pair[0] + pair[1]
    print("pair")
    a, b = pair
    return s - a * b


@program(lambda: ([torch.randn(2) for _ in range(3)],), 2)
def comprehension_with_print(xs):
    # The comprehension's own function runs in Python (a break inside it).
    # g1: mul; g2: stack, sum... the result list crosses as a value.
    scale = xs[0] * 0 + 2
    ys = [print("item", i) or t * 2 for i, t in enumerate(xs)]
    return torch.stack(ys).sum(0) * scale


@program(t(4), 2, same_values=True)
def print_format_conversions(x):
    # Formatting s runs in Python: the string (of s's value) crosses the break.
    # g1: sum; g2: mul.
    s = x.sum()
    print(f"{s!r} {s.shape!s:>8} {s.dtype}")
    return x * 2


@program(t(3), 3)
def user_context_and_no_grad(x):
    # g1: mul; g2: set_grad_enabled(False), add, set_grad_enabled(True); g3: sub.
    # (The with-blocks' values are rebuilt across both breaks.)
    y = x * 2
    with Tracked("outer"):
        print("in tracked")
        with torch.no_grad():
            z = y + 1
        bytegraph.graph_break()
    return z - y


@program(lambda: ([torch.randn(3) for _ in range(3)],), 2)
def for_over_generator_expression(xs):
    # The loop, its generator expression included, runs in Python.
    # g1: mul (acc); g2: mul.
    acc = xs[0] * 0
    for v in (t * 2 for t in xs):
        print("gen item")
        acc = acc + v
    return acc * 3


@program(t(3), 2)
def try_inside_loop_runs_with_the_loop(x):
    # The try block is inside the loop, which runs in Python as a whole.
    # g1: add; g2: mul.
    y = x + 1
    for i in range(2):
        try:
            print("try", i)
            y = y + i
        except ValueError:
            pass
    return y * 2


@program(t(3), 3)
def star_call_of_breaking_helper(x):
    # CALL_FUNCTION_EX of a user function whose body breaks: it is called compiled.
    # g1: mul; report: g2: add; g3: sub.
    args = [x * 2]
    return report(*args) - 1


@program(t(3), 3)
def keyword_call_of_breaking_helper(x):
    # KW_NAMES before the compiled callee's call. g1: neg; report: g2; g3: mul.
    return report(t=-x) * 2


@program(lambda: (torch.randn(3), []), 2)
def mutation_seen_by_the_python_part(x, out):
    # The append is replayed before print runs: it prints 1, as eager does.
    # g1: mul; g2: add.
    out.append(x * 2)
    print("len", len(out))
    return out[0] + 1


def or_of_tensor_conditions(x):
    # JUMP_IF_TRUE_OR_POP on a tensor: the jump keeps the value on the stack.
    # g1: mul, sum, gt; g2: (max, gt when the first is false,) add.
    y = x * 2
    flag = (x.sum() > 0) or (x.max() > 5)
    return y + flag


PROGRAMS.append(Program("or_on_tensor_first_true", or_of_tensor_conditions, positive(3), 2))
PROGRAMS.append(Program("or_on_tensor_first_false", or_of_tensor_conditions, negative(3), 2))


@program(positive(3), 2)
def and_of_tensor_and_value(x):
    # JUMP_IF_FALSE_OR_POP on a tensor. g1: sum, gt; g2: max, mul.
    flag = (x.sum() > 0) and x.max()
    return x * flag


# --- the recipe ----------------------------------------------------------------------------


assert len(PROGRAMS) >= 60, len(PROGRAMS)
assert len({p.name for p in PROGRAMS}) == len(PROGRAMS), "program names must be unique"


def related_entries(compiled: Any) -> int:
    """Cache entries of the function, its resume functions and compiled callees."""
    seen: dict[int, Any] = {}
    work = [compiled]
    while work:
        fn = work.pop()
        if id(fn) not in seen:
            seen[id(fn)] = fn
            work.extend(fn.resume_cache.values())
            work.extend(fn.context.callee_cache.values())
    return sum(len(fn.entries) for fn in seen.values())


@pytest.fixture(autouse=True)
def _corpus_logging(caplog):
    caplog.set_level(logging.INFO, logger=LOG_NAME)
    yield
    reset_globals()


def run_both(prog: Program, compiled: Any, inputs: tuple, differential, capsys, caplog) -> None:
    """One eager run and one compiled run on clones of ``inputs``; compare everything."""
    eager: list[Observation] = []
    actual: list[Observation] = []
    differential.check(
        observed(prog.fn, eager, capsys, caplog), observed(compiled, actual, capsys, caplog),
        inputs,
    )
    (want,), (got,) = eager, actual
    assert got.stdout == want.stdout, f"stdout {got.stdout!r} != eager's {want.stdout!r}"
    assert got.stderr == want.stderr, f"stderr {got.stderr!r} != eager's {want.stderr!r}"
    assert got.logs == want.logs
    assert got.globals == want.globals, "globals after the call differ from eager's"
    assert got.grad_enabled and want.grad_enabled, "grad mode leaked out of the call"


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_program_matches_eager(prog: Program, differential, counting_backend, capsys, caplog):
    compiled = differential.compile(prog.fn)
    first = prog.make_inputs()
    run_both(prog, compiled, first, differential, capsys, caplog)
    allowed = prog.graphs if isinstance(prog.graphs, tuple) else (prog.graphs,)
    assert counting_backend.calls in allowed, (
        f"expected {' or '.join(map(str, allowed))} graph(s), got {counting_backend.calls}"
    )
    graphs, entries = counting_backend.calls, related_entries(compiled)

    second = first if prog.same_values else prog.make_inputs()
    run_both(prog, compiled, second, differential, capsys, caplog)
    assert counting_backend.calls == graphs, "the second call compiled a new graph"
    assert related_entries(compiled) == entries, "the second call missed a cache"
    if prog.same_values:  # new data: new guarded values may recompile, results still eager's
        run_both(prog, compiled, prog.make_inputs(), differential, capsys, caplog)


def test_both_branches_of_a_data_dependent_if(differential, counting_backend) -> None:
    """Each branch gets its own resume function, compiled once and then reused."""
    compiled = differential.compile(branch_on_sum)
    differential.check(branch_on_sum, compiled, positive(3)())
    assert counting_backend.calls == 2  # g1 and the then-branch
    differential.check(branch_on_sum, compiled, negative(3)())
    assert counting_backend.calls == 3  # g1 is reused; the else-branch is new
    for make in (positive(3), negative(3), positive(3)):
        differential.check(branch_on_sum, compiled, make())
    assert counting_backend.calls == 3


def test_seed_example_graphs_and_output(counting_backend, capsys) -> None:
    """8.2 exactly: two graphs (add, then mul) and the shape printed once per call."""
    compiled = bytegraph.compile(seed_print_shape, backend=counting_backend)
    x = torch.randn(3, 4)
    for _ in range(3):
        out = compiled(x)
        torch.testing.assert_close(out, (x + 1) * 2, rtol=0, atol=0)
        assert capsys.readouterr().out == "torch.Size([3, 4])\n"
    first, second = counting_backend.graphs
    ops = [[n.target for n in gm.graph.nodes if n.op == "call_function"] for gm in (first, second)]
    assert ops == [[operator.add], [operator.mul]]


def test_logger_level_change_after_compiling(counting_backend, caplog) -> None:
    """A debug call below the level may trace through logging; raising the level must log."""

    def f(x):
        y = x + 1
        LOG.debug("debug %s", tuple(y.shape))
        return y * 2

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.randn(3)
    caplog.set_level(logging.INFO, logger=LOG_NAME)
    torch.testing.assert_close(compiled(x), (x + 1) * 2, rtol=0, atol=0)
    assert not [r for r in caplog.records if r.name == LOG_NAME]
    caplog.set_level(logging.DEBUG, logger=LOG_NAME)
    torch.testing.assert_close(compiled(x), (x + 1) * 2, rtol=0, atol=0)
    messages = [r.getMessage() for r in caplog.records if r.name == LOG_NAME]
    assert messages == ["debug (3,)"]


def fails(t):
    raise ValueError(f"bad input of shape {tuple(t.shape)}")


def raises_after_break(x):
    y = x + 1
    print("before the failure")
    return fails(y) * 2


def user_frames(error: BaseException) -> list[tuple[str, int]]:
    """(function, line) of this file's frames in the traceback, continuations merged.

    A resume function is another frame of the same function, called from the
    frame that broke (at the line of the break): of consecutive frames of one
    function, only the innermost says where the program is.
    """
    import traceback

    frames = [(f.name, f.lineno) for f in traceback.extract_tb(error.__traceback__)
              if f.filename == __file__]
    return [f for i, f in enumerate(frames) if i + 1 == len(frames) or frames[i + 1][0] != f[0]]


def test_exception_after_a_break_has_eager_traceback(capsys) -> None:
    errors = []
    for fn in (raises_after_break, bytegraph.compile(raises_after_break, backend="eager")):
        with pytest.raises(ValueError, match=r"bad input of shape \(3,\)") as info:
            fn(torch.randn(3))
        errors.append(info.value)
        assert capsys.readouterr().out == "before the failure\n"
    eager, compiled = map(user_frames, errors)
    assert compiled == eager


def make_closure_program():
    k = 2.0

    def scaled_by_free_variable(x):
        y = x * k
        print("free variable", k)
        return y + k

    return scaled_by_free_variable


def test_free_variables_cross_a_break(differential, counting_backend, capsys) -> None:
    """A nested function's free variables (no cells of its own) may break: 2 graphs."""
    fn = make_closure_program()
    compiled = differential.compile(fn)
    for _ in range(2):
        differential.check(fn, compiled, (torch.randn(3),))
    assert counting_backend.calls == 2  # g1: mul; g2: add
    assert capsys.readouterr().out == "free variable 2.0\n" * 4


def make_nonlocal_counter():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        y = x * count
        print("count", count)
        count += 10
        return y + count

    return bump


def test_nonlocal_writes_across_a_break(differential, capsys) -> None:
    """STORE_DEREF on both sides of a break, eager and compiled on separate closures."""
    eager, compiled_fn = make_nonlocal_counter(), make_nonlocal_counter()
    compiled = differential.compile(compiled_fn)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x.clone()), eager(x.clone()), rtol=0, atol=0)
    out = capsys.readouterr().out.splitlines()
    assert out == ["count 1", "count 1", "count 12", "count 12", "count 23", "count 23"]
    assert [c.cell_contents for c in compiled_fn.__closure__] == [33]


FLAG_AFTER_BREAK = True


def reads_flag_after_break(x):
    y = x + 1
    print("flag")
    if FLAG_AFTER_BREAK:
        return y * 2
    return y * 3


def test_global_changed_between_calls_recompiles_the_resume(differential, counting_backend):
    global FLAG_AFTER_BREAK
    compiled = differential.compile(reads_flag_after_break)
    try:
        differential.check(reads_flag_after_break, compiled, (torch.randn(3),))
        FLAG_AFTER_BREAK = False
        differential.check(reads_flag_after_break, compiled, (torch.randn(3),))
        assert counting_backend.calls == 3  # g1, the resume for True, the resume for False
    finally:
        FLAG_AFTER_BREAK = True


def test_module_forward_with_a_break(counting_backend, capsys) -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = torch.nn.Linear(4, 4)
            self.second = torch.nn.Linear(4, 2)

        def forward(self, x):
            h = self.first(x).relu()
            print("hidden", tuple(h.shape))
            return self.second(h)

    net = Net()
    compiled = bytegraph.compile(net, backend=counting_backend)
    for _ in range(2):
        x = torch.randn(3, 4)
        torch.testing.assert_close(compiled(x), net(x), rtol=0, atol=0)
    assert counting_backend.calls == 2  # g1: first, relu; g2: second
    with torch.no_grad():
        net.second.weight.mul_(2)  # parameters are read at run time, not baked in
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), net(x), rtol=0, atol=0)
    assert capsys.readouterr().out == "hidden (3, 4)\n" * 6


# --- exceptions raised by the Python part of a break -----------------------------------------


def raise_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        fails(y)
    return y


def raise_in_tracked(x):
    y = x + 1
    with Tracked("raising"):
        z = y * 2
        fails(z)
    return z


def raise_in_loop_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        for i in range(3):
            print("iteration", i)
            if i == 1:
                fails(y)
    return y


def suppressed_in_with(x):
    import contextlib

    y = x * 2
    with contextlib.suppress(ValueError):
        z = y + 1
        fails(z)
        y = z  # never reached
    return y - 1


def swallowed_by_user_context(x):
    y = x * 2
    with Swallow():
        y = y + 1
        fails(y)
    return y * 3


class Swallow:
    def __enter__(self):
        SEEN.append("enter")

    def __exit__(self, kind, value, tb):
        SEEN.append(("exit", None if kind is None else kind.__name__))
        return True


@pytest.mark.parametrize(
    "fn",
    [raise_in_no_grad, raise_in_tracked, raise_in_loop_in_no_grad, suppressed_in_with,
     swallowed_by_user_context],
    ids=lambda f: f.__name__,
)
def test_exception_in_a_with_block_after_a_break(fn, counting_backend, capsys) -> None:
    """The context exits exactly once; the exception, or the swallowed one's result, is eager's."""

    def outcome(call):
        reset_globals()
        x = torch.randn(3, requires_grad=True)
        torch.manual_seed(0)
        try:
            result = ("returned", freeze(call(x.detach().clone().requires_grad_())))
        except ValueError as e:
            result = ("raised", str(e))
        grad = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        return result, freeze(SEEN), grad, capsys.readouterr().out

    torch.manual_seed(1)
    eager = outcome(fn)
    compiled = bytegraph.compile(fn, backend=counting_backend)
    for _ in range(2):
        torch.manual_seed(1)
        assert outcome(compiled) == eager
    assert eager[2] is True
