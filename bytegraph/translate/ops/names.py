"""Loads and stores of names: fast locals, constants, globals, attributes."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import BuiltinSource, GlobalSource, ModuleGlobalSource
from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.base import NULL, VariableTracker
from bytegraph.variables.builder import wrap, wrap_constant_result

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
        raise Unsupported("unsupported_value", f"del of unbound local {inst.argval!r}")


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
        raise Unsupported("unsupported_value", f"global {name!r} read after its del")
    if pending is not None:
        return pending
    source = global_source(tx, name)
    if name in tx.f_globals:
        return wrap(tx, tx.f_globals[name], source)
    if name in tx.f_builtins:
        tx.output.add_guard(GuardKind.GLOBAL_ABSENT, source)
        return wrap(tx, tx.f_builtins[name], BuiltinSource(name))
    raise Unsupported("unsupported_value", f"name {name!r} is not defined (raises in eager)")


def global_source(tx: Tx, name: str) -> GlobalSource | ModuleGlobalSource:
    """``name`` in ``tx``'s globals: the compiled frame's own, or another module's."""
    root = tx
    while getattr(root, "parent", None) is not None:
        root = root.parent
    if tx.f_globals is root.f_globals:
        return GlobalSource(name)
    module = tx.f_globals.get("__name__")
    found = sys.modules.get(module) if isinstance(module, str) else None
    module_dict = getattr(found, "__dict__", None)
    if module_dict is not tx.f_globals:
        raise Unsupported("unsupported_value", f"global {name!r} of globals that are no module's")
    return ModuleGlobalSource(module, name)


@handler("LOAD_GLOBAL")
def LOAD_GLOBAL(tx: Tx, inst: Instruction) -> None:
    """( -- [NULL] value); the low oparg bit asks for the NULL."""
    if inst.arg & 1:
        tx.push(NULL)
    tx.push(load_global(tx, inst.argval))


@handler("LOAD_ATTR")
def LOAD_ATTR(tx: Tx, inst: Instruction) -> None:
    """(obj -- obj.name)"""
    tx.push(tx.pop().var_getattr(tx, inst.argval))


@handler("LOAD_METHOD")
def LOAD_METHOD(tx: Tx, inst: Instruction) -> None:
    """(obj -- NULL bound_method); CALL then sees a plain callable."""
    method = tx.pop().var_getattr(tx, inst.argval)
    tx.push(NULL)
    tx.push(method)


_MODULE_BODIES = "module and class bodies use it; functions use FAST, GLOBAL and DEREF names"
for _opname in ("LOAD_NAME", "STORE_NAME", "DELETE_NAME", "SETUP_ANNOTATIONS"):
    unsupported_opcode(_opname, _MODULE_BODIES)
_IMPORTS = "an import may run module code and changes sys.modules: the frame runs in Python"
for _opname in ("IMPORT_NAME", "IMPORT_FROM", "IMPORT_STAR"):
    unsupported_opcode(_opname, _IMPORTS)
