"""``os.environ``, read one variable at a time.

Libraries read settings from the environment inside the code being traced
(``os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA", "0")``). Inlining
``os._Environ`` would go through ``Mapping.get``'s ``try``/``except KeyError``
(the exception path is not traced) and guard every variable's name. Instead
each read is evaluated for real and guarded by its value:
``os.environ.get(name)`` is re-evaluated on every call by the guard, so a
changed variable recompiles. Writes are graph breaks (they change the
process's environment).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import Source, source_record
from bytegraph.variables.base import BoundMethodVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_READS = frozenset({"get", "__getitem__", "__contains__"})


@source_record
class EnvironItemSource(Source):
    """``os.environ.get(name)``: one variable of the environment, or None."""

    name: str

    def _expr(self) -> str:
        return f"__import__('os').environ.get({self.name!r})"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(os.environ.get)
        codegen.load_const(self.name)
        codegen.append(*assemble.call(1))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EnvironVariable(VariableTracker):
    """``os.environ`` itself (reached through its source; reads only)."""

    def python_type(self) -> type:
        return type(os.environ)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name not in _READS:
            raise Unsupported("environ_access", f"os.environ.{name}")
        return BoundMethodVariable(self, name)

    def _read(self, tx: Tx, key: VariableTracker) -> str | None:
        name = key.as_python_constant()
        if not isinstance(name, str):
            raise Unsupported("environ_access", f"os.environ[{name!r}] (not a str)")
        value = os.environ.get(name)
        tx.output.add_guard(GuardKind.CONSTANT_MATCH, EnvironItemSource(name), value)
        return value

    def call_method(self, tx: Tx, name: str, args, kwargs) -> VariableTracker:
        if name not in _READS or kwargs or not 1 <= len(args) <= (2 if name == "get" else 1):
            raise Unsupported("environ_access", f"os.environ.{name}")
        value = self._read(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(value is not None)
        if value is not None:
            return ConstantVariable(value)
        if name == "get":
            return args[1] if len(args) == 2 else ConstantVariable(None)
        raise Unsupported("operation_raises", f"os.environ[{args[0]}]: unset (KeyError)")

    def getitem(self, tx: Tx, index: VariableTracker) -> VariableTracker:
        return self.call_method(tx, "__getitem__", [index], {})

    def contains(self, tx: Tx, item: VariableTracker) -> VariableTracker:
        return self.call_method(tx, "__contains__", [item], {})

    def __repr__(self) -> str:
        return "EnvironVariable()"


def is_environ(value: Any) -> bool:
    return value is os.environ
