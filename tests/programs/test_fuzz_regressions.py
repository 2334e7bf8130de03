"""Reproducers found by the differential fuzzer (tests/fuzz/), each kept after its fix.

Every program runs eagerly and compiled on clones of the same inputs
(``differential.check``: outputs, every input after the call, aliasing); a
program whose eager run raises must raise the same exception, type and
message, compiled.
"""

from __future__ import annotations

import contextlib
import enum
import operator
from typing import Any

import pytest
import torch

import bytegraph
from tests.conftest import assert_same_value


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What calling ``fn`` did: its result, or its exception's type and message."""
    try:
        return "returned", fn(*args)
    except Exception as e:  # noqa: BLE001  (the program's own exception is the result)
        return type(e).__name__, str(e)


# -- writes into an expanded tensor: eager refuses most, meta kernels never check ------------


@torch.no_grad()
def clamp_in_place(x, y):
    x.clamp_(-2.0, 2.0)
    return x


def overlapping_write_caught(x, y, dct):  # seed 0, index 154
    acc = []
    out = x + y
    try:
        out = out + clamp_in_place(x.mean(0, keepdim=True).expand_as(x), x)
    except Exception as e:  # noqa: BLE001
        acc.append(str(e))
    return out, acc


def overlapping_write_raises(x, y, dct):
    z = x.sum(0, keepdim=True).expand(3, 2)
    z.add_(y)
    return z


def overlapping_inplace_operator(x, y, dct):
    z = x[:1].expand(3, 2)
    z += 1
    return z


def overlapping_out_argument(x, y, dct):
    z = torch.zeros(1, 2).expand(3, 2)
    torch.add(x, y, out=z)
    return z


def overlapping_setitem_after_a_store(x, y, dct):  # seed 11, index 277
    dct["b"] = y
    t = x.mean(0, keepdim=True).expand_as(x)
    t[:, 0] = 1
    return t


def overlapping_dunder_setitem(x, y, dct):
    t = x[:1].expand(3, 2)
    t.__setitem__(0, 2.0)
    return t


@pytest.mark.parametrize(
    "fn", [overlapping_write_caught, overlapping_write_raises, overlapping_inplace_operator,
           overlapping_out_argument, overlapping_setitem_after_a_store, overlapping_dunder_setitem],
)
def test_write_into_expanded_tensor_behaves_as_eager(fn) -> None:
    x, y = torch.randn(3, 2), torch.randn(3, 2)
    eager_dct, compiled_dct = {"b": 0}, {"b": 0}
    expected = outcome(fn, x.clone(), y.clone(), eager_dct)
    actual = outcome(bytegraph.compile(fn, backend="eager"), x.clone(), y.clone(), compiled_dct)
    assert_same_value(actual, expected)
    assert_same_value(compiled_dct, eager_dct, "dct after the call")


def fill_expanded(x):
    z = torch.zeros(1, 2).expand(3, 2)
    z.fill_(2.0)
    return x * z


def test_fill_into_expanded_tensor_stays_in_the_graph(differential, counting_backend) -> None:
    compiled = differential.compile(fill_expanded)
    differential.check(fill_expanded, compiled, (torch.randn(3, 2),))
    assert counting_backend.calls == 1


# -- an op that fails only on data: the call reruns as Python, eager's state behind it ----


def index_fails_after_append(x, lst, idx):
    lst.append(x.sum())
    return x[idx] + 1


def index_fails_with_star_arguments(x, lst, *rest, scale=2, **options):
    lst.append(len(rest) + len(options))
    return x[rest[0]] * scale


def index_fails_after_a_break(x, lst, idx):
    lst.append(1)
    print("a break")
    lst.append(2)
    return torch.gather(x, 0, idx)


class Indexer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x, idx):
        self.calls += 1
        return x.index_select(0, idx) * 2


@pytest.mark.parametrize(
    ("fn", "extra"),
    [(index_fails_after_append, ()), (index_fails_with_star_arguments, ()),
     (index_fails_after_a_break, ())],
)
def test_a_graph_that_fails_on_data_leaves_eagers_state(fn, extra, capsys) -> None:
    x = torch.randn(3)
    for idx in (torch.tensor([1]), torch.tensor([7])):  # in range, then out of range
        eager_lst, compiled_lst = [], []
        args = (idx,) if fn is not index_fails_with_star_arguments else (idx, 5)
        expected = outcome(fn, x, eager_lst, *args)
        actual = outcome(bytegraph.compile(fn, backend="eager"), x, compiled_lst, *args)
        assert_same_value(actual, expected)
        assert_same_value(compiled_lst, eager_lst, "lst after the call")


def test_a_module_whose_graph_fails_on_data_counts_its_call_once() -> None:
    eager, compiled_module = Indexer(), Indexer()
    compiled = bytegraph.compile(compiled_module, backend="eager")
    x = torch.randn(3)
    for idx in (torch.tensor([0, 2]), torch.tensor([3])):
        assert_same_value(outcome(compiled, x, idx), outcome(eager, x, idx))
        assert compiled_module.calls == eager.calls


def index_fails_after_in_place_write(x, lst, idx):
    lst.append(1)
    x.add_(1)
    return x[idx]


def test_a_failing_graph_that_wrote_in_place_is_not_rerun() -> None:
    """Rerunning would add twice: the exception leaves as it is (the list stays short)."""
    x = torch.zeros(3)
    compiled_lst: list = []
    compiled = bytegraph.compile(index_fails_after_in_place_write, backend="eager")
    with pytest.raises(IndexError):
        compiled(x, compiled_lst, torch.tensor([9]))
    assert torch.equal(x, torch.ones(3)), "the in-place add ran exactly once"


def index_fails_before_in_place_write(x, lst, idx):
    lst.append(1)
    y = x[idx]
    x.add_(1)
    return y


def loss_fails_before_in_place_write(x, lst, idx):  # fuzz seed 14368, index 68
    lst.extend([1, 1])
    x.mul_(torch.nn.CrossEntropyLoss()(x, 3 * x.argmax(1)))


@pytest.mark.parametrize(
    "fn", [index_fails_before_in_place_write, loss_fails_before_in_place_write]
)
def test_a_graph_failing_before_its_first_write_reruns(fn) -> None:
    """The inputs' version counters are unchanged: nothing was written, the call reruns as
    Python and eager's state is behind it (the list's append); written once, not twice."""
    base = torch.tensor([[0.5, -1.0, 2.0, 0.0], [1.5, 0.25, -0.5, 3.0]])
    for idx in (torch.tensor([1]), torch.tensor([7])):  # in range, then out of range
        results = []
        for run in (fn, bytegraph.compile(fn, backend="eager")):
            x, lst = base.clone(), [0]
            results.append((outcome(run, x, lst, idx), lst, x))
        assert_same_value(results[1], results[0])
    assert results[0][0][0] == "IndexError", results[0][0]


# -- ops eager refuses for mixed floating dtypes (meta kernels compute them anyway) -------


def linear_of_double_after_del(x, lst, linear):  # seed 0, index 5 (widened grammar)
    if lst:
        del lst[0]
    return linear(x)


def mixed_dtype_ops(x, lst, linear):
    lst.append(1)
    x.mul_(2.0)  # an in-place op: the graph cannot simply rerun as Python
    return x @ linear.weight, torch.einsum("ij,jk->ik", x, linear.weight)


@pytest.mark.parametrize("fn", [linear_of_double_after_del, mixed_dtype_ops])
def test_mixed_dtypes_raise_as_in_eager(fn) -> None:
    linear = torch.nn.Linear(2, 2)
    x = torch.randn(2, 2, dtype=torch.double)
    eager_lst, compiled_lst = [3, 0], [3, 0]
    expected = outcome(fn, x, eager_lst, linear)
    actual = outcome(bytegraph.compile(fn, backend="eager"), x, compiled_lst, linear)
    assert expected[0] == "RuntimeError"
    assert_same_value(actual, expected)
    assert_same_value(compiled_lst, eager_lst, "lst after the call")


def index_fails_after_in_place_on_a_temporary(x, lst, idx):
    lst.append(1)
    y = (x + 1).relu_()
    y.view(-1)[0] = 5.0
    return y[idx]


def index_fails_after_in_place_on_an_input_view(x, lst, idx):
    lst.append(1)
    x.t()[0].mul_(2.0)
    return x[idx]


def test_only_writes_into_inputs_keep_a_failing_graph_from_rerunning() -> None:
    x = torch.ones(2, 2)
    eager_lst, compiled_lst = [], []
    fn = index_fails_after_in_place_on_a_temporary
    expected = outcome(fn, x, eager_lst, torch.tensor([4]))
    actual = outcome(bytegraph.compile(fn, backend="eager"), x, compiled_lst, torch.tensor([4]))
    assert expected[0] == "IndexError"
    assert_same_value(actual, expected)
    assert compiled_lst == eager_lst == [1], "a temporary's in-place ops do not stop the rerun"
    compiled = bytegraph.compile(index_fails_after_in_place_on_an_input_view, backend="eager")
    with pytest.raises(IndexError):
        compiled(x, compiled_lst, torch.tensor([4]))
    assert torch.equal(x, torch.tensor([[2.0, 1.0], [2.0, 1.0]])), "written once, not rerun"


# -- in-place writes whose source shares the written memory (W1, W2, W3) ------------------


def index_add_of_itself_after_extend(x, lst, y):  # seed 100, index 519
    lst.extend([1, 1])
    x.index_add_(0, torch.arange(x.shape[0]), x)
    return x


def scatter_of_itself_caught(x, lst, y):  # seed 102, index 978
    try:
        x.scatter_(1, x.argsort(1), x)
    except RuntimeError as e:
        lst.append(str(e))
    return x + 1


@torch.no_grad()
def index_add_no_grad(x, y):
    y.index_add_(0, torch.arange(x.shape[0]), x)
    return y


def index_add_of_an_alias_in_no_grad(x, lst, y):  # seed 103, index 87, called with y is x
    lst.append(1)
    return x + index_add_no_grad(x, y)


def add_of_a_transposed_self(x, lst, y):
    lst.append(2)
    x.add_(x.t())
    return x


def add_of_itself_stays_in_the_graph(x, lst, y):
    x.add_(x)
    x += x
    x[0].mul_(x[0])
    return x


@pytest.mark.parametrize(
    "fn", [index_add_of_itself_after_extend, scatter_of_itself_caught,
           index_add_of_an_alias_in_no_grad, add_of_a_transposed_self,
           add_of_itself_stays_in_the_graph],
)
def test_writes_overlapping_another_argument_behave_as_eager(fn) -> None:
    base = torch.randn(4, 4)
    results = []
    for compiled in (False, True):
        x = base.clone()
        lst: list = []
        run = bytegraph.compile(fn, backend="eager") if compiled else fn
        results.append((outcome(run, x, lst, x), x, lst, torch.is_grad_enabled()))
        torch.set_grad_enabled(True)
    assert_same_value(results[1], results[0])


def test_a_write_into_itself_is_one_graph(counting_backend) -> None:
    compiled = bytegraph.compile(
        add_of_itself_stays_in_the_graph, backend=counting_backend, fullgraph=True
    )
    x = torch.randn(3, 3)
    expected = add_of_itself_stays_in_the_graph(x.clone(), [], None)
    assert_same_value(compiled(x, [], None), expected)
    assert counting_backend.calls == 1


# -- a graph failing inside a no_grad block puts grad mode back ---------------------------


def fails_in_no_grad_after_a_write(x, lst, idx):  # no rerun: it wrote into x
    with torch.no_grad():
        x.mul_(2.0)
        y = x[idx]
    return y


def fails_in_no_grad_then_catches(x, lst, idx):
    try:
        with torch.no_grad():
            y = x[idx] * 2
    except IndexError:
        y = x * 3  # eager computes this with grad enabled again
    lst.append(y.requires_grad)
    return y


@pytest.mark.parametrize("fn", [fails_in_no_grad_after_a_write, fails_in_no_grad_then_catches])
def test_a_graph_failing_in_no_grad_restores_grad_mode(fn) -> None:
    base = torch.randn(3, requires_grad=True)
    results = []
    for compiled in (False, True):
        x = base.detach().clone().requires_grad_(fn is fails_in_no_grad_then_catches)
        lst: list = []
        run = bytegraph.compile(fn, backend="eager") if compiled else fn
        results.append((outcome(run, x, lst, torch.tensor([5])), lst, torch.is_grad_enabled()))
        torch.set_grad_enabled(True)
    assert_same_value(results[1], results[0])


# -- a slice of a constant list that eager refuses ------------------------------------------


def slice_with_a_float_bound(x, lst, bound):  # seed 104, index 690
    acc = []
    acc.extend("a b c".split()[:bound % 3])
    return x + len(acc)


def slice_with_a_zero_step(x, lst, step):
    return x + len([1, 2, 3][::step])


@pytest.mark.parametrize(
    ("fn", "value"), [(slice_with_a_float_bound, 2.5), (slice_with_a_zero_step, 0)]
)
def test_a_slice_eager_refuses_raises_the_same_error(fn, value) -> None:
    x = torch.randn(2)
    expected = outcome(fn, x, [], value)
    assert expected[0] in ("TypeError", "ValueError")
    assert_same_value(outcome(bytegraph.compile(fn, backend="eager"), x, [], value), expected)


def item_stores_from_views_of_itself(x):
    x[0] += 1
    x[:, 1:] *= 2
    x[1] = x[1] * 3
    return x


def item_store_from_an_overlapping_view(x):
    x[1:] = x[:-1]
    return x


def item_store_from_another_row(x):
    rows = x.view(3, 2, 2)
    first = rows[0]
    first[..., 1:2] = rows[1][..., 1:2]  # Cosmos3's rotary frequencies: disjoint rows
    return x


def masks_of_views_of_one_tensor(x):
    mask = x > 0  # a & b and a | b of two views of one tensor write nothing
    return (mask.view(3, 4, 1) & mask.view(3, 1, 4)) | mask.view(3, 1, 4)


@pytest.mark.parametrize(
    ("fn", "stores_in_graph"),
    [(item_stores_from_views_of_itself, 3), (item_store_from_an_overlapping_view, 0),
     (item_store_from_another_row, 1)],
)
def test_item_stores_from_views_of_the_same_tensor(fn, stores_in_graph, counting_backend) -> None:
    x = torch.randn(3, 4)
    expected = outcome(fn, x.clone())
    assert_same_value(outcome(bytegraph.compile(fn, backend=counting_backend), x.clone()), expected)
    stores = [
        n for gm in counting_backend.graphs for n in gm.graph.nodes
        if n.target is operator.setitem
    ]
    assert len(stores) == stores_in_graph


def test_operators_on_views_of_one_tensor_are_no_writes(counting_backend) -> None:
    """``operator.and_`` and ``or_`` end in an underscore but write nothing: two views of
    one mask combined (CPM-Ant's attention mask) are one graph, not a refused write."""
    compiled = bytegraph.compile(
        masks_of_views_of_one_tensor, backend=counting_backend, fullgraph=True
    )
    x = torch.randn(3, 4)
    assert torch.equal(compiled(x), masks_of_views_of_one_tensor(x))
    assert counting_backend.calls == 1


# -- autograd facts of inputs: read first inside no_grad, or views of a base --------------


def requires_grad_read_in_no_grad(x, y, lst):  # seed 1016, index 241
    y.mul_(x.sum())
    lst.append(len({v % 3 for v in lst}))
    bytegraph.graph_break()  # the resume function first reads y inside the block
    with torch.set_grad_enabled(False):
        if y.requires_grad:
            out = x + 1
        else:
            out = x * 100
    return out, y.is_leaf


def test_an_input_first_read_in_no_grad_keeps_requires_grad(counting_backend) -> None:
    x = torch.randn(3, requires_grad=True)
    results = []
    for run in (requires_grad_read_in_no_grad,
                bytegraph.compile(requires_grad_read_in_no_grad, backend=counting_backend)):
        lst = [2, 5]
        results.append((run(x, torch.ones(3), lst), lst))
    assert_same_value(results[1], results[0])
    assert counting_backend.calls == 2


def write_into_a_view_of_a_leaf(x, y, w, mod):  # seed 1009, index 779: y is x, a view
    mod.extra = x
    y[0] = w
    x.relu_()
    return x


def test_in_place_on_a_view_input_follows_autograd_as_eager() -> None:
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        x = torch.randn(4, 5).t()  # a view of a leaf that does not require grad
        w = torch.randn(4, requires_grad=True)
        mod = torch.nn.Module()
        run = bytegraph.compile(write_into_a_view_of_a_leaf, backend="eager") if compiled else (
            write_into_a_view_of_a_leaf
        )
        results.append((outcome(run, x, x, w, mod), "extra" in vars(mod)))
    assert results[0][0][0] == "RuntimeError"
    assert_same_value(results[1], results[0])


# -- a missing attribute: its absence from the class is guarded ---------------------------


class Plain:
    pass


class PlainChild(Plain):
    pass


def has_a(x, obj):
    return x + 1 if hasattr(obj, "a") else x - 1


def a_or_zero(x, obj):
    return x + getattr(obj, "a", 0)


def new_object_has_a(x):
    return x + 1 if hasattr(PlainChild(), "a") else x - 1


@pytest.mark.parametrize("fn", [has_a, a_or_zero])
@pytest.mark.parametrize("owner", [Plain, PlainChild])
def test_a_class_attribute_added_later_is_seen(fn, owner, monkeypatch) -> None:
    compiled = bytegraph.compile(fn, backend="eager")
    obj, x = PlainChild(), torch.zeros(1)
    assert_same_value(compiled(x, obj), fn(x, obj))
    monkeypatch.setattr(owner, "a", 5, raising=False)
    assert_same_value(compiled(x, obj), fn(x, obj))
    assert len(compiled.entries) == 2


def test_a_new_object_sees_a_class_attribute_added_later(monkeypatch) -> None:
    compiled = bytegraph.compile(new_object_has_a, backend="eager")
    x = torch.zeros(1)
    assert_same_value(compiled(x), new_object_has_a(x))
    monkeypatch.setattr(Plain, "a", 5, raising=False)
    assert_same_value(compiled(x), new_object_has_a(x))


# -- a break while a generator's bound method waits on the stack --------------------------


def accumulate(t):
    total = 0
    while True:
        got = yield t * total
        total += 1 if got is None else got


def send_to_unstarted_after_a_break(x, lst):  # seed 11, index 846
    gen = accumulate(x)
    return gen.send(x.argmax().item())


def send_to_started_after_a_break(x, lst):
    gen = accumulate(x)
    lst.append(next(gen))
    return gen.send(print("a break") or len(lst))


@pytest.mark.parametrize("fn", [send_to_unstarted_after_a_break, send_to_started_after_a_break])
def test_a_method_of_a_generator_crosses_a_break(fn) -> None:
    """The resume function binds ``send`` again in its prologue, which the trace cannot model
    on a generator object: the resume function runs as Python, never a break at index -2."""
    x = torch.randn(3)
    eager_lst, compiled_lst = [], []
    expected = outcome(fn, x, eager_lst)
    actual = outcome(bytegraph.compile(fn, backend="eager"), x, compiled_lst)
    assert_same_value(actual, expected)
    assert_same_value(compiled_lst, eager_lst, "lst after the call")


# -- a cache entry keeps its break reasons, never the frames their tracebacks reach ---------


def closing(x, log):
    try:
        while True:
            yield x
    finally:
        log.append("closed")


def generator_local_across_breaks(x, w, log):  # seed 12, index 440
    for _ in range(2):
        gen = closing(x, log)
        x = x + next(gen)
        print("a loop that runs as Python")
    if w.grad is None:  # a break in the resume function, recorded on its cache entry
        w.requires_grad_(True)
    return x


def test_break_reasons_keep_no_user_frames_alive(capsys) -> None:
    """Each generator's ``finally`` runs when its last reference goes, as in eager: the
    Unsupported kept on a cache entry must not hold, through its traceback's frames, the
    Python part's frame and the generator in its locals."""
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    expected = generator_local_across_breaks(x, torch.ones(2), eager_log)
    compiled = bytegraph.compile(generator_local_across_breaks, backend="eager")
    actual = compiled(x, torch.ones(2), compiled_log)
    assert_same_value(actual, expected)
    assert compiled_log == eager_log == ["closed", "closed"]


class CodedError(Exception):
    def __init__(self, code, note="bad"):
        super().__init__(code, note)
        self.code = code


def must_small(v):
    if v > 3:
        raise CodedError(v, "big")
    return v


def via_two(v):
    return must_small(v) + 1


def generator_paused_when_a_routed_call_raises(x, lst, log):  # seed 22, index 659
    gen = closing(x, log)  # paused inside its try: the frame runs as Python
    x = x + next(gen)
    return x + via_two(sum(lst))  # a call routed through bytegraph, traced raising


@contextlib.contextmanager
def swallowing(*kinds):
    try:
        yield len(kinds)
    except kinds:
        pass


def raises_through_a_manager(x):
    with swallowing(KeyError):
        raise ValueError(1) from KeyError("k")


def generator_paused_when_a_manager_passes_a_raise(x, lst, log):  # seed 23, index 309
    gen = closing(x, log)
    x = x + next(gen)
    return raises_through_a_manager(x)


@pytest.mark.parametrize(
    "fn",
    [generator_paused_when_a_routed_call_raises, generator_paused_when_a_manager_passes_a_raise],
)
def test_a_traced_raise_keeps_no_frame_of_the_caller_alive(fn) -> None:
    """Each step drops the traceback of the raise it handles, so frames that held it in a
    local (a generator's frame being left) make no cycle with the frame that routed the call."""
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    expected = outcome(fn, x, [5], eager_log)
    actual = outcome(bytegraph.compile(fn, backend="eager"), x, [5], compiled_log)
    assert expected[0] in ("CodedError", "ValueError")
    assert_same_value(actual, expected)
    assert compiled_log == eager_log == ["closed"]


class PassingManager:
    def __init__(self, acc):
        self.acc = acc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.acc.append("exit")
        return False


def raise_after_a_break_in_a_try_in_a_with(x, acc):  # seed 21, index 90
    with PassingManager(acc):
        try:
            bytegraph.graph_break()
            raise KeyError(1)
        except ArithmeticError as e8:
            acc.append(e8)
        except KeyError as e10:
            acc.append(e10.__traceback__ is None)
    return x + 1


def test_a_resume_function_run_as_python_is_not_routed(differential) -> None:
    """Its code enters try ranges in the middle: decoded again to route its calls, the
    ``bytecode`` package computed a negative stack depth (an internal error), or a wrong
    one (an UnboundLocalError inside the router). It runs as it is."""
    compiled = differential.compile(raise_after_a_break_in_a_try_in_a_with)
    for _ in range(2):
        differential.check(raise_after_a_break_in_a_try_in_a_with, compiled, (torch.ones(2), []))


class CountedStats:
    count = 0

    def __init__(self, t):
        self.t = t
        CountedStats.count += 1

    def __len__(self):
        return self.t.shape[0]


class HashedKey:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, HashedKey) and self.v == other.v

    def __hash__(self):
        return hash(self.v)


def loop_break_in_a_try(x, y, w, n, lst, dct):  # seed 11, index 730
    out = x + y
    try:
        w9 = 0
        while True:
            if w9 > 1:
                break
            t10 = x * (w.grad if w.grad is not None else w)  # noqa: F841
            raise KeyError(len(CountedStats(y * dct.get("c", 2)))) from None
        lst.append(1 < n <= 10)
    except:  # noqa: E722
        out.relu_()
    lst.insert(0, max({HashedKey(1): 5}.get(HashedKey(PassingManager(2).acc + 1), 0), n))
    return out


def test_code_entered_inside_a_try_has_room_for_its_handlers(differential) -> None:
    """``bytecode`` sized the frame of a resume function entered inside a try range
    from the flow of its prologue, missing the handler's depth: the frame was too
    small, and running it corrupted memory (a call of a stale object, or a segfault)."""
    compiled = differential.compile(loop_break_in_a_try)
    for _ in range(3):
        args = (torch.randn(2, 4), torch.randn(2, 4), torch.randn(4, requires_grad=True), 1,
                [1, 2], {"a": 3})
        differential.check(loop_break_in_a_try, compiled, args)
    base = loop_break_in_a_try.__code__.co_stacksize
    assert compiled.resume_cache
    assert all(r.fn.__code__.co_stacksize >= base for r in compiled.resume_cache.values())


@pytest.mark.parametrize("seed, index", [(31, 454), (29467, 82), (0, 2), (0, 37)])
def test_generated_program_agrees_with_eager(seed, index) -> None:
    """Findings kept as the generated programs themselves, run through the fuzz runner
    (which compares results, exceptions, globals and arguments after each call):

    * 31/454: a resume function compiled while a Python part runs (that part's frame on
      the f_back chain) traced a StopIteration turned into a RuntimeError (PEP 479). The
      StopIteration kept its traceback and a local of the generator machinery held it:
      a frame cycle, so the Python part's paused generator ran its ``finally`` when the
      collector came by, not at the call's end as in eager.
    * 29467/82: a resume function entered inside a try range: ``bytecode`` computed its
      stack size along the prologue's flow and failed ("negative size", an internal
      error); its size is now bounded from the base code's.
    * 0/2 and 0/37 (3.13): a resume function's arguments moved the frame's locals to
      numbers a fused pair of local loads (LOAD_FAST_LOAD_FAST, 4 bits each) cannot
      name: it read other locals (a wrong result) or past the frame (a crash). Entered
      code now splits the fused pairs.
    """
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.fuzz.grammar import generate
    from tests.fuzz.runner import run_program

    outcome_ = run_program(generate(seed, index))
    assert outcome_.category is None, outcome_.detail


# -- a return from a with block inside a loop that runs as Python ------------------------------


class Logged:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append("exit")
        return False


class Mode(enum.Enum):  # Mode(1): a call the trace refuses, so the loop runs as Python
    ON = 1
    OFF = 2


def return_from_user_with_in_loop(x, y):  # seed 19, index 179
    log = []
    out = x + y
    with Logged(log):
        for _ in range(2):
            if Mode(1) is Mode.ON:
                return out, log
    return x, log


def return_from_grad_mode_with_in_loop(x, y):  # seed 11, index 183
    out = x * y
    with torch.set_grad_enabled(False):
        for i in range(2):
            if Mode(i + 1) is Mode.ON:
                return out, i
    return x, -1


@pytest.mark.parametrize("fn", [return_from_user_with_in_loop, return_from_grad_mode_with_in_loop])
def test_a_return_from_a_with_block_in_a_python_loop(fn, differential, counting_backend) -> None:
    """The loop runs as Python; its return path pops the with block's __exit__, which
    lies below the loop's stack, so it cannot leave into a resume function that is given
    the loop's entry stack (it returned the bound __exit__ instead of the tuple)."""
    compiled = differential.compile(fn)
    for _ in range(2):
        differential.check(fn, compiled, (torch.randn(3), torch.randn(3)))
    assert counting_backend.calls == 1


def delete_unbound_cell(x):  # seed 2612, index 5603
    out = x + 1
    for _ in range(3):
        del cell_var  # noqa: F821  (unbound: eager raises here)
    else:
        print("after the loop")
        cell_var = x

    def reads_cell():
        return cell_var

    return out, reads_cell


def test_deleting_an_unbound_cell_raises_as_in_eager(capsys) -> None:
    """``del`` of a cell variable before it is bound raises in eager; the trace went on
    (and printed from the loop's else clause)."""
    expected = outcome(delete_unbound_cell, torch.ones(2))
    printed = capsys.readouterr().out
    compiled = bytegraph.compile(delete_unbound_cell, backend="eager")
    assert outcome(compiled, torch.ones(2)) == expected
    assert capsys.readouterr().out == printed == ""


# -- one tensor passed for two arguments after a trace with two ----------------------------


def branch_on_identity(x, y, t):  # seed 2001, index 242
    out = x + y
    if y is x:
        out = out + t
    return out


def write_one_read_other(x, y):
    x.add_(1)
    return y * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn, extra", [(branch_on_identity, (torch.ones(2),)),
                                       (write_one_read_other, ())],
                         ids=["branch_on_identity", "write_one_read_other"])
def test_one_tensor_for_two_arguments_after_a_trace_with_two(fn, extra, backend) -> None:
    """``y is x`` folded to False, and a graph writing into ``x`` read ``y`` as another
    tensor, with no guard that the two stay distinct: a later call passing one tensor for
    both hit the entry (the branch not taken; under AOTAutograd, ``y``'s old value)."""
    compiled = bytegraph.compile(fn, backend=backend)
    x, y = torch.zeros(3, 2), torch.zeros(3, 2)
    assert_same_value(compiled(x.clone(), y.clone(), *extra), fn(x.clone(), y.clone(), *extra))
    eager_x, compiled_x = x.clone(), x.clone()
    expected = fn(eager_x, eager_x, *extra)
    assert_same_value(compiled(compiled_x, compiled_x, *extra), expected)
    assert_same_value(compiled_x, eager_x)
