"""How guards/build.py writes a cache entry's guards into one function.

The fast form joins every condition with ``and`` as it is written (no
parentheses), renders a tensor's conditions once per snapshot and places each
source's read at its first use; these tests pin what that must not change:
each condition still means what it means alone, and the plain form (reports,
``first_failure``) names the condition that failed.
"""

from __future__ import annotations

import ast
import math

import torch

from bytegraph.guards.build import GuardFunctionBuilder, _built, _connected, build_guard_function
from bytegraph.guards.guard import Guard, GuardKind, TensorSnapshot
from bytegraph.guards.sources import AttrSource, GetItemSource, GlobalSource, LocalSource

X, Y, Z = LocalSource("x"), LocalSource("y"), LocalSource("z")


def two(x, y, z=None):
    return x, y, z


def _every_kind() -> list[Guard]:
    weight = GetItemSource(AttrSource(Z, "params"), "w")
    return [
        Guard(GuardKind.TENSOR_MATCH, X, TensorSnapshot.of(torch.zeros(3))),
        Guard(GuardKind.TYPE_MATCH, Z, Holder),
        Guard(GuardKind.TYPE_MATCH, AttrSource(Z, "params"), dict),
        Guard(GuardKind.TENSOR_MATCH, weight, TensorSnapshot.of(torch.zeros(2, 2))),
        Guard(GuardKind.CONSTANT_MATCH, AttrSource(Z, "n"), 3),
        Guard(GuardKind.CONSTANT_MATCH, AttrSource(Z, "nan"), math.nan),
        Guard(GuardKind.CONSTANT_MATCH, AttrSource(Z, "none"), None),
        Guard(GuardKind.ID_MATCH, AttrSource(Z, "fn"), math.floor),
        Guard(GuardKind.LEN_MATCH, AttrSource(Z, "items"), (list, 2)),
        Guard(GuardKind.DICT_KEYS, AttrSource(Z, "params"), (dict, ("w",))),
        Guard(GuardKind.SAME_OBJECT, AttrSource(Z, "alias"), AttrSource(Z, "items")),
        Guard(GuardKind.DISTINCT, AttrSource(Z, "other"), (AttrSource(Z, "items"),)),
        Guard(GuardKind.EMPTY, AttrSource(Z, "hooks")),
        Guard(GuardKind.KEY_ABSENT, AttrSource(Z, "__dict__"), "forward"),
        Guard(GuardKind.GLOBAL_ABSENT, GlobalSource("not_a_global_anywhere")),
        Guard(GuardKind.CLOSES_QUIETLY, AttrSource(Z, "items")),
        # A repeated subtree's helper (guards/subtrees.py); ``bool`` stands in for one.
        Guard(GuardKind.SUBTREE, AttrSource(Z, "items"), bool),
        # The ShapeEnv's text, which may hold ``or``: a condition of lower precedence.
        Guard(GuardKind.SHAPE, X, "x.size()[0] == 3 or x.size()[0] == 5"),
    ]


class Holder:
    def __init__(self) -> None:
        self.params = {"w": torch.zeros(2, 2)}
        self.n, self.nan, self.none, self.fn = 3, math.nan, None, math.floor
        self.items = [1, 2]
        self.alias, self.other, self.hooks = self.items, [1, 2], {}


def test_each_part_joins_with_and_as_it_reads_alone():
    """The fast form's body is the parts joined by ``and`` without parentheses: each one
    must be one operand of that ``and``, parsed as it parses alone."""
    assert {guard.kind for guard in _every_kind()} == set(GuardKind)  # a new kind: add it
    fast = _built(GuardFunctionBuilder(share_reads=True), _every_kind(), False)
    joined = ast.parse(fast.body(), mode="eval").body
    assert isinstance(joined, ast.BoolOp) and isinstance(joined.op, ast.And)
    alone = [ast.parse(fast.resolved(part), mode="eval").body for part in fast.parts]
    assert [ast.dump(v) for v in joined.values] == [
        ast.dump(v) for p in alone for v in (p.values if isinstance(p, ast.BoolOp)
                                             and isinstance(p.op, ast.And) else [p])
    ]


def test_every_kind_passes_for_the_values_it_was_built_from():
    guard = build_guard_function(_every_kind(), two)
    assert guard.check(torch.zeros(3), 0, Holder())
    assert guard.first_failure((torch.zeros(3), 0, Holder()), {}) is None


def test_a_shape_relation_with_or_keeps_the_conditions_before_it():
    """``x.shape == (3,) and ... and <size is 3> or <size is 5>`` would pass for any x of
    size 5: the relation comes parenthesized."""
    guards = [
        Guard(GuardKind.TENSOR_MATCH, X, TensorSnapshot.of(torch.zeros(3))),
        Guard(GuardKind.SHAPE, X, "x.size()[0] == 3 or x.size()[0] == 5"),
    ]
    guard = build_guard_function(guards, two)
    assert guard.check(torch.zeros(3), 0)
    assert not guard.check(torch.zeros(5), 0)
    assert guard.first_failure((torch.zeros(5), 0), {}) == "x.shape == (3,)"


class _EqualClasses(type(torch.Tensor)):
    """A metaclass under which every two tensor classes compare (and hash) equal."""

    def __eq__(cls, other: object) -> bool:
        return isinstance(other, type)

    def __hash__(cls) -> int:
        return 0


class TensorA(torch.Tensor, metaclass=_EqualClasses):
    pass


class TensorB(torch.Tensor, metaclass=_EqualClasses):
    pass


def test_tensors_of_equal_snapshots_of_different_classes_keep_their_own_type_checks():
    """A tensor's conditions are made once per snapshot; snapshots compare their classes
    with ``==``, which a metaclass may answer for classes that are not the same."""
    a, b = torch.zeros(2).as_subclass(TensorA), torch.zeros(2).as_subclass(TensorB)
    assert TensorSnapshot.of(a) == TensorSnapshot.of(b)
    guards = [
        Guard(GuardKind.TENSOR_MATCH, X, TensorSnapshot.of(a)),
        Guard(GuardKind.TENSOR_MATCH, Y, TensorSnapshot.of(b)),
    ]
    guard = build_guard_function(guards, two)
    assert guard.check(a, b)
    assert not guard.check(a, a)
    assert guard.first_failure((a, a), {}) == "type(y) is test_guard_function.TensorB"


def test_first_failure_names_the_condition_of_a_tensor_sharing_a_snapshot():
    """The plain form numbers its constants as the fast form does, tensors whose
    conditions were made once included."""
    x, w = torch.zeros(3), torch.zeros(3)
    guards = [
        Guard(GuardKind.TENSOR_MATCH, X, TensorSnapshot.of(x)),
        Guard(GuardKind.TYPE_MATCH, Y, float),
        Guard(GuardKind.TENSOR_MATCH, AttrSource(Z, "w"), TensorSnapshot.of(w)),
    ]
    guard = build_guard_function(guards, two)
    holder = Holder()
    holder.w = w
    assert guard.check(x, 1.0, holder)
    holder.w = w.double()
    assert not guard.check(x, 1.0, holder)
    assert guard.first_failure((x, 1.0, holder), {}) == "z.w.dtype is torch.float32"


def test_distinct_links_merge_into_groups_in_first_seen_order():
    a, b, c, d, e, f = (LocalSource(n) for n in "abcdef")
    groups = _connected([(b, a), (d, c), (f, e), (c, (a_again := LocalSource("a")), b)])
    assert groups == [[b, a, d, c], [f, e]]
    assert groups[0][1] is a and a_again == a  # the first source of a text stands for it


def test_distinct_links_that_extend_the_previous_one_join_its_group():
    """``m1 vs (m0,)``, ``m2 vs (m0, m1)``...: each link's others start with the previous
    link's sources, which stand in for them by one of theirs."""
    a, b, c, d, e, x = (LocalSource(n) for n in "abcdex")
    edges = [(b, a), (c, a, b), (d, a, b, c), (e, x), (x, e, a)]
    assert _connected(edges) == [[b, a, c, d, e, x]]
    assert _connected(edges[:4]) == [[b, a, c, d], [e, x]]


def _spy_on_guard_compiles(monkeypatch) -> list[str]:
    """The texts ``guards/compiled_text.py`` compiles from now on (its memo emptied)."""
    from bytegraph.guards import compiled_text

    texts: list[str] = []
    real_compile = compile

    def spying_compile(source, filename, mode, *args, **kwargs):
        texts.append(source)
        return real_compile(source, filename, mode, *args, **kwargs)

    monkeypatch.setattr(compiled_text, "compile", spying_compile, raising=False)
    monkeypatch.setattr(compiled_text, "_compiled", {})
    return texts


def test_a_recompile_for_new_sizes_reuses_the_compiled_guard_text(monkeypatch):
    """The guard text names its constants (``___t0``), so a recompile for new sizes
    compiles no new guard code, and each entry still checks its own sizes."""
    import bytegraph

    compiled_texts = _spy_on_guard_compiles(monkeypatch)

    def f(x):
        return x.sin() + 1

    cf = bytegraph.compile(f, backend="eager", dynamic=False)
    small, large = torch.randn(2, 3), torch.randn(4, 5)
    torch.testing.assert_close(cf(small), f(small))
    torch.testing.assert_close(cf(large), f(large))
    torch.testing.assert_close(cf(small), f(small))  # the first entry's own sizes
    assert len(cf.entries) == 2
    first, second = (entry.guard.check for entry in cf.entries)
    assert first.__code__ is second.__code__  # one compiled text, two sets of constants
    assert len(compiled_texts) == len(set(compiled_texts))
    passes = sorted((e.guard.check(small), e.guard.check(large)) for e in cf.entries)
    assert passes == [(False, True), (True, False)]


def test_a_callees_globals_are_read_through_its_module_dict_bound_as_a_constant(monkeypatch):
    """A global of another module's function is read from that module's dict, bound as a
    constant of the guard, not through ``__import__('sys').modules`` (a call per check).
    The entry still recompiles when the global changes, and it keeps reading the dict
    the callee reads where ``sys.modules`` later names another module."""
    import sys
    import types

    import bytegraph

    texts = _spy_on_guard_compiles(monkeypatch)
    helper = types.ModuleType("bytegraph_test_callee_module")
    exec("SCALE = 2.0\ndef scaled(x):\n    return x * SCALE\n", helper.__dict__)
    monkeypatch.setitem(sys.modules, helper.__name__, helper)

    def f(x):
        return helper.scaled(x) + 1

    cf = bytegraph.compile(f, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), f(x))
    reading_scale = [text for text in texts if "'SCALE'" in text]
    assert reading_scale and not any("__import__" in text for text in reading_scale)

    helper.SCALE = 3.0
    torch.testing.assert_close(cf(x), f(x))  # x * 3 + 1
    torch.testing.assert_close(cf(x), x * 3 + 1)
    assert len(cf.entries) == 2

    monkeypatch.setitem(sys.modules, helper.__name__, types.ModuleType(helper.__name__))
    torch.testing.assert_close(cf(x), f(x))  # helper.scaled still reads helper's SCALE
    assert len(cf.entries) == 2
