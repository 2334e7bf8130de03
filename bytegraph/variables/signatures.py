"""``inspect.signature`` of a function the trace knows, folded at trace time.

Libraries count or name a callback's parameters (Hugging Face's
``apply_chunking_to_forward`` does ``len(inspect.signature(fn).parameters)``).
Inlining ``inspect.signature`` would walk ``inspect``'s internals (``id()``
memos, ``__wrapped__`` chains); instead the signature of the very function
the trace holds is computed for real. That function is guarded by identity
(ID_MATCH on its source), and so is everything its signature is computed
from: its code, defaults, keyword defaults and annotations, and the
``__signature__`` and ``__wrapped__`` attributes it follows (with the keys of
its ``__dict__``). The result is immutable.

``FrozenValueVariable`` holds such an immutable value (a Signature, its
Parameters, the read-only ``parameters`` mapping): attribute reads and the
mapping's read methods are evaluated for real, and builtins such as ``len``
fold on it as on any constant.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource
from bytegraph.variables.base import BoundMethodVariable, PythonValueVariable, VariableTracker

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_FROZEN_TYPES = (inspect.Signature, inspect.Parameter, types.MappingProxyType)
_MAPPING_READS = frozenset({"keys", "values", "items", "get", "__contains__", "__len__",
                            "__getitem__"})


def frozen(value: Any) -> VariableTracker:
    """A constant, or a FrozenValueVariable for the immutable inspect values."""
    from bytegraph.variables.builder import wrap_constant_result
    from bytegraph.variables.containers import TupleVariable

    if isinstance(value, _FROZEN_TYPES) or type(value).__name__ in ("odict_keys", "odict_values",
                                                                    "odict_items"):
        return FrozenValueVariable(value)
    if type(value) is tuple:
        return TupleVariable(tuple(frozen(v) for v in value))
    return wrap_constant_result(value)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FrozenValueVariable(PythonValueVariable):
    """An immutable value computed at trace time (no source, no guard)."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if isinstance(self.value, types.MappingProxyType) and name in _MAPPING_READS:
            return BoundMethodVariable(self, name)
        if name.startswith("_") or not hasattr(self.value, name):
            raise Unsupported("unknown_attribute", f"attribute {name!r} of {self}")
        attr = getattr(self.value, name)
        if callable(attr) and not isinstance(attr, type):
            raise Unsupported("inspect_call", f"method {name!r} of {self}")
        return frozen(attr)

    def call_method(self, tx: Tx, name: str, args, kwargs) -> VariableTracker:
        if not isinstance(self.value, types.MappingProxyType) or name not in _MAPPING_READS:
            raise Unsupported("inspect_call", f"method {name!r} of {self}")
        values = [a.as_python_constant() for a in args]
        try:
            result = getattr(self.value, name)(*values)
        except Exception as e:  # KeyError...: eager raises it
            raise Unsupported("inspect_call", f"{name} raised {type(e).__name__}") from e
        return frozen(tuple(result) if name in ("keys", "values", "items") else result)

    def unpack_sequence(self, tx: Tx) -> list[VariableTracker]:
        return [frozen(v) for v in self.value]

    def reconstruct(self, codegen: Any) -> None:
        codegen.load_const(self.value)

    def __repr__(self) -> str:
        return f"FrozenValueVariable({type(self.value).__name__})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SignatureFunctionVariable(VariableTracker):
    """``inspect.signature`` itself."""

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return inspect.signature

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported("inspect_call", "inspect.signature with options")
        return FrozenValueVariable(inspect.signature(_known_callable(tx, args[0])))


def _known_callable(tx: Tx, vt: VariableTracker) -> Any:
    """The real function or bound method ``vt`` stands for, what its signature is
    computed from guarded."""
    from bytegraph.variables.functions import UserFunctionVariable
    from bytegraph.variables.user_defined import UserMethodVariable

    bound = isinstance(vt, UserMethodVariable)
    fn_vt = vt.fn if bound else vt
    if not isinstance(fn_vt, UserFunctionVariable) or fn_vt.source is None:
        raise Unsupported("inspect_call", f"inspect.signature of {vt}")
    _guard_signature_inputs(tx, fn_vt.fn, fn_vt.source)
    # A bound method's signature drops the first parameter, whatever it is bound to.
    return types.MethodType(fn_vt.fn, object()) if bound else fn_vt.fn


def _guard_signature_inputs(tx: Tx, fn: Any, source: Any, depth: int = 0) -> None:
    """Guard what ``inspect.signature(fn)`` reads: code, defaults, and the
    ``__wrapped__``/``__signature__`` it follows (the function itself is ID_MATCHed)."""
    if depth > 8 or not isinstance(fn, types.FunctionType):
        raise Unsupported("inspect_call", f"inspect.signature of {fn!r}")
    add = tx.output.add_guard
    for name in ("__code__", "__defaults__", "__kwdefaults__", "__annotations__"):
        add(GuardKind.ID_MATCH, AttrSource(source, name), getattr(fn, name))
    attrs = fn.__dict__
    add(GuardKind.DICT_KEYS, AttrSource(source, "__dict__"), (type(attrs), tuple(attrs)))
    if "__signature__" in attrs:
        add(GuardKind.ID_MATCH, AttrSource(source, "__signature__"), attrs["__signature__"])
    if "__wrapped__" in attrs:
        wrapped = attrs["__wrapped__"]
        wrapped_source = AttrSource(source, "__wrapped__")
        add(GuardKind.ID_MATCH, wrapped_source, wrapped)
        _guard_signature_inputs(tx, wrapped, wrapped_source, depth + 1)
