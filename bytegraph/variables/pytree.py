"""``torch.utils._pytree`` calls on traced containers, run through skeletons.

Tracing into ``_pytree``'s source does not work: its registry is a dict keyed
by classes, a ``TreeSpec`` is a frozen slotted dataclass built with
``object.__setattr__``, and ``map_only`` subscripts ``typing`` generics. The
functions are modelled instead, without re-implementing pytree's rules:

1. A traced tree (lists, tuples, named tuples, ``torch.return_types``, dicts and
   OrderedDicts with constant keys) becomes a **skeleton**: the same containers,
   real, with every leaf replaced by a fresh ``_Leaf`` placeholder (a class
   pytree does not know, so a leaf). A value whose type is registered but not
   modelled here (a user ``register_pytree_node``, a deque, a defaultdict, a
   ``torch.Size``, which cannot hold placeholders) is a graph break.
2. The real ``_pytree`` function runs on the skeleton at trace time: it
   returns placeholders, skeleton pieces and real ``TreeSpec`` objects, the
   very ones eager would build for this structure.
3. Placeholders map back to the leaf VTs; containers that ``spec.unflatten``
   built become new container VTs. User callables (``func``, ``is_leaf``, a
   ``tree_map_only`` predicate) are called in the trace, leaf by leaf, in
   eager's order.

A ``TreeSpec`` made in the trace is a ``TreeSpecVariable`` holding the real
spec (a trace-time constant: its ``num_leaves`` and friends fold); one that
escapes is rebuilt as a fresh spec of the same structure, as each eager call
makes a new one. A spec from the frame is guarded by identity. The registry's
size is guarded, so a type registered later sends the call back to tracing.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch.utils._pytree as pytree

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource, GetItemSource
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import (
    NEW_VALUE,
    BaseSequenceVariable,
    ListVariable,
    TupleVariable,
)
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.object_keys import has_object_keys

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


class _Leaf:
    """A leaf's stand-in in a skeleton (unregistered, so pytree treats it as a leaf)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _node_type(cls: type) -> Any:
    return pytree.namedtuple if pytree.is_namedtuple_class(cls) else cls


def _plain_namedtuple(cls: type) -> bool:
    """A named tuple class whose instances ``cls(*fields)`` builds as a TupleVariable
    does: no ``__new__``/``__init__`` of its own above the generated class."""
    for klass in cls.__mro__:
        if "_fields" in vars(klass):
            return True
        if "__new__" in vars(klass) or "__init__" in vars(klass):
            return False
    return False


def _structseq(cls: type) -> bool:
    return cls.__module__ == "torch.return_types" and cls in pytree.SUPPORTED_NODES


class Skeleton:
    """A traced tree's real twin: leaves as placeholders, each mapped back to its VT."""

    def __init__(self, tx: Tx, is_leaf: VariableTracker | None) -> None:
        self.tx = tx
        self.is_leaf = is_leaf
        self.leaves: list[VariableTracker] = []
        self.nodes: dict[int, VariableTracker] = {}
        self._alive: list[Any] = []  # keeps ids in ``nodes`` unique

    def build(self, vt: VariableTracker) -> Any:
        if self.is_leaf is not None and self._leaf_by_user(vt):
            return self.leaf(vt)
        cls = vt.python_type()
        if _node_type(cls) not in pytree.SUPPORTED_NODES:
            return self.leaf(vt)
        real = self._container(vt, cls)
        self.nodes[id(real)] = vt
        self._alive.append(real)
        return real

    def leaf(self, vt: VariableTracker) -> _Leaf:
        self.leaves.append(vt)
        return _Leaf(len(self.leaves) - 1)

    def value(self, real: Any) -> VariableTracker:
        """The VT of a skeleton piece (a placeholder or a container this skeleton made)."""
        if isinstance(real, _Leaf):
            return self.leaves[real.index]
        vt = self.nodes.get(id(real))
        if vt is None:
            raise Unsupported("unmodelled_value", "pytree: a piece the skeleton did not make")
        return vt

    def _leaf_by_user(self, vt: VariableTracker) -> bool:
        answer = self.is_leaf.call_function(self.tx, [vt], {})
        if not answer.is_python_constant():
            raise Unsupported("data_dependent_branch", "pytree is_leaf returned a non-constant")
        return bool(answer.as_python_constant())

    def _container(self, vt: VariableTracker, cls: type) -> Any:
        tx = self.tx
        if isinstance(vt, DictVariable) and cls in (dict, OrderedDict):
            items = vt.items_now(tx)
            if has_object_keys(items):  # the spec would hold them: a constant of the code
                raise Unsupported("unmodelled_value", "pytree of a dict keyed by objects")
            return cls((k, self.build(v)) for k, v in items.items())
        if isinstance(vt, BaseSequenceVariable) and _sequence_type(cls):
            items = [self.build(v) for v in vt.items_now(tx)]
            if cls is list:
                return items
            if pytree.is_namedtuple_class(cls):
                return cls(*items)
            return cls(items)
        raise Unsupported("unmodelled_value", f"pytree node of registered type {cls.__qualname__}")


def _sequence_type(cls: type) -> bool:
    if cls in (list, tuple) or _structseq(cls):
        return True
    return pytree.is_namedtuple_class(cls) and _plain_namedtuple(cls)


def _rebuild(real: Any, leaves: list[VariableTracker]) -> VariableTracker:
    """New VTs for the containers of ``real`` (made by ``spec.unflatten``)."""
    if isinstance(real, _Leaf):
        return leaves[real.index]
    cls = type(real)
    if cls in (dict, OrderedDict):
        return DictVariable({k: _rebuild(v, leaves) for k, v in real.items()}, cls,
                            mutation_type=NEW_VALUE)
    if cls not in pytree.SUPPORTED_NODES and not pytree.is_namedtuple_class(cls):
        raise Unsupported("unmodelled_value", f"pytree unflatten to a {cls.__qualname__}")
    if not isinstance(real, (list, tuple)) or not _sequence_type(cls):
        raise Unsupported("unmodelled_value", f"pytree unflatten to a {cls.__qualname__}")
    items = tuple(_rebuild(v, leaves) for v in real)
    if cls is list:
        return ListVariable(items, mutation_type=NEW_VALUE)
    return TupleVariable(items, tuple_type=cls)


def _run(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """The real pytree function on skeletons; its errors are eager's (a graph break)."""
    try:
        return fn(*args)
    except (ValueError, TypeError, KeyError) as e:
        raise Unsupported("operation_raises", f"pytree.{what} raises in eager: {e}") from None


def _unflatten(spec: pytree.TreeSpec, leaves: list[VariableTracker]) -> VariableTracker:
    if len(leaves) != spec.num_leaves:
        raise Unsupported("operation_raises", "pytree unflatten: wrong number of leaves")
    real = _run("tree_unflatten", spec.unflatten, [_Leaf(i) for i in range(len(leaves))])
    return _rebuild(real, leaves)


def _fresh_spec(spec: pytree.TreeSpec) -> pytree.TreeSpec:
    """A new spec equal to ``spec``, as an eager call makes one (called by generated code)."""
    if spec.is_leaf():
        return spec  # pytree's own shared leaf spec
    return pytree.tree_structure(spec.unflatten([_Leaf(i) for i in range(spec.num_leaves)]))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TreeSpecVariable(PythonValueVariable):
    """A real ``TreeSpec``: made by a modelled call, or read from the frame (by identity)."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in ("num_leaves", "num_nodes", "num_children"):
            return ConstantVariable(getattr(self.value, name))
        if name in ("unflatten", "is_leaf"):
            from bytegraph.variables.base import BoundMethodVariable

            return BoundMethodVariable(self, name)
        raise Unsupported("unknown_attribute", f"attribute {name!r} of a TreeSpec")

    def call_method(self, tx: Tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "is_leaf" and not args and not kwargs:
            return ConstantVariable(self.value.is_leaf())
        if name == "unflatten" and len(args) == 1 and not kwargs:
            return _unflatten(self.value, args[0].unpack_sequence(tx))
        raise Unsupported("unsupported_method", f"TreeSpec.{name}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        codegen.call_const(_fresh_spec, [ConstantObject(self.value)])

    def __repr__(self) -> str:
        return f"TreeSpecVariable({self.value!r})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ConstantObject(VariableTracker):
    """An object the generated code holds as a constant (read by a helper, never shown)."""

    value: Any

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_const(self.value)


def _spec_variable(spec: pytree.TreeSpec) -> TreeSpecVariable:
    """A new spec: a distinct object, unless it is pytree's one shared leaf spec."""
    if spec.is_leaf():
        return TreeSpecVariable(spec)
    return TreeSpecVariable(spec, mutation_type=NEW_VALUE)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class KeyEntryVariable(PythonValueVariable):
    """A key path entry (``MappingKey``, ``SequenceKey``, ``GetAttrKey``): a frozen
    record of one constant, loaded as a constant by the generated code."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in ("key", "idx", "name") and hasattr(self.value, name):
            return ConstantVariable(getattr(self.value, name))
        raise Unsupported("unknown_attribute", f"attribute {name!r} of a pytree key entry")

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_const(self.value)

    def __repr__(self) -> str:
        return f"KeyEntryVariable({self.value!r})"


def _is_leaf_argument(vt: VariableTracker | None) -> VariableTracker | None:
    if vt is None or (vt.is_python_constant() and vt.as_python_constant() is None):
        return None
    return vt


def _skeleton(tx: Tx, tree: VariableTracker, is_leaf: VariableTracker | None = None):
    skeleton = Skeleton(tx, _is_leaf_argument(is_leaf))
    return skeleton, skeleton.build(tree)


def _new_list(items: list[VariableTracker]) -> ListVariable:
    return ListVariable(tuple(items), mutation_type=NEW_VALUE)


def _tree_flatten(tx: Tx, tree, is_leaf=None) -> VariableTracker:
    skeleton, real = _skeleton(tx, tree, is_leaf)
    spec = _run("tree_flatten", pytree.tree_structure, real)
    return TupleVariable((_new_list(skeleton.leaves), _spec_variable(spec)))


def _tree_leaves(tx: Tx, tree, is_leaf=None) -> VariableTracker:
    return _new_list(_skeleton(tx, tree, is_leaf)[0].leaves)


def _tree_structure(tx: Tx, tree, is_leaf=None) -> VariableTracker:
    real = _skeleton(tx, tree, is_leaf)[1]
    return _spec_variable(_run("tree_structure", pytree.tree_structure, real))


def _tree_unflatten(tx: Tx, leaves, treespec) -> VariableTracker:
    if isinstance(leaves, TreeSpecVariable) and not isinstance(treespec, TreeSpecVariable):
        leaves, treespec = treespec, leaves  # pytree accepts them swapped
    if not isinstance(treespec, TreeSpecVariable):
        raise Unsupported("unmodelled_value", f"tree_unflatten with a spec {treespec}")
    return _unflatten(treespec.value, leaves.unpack_sequence(tx))


def _tree_map(tx: Tx, func, tree, *rests, is_leaf=None) -> VariableTracker:
    skeleton, real = _skeleton(tx, tree, is_leaf)
    spec = _run("tree_map", pytree.tree_structure, real)
    columns = [skeleton.leaves] + [_up_to(tx, spec, rest) for rest in rests]
    results = [func.call_function(tx, list(args), {}) for args in zip(*columns)]
    return _unflatten(spec, results)


def _up_to(tx: Tx, spec: pytree.TreeSpec, rest: VariableTracker) -> list[VariableTracker]:
    """``spec.flatten_up_to(rest)``: ``rest``'s subtrees at ``spec``'s leaves."""
    skeleton, real = _skeleton(tx, rest)
    return [skeleton.value(piece) for piece in _run("tree_map", spec.flatten_up_to, real)]


def _tree_map_only(tx: Tx, type_or_types_or_pred, func, tree, is_leaf=None) -> VariableTracker:
    from bytegraph.variables.builtin import BuiltinVariable

    kind = type_or_types_or_pred.python_type()
    if issubclass(kind, (type, tuple)):
        def pred(leaf: VariableTracker) -> VariableTracker:
            return BuiltinVariable(isinstance).call_function(tx, [leaf, type_or_types_or_pred], {})
    else:
        def pred(leaf: VariableTracker) -> VariableTracker:
            return type_or_types_or_pred.call_function(tx, [leaf], {})

    skeleton, real = _skeleton(tx, tree, is_leaf)
    spec = _run("tree_map_only", pytree.tree_structure, real)
    results = []
    for leaf in skeleton.leaves:
        chosen = pred(leaf)
        if not chosen.is_python_constant():
            raise Unsupported("data_dependent_branch", "tree_map_only predicate not a constant")
        results.append(func.call_function(tx, [leaf], {}) if chosen.as_python_constant() else leaf)
    return _unflatten(spec, results)


def _tree_flatten_with_path(tx: Tx, tree, is_leaf=None) -> VariableTracker:
    skeleton, real = _skeleton(tx, tree, is_leaf)
    pairs, spec = _run("tree_flatten_with_path", pytree.tree_flatten_with_path, real)
    items = tuple(
        TupleVariable((TupleVariable(tuple(KeyEntryVariable(k) for k in path)),
                       skeleton.value(leaf)))
        for path, leaf in pairs
    )
    return TupleVariable((ListVariable(items, mutation_type=NEW_VALUE), _spec_variable(spec)))


_MODELS: dict[Any, Callable[..., VariableTracker]] = {
    pytree.tree_flatten: _tree_flatten,
    pytree.tree_unflatten: _tree_unflatten,
    pytree.tree_leaves: _tree_leaves,
    pytree.tree_structure: _tree_structure,
    pytree.tree_map: _tree_map,
    pytree.tree_map_only: _tree_map_only,
    pytree.tree_flatten_with_path: _tree_flatten_with_path,
}


_MODEL_IDS = frozenset(id(fn) for fn in _MODELS)


def is_pytree_function(value: Any) -> bool:
    return id(value) in _MODEL_IDS


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PytreeFunctionVariable(PythonValueVariable):
    """One of the modelled ``torch.utils._pytree`` functions (by identity)."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        import inspect

        try:
            bound = inspect.signature(self.value).bind(*args, **kwargs)
        except TypeError as e:
            raise Unsupported("call_raises_type_error", f"pytree call: {e}") from None
        self._guard_registry(tx)
        return _MODELS[self.value](tx, *bound.args, **bound.kwargs)

    def _guard_registry(self, tx: Tx) -> None:
        """A type registered after this trace could turn one of its leaves into a node."""
        if self.source is None:
            raise Unsupported("unmodelled_value", "pytree function without a source")
        registry = GetItemSource(AttrSource(self.source, "__globals__"), "SUPPORTED_NODES")
        nodes = pytree.SUPPORTED_NODES
        tx.output.add_guard(GuardKind.LEN_MATCH, registry, (type(nodes), len(nodes)))

    def __repr__(self) -> str:
        return f"PytreeFunctionVariable({self.value.__name__})"
