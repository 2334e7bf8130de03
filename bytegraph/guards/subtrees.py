"""Repeated module subtrees of a guard function, each kind checked by one helper.

A model's guard checks the same things on every copy of a repeated block: the
layers of an ``nn.Sequential`` of ``Linear``, or GPT-2's blocks, hold a few to a
few hundred guards each that differ only in the module they start from. Written
out flat, the guard function's text grows with every copy, and compile() of that
text was most of the time spent building a model's guard (GPT-2: 17 of 28 ms).

``factored`` rewrites the guards of the fast guard function so that each kind of
repeated subtree is checked by one helper, ``___h(___r)``, compiled once and
called on every copy:

* A *root* is a module source with an exact-type guard (not the frame's own
  arguments). It owns every guard whose source reaches it through attribute,
  item and call reads (``Source.expr()`` is then the root's text and more), up to
  the next root below, which it owns as a child. What is read through the
  root's ``__class__`` is the class's, guarded once under the first instance
  that looked it up: it stays with the caller.
* Two roots whose subtrees hold the same guards relative to the root (the same
  kinds, the same text after the root's, equal expected values; in any order)
  and the same kinds of child subtrees at the same places are copies of one kind.
* A kind with at least two copies gets a helper: its guards re-rooted onto the
  helper's argument, each child as a call of the child's own helper, or inline
  where the child's kind has one copy. A copy's guards leave the caller (the
  guard function, or the helper of the subtree above) for one ``SUBTREE`` guard
  there: the helper called on the root. A caller with several copies of a kind
  calls its helper once, on all of them (``guards/build.py``), and the helper
  loops over them: a call per root cost 4 % more than the checks written out
  flat on 60 Linear layers, and a loop as much as a call where there is one.

Guards that name a second source (aliasing) or that the ShapeEnv wrote stay in
the guard function itself, as do those on classes made per instance. The order
of the conditions changes (a subtree's come together, at its first one); they are
a conjunction of side-effect-free reads, each failure or exception a miss either
way. Reports and failure diagnosis read the plain form, one condition per guard.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

from bytegraph.guards.class_shapes import per_instance_class
from bytegraph.guards.guard import KEYED_BY_EXPECTED, Guard, GuardKind
from bytegraph.guards.sources import (
    AttrSource,
    CallResultSource,
    ChildSource,
    GetItemSource,
    LocalSource,
    Source,
    reroot_with,
)

HELPER_ARGUMENT = LocalSource("___r")
# Below this many guards, compiling them flat costs under a millisecond, about what
# finding the subtrees and compiling their helpers would (the 259 of a
# TransformerEncoderLayer: 3.3 ms flat, 3.4 factored).
MIN_GUARDS = 400
# The sources whose text is their base's followed by more: a suffix names the step.
_READS_ON = (AttrSource, GetItemSource, CallResultSource)
_IN_GUARD_FUNCTION = frozenset({  # name a second source, or are the ShapeEnv's text
    GuardKind.SAME_OBJECT, GuardKind.DISTINCT, GuardKind.SHAPE, GuardKind.GLOBAL_ABSENT,
})
_CLASS_CHECKS = (GuardKind.TYPE_MATCH, GuardKind.ID_MATCH)  # may be on a per-instance class
_BY_VALUE = (GuardKind.CONSTANT_MATCH, GuardKind.KEY_ABSENT)  # ``==`` and ``in``: no ``is``
_VALUE_KEYED = (int, str, bool, bytes, type(None))  # equal values check alike
_UNSEEN = object()
_RANKS = {kind: rank for rank, kind in enumerate(GuardKind)}

Item = Guard | Source  # in a subtree: a guard, or a child root


def factored(
    guards: Sequence[Guard], compile_helper: Callable[[list[Guard], bool], Callable[..., bool]]
) -> list[Guard]:
    """``guards`` with each repeated subtree's replaced by a ``SUBTREE`` guard whose
    expected value is the helper ``compile_helper`` made of the subtree's guards,
    re-rooted onto ``HELPER_ARGUMENT``; ``compile_helper(guards, several)`` makes a
    helper of one root, or (``several``) one that checks each of the roots it is
    given, for a caller with several copies of the kind. Unchanged where nothing
    repeats."""
    if len(guards) < MIN_GUARDS:
        return list(guards)
    roots = {g.source for g in guards if _is_root(g)}
    if len(roots) < 2:
        return list(guards)
    tree = _Tree(roots, compile_helper)
    for guard in guards:
        tree.add(guard)
    if not tree.has_repeats():
        return list(guards)
    return tree.expanded(tree.top)


def _is_root(guard: Guard) -> bool:
    expected = guard.expected
    return (
        guard.kind is GuardKind.TYPE_MATCH
        and isinstance(guard.source, ChildSource)
        and isinstance(expected, type)
        and issubclass(expected, nn.Module)
        and per_instance_class(guard) is None
    )


class _Tree:
    """The roots, what each owns, and the kinds of their subtrees."""

    def __init__(
        self, roots: set[Source], compile_helper: Callable[[list[Guard], bool], Callable[..., bool]]
    ) -> None:
        self.roots = roots
        self.top: list[Item] = []  # what stays in the guard function, in order
        self.items: dict[Source, list[Item]] = {}  # a root -> what it owns, in order
        self._owners: dict[int, Source | None] = {}  # by id (see _owner)
        self._kinds: dict[Source, int] = {}  # a root -> the number of its subtree's kind
        self._numbers: dict[tuple[Any, ...], int] = {}  # a kind's description -> its number
        self._copies: list[int] = []  # by kind number
        self._helpers: dict[tuple[int, bool], Callable[..., bool]] = {}
        self._compile_helper = compile_helper

    def add(self, guard: Guard) -> None:
        kind = guard.kind
        owner = None
        if kind not in _IN_GUARD_FUNCTION and (
            kind not in _CLASS_CHECKS or per_instance_class(guard) is None
        ):
            owner = self._owner(guard.source)
        if owner is None:
            self.top.append(guard)
        else:
            if owner not in self.items:
                self._announce(owner)
            self.items[owner].append(guard)

    def has_repeats(self) -> bool:
        for root in self.items:
            self._kind(root)
        return any(copies > 1 for copies in self._copies)

    def expanded(self, items: list[Item]) -> list[Guard]:
        """``items`` as guards: a child whose kind repeats as a call of its helper, any
        other child as its own items (``_spliced``)."""
        spliced = self._spliced(items)
        per_kind: dict[int, int] = {}
        for item in spliced:
            if not isinstance(item, Guard):
                kind = self._kinds[item]
                per_kind[kind] = per_kind.get(kind, 0) + 1
        return [
            item if isinstance(item, Guard) else Guard(
                GuardKind.SUBTREE, item, self._helper(item, per_kind[self._kinds[item]] > 1)
            )
            for item in spliced
        ]

    def _spliced(self, items: list[Item]) -> list[Item]:
        """``items`` with each child whose kind has one copy replaced by its own items."""
        spliced: list[Item] = []
        for item in items:
            if isinstance(item, Guard) or self._copies[self._kinds[item]] > 1:
                spliced.append(item)
            else:
                spliced.extend(self._spliced(self.items[item]))
        return spliced

    def _helper(self, root: Source, several: bool) -> Callable[..., bool]:
        """The helper of ``root``'s kind: of one root, or of ``several`` in one call."""
        key = (self._kinds[root], several)
        helper = self._helpers.get(key)
        if helper is None:
            table: dict[Source, Source] = {root: HELPER_ARGUMENT}
            guards = [
                Guard(g.kind, reroot_with(g.source, table), g.expected)
                for g in self.expanded(self.items[root])
            ]
            helper = self._helpers[key] = self._compile_helper(guards, several)
        return helper

    def _owner(self, source: Source) -> Source | None:
        """The nearest root that ``source`` is, or reaches through ``_READS_ON`` steps."""
        # Memoized by identity (the guards keep every source alive meanwhile): sources of
        # one module share their base objects, and a Source hashes in Python.
        owners, roots = self._owners, self.roots
        found = owners.get(id(source), _UNSEEN)
        if found is not _UNSEEN:
            return found  # type: ignore[return-value]
        walked = []
        step: Source = source
        while True:
            if step in roots:
                found = step
                break
            if type(step) not in _READS_ON:
                found = None
                break
            walked.append(id(step))
            step = step.base  # type: ignore[attr-defined]
            if _is_class_read(step):
                found = None
                break
            found = owners.get(id(step), _UNSEEN)
            if found is not _UNSEEN:
                break
        for seen in walked:
            owners[seen] = found  # type: ignore[assignment]
        owners[id(source)] = found  # type: ignore[assignment]
        return found  # type: ignore[return-value]

    def _announce(self, root: Source) -> None:
        """Place ``root`` with its owner, the first time a guard of its subtree comes."""
        if root in self.items:
            return
        self.items[root] = []
        parent = self._owner(root.base) if type(root) in _READS_ON else None  # type: ignore[attr-defined]
        if parent is None:
            self.top.append(root)
        else:
            self._announce(parent)
            self.items[parent].append(root)

    def _kind(self, root: Source) -> int:
        """The number of the kind of ``root``'s subtree (counting this copy once). Its
        items are put in a canonical order first: a copy whose fragment was re-rooted
        (translate/fragments.py) holds the first copy's guards in another order."""
        kind = self._kinds.get(root)
        if kind is not None:
            return kind
        prefix = len(root.expr())
        described = []
        for item in self.items[root]:
            if isinstance(item, Guard):
                checks = item.kind
                suffix, expected = item.source.expr()[prefix:], _expected_key(item)
                # Only guards keyed by what they expect come several to a source.
                tie = _order_token(expected) if checks in KEYED_BY_EXPECTED else ""
                order = (suffix, _RANKS[checks], tie)
                described.append((order, item, (checks, suffix, expected)))
            else:
                suffix = item.expr()[prefix:]
                described.append(((suffix, -1, ""), item, (None, suffix, self._kind(item))))
        described.sort(key=lambda entry: entry[0])
        self.items[root] = [item for _, item, _ in described]
        description = tuple(entry[2] for entry in described)
        kind = self._numbers.get(description)
        if kind is None:
            kind = self._numbers[description] = len(self._copies)
            self._copies.append(0)
        self._copies[kind] += 1
        self._kinds[root] = kind
        return kind


def _is_class_read(source: Source) -> bool:
    """``x.__class__``: what is read through it is the class's, which a class lookup guards
    once, under the first instance it met (the root's type guard fixes the class)."""
    return type(source) is AttrSource and source.attr == "__class__"  # type: ignore[attr-defined]


def _expected_key(guard: Guard) -> Any:
    """What a guard expects, such that equal keys make the same checks: the value where
    the check compares by equality (a constant, a key, a length, a tensor's snapshot),
    else the object itself, compared by identity."""
    expected, kind = guard.expected, guard.kind
    if kind is GuardKind.TENSOR_MATCH:  # classes and dtypes compare by identity
        return expected
    if kind is GuardKind.LEN_MATCH:
        return (_Identity(expected[0]), expected[1])
    if kind is GuardKind.DICT_KEYS and all(type(key) is str for key in expected[1]):
        return (_Identity(expected[0]), expected[1])
    if kind in _BY_VALUE:
        if type(expected) in _VALUE_KEYED:
            return (type(expected), expected)
        if type(expected) is float:  # by its bits: 0.0 == -0.0, and nan != nan
            return (float, struct.pack("<d", expected))
    return _Identity(expected)


def _order_token(key: Any) -> str:
    """Orders the guards of one kind on one source (``'a' not in d``, ``'b' not in d``)."""
    return f"#{id(key.value)}" if isinstance(key, _Identity) else repr(key)


class _Identity:
    """A key equal only to another of the very same object."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)
