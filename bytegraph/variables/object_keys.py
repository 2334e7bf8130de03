"""Dict keys and set elements that are objects: tensors, modules, functions, user objects.

A dict or set of constants keys its trace-time table by the constants themselves
(``dicts.py``, ``sets.py``). An object key is keyed by an ``ObjectKey`` instead:

1. *Which objects.* A class whose ``__hash__`` is ``object``'s (or ``Tensor``'s,
   ``id(self)``) hashes by identity: two live objects never share a hash, so a
   lookup finds the very object, never calls ``__eq__``, and the table's
   behaviour is fixed by which objects it holds. ``ObjectKey.token`` stands for
   that identity: the real object for a value from the frame (the builder gives
   one VT per object, aliases guarded ``SAME_OBJECT``), the VT itself for a value
   made in the trace (a tensor's in-place ops return its VT).
2. *Identity decisions are guarded.* ``p in d`` decided False relies on ``p`` being
   none of the keys next call too. User objects and modules of one type are
   guarded distinct by the builder; a tensor from the frame that becomes a key is
   guarded distinct from the frame tensors keyed before it (``DISTINCT``, one set
   of ids per call), so a call passing one tensor twice misses the cache.
3. *Frames.* A dict (or set) from the frame whose keys are constants or such
   objects is a ``DictVariable`` (``SetVariable``): its type and length guarded,
   each key read through ``tuple(d)[i]`` (a constant key guarded by value, an
   object wrapped as any other frame value), each value through
   ``tuple(d.values())[i]``. A fresh dict holding the same key objects hits the
   cache; the table's order is the guarded key order.
4. *Keys hashed by user code* (a class defining ``__hash__`` in Python): eager
   calls that ``__hash__`` (and ``__eq__`` on hash-equal entries, in probe order)
   a number of times the trace cannot know without running it, and the hashes a
   frame dict stored are not readable. Such keys are allowed in a frame dict for
   what hashes nothing (``len``, iteration, ``keys()/values()/items()``); any
   other operation on that dict, or hashing such an object anywhere, is a graph
   break (``user_hash``), never a call count that differs from eager's.
5. *Rebuilding.* Generated code loads each key's VT (``load_key``): a rebuilt
   dict has the same key objects in the same order. A set is rebuilt by running
   its recipe on the objects of *this* call (``rebuild_set``; a frame set's
   mutations by ``plan_set_replay``, its objects loaded before any replay stores),
   so its table is eager's; a set's iteration order in the trace is that of a real
   set of the real objects (``elements_in_order``), pinned by identity, and
   unknowable (a break) when an element was made in the trace.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bytecode as bc
import torch

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import ChildSource, GetItemSource, Source, source_record
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.sets import SetRecipe

_IDENTITY_HASHES = (object.__hash__, torch.Tensor.__hash__)
_IDENTITY_HASH_IDS = frozenset(map(id, _IDENTITY_HASHES))  # an identity test, no __eq__


@dataclasses.dataclass(frozen=True, eq=False, slots=True)
class ObjectKey:
    """A table key standing for one object: equal to another only for the same object.

    ``vt`` is the VT that loads it; ``user_hash`` marks an object whose class hashes
    in Python (only a frame dict holds one, see the module docstring).
    """

    token: Any
    vt: VariableTracker
    user_hash: bool = False

    def __hash__(self) -> int:
        return hash(id(self.token))

    def __eq__(self, other: object) -> bool:
        return type(other) is ObjectKey and other.token is self.token

    def held_vts(self) -> tuple[VariableTracker, ...]:
        return (self.vt,)

    def __repr__(self) -> str:
        return f"ObjectKey({self.vt})"


@source_record
class DictValuesSource(ChildSource):
    """``tuple(base.values())``: a dict's values in order (keys that are objects have no
    literal to index with, and hashing a user-hashed key would run its ``__hash__``)."""

    def _expr(self) -> str:
        return f"tuple({self.base.expr()}.values())"

    def reconstruct(self, codegen: PyCodegen) -> None:
        from bytegraph.bytecode import assemble

        codegen.load_callable(tuple)
        codegen.load_source(self.base)
        codegen.append(assemble.load_method("values"), *codegen.call_instrs(0))
        codegen.append(*assemble.call(1))


# -- which objects, and their keys ------------------------------------------------


def hash_kind(cls: type) -> str | None:
    """``"identity"``, ``"user"`` (``__hash__`` written in Python), or None (unhashable,
    or hashed by C code this module does not model)."""
    hasher = getattr(cls, "__hash__", None)
    if id(hasher) in _IDENTITY_HASH_IDS:
        return "identity"
    if isinstance(hasher, types.FunctionType):
        return "user"
    return None


def _token(vt: VariableTracker) -> Any:
    """What the identity of ``vt``'s object is, at trace time; None if not known."""
    from bytegraph.variables.functions import UserFunctionVariable
    from bytegraph.variables.objects import ObjectVariable
    from bytegraph.variables.tensor import TensorVariable
    from bytegraph.variables.user_defined import UserDefinedObjectVariable

    if isinstance(vt, TensorVariable):
        return vt  # one VT per frame tensor (builder), in-place ops return their VT
    if isinstance(vt, UserFunctionVariable):
        return vt.fn if vt.by_identity else None  # one made per call: no identity known
    if isinstance(vt, (UserDefinedObjectVariable, ObjectVariable)) and vt.source is not None:
        return vt.value if guarded_alias_free(vt) else None
    if vt.source is None and vt.mutation_type is not None:
        return vt  # made in the trace: its VT is the object
    return None


def guarded_alias_free(vt: VariableTracker) -> bool:
    """Whether the builder keeps this frame object's aliases apart (an identity guard, or
    one VT per object with DISTINCT guards): not one guarded by its type alone."""
    from bytegraph.variables.objects import ObjectVariable

    return not (isinstance(vt, ObjectVariable) and type(vt.value) in _BY_TYPE_ONLY)


_BY_TYPE_ONLY = frozenset({types.GeneratorType, io.StringIO, io.BytesIO})  # builder's


def object_key(tx: Tx, vt: VariableTracker) -> ObjectKey:
    """The key of the object ``vt``, or Unsupported where its hash is not modelled."""
    kind = hash_kind(vt.python_type())
    token = _token(vt) if kind is not None else None
    if token is None:
        raise Unsupported("operation_raises", f"{vt} as a dict key or set element")
    if kind == "identity":
        _guard_distinct(tx, vt)
    return ObjectKey(token, vt, user_hash=kind == "user")


def _guard_distinct(tx: Tx, vt: VariableTracker) -> None:
    """A frame tensor used as a key is no other frame tensor used as one (tables told
    them apart): each guarded distinct from those keyed before it, once."""
    from bytegraph.variables.tensor import TensorVariable

    keyed = tx.output.keyed_tensors
    if not isinstance(vt, TensorVariable) or vt.source is None or vt.source in keyed:
        return
    if keyed:
        tx.output.add_guard(GuardKind.DISTINCT, vt.source, tuple(keyed))
    keyed[vt.source] = vt


def table_key(tx: Tx, vt: VariableTracker, constant: Any) -> Any:
    """How a dict or set at trace time holds ``vt``: ``constant()`` (its value) if it is
    a constant, else its ObjectKey; Unsupported where hashing it runs user code."""
    try:
        return constant()
    except Unsupported:
        if isinstance(vt, ConstantVariable) or hash_kind(_python_type(vt)) is None:
            raise
    key = object_key(tx, vt)
    if key.user_hash:
        raise _user_hash(vt)
    return key


def _python_type(vt: VariableTracker) -> type:
    try:
        return vt.python_type()
    except Unsupported:
        return type(None)


def _user_hash(what: Any) -> Unsupported:
    return Unsupported(
        "user_hash",
        f"hashing {what} runs its class's __hash__/__eq__ (eager's call count is not modelled)",
    )


def refuse_user_hashing(keys: Any) -> None:
    """Unsupported if ``keys`` (a table's) holds an object its class hashes in Python: an
    operation that hashes would compare against it through user code."""
    if any(type(k) is ObjectKey and k.user_hash for k in keys):
        raise _user_hash("into a dict whose keys hash in user code")


def has_object_keys(keys: Any) -> bool:
    return any(type(k) is ObjectKey for k in keys)


def key_variable(key: Any) -> VariableTracker:
    """The VT of a key as a table holds it."""
    return key.vt if type(key) is ObjectKey else ConstantVariable(key)


def load_key(codegen: PyCodegen, key: Any) -> None:
    if type(key) is ObjectKey:
        codegen(key.vt)
    else:
        codegen.load_const(key)


# -- dicts and sets from the frame ----------------------------------------------------


def _frame_key_ok(key: Any) -> bool:
    """A key ``wrap_frame_table`` takes: a constant, or an object hashed by identity (or,
    in a dict, by user code) that the builder wraps as a tracked object."""
    from bytegraph.variables.user_defined import is_user_class

    kind = hash_kind(type(key))
    if is_constant_value(key) or (isinstance(key, type) and kind == "identity"):
        return True
    if kind is None:
        return False
    if type(key) in (torch.Tensor, torch.nn.Parameter) or isinstance(key, torch.nn.Module):
        return True
    return isinstance(key, types.FunctionType) or is_user_class(type(key))


def _element_vt(tx: Tx, key: Any, source: Source) -> Any:
    """The table key of a frame container's element read through ``source``."""
    from bytegraph.variables.builder import wrap

    if is_constant_value(key):
        tx.output.add_guard(GuardKind.CONSTANT_MATCH, source, key)
        return key
    vt = wrap(tx, key, source)
    if vt.is_python_constant():  # a class: the very object, guarded by identity
        return vt.as_python_constant()
    return object_key(tx, vt)


def wrap_frame_table(tx: Tx, value: Any, source: Source) -> VariableTracker | None:
    """A dict or set from the frame with object keys; None where any key is not modelled."""
    from bytegraph.variables.sets import SetElementsSource

    if not value or not all(_frame_key_ok(k) for k in value):
        return None
    if isinstance(value, (set, frozenset)) and (
        type(value) is frozenset or any(hash_kind(type(k)) == "user" for k in value)
    ):
        return None
    tx.output.add_guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
    elements = SetElementsSource(source)
    keys = [_element_vt(tx, k, GetItemSource(elements, i)) for i, k in enumerate(value)]
    if isinstance(value, set):
        return _frame_set(keys, source)
    return _frame_dict(tx, value, keys, source)


def _frame_dict(tx: Tx, value: dict, keys: list[Any], source: Source) -> VariableTracker:
    from bytegraph.guards.sources import AttrSource
    from bytegraph.variables.builder import EXISTING_VALUE, wrap
    from bytegraph.variables.dicts import DictVariable

    values = DictValuesSource(source)
    items = {
        key: wrap(tx, item, GetItemSource(values, i))
        for i, (key, item) in enumerate(zip(keys, value.values()))
    }
    factory = None
    if hasattr(value, "default_factory"):
        factory = wrap(tx, value.default_factory, AttrSource(source, "default_factory"))
    return DictVariable(items, type(value), factory, source=source, mutation_type=EXISTING_VALUE)


def _frame_set(keys: list[Any], source: Source) -> VariableTracker:
    from bytegraph.variables.builder import EXISTING_VALUE
    from bytegraph.variables.sets import SetRecipe, SetVariable, _create

    order = tuple(keys)
    recipe = SetRecipe(((_create, (set, order)),), exact=False, order=order)
    return SetVariable(recipe, source=source, mutation_type=EXISTING_VALUE)


# -- sets: order and rebuilding on the real objects ------------------------------------


def keys_in(value: Any) -> list[ObjectKey]:
    """Every ObjectKey inside a recipe's arguments (once each, first-seen order)."""
    found: dict[ObjectKey, None] = {}
    _gather(value, found)
    return list(found)


def _gather(value: Any, found: dict) -> None:
    from bytegraph.variables.sets import SetRecipe

    if type(value) is ObjectKey:
        found.setdefault(value, None)
    elif isinstance(value, SetRecipe):
        for _, args in value.steps:
            _gather(args, found)
    elif isinstance(value, (tuple, list, dict)):
        for item in value:
            _gather(item, found)


def substitute(value: Any, objects: dict[ObjectKey, Any]) -> Any:
    """``value`` with each ObjectKey replaced by its object in ``objects``."""
    from bytegraph.variables.sets import SetRecipe

    if type(value) is ObjectKey:
        return objects[value]
    if isinstance(value, SetRecipe):
        steps = tuple((fn, substitute(args, objects)) for fn, args in value.steps)
        order = None if value.order is None else substitute(value.order, objects)
        return SetRecipe(steps, value.exact, order)
    if isinstance(value, (tuple, list)):
        return type(value)(substitute(item, objects) for item in value)
    if isinstance(value, dict):
        return dict.fromkeys(substitute(item, objects) for item in value)
    return value


def _real_object(tx: Tx, key: ObjectKey) -> Any:
    """The object a key stands for in this trace, pinned by identity; Unsupported for
    one made in the trace (it has no object until the generated code runs)."""
    from bytegraph.variables.tensor import TensorVariable

    vt = key.vt
    if vt.source is None:
        raise Unsupported(
            "set_order_unknown", f"iteration order of a set holding {vt}, made in the trace"
        )
    real = key.token
    if isinstance(vt, TensorVariable):
        real = next(i.example for i in tx.output.inputs if i.node is vt.node)
    tx.output.add_guard(GuardKind.ID_MATCH, vt.source, real)
    return real


def elements_in_order(tx: Tx, recipe: SetRecipe) -> tuple[Any, ...]:
    """The elements (constants and ObjectKeys) as eager iterates the set."""
    keys = keys_in(recipe)
    if not keys or not recipe.exact:
        return recipe.elements_in_order()  # a frame set's guarded order, or Unsupported
    objects = {key: _real_object(tx, key) for key in keys}
    back = {id(obj): key for key, obj in objects.items()}
    return tuple(back.get(id(e), e) for e in substitute(recipe, objects).build())


def refuse_order(recipe: SetRecipe, what: str) -> None:
    """Unsupported for an operation whose result follows a table holding objects."""
    if keys_in(recipe):
        raise Unsupported("set_order_unknown", f"{what} of a set holding objects")


def _build_with(recipe: SetRecipe, keys: tuple[ObjectKey, ...], objects: tuple) -> Any:
    return substitute(recipe, dict(zip(keys, objects))).build()


def _replay_with(target: set, objects: tuple, steps: tuple, keys: tuple[ObjectKey, ...]) -> None:
    from bytegraph.variables.sets import _replay

    _replay(target, substitute(steps, dict(zip(keys, objects))))


def rebuild_set(codegen: PyCodegen, recipe: SetRecipe) -> None:
    """Leave a set built by ``recipe`` on the stack, on this call's objects."""
    from bytegraph.variables.containers import TupleVariable

    keys = tuple(keys_in(recipe))
    if not keys:
        codegen.call_const(recipe.build, [])
        return
    objects = TupleVariable(tuple(k.vt for k in keys))
    codegen.call_const(functools.partial(_build_with, recipe, keys), [objects])


def plan_set_replay(replay: Any, target: VariableTracker, steps: tuple) -> Callable[[], None]:
    """Load the real set ``target`` and the objects ``steps`` add now (an earlier replay
    may change what their sources read); return the store that runs ``steps`` on it."""
    from bytegraph.bytecode import assemble
    from bytegraph.variables.containers import TupleVariable
    from bytegraph.variables.sets import _replay

    keys = tuple(keys_in(steps))
    loaded = [replay.load(target)]
    if keys:
        loaded.append(replay.load(TupleVariable(tuple(k.vt for k in keys))))
        run = functools.partial(_replay_with, steps=steps, keys=keys)
    else:
        run = functools.partial(_replay, steps=steps)

    def store() -> None:
        replay.codegen.load_callable(run)
        replay.emit(*(bc.Instr("LOAD_FAST", name) for name in loaded))
        replay.emit(*assemble.call(len(loaded)), bc.Instr("POP_TOP"))

    return store
