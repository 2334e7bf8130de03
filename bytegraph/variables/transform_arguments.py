"""The arguments of a torch.func transform's call: pytrees flattened to tensor leaves.

``vmap(f)(d, scale=2.0)`` with ``d = {"a": x, "b": y}`` traces ``f``'s body on
the tensor leaves ``x, y`` alone; the rest of the call (its tuples, lists,
dicts, their keys, the constants in them, and which argument is a keyword) is a
*skeleton* of tagged tuples::

    ("tuple", (("tuple", (("dict", (("a", ("tensor", 0)), ("b", ("tensor", 1)))),)),
               ("dict", (("scale", ("const", 2.0)),))))

Inside the body, ``variables_of`` rebuilds the call's VariableTrackers around the
body's leaves. The graph's node applies the transform to the flat function of the
leaves, with the options translated to leaves (``leaf_dims`` for vmap's
``in_dims``; the leaves of the differentiated arguments for ``argnums``): a
transform treats each leaf of a pytree on its own, so the results are the same.
Keys are str or int; constants are None, bools, ints, floats and strs. An
instance of a dataclass registered with ``torch.utils._pytree.register_dataclass``
is a node of its fields, ``("node", (("", ("class", class_vt)), (name, part)...))``
(a None field is a constant part, as pytree leaves it out); rebuilt, it is a new
instance: the class called with the fields as keywords, as pytree's unflatten does.
Anything else in an argument leaves the call to Python.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import NEW_VALUE, ListVariable, TupleVariable
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

Skeleton = tuple  # ("tensor", i) | ("const", v) | ("tuple"|"list", parts) | ("dict", pairs)

_CONSTANT_TYPES = (type(None), bool, int, float, str)


@dataclasses.dataclass(frozen=True)
class TransformCall:
    """A call's positional and keyword arguments: their skeleton and tensor leaves."""

    skeleton: Skeleton
    leaves: tuple[TensorVariable, ...]
    tx: Any = dataclasses.field(default=None, compare=False)  # makes registered nodes

    @staticmethod
    def of(tx: Tx, what: str, args: Sequence[VariableTracker],
           kwargs: dict[str, VariableTracker]) -> TransformCall:
        leaves: list[TensorVariable] = []
        positional = ("tuple", tuple(_flatten(tx, what, a, leaves) for a in args))
        keywords = ("dict", tuple((k, _flatten(tx, what, v, leaves)) for k, v in kwargs.items()))
        return TransformCall(("tuple", (positional, keywords)), tuple(leaves), tx)

    def argument(self, index: int) -> Skeleton:
        """The skeleton of positional argument ``index``."""
        return self.skeleton[1][0][1][index]

    @property
    def n_positional(self) -> int:
        return len(self.skeleton[1][0][1])

    def rebuild_argument(self, index: int, by_leaf: dict[int, VariableTracker]
                         ) -> VariableTracker:
        """Positional argument ``index``'s structure holding ``by_leaf[i]`` for leaf i."""
        return _variable(self.argument(index), by_leaf, self.tx)

    def variables_of(self, leaves: Sequence[VariableTracker]
                     ) -> tuple[list[VariableTracker], dict[str, VariableTracker]]:
        """The call's arguments as VariableTrackers holding ``leaves``."""
        args, kwargs = _variable(self.skeleton, leaves, self.tx).items
        return list(args.items), {k: v for k, v in kwargs.items.items()}


def leaf_indices(skeleton: Skeleton) -> list[int]:
    tag, body = skeleton
    if tag == "tensor":
        return [body]
    if tag in ("const", "class"):
        return []
    parts = [p for _, p in body] if tag in ("dict", "node") else body
    return [i for p in parts for i in leaf_indices(p)]


def has_constants(skeleton: Skeleton) -> bool:
    tag, body = skeleton
    if tag in ("tensor", "const", "class"):
        return tag == "const"
    parts = [p for _, p in body] if tag in ("dict", "node") else body
    return any(has_constants(p) for p in parts)


def _flatten(tx: Tx, what: str, vt: VariableTracker, leaves: list[TensorVariable]) -> Skeleton:
    if isinstance(vt, TensorVariable):
        leaves.append(vt)
        return ("tensor", len(leaves) - 1)
    if isinstance(vt, ConstantVariable) and type(vt.value) in _CONSTANT_TYPES:
        return ("const", vt.value)
    if isinstance(vt, TupleVariable) and vt.tuple_type is tuple:
        return ("tuple", tuple(_flatten(tx, what, item, leaves) for item in vt.items_now(tx)))
    if isinstance(vt, ListVariable):
        return ("list", tuple(_flatten(tx, what, item, leaves) for item in vt.items_now(tx)))
    if isinstance(vt, DictVariable) and vt.dict_type is dict:
        items = vt.items_now(tx)
        if all(type(k) in (str, int) for k in items):
            return ("dict", tuple((k, _flatten(tx, what, v, leaves)) for k, v in items.items()))
    names = registered_dataclass_fields(vt.python_type())
    if names is not None and hasattr(vt, "class_vt"):
        parts = tuple((name, _flatten(tx, what, vt.var_getattr(tx, name), leaves))
                      for name in names)
        return ("node", (("", ("class", vt.class_vt(tx))), *parts))
    raise Unsupported(
        "higher_order_call",
        f"{what} called with {vt}: its arguments are tensors, constants, and tuples, lists "
        "and dicts of them",
    )


def registered_dataclass_fields(cls: type) -> list[str] | None:
    """The fields pytree flattens of a dataclass registered with ``register_dataclass``
    (the ``field_names`` its flatten function closes over); None for any other type."""
    import inspect

    import torch.utils._pytree as pytree

    node = pytree.SUPPORTED_NODES.get(cls)
    flatten = getattr(node, "flatten_fn", None)
    if node is None or not dataclasses.is_dataclass(cls) or not (
        getattr(flatten, "__qualname__", "").startswith("register_dataclass.")
    ):
        return None
    names = inspect.getclosurevars(flatten).nonlocals.get("field_names")
    return list(names) if isinstance(names, (list, tuple)) else None


def _variable(skeleton: Skeleton, leaves: Any, tx: Any = None) -> Any:
    tag, body = skeleton
    if tag == "tensor":
        return leaves[body]
    if tag == "const":
        return ConstantVariable(body)
    if tag == "tuple":
        return TupleVariable(tuple(_variable(p, leaves, tx) for p in body))
    if tag == "list":
        return ListVariable(tuple(_variable(p, leaves, tx) for p in body),
                            mutation_type=NEW_VALUE)
    if tag == "node":
        (_, (_, class_vt)), *parts = body
        fields = {k: _variable(p, leaves, tx) for k, p in parts}
        return class_vt.call_function(tx, [], fields)
    return DictVariable({k: _variable(p, leaves, tx) for k, p in body}, mutation_type=NEW_VALUE)


def leaf_dims(call: TransformCall, in_dims: Any) -> list[int | None]:
    """vmap's ``in_dims`` (an int, None, or one prefix pytree per positional argument)
    as one dimension per leaf; keyword arguments are not batched."""
    n = call.n_positional
    per_argument = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * n
    if len(per_argument) != n:
        raise Unsupported("higher_order_call", f"vmap in_dims {in_dims!r} for {n} arguments")
    dims: list[int | None] = [None] * len(call.leaves)
    for index, prefix in enumerate(per_argument):
        _broadcast(call.argument(index), prefix, dims, in_dims)
    return dims


def _broadcast(skeleton: Skeleton, prefix: Any, dims: list[int | None], in_dims: Any) -> None:
    tag, body = skeleton
    if prefix is None or type(prefix) is int:
        for i in leaf_indices(skeleton):
            dims[i] = prefix
        return
    if tag in ("tuple", "list") and isinstance(prefix, (tuple, list)) and len(prefix) == len(body):
        for part, inner in zip(body, prefix):
            _broadcast(part, inner, dims, in_dims)
        return
    if tag == "dict" and isinstance(prefix, dict) and set(prefix) == {k for k, _ in body}:
        for key, part in body:
            _broadcast(part, prefix[key], dims, in_dims)
        return
    raise Unsupported("higher_order_call", f"vmap in_dims {in_dims!r} do not match the arguments")
