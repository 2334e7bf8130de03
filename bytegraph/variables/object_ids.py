"""``id(obj)`` of an object the trace knows, folded at trace time.

Libraries key registries by identity: the ``kernels`` package (which
transformers wraps layers with) routes a module's calls through a dict
``{id(fn): ...}`` built on every call and read with ``.get(id(self))``.
``id`` of an object from the frame is the id of the very object the builder
wrapped (``value`` of its VT), so the trace

1. guards that object by identity (ID_MATCH on the VT's source): the next
   call that hits the cache reaches the same object there, so its id is the
   same int (the guard holds the object alive, so the int is never reused);
2. returns that int as a constant, which then folds like any other (a dict
   key, a comparison).

Everything else is a break (``object_id``): an object made in the trace
(it does not exist yet, so it has no id to fold), a tensor, a nested
function made anew each call (guarding its identity would miss the cache on
every call), a class reached without a source (a per-instance class is
guarded by its shape, not its identity), and constants other than the
singletons (the identity of an int or a str is CPython's choice).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_SINGLETONS = (None, True, False, Ellipsis, NotImplemented)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ObjectIdFunctionVariable(VariableTracker):
    """The builtin ``id`` itself."""

    def python_type(self) -> type:
        return type(id)

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported("object_id", "id() takes exactly one argument (TypeError in eager)")
        return ConstantVariable(id(_known_object(tx, args[0])))

    def __repr__(self) -> str:
        return "ObjectIdFunctionVariable()"


def _known_object(tx: Tx, vt: VariableTracker) -> Any:
    """The real object ``vt`` stands for, guarded by identity; Unsupported if none is known."""
    if isinstance(vt, ConstantVariable):
        if any(vt.value is s for s in _SINGLETONS):
            return vt.value
        raise Unsupported("object_id", f"id() of the constant {vt.value!r}")
    obj = _frame_object(vt)
    if obj is _UNKNOWN:
        raise Unsupported("object_id", f"id() of {vt}")
    tx.output.add_guard(GuardKind.ID_MATCH, vt.source, obj)
    return obj


_UNKNOWN = object()


def _frame_object(vt: VariableTracker) -> Any:
    """The object at ``vt``'s source, for the VTs that hold it; ``_UNKNOWN`` otherwise."""
    from bytegraph.variables.functions import UserFunctionVariable
    from bytegraph.variables.object_keys import guarded_alias_free
    from bytegraph.variables.objects import ObjectVariable
    from bytegraph.variables.torch import PythonModuleVariable
    from bytegraph.variables.user_defined import UserDefinedObjectVariable

    if vt.source is None:
        return _UNKNOWN
    if isinstance(vt, UserFunctionVariable):
        return vt.fn if vt.by_identity else _UNKNOWN
    if isinstance(vt, (UserDefinedObjectVariable, ObjectVariable)):
        known = vt.value is not None and guarded_alias_free(vt)
        return vt.value if known else _UNKNOWN
    if isinstance(vt, (PythonValueVariable, PythonModuleVariable)):
        return vt.value
    return _UNKNOWN
