"""SetVariable: a set of constants, and the recipe that rebuilds it exactly.

A set's iteration order is not a function of its elements: it depends on
the history of its hash table (insertions, deletions, resizes). ``{1, 9}``
and ``{9, 1}`` are equal and iterate differently. So a set's contents in
SideEffects are a ``SetRecipe``: the operations eager Python performs on it,
in order, replayed on a fresh real set whenever its elements are needed.
Every set made during the trace from constants has an *exact* recipe: the
real set it builds has the table eager builds, so iterating it, popping from
it, or printing it in the trace sees what eager sees, and a set that escapes
is rebuilt by running the same recipe.

A set from the frame has a guarded iteration order but an unknown table. Its
recipe starts from its elements and is marked inexact: membership, length,
comparisons and sorting stay exact, and iterating it is exact until it is
mutated; after that, anything whose answer depends on the order is
unsupported. Its mutations are replayed after the graph by running the same
operations on the real object, which keeps it exact.

Elements are constants (anything hashable that ``is_constant_value``
accepts) or objects hashed by identity (``object_keys.py``: their ``ObjectKey``s
stand in the recipe, and the real objects replace them where order matters).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import GetItemSource, Source, source_record
from bytegraph.variables.base import ValueMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value
from bytegraph.variables.method_arguments import check_method_arguments
from bytegraph.variables.object_keys import (
    ObjectKey,
    elements_in_order,
    key_variable,
    keys_in,
    plan_set_replay,
    rebuild_set,
    refuse_order,
    table_key,
)

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

NEW_VALUE = ValueMutationNew(1)


@source_record
class SetElementsSource(Source):
    """``tuple(base)``: a set's elements in iteration order, for element guards."""

    base: Source

    def _expr(self) -> str:
        return f"tuple({self.base.expr()})"

    @property
    def root(self) -> Source:
        return self.base.root

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(tuple)
        codegen.load_source(self.base)
        codegen.append(*assemble.call(1))


# -- recipes -------------------------------------------------------------------


def _create(previous: Any, factory: Callable[..., Any], *args: Any) -> Any:
    return factory(*args)


def _add_each(previous: Any, set_type: type, elements: tuple) -> Any:
    """BUILD_SET: an empty set, then one add per element in order."""
    value = set_type()
    for element in elements:
        value.add(element)
    return value


def _mutate(previous: Any, name: str, *args: Any) -> Any:
    getattr(previous, name)(*args)
    return previous


def _apply(previous: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """A new set computed from built sets and constants: ``a | b``, ``a.union(c)``."""
    return fn(*args)


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class SetRecipe:
    """How to build the real set again: ``steps`` run in order on a fresh value.

    Each step is ``(fn, args)``; ``fn(previous, *args)`` returns the new value,
    with every SetRecipe among ``args`` built fresh first. ``exact`` is False
    when the recipe starts from a frame set's elements (its table is unknown);
    ``order`` is then that set's guarded iteration order.
    """

    steps: tuple[tuple[Callable[..., Any], tuple[Any, ...]], ...]
    exact: bool = True
    order: tuple[Any, ...] | None = None

    def build(self) -> Any:
        value = None
        for fn, args in self.steps:
            value = fn(value, *(a.build() if isinstance(a, SetRecipe) else a for a in args))
        return value

    def then(self, fn: Callable[..., Any], *args: Any) -> SetRecipe:
        exact = self.exact and all(a.exact for a in args if isinstance(a, SetRecipe))
        return SetRecipe(self.steps + ((fn, args),), exact, None)

    @staticmethod
    def new(fn: Callable[..., Any], *args: Any) -> SetRecipe:
        exact = all(a.exact for a in args if isinstance(a, SetRecipe))
        return SetRecipe(((fn, args),), exact)

    def held_vts(self) -> tuple[VariableTracker, ...]:
        """The VTs of the objects among its elements (generated code loads them)."""
        return tuple(key.vt for key in keys_in(self))

    def elements_in_order(self) -> tuple[Any, ...]:
        """The elements as eager iteration yields them, or Unsupported."""
        if self.exact:
            return tuple(self.build())
        if self.order is not None:
            return self.order
        raise Unsupported(
            "set_order_unknown",
            "iteration order of a set derived from a mutated or combined input set",
        )


def frame_set_recipe(value: set | frozenset) -> SetRecipe:
    """The recipe of a set read from the frame: its elements, order as guarded."""
    order = tuple(value)
    return SetRecipe(((_create, (type(value), order)),), exact=False, order=order)


def guard_frame_set(tx: InstructionTranslatorBase, value: set | frozenset, source: Source) -> None:
    """Type, elements in iteration order, and each element's type (``1 == 1.0``)."""
    tx.output.add_guard(GuardKind.DICT_KEYS, source, (type(value), tuple(value)))
    for i, item in enumerate(value):
        item_source = GetItemSource(SetElementsSource(source), i)
        tx.output.add_guard(GuardKind.TYPE_MATCH, item_source, type(item))


def wrap_frame_set(
    tx: InstructionTranslatorBase, value: set | frozenset, source: Source
) -> VariableTracker | None:
    """The VT of a set or frozenset of constants from the frame; None for other sets."""
    from bytegraph.variables.base import ValueMutationExisting

    if not all(is_constant_value(v) for v in value):
        return None
    guard_frame_set(tx, value, source)
    if type(value) is frozenset:
        return ConstantVariable(value, source=source)
    recipe = frame_set_recipe(value)
    return SetVariable(recipe, source=source, mutation_type=ValueMutationExisting(0))


# -- the variable ----------------------------------------------------------------


def element(tx: InstructionTranslatorBase, vt: VariableTracker) -> Any:
    """The hashable constant a VT stands for, or its object's key, as a set element."""
    return table_key(tx, vt, lambda: _constant_element(tx, vt))


def element_variable(value: Any) -> VariableTracker:
    """The VT of an element as a recipe holds it."""
    from bytegraph.variables.builder import wrap_constant_result

    return key_variable(value) if type(value) is ObjectKey else wrap_constant_result(value)


def _constant_element(tx: InstructionTranslatorBase, vt: VariableTracker) -> Any:
    from bytegraph.variables.containers import python_constant

    value = python_constant(tx, vt)
    if not is_constant_value(value):
        raise Unsupported("not_a_constant", f"set element {vt} is not a constant")
    try:
        hash(value)
    except TypeError:
        raise Unsupported("operation_raises", f"unhashable set element {value!r}") from None
    return value


def iterable_argument(tx: InstructionTranslatorBase, vt: VariableTracker) -> Any:
    """What eager passes to ``set(x)``/``s.update(x)``, as a replayable value.

    Sets pass their recipe (CPython merges tables); an exact dict passes a real
    dict with the same keys (CPython presizes for it); anything else passes a
    list of its items, which CPython adds one by one exactly as it would
    iterate the original.
    """
    from bytegraph.variables.dicts import DictVariable

    if isinstance(vt, SetVariable):
        return vt.items_now(tx)
    if isinstance(vt, DictVariable) and vt.python_type() is dict:
        return dict.fromkeys(element(tx, key_variable(k)) for k in vt.items_now(tx))
    if isinstance(vt, ConstantVariable) and isinstance(vt.value, (set, frozenset)):
        return constant_set_operand(vt)
    return [element(tx, item) for item in vt.unpack_sequence(tx)]


def constant_set_operand(vt: ConstantVariable) -> Any:
    """A frozenset constant as an operand: the object itself, unless it came from
    the frame (the runtime object's table may differ from the one traced)."""
    return vt.value if vt.source is None else frame_set_recipe(vt.value)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SetVariable(VariableTracker):
    """A ``set`` of constants and objects; its current recipe lives in SideEffects."""

    # The objects among its elements are VTs the generated code may load (side_effects).
    initial: SetRecipe = dataclasses.field(metadata={"contents": True})

    def python_type(self) -> type:
        return set

    @staticmethod
    def create(recipe: SetRecipe) -> SetVariable:
        return SetVariable(recipe, mutation_type=NEW_VALUE)

    def items_now(self, tx: InstructionTranslatorBase) -> SetRecipe:
        return tx.output.side_effects.contents(self, self.initial)

    def elements(self, tx: InstructionTranslatorBase) -> Any:
        """The current elements as a real set (its order may not be eager's)."""
        return self.items_now(tx).build()

    def python_constant_now(self, tx: InstructionTranslatorBase) -> set:
        """An equal real set that also iterates as eager's does, or Unsupported."""
        recipe = self.items_now(tx)
        if not recipe.exact:  # a copy of it would not iterate as the real one does
            raise Unsupported("set_order_unknown", "a set from the frame used as a constant")
        refuse_order(recipe, "a constant")
        return recipe.build()

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        return [element_variable(e) for e in elements_in_order(tx, self.items_now(tx))]

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.elements(tx))

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        from bytegraph.variables.containers import method_of

        return method_of(self, name)

    def mutate(self, tx: InstructionTranslatorBase, recipe: SetRecipe) -> None:
        from bytegraph.variables.containers import store_contents

        store_contents(tx, self, recipe)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        check_method_arguments(self.python_type(), name, args, kwargs)
        if kwargs:
            raise Unsupported("unsupported_method", f"set.{name} with keyword arguments")
        method = _SET_METHODS.get(name)
        if method is None:
            raise Unsupported("unsupported_method", f"set.{name}")
        return method(tx, self, *args)

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        rebuild_set(codegen, codegen.side_effects.contents(self, self.initial))

    def plan_replay(self, replay: Any, recipe: SetRecipe) -> Callable[[], None]:
        """Run the trace's operations on the real frame set, in order (the set and the
        objects they add are loaded before any replay stores: side_effects.py)."""
        return plan_set_replay(replay, self, recipe.steps[len(self.initial.steps):])

    def __repr__(self) -> str:
        return f"SetVariable({len(self.initial.steps)} steps)"


def _replay(target: set, steps: tuple) -> None:
    value = target
    for fn, args in steps:
        value = fn(value, *(a.build() if isinstance(a, SetRecipe) else a for a in args))
        if value is not target:
            raise AssertionError("bytegraph: a set replay step must mutate in place")


# -- methods -----------------------------------------------------------------------

_MUTATORS = {"add", "discard", "remove", "clear", "update", "difference_update",
             "intersection_update", "symmetric_difference_update"}
_COMBINERS = {"union", "intersection", "difference", "symmetric_difference"}
_PREDICATES = {"issubset", "issuperset", "isdisjoint"}


def _set_add(tx, s: SetVariable, value: VariableTracker) -> VariableTracker:
    s.mutate(tx, s.items_now(tx).then(_mutate, "add", element(tx, value)))
    return ConstantVariable(None)


def _set_discard(tx, s: SetVariable, value: VariableTracker) -> VariableTracker:
    s.mutate(tx, s.items_now(tx).then(_mutate, "discard", element(tx, value)))
    return ConstantVariable(None)


def _set_remove(tx, s: SetVariable, value: VariableTracker) -> VariableTracker:
    key = element(tx, value)
    if key not in s.elements(tx):
        from bytegraph.translate.ops.exceptions import raise_as_eager, raise_builtin

        if isinstance(key, ObjectKey):
            raise_builtin(tx, KeyError, value)
        raise_as_eager(tx, "set.remove", set.remove, set(), key)
    return _set_discard(tx, s, value)


def _set_clear(tx, s: SetVariable) -> VariableTracker:
    s.mutate(tx, s.items_now(tx).then(_mutate, "clear"))
    return ConstantVariable(None)


def _set_pop(tx, s: SetVariable) -> VariableTracker:
    from bytegraph.variables.builder import wrap_constant_result

    recipe = s.items_now(tx)
    if not recipe.exact:
        raise Unsupported("set_order_unknown", "set.pop of a set whose table is unknown")
    refuse_order(recipe, "set.pop")
    real = recipe.build()
    if not real:
        from bytegraph.translate.ops.exceptions import raise_as_eager

        raise_as_eager(tx, "set.pop", set.pop, set())
    popped = real.pop()
    s.mutate(tx, recipe.then(_mutate, "pop"))
    return wrap_constant_result(popped)


def _update_method(name: str):
    def update(tx, s: SetVariable, *others: VariableTracker) -> VariableTracker:
        values = [iterable_argument(tx, o) for o in others]
        s.mutate(tx, s.items_now(tx).then(_mutate, name, *values))
        return ConstantVariable(None)

    return update


def _combine_method(name: str):
    def combine(tx, s: SetVariable, *others: VariableTracker) -> VariableTracker:
        values = [iterable_argument(tx, o) for o in others]
        recipe = SetRecipe.new(_apply, getattr(set, name), s.items_now(tx), *values)
        return SetVariable.create(recipe)

    return combine


# Predicates that read an iterable (no set, no dict) only up to the first item that
# decides them, as CPython does: True for the item that decides.
_STOPS_EARLY = {
    "isdisjoint": lambda item, elements: item in elements,
    "issuperset": lambda item, elements: item not in elements,
}


def _reads_lazily(tx, other: VariableTracker) -> bool:
    from bytegraph.variables.dicts import DictVariable

    return not isinstance(other, (SetVariable, DictVariable, ConstantVariable))


def _predicate_method(name: str):
    def predicate(tx, s: SetVariable, other: VariableTracker) -> VariableTracker:
        if name in _STOPS_EARLY and _reads_lazily(tx, other):
            from bytegraph.variables.iterators import iterate

            decides, elements, iterator = _STOPS_EARLY[name], s.elements(tx), iterate(tx, other)
            while (item := iterator.next_item(tx)) is not None:
                if decides(element(tx, item), elements):
                    return ConstantVariable(False)
            return ConstantVariable(True)
        value = iterable_argument(tx, other)
        if isinstance(value, SetRecipe):
            value = value.build()
        return ConstantVariable(getattr(s.elements(tx), name)(value))

    return predicate


def _set_copy(tx, s: SetVariable) -> VariableTracker:
    return SetVariable.create(SetRecipe.new(_apply, set.copy, s.items_now(tx)))


def _set_contains(tx, s: SetVariable, value: VariableTracker) -> VariableTracker:
    return ConstantVariable(element(tx, value) in s.elements(tx))


def _set_len(tx, s: SetVariable) -> VariableTracker:
    return ConstantVariable(len(s.elements(tx)))


_SET_METHODS: dict[str, Callable[..., VariableTracker]] = {
    "add": _set_add,
    "discard": _set_discard,
    "remove": _set_remove,
    "clear": _set_clear,
    "pop": _set_pop,
    "copy": _set_copy,
    "__contains__": _set_contains,
    "__len__": _set_len,
    **{name: _update_method(name) for name in _MUTATORS - {"add", "discard", "remove", "clear"}},
    **{name: _combine_method(name) for name in _COMBINERS},
    **{name: _predicate_method(name) for name in _PREDICATES},
}

# -- operators ---------------------------------------------------------------------

# ``a | b`` and friends: both operands must be sets (or frozensets) in eager.
BINARY_SET_OPERATORS: dict[Any, Callable[[Any, Any], Any]] = {
    operator.or_: operator.or_, operator.and_: operator.and_,
    operator.sub: operator.sub, operator.xor: operator.xor,
}
INPLACE_SET_OPERATORS: dict[Any, str] = {
    operator.ior: "__ior__", operator.iand: "__iand__",
    operator.isub: "__isub__", operator.ixor: "__ixor__",
}
COMPARISONS = frozenset({operator.eq, operator.ne, operator.lt, operator.le,
                         operator.gt, operator.ge})


def _operand(tx: InstructionTranslatorBase, vt: VariableTracker) -> Any:
    """A set operand as a recipe (a SetVariable) or a real frozenset (a constant)."""
    if isinstance(vt, SetVariable):
        return vt.items_now(tx)
    if isinstance(vt, ConstantVariable) and isinstance(vt.value, (set, frozenset)):
        return constant_set_operand(vt)
    return None


def set_operator(
    tx: InstructionTranslatorBase, fn: Any, a: VariableTracker, b: VariableTracker
) -> VariableTracker | None:
    """``a <op> b`` with a SetVariable operand; None if eager would not use set semantics."""
    left, right = _operand(tx, a), _operand(tx, b)
    if left is None or right is None:
        return None
    if fn in INPLACE_SET_OPERATORS and isinstance(a, SetVariable):
        a.mutate(tx, left.then(_mutate, INPLACE_SET_OPERATORS[fn], right))
        return a
    op = BINARY_SET_OPERATORS.get(fn) or _inplace_as_binary(fn)
    if op is not None:
        if not isinstance(a, SetVariable):  # frozenset <op> set is a frozenset
            value = left.build() if isinstance(left, SetRecipe) else left
            return ConstantVariable(op(value, b.python_constant_now(tx)))
        return SetVariable.create(SetRecipe.new(_apply, op, left, right))
    if fn in COMPARISONS:
        built = [v.build() if isinstance(v, SetRecipe) else v for v in (left, right)]
        return ConstantVariable(fn(*built))
    return None


def _inplace_as_binary(fn: Any) -> Callable[[Any, Any], Any] | None:
    """``frozenset |= x`` rebinds to a new frozenset, as the binary operator does."""
    names = {operator.ior: operator.or_, operator.iand: operator.and_,
             operator.isub: operator.sub, operator.ixor: operator.xor}
    return names.get(fn)
