"""Sources: how to fetch a value from the frame again.

A Source is a small immutable record. ``expr()`` is a Python expression over
the frame's arguments (and ``___G``, the function's globals, ``___B``, the
builtins) used by guards and logs; ``reconstruct(codegen)`` emits bytecode
that loads the value inside a transformed function.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import bytecode as bc

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    def expr(self) -> str:
        raise NotImplementedError

    def reconstruct(self, codegen: PyCodegen) -> None:
        raise NotImplementedError

    @property
    def root(self) -> Source:
        return self

    def __str__(self) -> str:
        return self.expr()


@dataclasses.dataclass(frozen=True, slots=True)
class LocalSource(Source):
    """An argument or local of the compiled frame."""

    name: str

    def expr(self) -> str:
        return self.name

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_FAST", self.name))


@dataclasses.dataclass(frozen=True, slots=True)
class GlobalSource(Source):
    """A name in the function's module globals."""

    name: str

    def expr(self) -> str:
        return f"___G[{self.name!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_GLOBAL", (False, self.name)))


@dataclasses.dataclass(frozen=True, slots=True)
class ModuleGlobalSource(Source):
    """A global of another module (an inlined callee's), reached through ``sys.modules``."""

    module: str
    name: str

    def dict_expr(self) -> str:
        return f"__import__('sys').modules[{self.module!r}].__dict__"

    def expr(self) -> str:
        return f"{self.dict_expr()}[{self.name!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        import sys

        codegen.load_const(sys.modules[self.module].__dict__)
        codegen.load_const(self.name)
        codegen.append(bc.Instr("BINARY_SUBSCR"))


@dataclasses.dataclass(frozen=True, slots=True)
class BuiltinSource(Source):
    """A builtin reached by LOAD_GLOBAL because the module has no such global."""

    name: str

    def expr(self) -> str:
        return f"___B[{self.name!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_GLOBAL", (False, self.name)))


@dataclasses.dataclass(frozen=True, slots=True)
class ClosureCellSource(Source):
    """The cell of one of the compiled function's free variables (not its contents)."""

    name: str

    def expr(self) -> str:
        return f"___cell_{self.name}"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_CLOSURE", bc.FreeVar(self.name)))


@dataclasses.dataclass(frozen=True, slots=True)
class ChildSource(Source):
    base: Source

    @property
    def root(self) -> Source:
        return self.base.root


@dataclasses.dataclass(frozen=True, slots=True)
class AttrSource(ChildSource):
    attr: str

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def reconstruct(self, codegen: PyCodegen) -> None:
        self.base.reconstruct(codegen)
        codegen.append(bc.Instr("LOAD_ATTR", self.attr))


@dataclasses.dataclass(frozen=True, slots=True)
class GetItemSource(ChildSource):
    """``base[index]`` for a constant index (int, str, or other hashable constant)."""

    index: object

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.index!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        self.base.reconstruct(codegen)
        codegen.load_const(self.index)
        codegen.append(bc.Instr("BINARY_SUBSCR"))
