"""SideEffects: the one log of every change to Python state during a trace.

VariableTrackers are frozen. What a program changes lives here instead:

* the current contents of mutable containers and iterators (lists, dicts,
  sets, iterator positions), keyed by the VT that stands for the container;
* attribute stores and deletes on objects, classes and closure cells
  (``DELETED`` marks a delete);
* writes to module globals, keyed by the globals dict and the name;
* calls the replay makes (``print`` and logging on constants, when
  ``config.reorderable_logging`` is on), in program order;
* numbers drawn from ``random`` generators whose state only the call knows
  (``draws``: made by the transformed code *before* the graph, random_draws.py).

Reads consult the log first, so a value mutated and read back in the same
trace is seen with its new state. The log also knows every object that
existed before the trace (``track_existing``): one VT per real object, so two
sources reaching the same object share their pending mutations.

After the graph call the generated code replays every change to state that
existed before the trace (values with a source, and globals), in the order of
first mutation and in two phases: first every target and every value is
loaded into a temporary, then the stores run. A store can therefore never
change what a later replay reads (``a = o.x; o.x = 1; p.y = a``). New objects
cost nothing unless they escape (returned, or stored into something that is
replayed); they are then rebuilt with their final state.

Inside a nested higher-order op (``enter_scope``) only values created in that
same scope may be mutated; anything else is ``Unsupported("side_effect")``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.body_stores import ABSENT, ScopeStores, unrestored
from bytegraph.dropped_values import DROPPED_TYPES as _DROPPED
from bytegraph.dropped_values import check_dropped, check_replaced, dropped
from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource
from bytegraph.random_draws import DrawPlan
from bytegraph.variables.base import VariableTracker

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.variables.base import MutationType, VariableTracker

DELETED = object()
"""Marks an attribute, cell or global deleted during the trace."""

NOTHING = object()
"""What a read of the log found where it holds no entry (in ``SideEffects.reads``)."""

TOP_SCOPE = 1
"""The scope of values created by the frame itself (0 is "existed before the trace")."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Key:
    """Identity of a mutable VT (VTs compare by identity, keep them alive here)."""

    vt: Any

    def __hash__(self) -> int:
        return id(self.vt)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and other.vt is self.vt


@dataclasses.dataclass(frozen=True, slots=True)
class _GlobalKey:
    """A module global: the very dict it lives in, and its name."""

    f_globals: dict[str, Any] = dataclasses.field(compare=False, hash=False)
    name: str
    dict_id: int

    @staticmethod
    def of(f_globals: dict[str, Any], name: str) -> _GlobalKey:
        return _GlobalKey(f_globals, name, id(f_globals))


class SideEffects:
    def __init__(self, add_guard: Any = None) -> None:
        self._contents: dict[_Key, Any] = {}
        self._attrs: dict[_Key, dict[str, Any]] = {}
        self._globals: dict[_GlobalKey, Any] = {}
        self._order: list[tuple[str, Any]] = []  # (kind, key) in order of first mutation
        self.keepalive: list[Any] = []  # objects whose id() keys a VT: never reused meanwhile
        self._existing: dict[int, VariableTracker] = {}
        self._existing_by_type: dict[type, list[VariableTracker]] = {}
        self.scope = TOP_SCOPE
        # New objects whose rebuild is under way (id -> temporary): a cycle reloads them.
        self.rebuilding: dict[int, str] = {}
        self.draws = DrawPlan()  # random-module draws the code makes before the graph
        self._body_stores: list[ScopeStores] = []  # per body being traced, innermost last
        self.add_guard = add_guard  # the OutputGraph's: what undone stores rely on is guarded
        # While a call is recorded for reuse (translate/fragments.py): every read of the
        # log as (table, key, name, entry found or NOTHING, value returned), and every
        # write as ("write", table, key, name, None). None: nobody listens.
        self.reads: list[tuple[Any, ...]] | None = None
        # Class-attribute lookups of this trace (variables/user_defined.py), each with the
        # reads of this log it made; emptied by every attribute write, undo, or class
        # newly tracked, the only changes of what such a lookup finds within a trace.
        self.class_lookups: dict[Any, Any] = {}

    def release(self) -> None:
        """The trace is over: let go of the frame's objects it tracked. A VT holds its
        trace's OutputGraph, which holds these: a cycle, through which the caller's
        objects (a generator among them) would live until the cyclic collector runs,
        where eager frees them, and closes such a generator, when the call returns."""
        for table in (self._contents, self._attrs, self._globals, self._existing,
                      self._existing_by_type):
            table.clear()
        self._order.clear()
        self.keepalive.clear()
        self.class_lookups.clear()

    def log_length(self) -> int:
        """How many objects, globals and calls the log holds (it only grows)."""
        return len(self._order)

    def logged(self, entries: int) -> list[Any]:
        """The VTs the log's first ``entries`` entries change, and the values they hold."""
        found: list[Any] = []
        for kind, key in self._order[:entries]:
            if kind == "global":
                found.append(self._globals[key])
            elif kind == "contents":
                found.append(key.vt)
            elif kind == "attrs":
                found.append(key.vt)
                found.extend(self._attrs[key].values())
        return [v for v in found if v is not DELETED]

    def pending_sources(self) -> list[Any]:
        """The sources of the frame's objects with a change pending."""
        return [
            key.vt.source for kind, key in self._order
            if kind in ("contents", "attrs") and key.vt.source is not None
        ]

    # -- objects that existed before the trace ------------------------------

    def existing(self, value: Any) -> VariableTracker | None:
        """The VT already standing for the real object ``value``, if any."""
        return self._existing.get(id(value))

    def track_existing(self, value: Any, vt: VariableTracker) -> list[VariableTracker]:
        """Make ``vt`` the one VT of ``value``; the earlier VTs of objects of its type."""
        self._existing[id(value)] = vt
        self.keepalive.append(value)
        if isinstance(value, type):
            self.class_lookups.clear()
        same_type = self._existing_by_type.setdefault(type(value), [])
        earlier = list(same_type)
        same_type.append(vt)
        return earlier

    def track_made(self, value: Any, vt: VariableTracker) -> None:
        """``value`` is a real stand-in for what the trace made (a class built by a class
        statement, variables/made_classes.py): looking ``value`` up finds ``vt``."""
        self._existing[id(value)] = vt
        self.keepalive.append(value)
        self.class_lookups.clear()

    # -- scopes of nested higher-order ops -------------------------------------
    @contextlib.contextmanager
    def enter_scope(self) -> Iterator[None]:
        """Trace the body of a nested higher-order op: mutations stay inside it."""
        from bytegraph.variables.base import CreationScope

        outer = self.scope
        self.scope = CreationScope.current = outer + 1
        self._body_stores.append(ScopeStores())
        try:
            yield
            self._undo_body_stores(self._body_stores[-1])
        finally:
            self._body_stores.pop()
            self.scope = CreationScope.current = outer

    def _undo_body_stores(self, stores: ScopeStores) -> None:
        """Put back the log as before the body, which undid its outside stores itself;
        Unsupported if it left one changed (body_stores.py)."""
        left = unrestored(self, stores, self.add_guard)
        if left is not None:
            vt, name = left
            raise Unsupported(
                "side_effect_in_higher_order_body",
                f"mutation of {vt}, created outside the higher-order op being traced: "
                f"attribute {name!r} set in the body and not set back before it ends",
            )
        self.class_lookups.clear()
        for vt, name, before in stores.before.values():
            attrs = self._attrs[_Key(vt)]
            if before is ABSENT:
                del attrs[name]
            else:
                attrs[name] = before
            if not attrs:
                del self._attrs[_Key(vt)]
                self._order.remove(("attrs", _Key(vt)))

    def new_mutation(self, kind: type[MutationType]) -> MutationType:
        """The mutation type of a value created now (``ValueMutationNew``...)."""
        return kind(self.scope)

    def check_allowed_side_effect(self, vt: VariableTracker) -> None:
        """Unsupported unless ``vt`` may be mutated in the current scope."""
        mutation = vt.mutation_type
        if mutation is None:
            raise Unsupported(
                "immutable_value_mutation", f"mutation of {vt}, which the trace treats as immutable"
            )
        if self.scope > TOP_SCOPE and mutation.scope != self.scope:
            raise Unsupported(
                "side_effect_in_higher_order_body",
                f"mutation of {vt}, created outside the higher-order op being traced "
                f"(created in scope {mutation.scope}, mutated in scope {self.scope})",
            )

    def _outside_body(self, vt: VariableTracker) -> bool:
        """Whether ``vt`` is an object created outside the body being traced."""
        mutation = vt.mutation_type
        return self.scope > TOP_SCOPE and mutation is not None and mutation.scope != self.scope

    def _check_global_write(self, name: str) -> None:
        if self.scope > TOP_SCOPE:
            raise Unsupported(
                "side_effect_in_higher_order_body",
                f"write to global {name!r} inside a higher-order op",
            )

    # -- containers -------------------------------------------------------
    def contents(self, vt: VariableTracker, initial: Any) -> Any:
        """The current contents of a container VT (``initial`` if never mutated)."""
        key = _Key(vt)
        found = self._contents.get(key, NOTHING)
        value = initial if found is NOTHING else found
        if self.reads is not None:
            self.reads.append(("contents", key, None, found, value))
        return value

    def entry(self, table: str, key: Any, name: Any) -> Any:
        """What a read of ``table`` (as in ``reads``) finds now, or NOTHING."""
        if table == "contents":
            return self._contents.get(key, NOTHING)
        if table == "attrs":
            return self._attrs.get(key, {}).get(name, NOTHING)
        if table == "all_attrs":
            return tuple(self._attrs.get(key, {}).items())
        return self._globals.get(key, NOTHING)

    def _note_write(self, table: str, key: Any, name: Any = None) -> None:
        if self.reads is not None:
            self.reads.append(("write", table, key, name, None))

    def set_contents(self, vt: VariableTracker, contents: Any) -> None:
        self.check_allowed_side_effect(vt)
        if vt.source is not None:
            self._check_dropped_contents(vt, contents)
        key = _Key(vt)
        self._note_write("contents", key)
        if key not in self._contents:
            self._order.append(("contents", key))
        self._contents[key] = contents

    def _check_dropped_contents(self, vt: VariableTracker, contents: Any) -> None:
        """The existing generators the new contents let go of (dropped_values.py)."""
        from bytegraph.variables.base import VariableTracker

        held = [v for v in self.children(vt) if type(getattr(v, "value", None)) in _DROPPED]
        if held:
            kept: list[Any] = []
            _collect(contents, kept, VariableTracker)
            check_dropped(dropped(held, kept), self.add_guard)

    # -- attributes -------------------------------------------------------
    def load_attr(self, vt: VariableTracker, name: str) -> Any:
        """The pending value of ``vt.name``, ``DELETED``, or None if never stored."""
        key = _Key(vt)
        found = self._attrs.get(key, {}).get(name, NOTHING)
        if self.reads is not None:
            self.reads.append(("attrs", key, name, found, found))
        return None if found is NOTHING else found

    def store_attr(self, vt: VariableTracker, name: str, value: Any) -> None:
        key = _Key(vt)
        self.class_lookups.clear()
        self._check_replaced_attr(vt, name)
        self._note_write("attrs", key, name)
        if self._outside_body(vt):  # allowed if the body undoes it (body_stores.py)
            self._body_stores[-1].note(vt, name, self._attrs.get(key, {}).get(name, ABSENT))
        else:
            self.check_allowed_side_effect(vt)
        if key not in self._attrs:
            self._attrs[key] = {}
            self._order.append(("attrs", key))
        attrs = self._attrs[key]
        if attrs.get(name) is DELETED:
            del attrs[name]  # deleted then set again: it goes to the end, as in a __dict__
        attrs[name] = value

    def _check_replaced_attr(self, vt: VariableTracker, name: str) -> None:
        """What a store to ``vt.name`` lets go of: the value stored before in this trace,
        else the real object's own (its ``__dict__``'s; dropped_values.py)."""
        pending = self._attrs.get(_Key(vt), {}).get(name)
        if pending is not None:
            if pending is not DELETED:
                check_dropped([pending], self.add_guard)
            return
        own = getattr(getattr(vt, "value", None), "__dict__", None)
        if vt.source is not None and isinstance(own, Mapping) and name in own:
            check_replaced(own[name], AttrSource(vt.source, name), self.add_guard)

    def delete_attr(self, vt: VariableTracker, name: str) -> None:
        self.store_attr(vt, name, DELETED)

    def forget_attr(self, vt: VariableTracker, name: str) -> None:
        """Drop the pending store of ``vt.name``: the real object is left as it was."""
        self.check_allowed_side_effect(vt)
        self.class_lookups.clear()
        self._note_write("attrs", _Key(vt), name)
        self._attrs.get(_Key(vt), {}).pop(name, None)

    def pending_attrs(self, vt: VariableTracker) -> dict[str, Any]:
        found = self._attrs.get(_Key(vt), {})
        if self.reads is not None:
            snapshot = tuple(found.items())
            self.reads.append(("all_attrs", _Key(vt), None, snapshot, snapshot))
        return found

    # -- globals ----------------------------------------------------------
    def load_global(self, f_globals: dict[str, Any], name: str) -> Any:
        """The pending value of a global, ``DELETED``, or None if never written."""
        key = _GlobalKey.of(f_globals, name)
        found = self._globals.get(key, NOTHING)
        if self.reads is not None:
            self.reads.append(("global", key, None, found, found))
        return None if found is NOTHING else found

    def store_global(self, f_globals: dict[str, Any], name: str, value: Any) -> None:
        self._check_global_write(name)
        key = _GlobalKey.of(f_globals, name)
        self._note_write("global", key)
        if key not in self._globals:
            self._order.append(("global", key))
        self._globals[key] = value

    def delete_global(self, f_globals: dict[str, Any], name: str) -> None:
        self.store_global(f_globals, name, DELETED)

    # -- deferred calls ---------------------------------------------------
    def record_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """``fn(*args, **kwargs)`` made by the replay, in order with the other entries:
        a print or log call on constants (variables/logging_calls.py)."""
        self._note_write("call", None)
        self._order.append(("call", _Call(fn, args, kwargs)))

    # -- what the generated code will need --------------------------------
    def _replayed(self) -> Iterator[tuple[str, Any]]:
        """The log entries a replay performs: globals, calls and state with a source."""
        for kind, key in self._order:
            if kind in ("global", "call") or key.vt.source is not None:
                yield kind, key

    def pending_values(self) -> list[Any]:
        """Every VT a replay stores (new objects inside them are found via ``children``)."""
        values: list[Any] = []
        for kind, key in self._replayed():
            if kind == "call":
                continue  # its arguments are constants; its callable a source or a builtin
            if kind == "global":
                values.append(self._globals[key])
            elif kind == "contents":
                values.append(key.vt)
            else:
                values.extend(self._attrs[key].values())
        return [v for v in values if v is not DELETED]

    def children(self, vt: Any) -> list[Any]:
        """The VTs directly inside ``vt``, as they are now.

        Every VT held in a field of ``vt`` (a bound method's receiver, a
        partial's arguments...), a container's current contents instead of
        its initial ``items``, and the attributes stored on it.
        """
        children: list[Any] = []
        if dataclasses.is_dataclass(vt):
            for field in dataclasses.fields(vt):
                if field.name in ("source", "mutation_type") or field.metadata.get("no_vts"):
                    continue
                value = getattr(vt, field.name)
                if field.name == "items" or field.metadata.get("contents"):
                    value = self.contents(vt, value)
                _collect(value, children, VariableTracker)
        children.extend(v for v in self.pending_attrs(vt).values() if v is not DELETED)
        children.extend(vt.children() if hasattr(vt, "children") else ())
        return children

    def is_modified(self, vt: VariableTracker) -> bool:
        key = _Key(vt)
        return key in self._contents or key in self._attrs

    @property
    def has_replay(self) -> bool:
        """True if some mutation must be replayed after the graph."""
        return next(self._replayed(), None) is not None

    # -- replay -------------------------------------------------------------
    def replay_all(self, codegen: PyCodegen) -> None:
        """Emit code performing every mutation of pre-existing state, in order.

        Phase one loads every target and every stored value into temporaries;
        phase two stores. Rebuilding a value never sees a half-replayed state.
        """
        replay = _Replay(codegen)
        stores = [self._plan(replay, kind, key) for kind, key in self._replayed()]
        for store in stores:
            store()

    def _plan(self, replay: _Replay, kind: str, key: Any) -> Any:
        """Load what one log entry needs now; return the function emitting its store."""
        if kind == "global":
            return self._plan_global(replay, key)
        if kind == "call":
            return _plan_call(replay, key)
        if kind == "contents":
            return _plan_contents(replay, key.vt, self._contents[key])
        target = replay.load(key.vt)
        values = {
            name: (None if value is DELETED else replay.load(value))
            for name, value in self._attrs[key].items()
        }

        raw = getattr(key.vt, "raw_attribute_stores", False)

        def store() -> None:
            for name, temp in values.items():
                if raw:  # object.__setattr__(target, name, temp) / __delattr__(target, name)
                    _emit_raw_store(replay, target, name, temp)
                elif temp is None:
                    replay.emit(bc.Instr("LOAD_FAST", target), bc.Instr("DELETE_ATTR", name))
                else:
                    replay.emit(
                        bc.Instr("LOAD_FAST", temp),
                        bc.Instr("LOAD_FAST", target),
                        bc.Instr("STORE_ATTR", name),
                    )

        return store

    def _plan_global(self, replay: _Replay, key: _GlobalKey) -> Any:
        value = self._globals[key]
        temp = None if value is DELETED else replay.load(value)
        self.keepalive.append(key.f_globals)

        def store() -> None:
            # ``f_globals[name] = value``: the dict itself is a constant of the code,
            # so a global of another module (an inlined callee's) lands in its module.
            if temp is not None:
                replay.emit(bc.Instr("LOAD_FAST", temp))
            replay.emit(bc.Instr("LOAD_CONST", key.f_globals), bc.Instr("LOAD_CONST", key.name))
            replay.emit(bc.Instr("DELETE_SUBSCR" if temp is None else "STORE_SUBSCR"))

        return store


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class _Call:
    """A call the replay makes: ``fn`` is a VT with ``load_callable(codegen)``."""

    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _emit_raw_store(replay: _Replay, target: str, name: str, temp: str | None) -> None:
    """A store the class's own ``__setattr__`` made (the trace inlined it): replayed by
    ``object``'s, so the custom method does not run a second time."""
    from bytegraph.bytecode import assemble

    method = object.__delattr__ if temp is None else object.__setattr__
    replay.emit(*assemble.with_null([bc.Instr("LOAD_CONST", method)]))
    replay.emit(bc.Instr("LOAD_FAST", target), bc.Instr("LOAD_CONST", name))
    if temp is not None:
        replay.emit(bc.Instr("LOAD_FAST", temp))
    replay.emit(*assemble.call(2 if temp is None else 3), bc.Instr("POP_TOP"))


def _plan_call(replay: _Replay, call: _Call) -> Any:
    """Load the callable now (``logger.info`` bound before any store); call it later."""
    from bytegraph.bytecode import assemble

    call.fn.load_callable(replay.codegen)
    fn = replay.store_top()

    def store() -> None:  # fn(*args, **kwargs)
        replay.emit(*assemble.with_null([bc.Instr("LOAD_FAST", fn)]))
        replay.emit(bc.Instr("LOAD_CONST", call.args), bc.Instr("LOAD_CONST", call.kwargs))
        replay.emit(bc.Instr("CALL_FUNCTION_EX", 1), bc.Instr("POP_TOP"))

    return store


def _collect(value: Any, found: list[Any], vt_class: type) -> None:
    """The VTs in ``value``: itself, or inside its tuples, lists and dicts."""
    if isinstance(value, vt_class):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _collect(item, found, vt_class)
    elif isinstance(value, dict):
        for key, item in value.items():
            _collect(key, found, vt_class)  # an object key (variables/object_keys.py)
            _collect(item, found, vt_class)
    elif hasattr(type(value), "held_vts"):  # an object key, a set's recipe
        for item in value.held_vts():
            _collect(item, found, vt_class)


class _Replay:
    """Temporaries of one replay: each load leaves its value in a fresh local."""

    def __init__(self, codegen: PyCodegen) -> None:
        self.codegen = codegen
        self.count = 0

    def load(self, vt: VariableTracker) -> str:
        self.codegen(vt)
        return self.store_top()

    def store_top(self) -> str:
        name = f"___replay{self.count}"
        self.count += 1
        self.codegen.append(bc.Instr("STORE_FAST", name))
        return name

    def emit(self, *instrs: bc.Instr) -> None:
        self.codegen.append(*instrs)


def _plan_contents(replay: _Replay, vt: Any, contents: Any) -> Any:
    """Lists and dicts: build the final contents now, write them in place later."""
    from bytegraph.bytecode import assemble
    from bytegraph.variables.containers import DictVariable, ListVariable

    if isinstance(vt, ListVariable):
        target = replay.load(vt)
        new = replay.load(ListVariable(tuple(contents)))

        def store_list() -> None:  # target[:] = new
            replay.emit(
                bc.Instr("LOAD_FAST", new),
                bc.Instr("LOAD_FAST", target),
                bc.Instr("LOAD_CONST", slice(None)),
                bc.Instr("STORE_SUBSCR"),
            )

        return store_list
    if isinstance(vt, DictVariable):
        target = replay.load(vt)
        new = replay.load(DictVariable(dict(contents)))

        def store_dict() -> None:  # target.clear(); target.update(new)
            codegen = replay.codegen
            for method, arg in (("clear", None), ("update", new)):
                replay.emit(bc.Instr("LOAD_FAST", target), assemble.load_method(method))
                if arg is not None:
                    replay.emit(bc.Instr("LOAD_FAST", arg))
                replay.emit(*codegen.call_instrs(0 if arg is None else 1), bc.Instr("POP_TOP"))

        return store_dict

    plan = getattr(vt, "plan_replay", None)
    if plan is not None:  # it loads what it needs now, and returns its store
        return plan(replay, contents)

    def store_other() -> None:  # a container kind that replays itself
        vt.replay_contents(replay.codegen, contents)

    return store_other
