"""Loads and stores of names: fast locals, constants, globals, attributes."""

from __future__ import annotations

import builtins
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.bytecode import compat
from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import (
    BuiltinSource,
    GlobalSource,
    ModuleGlobalSource,
    Source,
    source_record,
)
from bytegraph.side_effects import DELETED
from bytegraph.translate.ops.exceptions import getattr_raising, vet_attribute
from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.base import NULL, NullVariable, VariableTracker
from bytegraph.variables.builder import wrap, wrap_constant_result
from bytegraph.variables.exceptions import ObservedRaise

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("LOAD_FAST")
@handler("LOAD_FAST_CHECK", min_ver=(3, 12))  # raises UnboundLocalError: so does LOAD_FAST here
def LOAD_FAST(tx: Tx, inst: Instruction) -> None:
    """( -- value)"""
    tx.push(_load_fast(tx, inst.argval))


def _load_fast(tx: Tx, name: str) -> VariableTracker:
    if not compat.HAS_LOAD_CLOSURE and name in tx.cells:  # 3.13: a closure's cell
        return tx.cells[name]
    vt = tx.symbolic_locals.get(name)
    return vt if vt is not None else tx.realize_local(name)


@handler("STORE_FAST")
def STORE_FAST(tx: Tx, inst: Instruction) -> None:
    """(value -- ); a NULL (from LOAD_FAST_AND_CLEAR) unbinds the local again."""
    _store_fast(tx, inst.argval, tx.pop())


def _store_fast(tx: Tx, name: str, value: VariableTracker) -> None:
    if isinstance(value, NullVariable):
        tx.symbolic_locals.pop(name, None)
        tx.frame_values.pop(name, None)
    else:
        tx.symbolic_locals[name] = value


@handler("LOAD_FAST_AND_CLEAR", min_ver=(3, 12))
def LOAD_FAST_AND_CLEAR(tx: Tx, inst: Instruction) -> None:
    """( -- value or NULL): an inlined comprehension saves the local its variable shadows
    and unbinds it; a STORE_FAST after the comprehension puts it back."""
    name = inst.argval
    bound = name in tx.symbolic_locals or name in tx.frame_values
    tx.push(_load_fast(tx, name) if bound else NULL)
    tx.symbolic_locals.pop(name, None)
    tx.frame_values.pop(name, None)


@handler("LOAD_FAST_LOAD_FAST", min_ver=(3, 13))
def LOAD_FAST_LOAD_FAST(tx: Tx, inst: Instruction) -> None:
    """( -- first second)"""
    first, second = inst.argval
    tx.push(_load_fast(tx, first))
    tx.push(_load_fast(tx, second))


@handler("STORE_FAST_LOAD_FAST", min_ver=(3, 13))
def STORE_FAST_LOAD_FAST(tx: Tx, inst: Instruction) -> None:
    """(value -- loaded)"""
    stored, loaded = inst.argval
    _store_fast(tx, stored, tx.pop())
    tx.push(_load_fast(tx, loaded))


@handler("STORE_FAST_STORE_FAST", min_ver=(3, 13))
def STORE_FAST_STORE_FAST(tx: Tx, inst: Instruction) -> None:
    """(second first -- ): the top goes to the first name."""
    first, second = inst.argval
    _store_fast(tx, first, tx.pop())
    _store_fast(tx, second, tx.pop())


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
    """( -- [NULL] value), 3.13: ( -- value [NULL]); the low oparg bit asks for the NULL."""
    value = load_global(tx, inst.argval)
    _push_callable(tx, value, with_null=bool(inst.arg & 1))


def _push_callable(tx: Tx, value: VariableTracker, *, with_null: bool) -> None:
    """``value`` and, for a call, the NULL slot: below it before 3.13, above it after."""
    if with_null and compat.NULL_BEFORE_CALLABLE:
        tx.push(NULL)
    tx.push(value)
    if with_null and not compat.NULL_BEFORE_CALLABLE:
        tx.push(NULL)


def _load_attr(tx: Tx, obj: VariableTracker, name: str) -> VariableTracker:
    """``obj.name``; a certainly missing attribute raises AttributeError in the trace."""
    try:
        return getattr_raising(tx, obj, name)
    except ObservedRaise as error:
        vet_attribute(tx, error)
        raise


@handler("LOAD_ATTR")
def LOAD_ATTR(tx: Tx, inst: Instruction) -> None:
    """(obj -- obj.name); 3.12+ with the low oparg bit, 3.11's LOAD_METHOD."""
    is_method = compat.LOAD_ATTR_METHOD_BIT and inst.arg & 1
    _push_callable(tx, _load_attr(tx, tx.pop(), inst.argval), with_null=bool(is_method))


@handler("LOAD_METHOD", max_ver=(3, 11))
def LOAD_METHOD(tx: Tx, inst: Instruction) -> None:
    """(obj -- NULL bound_method); CALL then sees a plain callable."""
    _push_callable(tx, _load_attr(tx, tx.pop(), inst.argval), with_null=True)


@handler("LOAD_SUPER_ATTR", min_ver=(3, 12))
def LOAD_SUPER_ATTR(tx: Tx, inst: Instruction) -> None:
    """(super class self -- [NULL] attr): ``super().name``, with the two-argument
    form when the oparg's second bit is set, the method form with its low bit."""
    receiver, cls, global_super = tx.pop(), tx.pop(), tx.pop()
    args = [cls, receiver] if inst.arg & 2 else []
    proxy = global_super.call_function(tx, args, {})
    _push_callable(tx, _load_attr(tx, proxy, inst.argval), with_null=bool(inst.arg & 1))


_MODULE_BODIES = (
    "module and class bodies use it (translate/class_body.py traces class bodies); "
    "functions use FAST, GLOBAL and DEREF names"
)
for _opname in ("LOAD_NAME", "STORE_NAME", "DELETE_NAME", "SETUP_ANNOTATIONS"):
    unsupported_opcode(_opname, _MODULE_BODIES)
unsupported_opcode(
    "IMPORT_STAR", "from m import * is legal only in module bodies", max_ver=(3, 11)
)
for _opname in ("LOAD_LOCALS", "LOAD_FROM_DICT_OR_GLOBALS"):
    unsupported_opcode(
        _opname, "class bodies (translate/class_body.py) and annotation scopes use it",
        min_ver=(3, 12),
    )


@source_record
class SysModulesSource(Source):
    """``sys.modules[name]``: a module an import statement of the frame returned."""

    name: str

    def _expr(self) -> str:
        return f"__import__('sys').modules[{self.name!r}]"

    def bound_expr(self, const: Callable[[Any], str], base: None) -> str:
        return f"{const(sys.modules)}[{self.name!r}]"

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
