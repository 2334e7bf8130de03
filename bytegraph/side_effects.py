"""SideEffects: the one log of every change to Python state during a trace.

VariableTrackers are frozen. What a program changes lives here instead:

* the current contents of mutable containers and iterators (lists, dicts,
  sets, iterator positions), keyed by the VT that stands for the container;
* attribute stores and deletes on objects;
* writes to closure cells and module globals.

Reads consult the log first, so a value mutated and read back in the same
trace is seen with its new state. After the graph call the generated code
replays, in the order of first mutation, every change to state that existed
before the trace (values with a source); new objects cost nothing unless
they escape, and are then rebuilt with their final state.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.exc import Unsupported

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.variables.base import VariableTracker

DELETED = object()
"""Marks an attribute or global deleted during the trace."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Key:
    """Identity of a mutable VT (VTs compare by identity, keep them alive here)."""

    vt: Any

    def __hash__(self) -> int:
        return id(self.vt)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and other.vt is self.vt


class SideEffects:
    def __init__(self) -> None:
        self._contents: dict[_Key, Any] = {}
        self._attrs: dict[_Key, dict[str, Any]] = {}
        self._globals: dict[str, Any] = {}
        self._order: list[tuple[str, Any]] = []  # (kind, key) in order of first mutation
        self.keepalive: list[Any] = []  # objects whose id() keys a VT: never reused meanwhile

    # -- containers -------------------------------------------------------
    def contents(self, vt: VariableTracker, initial: Any) -> Any:
        """The current contents of a container VT (``initial`` if never mutated)."""
        return self._contents.get(_Key(vt), initial)

    def set_contents(self, vt: VariableTracker, contents: Any) -> None:
        self._check_mutable(vt)
        key = _Key(vt)
        if key not in self._contents:
            self._order.append(("contents", key))
        self._contents[key] = contents

    # -- attributes -------------------------------------------------------
    def load_attr(self, vt: VariableTracker, name: str) -> Any:
        """The pending value of ``vt.name``, ``DELETED``, or None if never stored."""
        return self._attrs.get(_Key(vt), {}).get(name)

    def store_attr(self, vt: VariableTracker, name: str, value: Any) -> None:
        self._check_mutable(vt)
        key = _Key(vt)
        if key not in self._attrs:
            self._attrs[key] = {}
            self._order.append(("attrs", key))
        self._attrs[key][name] = value

    def pending_attrs(self, vt: VariableTracker) -> dict[str, Any]:
        return self._attrs.get(_Key(vt), {})

    # -- globals ----------------------------------------------------------
    def load_global(self, name: str) -> Any:
        return self._globals.get(name)

    def store_global(self, name: str, value: Any) -> None:
        if name not in self._globals:
            self._order.append(("global", name))
        self._globals[name] = value

    # -- what the generated code will need --------------------------------
    def pending_values(self) -> list[Any]:
        """Every VT a replay will store: contents, attribute values, globals."""
        values: list[Any] = []
        for kind, key in self._order:
            if kind == "global":
                values.append(self._globals[key])
            elif kind == "contents":
                values.append(key.vt)
            else:
                values.append(key.vt)
                values.extend(self._attrs[key].values())
        return [v for v in values if v is not DELETED]

    def children(self, vt: Any) -> list[Any]:
        """The VTs directly inside ``vt``, as they are now."""
        items = getattr(vt, "items", None)
        if items is None:
            children: list[Any] = []
        else:
            current = self.contents(vt, items)
            children = list(current.values() if isinstance(current, dict) else current)
        children.extend(v for v in self.pending_attrs(vt).values() if v is not DELETED)
        children.extend(vt.children() if hasattr(vt, "children") else ())
        return children

    # -- checks and replay ------------------------------------------------
    @staticmethod
    def _check_mutable(vt: VariableTracker) -> None:
        if vt.mutation_type is None:
            raise Unsupported("side_effect", f"mutation of {vt}, which the trace treats as immutable")

    def is_modified(self, vt: VariableTracker) -> bool:
        key = _Key(vt)
        return key in self._contents or key in self._attrs

    @property
    def has_replay(self) -> bool:
        """True if some mutation must be replayed after the graph."""
        return any(kind == "global" or key.vt.source is not None for kind, key in self._order)

    def replay_all(self, codegen: PyCodegen) -> None:
        """Emit code performing every mutation of pre-existing state, in order."""
        for kind, key in self._order:
            if kind == "global":
                self._replay_global(codegen, key)
            elif key.vt.source is not None:
                if kind == "contents":
                    key.vt.replay_contents(codegen, self._contents[key])
                else:
                    self._replay_attrs(codegen, key.vt, self._attrs[key])

    def _replay_global(self, codegen: PyCodegen, name: str) -> None:
        value = self._globals[name]
        if value is DELETED:
            codegen.append(bc.Instr("DELETE_GLOBAL", name))
            return
        codegen(value)
        codegen.append(bc.Instr("STORE_GLOBAL", name))

    @staticmethod
    def _replay_attrs(codegen: PyCodegen, vt: VariableTracker, attrs: dict[str, Any]) -> None:
        for name, value in attrs.items():
            if value is DELETED:
                codegen(vt)
                codegen.append(bc.Instr("DELETE_ATTR", name))
                continue
            codegen(value)
            codegen(vt)
            codegen.append(bc.Instr("STORE_ATTR", name))
