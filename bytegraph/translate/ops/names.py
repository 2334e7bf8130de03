"""Loads and stores of names: fast locals, constants, globals, attributes."""

from __future__ import annotations

import builtins
import dataclasses
import sys
import types
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import BuiltinSource, GlobalSource, ModuleGlobalSource, Source
from bytegraph.translate.ops.exceptions import getattr_raising, vet_attribute
from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.base import NULL, VariableTracker
from bytegraph.variables.builder import wrap, wrap_constant_result
from bytegraph.variables.exceptions import ObservedRaise

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("LOAD_FAST")
def LOAD_FAST(tx: Tx, inst: Instruction) -> None:
    """( -- value)"""
    vt = tx.symbolic_locals.get(inst.argval)
    tx.push(vt if vt is not None else tx.realize_local(inst.argval))


@handler("STORE_FAST")
def STORE_FAST(tx: Tx, inst: Instruction) -> None:
    """(value -- )"""
    tx.symbolic_locals[inst.argval] = tx.pop()


@handler("DELETE_FAST")
def DELETE_FAST(tx: Tx, inst: Instruction) -> None:
    """( -- )"""
    unread = inst.argval in tx.frame_values
    tx.frame_values.pop(inst.argval, None)
    if tx.symbolic_locals.pop(inst.argval, None) is None and not unread:
        raise Unsupported("unbound_name", f"del of unbound local {inst.argval!r}")


@handler("LOAD_CONST")
def LOAD_CONST(tx: Tx, inst: Instruction) -> None:
    """( -- constant)"""
    tx.push(wrap_constant_result(inst.argval))


def load_global(tx: Tx, name: str) -> VariableTracker:
    """A global written by the trace, a module global, else a builtin.

    A builtin is guarded by the absence of a module global shadowing it.
    """
    from bytegraph.side_effects import DELETED

    pending = tx.output.side_effects.load_global(tx.f_globals, name)
    if pending is DELETED:
        raise Unsupported("unbound_name", f"global {name!r} read after its del")
    if pending is not None:
        return pending
    source = global_source(tx, name)
    if name in tx.f_globals:
        return wrap(tx, tx.f_globals[name], source)
    if name in tx.f_builtins:
        tx.output.add_guard(GuardKind.GLOBAL_ABSENT, source)
        return wrap(tx, tx.f_builtins[name], BuiltinSource(name))
    raise Unsupported("unbound_name", f"name {name!r} is not defined (raises in eager)")


def global_source(tx: Tx, name: str) -> GlobalSource | ModuleGlobalSource:
    """``name`` in ``tx``'s globals: the compiled frame's own, or another module's."""
    root = tx
    while getattr(root, "parent", None) is not None:
        root = root.parent
    if tx.f_globals is root.f_globals:
        return GlobalSource(name)
    # ``__name__`` first; the spec's name where a module renames itself
    # (``_collections_abc`` calls itself ``collections.abc``).
    spec = tx.f_globals.get("__spec__")
    for module in (tx.f_globals.get("__name__"), getattr(spec, "name", None)):
        found = sys.modules.get(module) if isinstance(module, str) else None
        if getattr(found, "__dict__", None) is tx.f_globals:
            return ModuleGlobalSource(module, name)
    raise Unsupported("foreign_globals", f"global {name!r} of globals that are no module's")


@handler("LOAD_GLOBAL")
def LOAD_GLOBAL(tx: Tx, inst: Instruction) -> None:
    """( -- [NULL] value); the low oparg bit asks for the NULL."""
    if inst.arg & 1:
        tx.push(NULL)
    tx.push(load_global(tx, inst.argval))


def _load_attr(tx: Tx, obj: VariableTracker, name: str) -> VariableTracker:
    """``obj.name``; a certainly missing attribute raises AttributeError in the trace."""
    try:
        return getattr_raising(tx, obj, name)
    except ObservedRaise as error:
        vet_attribute(tx, error)
        raise


@handler("LOAD_ATTR")
def LOAD_ATTR(tx: Tx, inst: Instruction) -> None:
    """(obj -- obj.name)"""
    tx.push(_load_attr(tx, tx.pop(), inst.argval))


@handler("LOAD_METHOD")
def LOAD_METHOD(tx: Tx, inst: Instruction) -> None:
    """(obj -- NULL bound_method); CALL then sees a plain callable."""
    method = _load_attr(tx, tx.pop(), inst.argval)
    tx.push(NULL)
    tx.push(method)


_MODULE_BODIES = "module and class bodies use it; functions use FAST, GLOBAL and DEREF names"
for _opname in ("LOAD_NAME", "STORE_NAME", "DELETE_NAME", "SETUP_ANNOTATIONS"):
    unsupported_opcode(_opname, _MODULE_BODIES)
unsupported_opcode("IMPORT_STAR", "from m import * is legal only in module bodies")


@dataclasses.dataclass(frozen=True, slots=True)
class SysModulesSource(Source):
    """``sys.modules[name]``: a module an import statement of the frame returned."""

    name: str

    def expr(self) -> str:
        return f"__import__('sys').modules[{self.name!r}]"

    def reconstruct(self, codegen: Any) -> None:
        codegen.load_const(sys.modules)
        codegen.load_const(self.name)
        codegen.append(bc.Instr("BINARY_SUBSCR"))


def _imported(name: str) -> types.ModuleType:
    """``sys.modules[name]`` if importing it again is only a lookup (no module code runs)."""
    module = sys.modules.get(name)
    if not isinstance(module, types.ModuleType) or getattr(
        getattr(module, "__spec__", None), "_initializing", False
    ):
        raise Unsupported("import_at_trace", f"import of {name!r}, not (fully) imported yet")
    return module


@handler("IMPORT_NAME")
def IMPORT_NAME(tx: Tx, inst: Instruction) -> None:
    """(level fromlist -- module): an absolute import of modules already in sys.modules.

    ``__import__`` then only looks them up: ``import a.b`` gives ``sys.modules['a']``,
    ``from a.b import c`` gives ``sys.modules['a.b']`` (whose ``c`` must exist, else
    the import system would load a submodule). The result is guarded by identity.
    """
    fromlist = tx.pop().as_python_constant()
    level = tx.pop().as_python_constant()
    name = inst.argval
    if level != 0 or tx.f_builtins.get("__import__") is not builtins.__import__:
        raise Unsupported("import_at_trace", f"relative or customised import of {name!r}")
    tx.output.add_guard(GuardKind.ID_MATCH, BuiltinSource("__import__"), builtins.__import__)
    parts = name.split(".")
    for i in range(len(parts)):
        _imported(".".join(parts[: i + 1]))
    if fromlist:
        module = _imported(name)
        if any(item == "*" or not hasattr(module, item) for item in fromlist):
            raise Unsupported("import_at_trace", f"from {name} import {fromlist} loads code")
        tx.push(wrap(tx, module, SysModulesSource(name)))
    else:
        tx.push(wrap(tx, _imported(parts[0]), SysModulesSource(parts[0])))


@handler("IMPORT_FROM")
def IMPORT_FROM(tx: Tx, inst: Instruction) -> None:
    """(module -- module value): ``from module import name`` (IMPORT_NAME checked it exists)."""
    tx.push(tx.stack[-1].var_getattr(tx, inst.argval))
