"""Side effects: container mutations, globals, closure cells, in-place tensors, escapes.

Every program runs eagerly and compiled, twice each, and the complete state
afterwards (result, inputs, the globals and cells it touches) must match
(``_state.check_state_program``). The graph count says where a program is
one graph and where a mutation that cannot be replayed faithfully makes the
frame break (or run as Python): never a lost or doubled mutation.
"""

from __future__ import annotations

import pytest
import torch
from _state import StateCorpus, check_state_program

import bytegraph
from bytegraph.exc import Unsupported
from bytegraph.side_effects import SideEffects
from bytegraph.variables.base import (
    AttributeMutationExisting,
    AttributeMutationNew,
    ValueMutationExisting,
    ValueMutationNew,
)
from bytegraph.variables.containers import ListVariable

corpus = StateCorpus()
add = corpus.add


def t3() -> tuple:
    return (torch.randn(3),)


def t_list() -> tuple:
    return (torch.randn(3), [1, 2, 3])


def t_tlist() -> tuple:
    return (torch.randn(3), [torch.randn(3), torch.randn(3)])


def t_dict() -> tuple:
    return (torch.randn(3), {"a": 1, "b": torch.randn(3)})


def t_two() -> tuple:
    return (torch.randn(3), torch.randn(3))


class Box:
    def __init__(self, value):
        self.value = value


# -- lists of the frame --------------------------------------------------------------------


@add(t_list)
def list_append(x, items):
    items.append(x * 2)
    return x + 1


@add(t_list)
def list_extend_insert(x, items):
    items.extend([x, 4])
    items.insert(0, x * 3)
    return x.sum()


@add(t_list)
def list_pop_remove(x, items):
    last = items.pop()
    items.remove(1)
    return x * last


@add(t_list)
def list_clear_then_refill(x, items):
    items.clear()
    items.append(x - 1)
    return x


@add(t_list)
def list_reverse_and_sort(x, items):
    items.reverse()
    items.sort()
    return x * items[0]


@add(t_list)
def list_setitem_and_slice(x, items):
    items[0] = x + 1
    items[1:] = [7, 8, 9]
    return x


@add(t_list)
def list_delitem(x, items):
    del items[1]
    del items[:1]
    return x * len(items)


@add(t_tlist)
def list_of_tensors_rewritten(x, items):
    items[0] = items[0] + x
    items[1].add_(1)
    return items[0] * items[1]


@add(t_tlist)
def list_pop_tensor_returned(x, items):
    t = items.pop(0)
    return t * x


@add(t_list)
def list_iadd(x, items):
    items += [x]
    return x * len(items)


@add(t_list)
def list_append_in_loop(x, items):
    for i in range(3):
        items.append(x * i)
    return x


@add(t_list)
def list_mutated_then_read_back(x, items):
    items.append(10)
    return x * len(items) + items[-1]


@add(t_list)
def list_mutated_by_helper(x, items):
    def push(lst, v):
        lst.append(v)

    push(items, x + 1)
    push(items, 5)
    return x


# -- dicts of the frame --------------------------------------------------------------------


@add(t_dict)
def dict_setitem(x, d):
    d["c"] = x * 2
    d["a"] = 5
    return x


@add(t_dict)
def dict_update_pop(x, d):
    d.update({"z": x, "a": 3})
    v = d.pop("b")
    return v + x


@add(t_dict)
def dict_del_and_clear(x, d):
    del d["a"]
    out = d["b"] * x
    d.clear()
    d["new"] = 1
    return out


@add(t_dict)
def dict_setdefault(x, d):
    d.setdefault("a", 100)
    d.setdefault("q", x)
    return x + d["a"]


@add(lambda: (torch.randn(3), {"inner": [1, 2], "n": 0}))
def dict_nested_list_mutated(x, d):
    d["inner"].append(x)
    d["n"] = d["n"] + 1
    return x * d["n"]


@add(t_dict)
def dict_tensor_value_updated(x, d):
    d["b"] = d["b"] * x
    return d["b"].sum()


# -- module globals ------------------------------------------------------------------------

COUNT = 0
TENSOR = torch.zeros(3)
REGISTRY: list = []
TABLE: dict = {"k": 1}
SCALE = 2.0


@add(t3, globals_=("COUNT",))
def global_int_increment(x):
    global COUNT
    COUNT = COUNT + 1
    return x + COUNT


@add(t3, globals_=("TENSOR",))
def global_tensor_assigned(x):
    global TENSOR
    TENSOR = TENSOR + x
    return x * 2


@add(t3, globals_=("REGISTRY",))
def global_list_append(x):
    REGISTRY.append(x.sum())
    return x


@add(t3, globals_=("TABLE",))
def global_dict_rmw(x):
    TABLE["k"] = TABLE["k"] * 10
    TABLE["t"] = x
    return x + TABLE["k"]


@add(t3, globals_=("NEW_GLOBAL",))
def global_created(x):
    global NEW_GLOBAL
    NEW_GLOBAL = x * 3
    return x


@add(t3, globals_=("SCALE",))
def global_deleted(x):
    global SCALE
    y = x * SCALE
    del SCALE
    return y


@add(t3, globals_=("SCALE",))
def global_store_then_load(x):
    global SCALE
    SCALE = 5.0
    return x * SCALE


@add(t3, globals_=("COUNT",))
def global_written_twice(x):
    global COUNT
    COUNT = 1
    y = x * COUNT
    COUNT = COUNT + 10
    return y


def _bump_count(n):
    global COUNT
    COUNT += n


@add(t3, globals_=("COUNT",))
def global_written_by_helper(x):
    _bump_count(2)
    _bump_count(3)
    return x * COUNT


@add(t3, globals_=("REGISTRY", "BOXED"))
def global_new_object_escapes(x):
    global BOXED
    BOXED = Box(x + 1)
    REGISTRY.append(BOXED)
    return x


@add(t3, globals_=("TABLE",))
def global_new_dict_escapes(x):
    global TABLE
    TABLE = {"fresh": [x, 1]}
    return x * 2


# -- closure cells -------------------------------------------------------------------------


@add(t3, factory=True)
def nonlocal_counter():
    count = 0

    def f(x):
        nonlocal count
        count += 1
        return x * count

    return f


@add(t3, factory=True)
def nonlocal_tensor_accumulated():
    total = torch.zeros(3)

    def f(x):
        nonlocal total
        total = total + x
        return total * 2

    return f


@add(t3, factory=True)
def nonlocal_list_mutated():
    seen = []

    def f(x):
        seen.append(x * 2)
        return x

    return f


@add(t3, factory=True)
def nonlocal_written_by_inner_helper():
    state = 1

    def f(x):
        def bump():
            nonlocal state
            state = state * 3

        bump()
        bump()
        return x + state

    return f


@add(t3, factory=True)
def nonlocal_deleted():
    gone = 5

    def f(x):
        nonlocal gone
        y = x * gone
        del gone
        return y

    return f


@add(t3)
def cell_of_the_frame_needs_no_replay(x):
    acc = 0

    def inc(v):
        nonlocal acc
        acc += v

    inc(2)
    inc(3)
    return x * acc


# -- in-place tensor operations on inputs ---------------------------------------------------


@add(t3)
def inplace_add_method(x):
    x.add_(1)
    return x * 2


@add(t3)
def inplace_setitem_constant(x):
    x[0] = 5
    return x.sum()


@add(lambda: (torch.randn(4), torch.tensor([0, 2]), torch.randn(2)))
def inplace_setitem_tensor_index(x, idx, t):
    x[idx] = t
    return x + 1


@add(t_two)
def inplace_slice_assign(x, y):
    x[1:] = y[:2] * 2
    return y


@add(lambda: (torch.randn(3, 4), torch.randn(3)))
def inplace_column_assign(x, y):
    x[:, 1] = y
    return x.mean()


@add(lambda: (torch.randn(3), torch.randn(3), torch.empty(3)))
def inplace_out_argument(a, b, out):
    torch.add(a, b, out=out)
    return out * 2


@add(t_two)
def inplace_augmented_assign(x, y):
    x += y
    x *= 2
    return x


@add(lambda: (torch.randn(3, 3),))
def inplace_on_a_view(x):
    x[0].mul_(10)
    x.diagonal().zero_()
    return x.sum()


@add(t_two)
def inplace_then_read_again(x, y):
    x.mul_(y)
    z = x + 1
    x.sub_(1)
    return z, x


@add(t_two)
def inplace_returns_the_input(x, y):
    return x.add_(y)


@add(t_tlist)
def inplace_on_list_item(x, items):
    items[0].mul_(x)
    return items


# -- new objects: rebuilt only when they escape ----------------------------------------------


@add(t3)
def new_list_returned(x):
    out = [x, x * 2]
    out.append(x + 1)
    return out


@add(t3)
def new_dict_returned(x):
    out = {"a": x}
    out["b"] = [x * 2]
    return out


@add(t_list)
def new_list_stored_into_input(x, items):
    fresh = [x * 2]
    items.append(fresh)
    fresh.append(5)
    return x


@add(t3)
def new_list_does_not_escape(x):
    tmp = [x, x * 2]
    tmp.append(x * 3)
    tmp.pop(0)
    return tmp[0] + tmp[1]


@add(t3)
def new_object_does_not_escape(x):
    b = Box(x * 2)
    b.value = b.value + 1
    return b.value


@add(t3)
def same_new_list_returned_twice(x):
    shared = [x * 2]
    return shared, shared


@add(t3)
def comprehension_result_returned(x):
    return [x * i for i in range(3)], {i: x + i for i in range(2)}


# -- replay order: values are read before any store -------------------------------------------


@add(lambda: (torch.randn(3), Box(1), Box(2)))
def old_value_moved_to_another_object(x, a, b):
    old = a.value
    a.value = 10
    b.value = old
    return x * 2


@add(lambda: (torch.randn(3), [1, 2], [3]))
def old_item_moved_to_another_list(x, first, second):
    old = first[0]
    first[0] = 100
    second.append(old)
    return x * 2


@add(lambda: (torch.randn(3), Box(Box(1))))
def target_reached_through_a_rebound_attribute(x, outer):
    inner = outer.value
    outer.value = Box(2)
    inner.value = 3
    return x * 2


@add(lambda: (torch.randn(3), Box(1), Box(2)))
def swap_attributes(x, a, b):
    a.value, b.value = b.value, a.value
    return x * 2


# -- aliasing: one object through two sources -------------------------------------------------


def _aliased_list() -> tuple:
    shared = [1, 2]
    return (torch.randn(3), shared, shared)


@add(_aliased_list)
def aliased_list_mutated_then_read(x, a, b):
    a.append(3)
    return x * len(b)


def _aliased_box() -> tuple:
    shared = Box(2.0)
    return (torch.randn(3), shared, shared)


@add(_aliased_box)
def aliased_object_mutated_then_read(x, a, b):
    a.value = 5.0
    return x * b.value


def _list_in_dict() -> tuple:
    shared = [1]
    return (torch.randn(3), {"k": shared}, shared)


@add(_list_in_dict)
def aliased_list_inside_dict(x, d, items):
    d["k"].append(x)
    return x * len(items)


def _aliased_tensor() -> tuple:
    t = torch.randn(3)
    return (t, t)


@add(_aliased_tensor)
def aliased_tensor_inplace(x, y):
    x.add_(1)
    return y * 2


def _global_alias() -> tuple:
    return (torch.randn(3),)


@add(_global_alias, globals_=("REGISTRY",))
def global_list_reached_twice(x):
    alias = REGISTRY
    alias.append(1)
    return x * len(REGISTRY)


# -- builtins and helpers that mutate ------------------------------------------------------------


@add(lambda: (torch.randn(3), Box(1)))
def setattr_builtin(x, box):
    setattr(box, "value", x * 2)  # noqa: B010
    setattr(box, "extra", 3)  # noqa: B010
    return x


@add(lambda: (torch.randn(3), Box(1)))
def delattr_builtin(x, box):
    delattr(box, "value")
    return x + hasattr(box, "value")


@add(lambda: (torch.randn(3), Box([])))
def attribute_list_mutated(x, box):
    box.value.append(x * 2)
    box.value.append(2)
    return x


@add(lambda: (torch.randn(3), Box(None)))
def tensor_stored_on_object(x, box):
    box.value = x * 2
    return x + 1


@add(t3, graphs=0, globals_=("REGISTRY",))
def no_tensor_op_mutation_runs_as_python(x):
    REGISTRY.append(1)
    return x


@add(lambda: (torch.randn(3), [1, 2]), graphs=0)
def only_mutations_runs_as_python(x, items):
    items.append(x)
    items.reverse()
    return items


# -- mutations that cannot be replayed: the frame breaks, each mutation once -------------------


class Logged:
    """Its __setattr__ runs Python: inlined; the append and the raw store it makes are
    replayed, the method itself does not run again."""

    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)


@add(lambda: (torch.randn(3), Logged()))
def custom_setattr_effects_replayed_once(x, obj):
    y = x * 2
    obj.value = 1
    return y + 1


@add(lambda: (torch.randn(3), [1]), graphs=2)
def mutation_before_a_break_is_replayed_once(x, items):
    items.append(x * 2)
    y = x + 1
    bytegraph.graph_break()
    items.append(y)
    return y * 3


# The replay before a break reads inputs through their sources, which must still hold
# the inputs: the locals the break hands on are stored only after it.
@add(t_list, graphs=1, fullgraph=False)  # no tensor op before the break
def input_rebound_after_mutation_before_a_break(x, items):
    items.append(1)
    items = [2]
    bytegraph.graph_break()
    return x + len(items), items


@add(lambda: (torch.randn(3), Box(1)), graphs=2)
def object_rebound_after_store_before_a_break(x, box):
    box.value = x + 1
    box = Box(2)
    bytegraph.graph_break()
    return x * box.value, box.value


PROGRAMS = corpus.programs
assert len(PROGRAMS) >= 60
INPLACE = [
    p for p in PROGRAMS if p.name.startswith("inplace_") or p.name.startswith("aliased_tensor")
]


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_side_effect_program(prog, counting_backend) -> None:
    check_state_program(prog, counting_backend)


@pytest.mark.parametrize("prog", INPLACE, ids=lambda p: p.name)
def test_inplace_program_with_aot_eager(prog, counting_backend) -> None:
    """AOTAutograd functionalizes the graph: input mutations must still land once."""
    check_state_program(prog, counting_backend, backend="aot_eager")


# -- checks beyond the corpus recipe --------------------------------------------------------------


def test_inplace_mutation_happens_exactly_once_per_call(counting_backend) -> None:
    def f(x):
        x.add_(1)
        x[0] = x[0] * 2
        return x.sum()

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.zeros(3)
    compiled(x)
    assert x.tolist() == [2.0, 1.0, 1.0]
    compiled(x)
    assert x.tolist() == [6.0, 2.0, 2.0]
    assert counting_backend.calls == 1


def test_objects_that_do_not_escape_are_not_graph_outputs(counting_backend) -> None:
    def f(x):
        box = Box(x * 2)
        box.value = x * 3
        items = [x * 4]
        items.append(x * 5)
        return x + 1

    compiled = bytegraph.compile(f, backend=counting_backend)
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0))
    (gm,) = counting_backend.graphs
    (outputs,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    assert len(outputs) == 1


def test_distinct_objects_then_aliased_recompiles(counting_backend) -> None:
    """Traced with two objects; called with one object twice: the trace does not apply."""

    def f(x, a, b):
        a.value = 5.0
        return x * b.value

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.ones(3)
    assert compiled(x, Box(1.0), Box(1.0)).tolist() == [1.0, 1.0, 1.0]
    shared = Box(1.0)  # every guard on types and values would pass
    assert compiled(x, shared, shared).tolist() == [5.0, 5.0, 5.0]
    assert shared.value == 5.0
    assert len(compiled.entries) == 2


def test_distinct_lists_then_aliased_recompiles(counting_backend) -> None:
    def f(x, a, b):
        a.append(1)
        return x * len(b)

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.ones(3)
    assert compiled(x, [0], [0]).tolist() == [1.0] * 3
    shared = [0]
    assert compiled(x, shared, shared).tolist() == [2.0] * 3
    assert shared == [0, 1]
    assert len(compiled.entries) == 2


def test_aliased_lists_then_distinct_recompiles(counting_backend) -> None:
    def f(x, a, b):
        a.append(1)
        return x * len(b)

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.ones(3)
    shared = [0]
    assert compiled(x, shared, shared).tolist() == [2.0] * 3
    a, b = [0], [0]
    assert compiled(x, a, b).tolist() == [1.0] * 3
    assert (a, b) == ([0, 1], [0])
    assert len(compiled.entries) == 2


def test_global_counter_persists_across_calls(counting_backend) -> None:
    global COUNT
    COUNT = 0

    def f(x):
        global COUNT
        COUNT += 1
        return x + 1

    compiled = bytegraph.compile(f, backend=counting_backend)
    try:
        for expected in (1, 2, 3):
            compiled(torch.ones(2))
            assert expected == COUNT
    finally:
        COUNT = 0


def test_global_of_another_module_written_by_inlined_callee(counting_backend) -> None:
    import _state_helpers

    _state_helpers.HITS = 0
    compiled = bytegraph.compile(_state_helpers.calls_the_counter, backend=counting_backend)
    out = compiled(torch.ones(2))
    assert out.tolist() == [2.0, 2.0]
    assert _state_helpers.HITS == 1
    assert "HITS" not in globals()
    assert counting_backend.calls == 1


# -- the scope check of nested higher-order ops ------------------------------------------------


def test_scope_check_refuses_mutation_of_outer_values() -> None:
    side_effects = SideEffects()
    outer_new = ListVariable((), mutation_type=ValueMutationNew(1))
    existing = ListVariable((), mutation_type=ValueMutationExisting(0))
    side_effects.set_contents(outer_new, ())  # top level: both may change
    side_effects.set_contents(existing, ())
    with side_effects.enter_scope():
        inner = ListVariable((), mutation_type=side_effects.new_mutation(ValueMutationNew))
        assert inner.mutation_type == ValueMutationNew(2)
        side_effects.set_contents(inner, ())  # created in this scope: allowed
        for outer in (outer_new, existing):
            with pytest.raises(Unsupported) as info:
                side_effects.set_contents(outer, (outer,))
            assert info.value.kind == "side_effect"
        obj = ListVariable((), mutation_type=AttributeMutationExisting(0))
        with pytest.raises(Unsupported):
            side_effects.store_global({}, "G", obj)
        nested_obj = ListVariable((), mutation_type=side_effects.new_mutation(AttributeMutationNew))
        side_effects.store_attr(nested_obj, "x", obj)
    assert side_effects.scope == 1
    # An outer attribute store is refused when the body ends without undoing it.
    with pytest.raises(Unsupported), side_effects.enter_scope():
        side_effects.store_attr(obj, "x", obj)
    assert side_effects.scope == 1
    side_effects.set_contents(outer_new, (outer_new,))  # back at top level


def test_immutable_values_are_refused() -> None:
    side_effects = SideEffects()
    with pytest.raises(Unsupported) as info:
        side_effects.set_contents(ListVariable(()), ())
    assert info.value.kind == "side_effect"
