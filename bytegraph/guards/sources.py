"""Sources: how to fetch a value from the frame again.

A Source is a small immutable record. ``expr()`` is a Python expression over
the frame's arguments (and ``___G``, the function's globals, ``___B``, the
builtins, ``___K``, the constants no literal can spell) used by guards and
logs; ``reconstruct(codegen)`` emits bytecode that loads the value inside a
transformed function.

The text must compile whatever the frame and its values are: a local that is
no identifier (a comprehension's ``.0``) reads as ``local_name(name)``, and a
constant (a dict key) is written by ``const_expr``: a literal only where the
literal reads back as the very value.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import bytecode as bc

from bytegraph.bytecode import assemble

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen

# Constants that ``const_expr`` refers to as ``___K[i]``; kept alive so that ids stay
# unique, and read by identity, so a NaN key finds its own dict entry.
KEPT_CONSTANTS: list[Any] = []
_KEPT_INDEX: dict[int, int] = {}
_LITERAL_TYPES = (type(None), bool, int, str, bytes)
_S = TypeVar("_S", bound=type)


def local_name(name: str) -> str:
    """``name`` as a Python identifier: itself, or escaped (``.0`` -> ``___local__2e_0``)."""
    if name.isidentifier():
        return name
    escaped = "".join(c if c.isalnum() or c == "_" else f"_{ord(c):x}_" for c in name)
    return f"___local_{escaped}"


def const_expr(value: Any) -> str:
    """Python text for the constant ``value``: its repr where that is a literal of it, else
    ``___K[i]``."""
    if _is_literal(value):
        return repr(value)
    index = _KEPT_INDEX.get(id(value))
    if index is None:
        index = _KEPT_INDEX[id(value)] = len(KEPT_CONSTANTS)
        KEPT_CONSTANTS.append(value)
    return f"___K[{index}]"


def _is_literal(value: Any) -> bool:
    """Whether ``repr(value)`` evaluates to an equal value of the same type."""
    kind = type(value)
    if kind in _LITERAL_TYPES:
        return True
    if kind is float:
        return math.isfinite(value)  # nan and inf have no literal
    if kind is complex:
        return math.isfinite(value.real) and math.isfinite(value.imag)
    if kind is tuple:
        return all(_is_literal(item) for item in value)
    return False


def source_record(cls: type[_S]) -> type[_S]:
    """A Source class: a frozen, slotted dataclass whose hash is computed once.

    Sources key guards and side effects, and a dataclass's hash hashes its fields
    again each time: for a chain ``self._modules['h']._modules['0']...`` that is the
    whole chain, every lookup (70,000 hashes in one GPT-2 trace).
    """
    cls = dataclasses.dataclass(frozen=True, slots=True)(cls)
    fields_hash = cls.__hash__

    def cached_hash(self: Source) -> int:
        value = self._hash
        if value is None:
            value = fields_hash(self)
            object.__setattr__(self, "_hash", value)
        return value

    cls.__hash__ = cached_hash  # type: ignore[method-assign, assignment]
    return cls


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    # ``expr()``'s text, made once: a guard function names one source many times (every
    # child's text starts with its base's), and building it again was most of the time
    # spent building guards (GPT-2: 830 guards, 9 ms of 24).
    _text: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)
    _hash: int | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def expr(self) -> str:
        """A Python expression that reads this value in a guard function."""
        text = self._text
        if text is None:
            text = self._expr()
            object.__setattr__(self, "_text", text)
        return text

    def _expr(self) -> str:
        raise NotImplementedError

    def reconstruct(self, codegen: PyCodegen) -> None:
        raise NotImplementedError

    @property
    def root(self) -> Source:
        return self

    def __str__(self) -> str:
        return self.expr()


@source_record
class LocalSource(Source):
    """An argument or local of the compiled frame."""

    name: str

    def _expr(self) -> str:
        return local_name(self.name)

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_FAST", self.name))


@source_record
class GlobalSource(Source):
    """A name in the function's module globals."""

    name: str

    def _expr(self) -> str:
        return f"___G[{self.name!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_GLOBAL", (False, self.name)))


@source_record
class StateCallSource(Source):
    """``fn(*args)`` of a function that reports process state (a torch switch), with
    constant arguments: a guard on it re-reads the state."""

    fn: Any
    args: tuple = ()

    def _expr(self) -> str:
        return f"{const_expr(self.fn)}({', '.join(const_expr(a) for a in self.args)})"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(self.fn)
        for arg in self.args:
            codegen.load_const(arg)
        codegen.append(*codegen.call_instrs(len(self.args)))


@source_record
class ModuleGlobalSource(Source):
    """A global of another module (an inlined callee's), reached through ``sys.modules``."""

    module: str
    name: str

    def dict_expr(self, const: Callable[[Any], str] | None = None) -> str:
        """The module's dict: read through ``sys.modules``, or bound as a constant. The
        bound dict is the callee's ``__globals__`` (``names.global_source`` checked it),
        what the trace read even where ``sys.modules`` later holds another module."""
        if const is None:
            return f"__import__('sys').modules[{self.module!r}].__dict__"
        return const(sys.modules[self.module].__dict__)

    def _expr(self) -> str:
        return f"{self.dict_expr()}[{self.name!r}]"

    def bound_expr(self, const: Callable[[Any], str], base: None) -> str:
        return f"{self.dict_expr(const)}[{self.name!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_const(sys.modules[self.module].__dict__)
        codegen.load_const(self.name)
        codegen.append(bc.Instr("BINARY_SUBSCR"))


@source_record
class BuiltinSource(Source):
    """A builtin reached by LOAD_GLOBAL because the module has no such global."""

    name: str

    def _expr(self) -> str:
        return f"___B[{self.name!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_GLOBAL", (False, self.name)))


@source_record
class ClosureCellSource(Source):
    """The cell of one of the compiled function's free variables (not its contents)."""

    name: str

    def _expr(self) -> str:
        return f"___cell_{self.name}"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(assemble.load_cell(bc.FreeVar(self.name)))


@source_record
class ChildSource(Source):
    base: Source

    @property
    def root(self) -> Source:
        return self.base.root


@source_record
class AttrSource(ChildSource):
    attr: str

    def _expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_source(self.base)
        codegen.append(assemble.load_attr(self.attr))


@source_record
class CallResultSource(ChildSource):
    """``base()``: what a weak reference points to (calling it has no side effect)."""

    def _expr(self) -> str:
        return f"{self.base.expr()}()"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable_with(lambda: codegen.load_source(self.base))
        codegen.append(*codegen.call_instrs(0))


@source_record
class GetItemSource(ChildSource):
    """``base[index]`` for a constant index (int, str, or other hashable constant)."""

    index: object

    def _expr(self) -> str:
        return f"{self.base.expr()}[{const_expr(self.index)}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_source(self.base)
        codegen.load_const(self.index)
        codegen.append(bc.Instr("BINARY_SUBSCR"))


def reroot_with(source: Any, table: dict[Source, Source]) -> Any:
    """``source`` (or a tuple of them, or any other value, kept as it is) with each source
    that is a key of ``table`` replaced by its value; ``table`` memoizes the rebuilt ones."""
    if isinstance(source, tuple):
        return tuple(reroot_with(s, table) for s in source)
    if not isinstance(source, Source):
        return source
    found = table.get(source)
    if found is not None:
        return found
    result = source
    if isinstance(source, ChildSource):
        base = reroot_with(source.base, table)
        if base is not source.base:
            result = _with_base(source, base)
    table[source] = result  # memo: the guards of one module share long prefixes
    return result


_INIT_FIELDS: dict[type, tuple[str, ...]] = {}


def _with_base(source: ChildSource, base: Source) -> Source:
    """``source`` read from ``base`` instead (``dataclasses.replace``, without its cost)."""
    cls = type(source)
    return cls(**{n: base if n == "base" else getattr(source, n) for n in init_fields(cls)})


def init_fields(cls: type) -> tuple[str, ...]:
    """The fields a Source class's constructor takes."""
    names = _INIT_FIELDS.get(cls)
    if names is None:
        names = _INIT_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return names
