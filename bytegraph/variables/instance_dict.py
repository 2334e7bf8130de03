"""``obj.__dict__`` of a user-defined object, for reading.

The attributes of an object live in SideEffects (stores pending in the
trace) over its real ``__dict__`` (read through a source, so guarded by
value). ``InstanceDictVariable`` is a read-only view of that combination:
``get``, ``[]``, ``in``, ``len``, ``keys``/``values``/``items`` and iteration.
A lookup that finds a name absent guards the real dict's keys, as attribute
reads do. Writing through the view would bypass the attribute log, so every
mutation is a graph break.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import BoundMethodVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import TupleVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.user_defined import UserDefinedObjectVariable

_READS = frozenset({
    "get", "__getitem__", "__contains__", "__len__", "keys", "values", "items", "__iter__",
})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class InstanceDictVariable(VariableTracker):
    """The ``__dict__`` of ``obj``: its attributes as they are now in the trace."""

    obj: UserDefinedObjectVariable

    def python_type(self) -> type:
        return dict

    def _real(self) -> dict[str, Any]:
        from bytegraph.variables.user_defined import _instance_dict

        if self.obj.is_new:
            return {}
        return _instance_dict(self.obj.value) or {}

    def _value(self, tx: Tx, name: str) -> VariableTracker | None:
        """The attribute's VT, or None if the instance has no such attribute."""
        return self.obj.instance_attr(tx, name)

    def current(self, tx: Tx) -> dict[str, VariableTracker]:
        """Every attribute in ``__dict__`` order; the trace relies on the real keys."""
        self.obj.guard_instance_keys(tx)
        names = list(self._real())
        for name in tx.output.side_effects.pending_attrs(self.obj):
            if name not in names:
                names.append(name)
        result = {}
        for name in names:
            value = self._value(tx, name)
            if value is not None:
                result[name] = value
        return result

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name not in _READS:
            raise Unsupported(
                "attribute_mutation", f"{name!r} of an object's __dict__ (read-only here)"
            )
        return BoundMethodVariable(self, name)

    def getitem(self, tx: Tx, index: VariableTracker) -> VariableTracker:
        return self.call_method(tx, "__getitem__", [index], {})

    def unpack_sequence(self, tx: Tx) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.current(tx)]

    def truth(self, tx: Tx) -> bool:
        return bool(self.current(tx))

    def contains(self, tx: Tx, item: VariableTracker) -> VariableTracker:
        """``name in obj.__dict__`` (nn.Module's ``__init__`` and ``register_*`` ask)."""
        return self.call_method(tx, "__contains__", [item], {})

    def call_method(self, tx: Tx, name: str, args, kwargs) -> VariableTracker:
        if kwargs or name not in _READS:
            raise Unsupported(
                "attribute_mutation", f"__dict__.{name} of an object (read-only here)"
            )
        if name in ("get", "__getitem__", "__contains__") and args:
            key = args[0].as_python_constant()
            if not isinstance(key, str):
                raise Unsupported("mapping_contents", f"__dict__ key {key!r} (not a str)")
            value = self._value(tx, key)
            if name == "__contains__":
                return ConstantVariable(value is not None)
            if value is not None:
                return value
            if name == "get" and len(args) <= 2:
                return args[1] if len(args) == 2 else ConstantVariable(None)
            raise Unsupported("operation_raises", f"__dict__[{key!r}]: no such key (KeyError)")
        if args:
            raise Unsupported("unsupported_method", f"__dict__.{name} with arguments")
        items = self.current(tx)
        if name == "__len__":
            return ConstantVariable(len(items))
        if name in ("keys", "__iter__"):
            return TupleVariable(tuple(ConstantVariable(k) for k in items))
        if name == "values":
            return TupleVariable(tuple(items.values()))
        pairs = (TupleVariable((ConstantVariable(k), v)) for k, v in items.items())
        return TupleVariable(tuple(pairs))

    def reconstruct(self, codegen: Any) -> None:
        if self.obj.is_new:
            raise Unsupported("mapping_contents", "the __dict__ of an object made in the trace")
        self.obj.attr_source("__dict__").reconstruct(codegen)

    def __repr__(self) -> str:
        return f"InstanceDictVariable({self.obj!r})"
