"""Sequences and mappings: tuples (and torch.Size, named tuples), lists, dicts.

Items are VTs. A container that came from the frame keeps its source, so
returning it unchanged hands back the very same object; one built during
tracing is rebuilt by the generated code only if it escapes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import bytecode as bc
import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import BoundMethodVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase


@dataclasses.dataclass(frozen=True, eq=False)
class BaseSequenceVariable(VariableTracker):
    items: tuple[VariableTracker, ...]

    def as_python_constant(self) -> Any:
        return self.python_type()(item.as_python_constant() for item in self.items)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        return list(self.items)

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.items)

    def getitem(self, tx: InstructionTranslatorBase, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if isinstance(key, slice):
            return self.with_items(tuple(self.items[key]))
        if not isinstance(key, int):
            raise Unsupported("unsupported_value", f"{self.python_type().__name__} index {key!r}")
        try:
            return self.items[key]
        except IndexError:
            raise Unsupported("unsupported_value", "index out of range (raises in eager)") from None

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        return method_of(self, name)

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        """A new sequence of the same kind, created during tracing."""
        return dataclasses.replace(self, items=items, source=None, mutation_type=None)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if name in ("index", "count") and not kwargs:
            if all(i.is_python_constant() for i in self.items):
                consts = [a.as_python_constant() for a in args]
                return ConstantVariable(getattr(self.as_python_constant(), name)(*consts))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        raise Unsupported("unsupported_call", f"{self.python_type().__name__}.{name}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        self._build(codegen)

    def _build(self, codegen: PyCodegen) -> None:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, eq=False)
class TupleVariable(BaseSequenceVariable):
    """A tuple, or a tuple subclass such as a named tuple or torch.return_types."""

    tuple_type: type = tuple

    def python_type(self) -> type:
        return self.tuple_type

    def as_python_constant(self) -> Any:
        values = tuple(item.as_python_constant() for item in self.items)
        if self.tuple_type is tuple:
            return values
        if not issubclass(self.tuple_type, tuple):
            raise Unsupported("unsupported_value", f"{self.tuple_type.__name__} as a constant")
        return self.tuple_type(values)

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        return TupleVariable(items)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        fields = getattr(self.tuple_type, "_fields", None) or _structseq_fields(self.tuple_type)
        if name in fields:
            return self.items[fields.index(name)]
        return method_of(self, name)

    def _build(self, codegen: PyCodegen) -> None:
        if self.tuple_type is tuple:
            for item in self.items:
                codegen(item)
            codegen.append(bc.Instr("BUILD_TUPLE", len(self.items)))
            return
        if not issubclass(self.tuple_type, tuple):
            raise Unsupported("unsupported_value", f"rebuilding a {self.tuple_type.__name__}")
        codegen.call_const(self.tuple_type, [TupleVariable(self.items)])


def method_of(container: VariableTracker, name: str) -> VariableTracker:
    if not callable(getattr(container.python_type(), name, None)):
        raise Unsupported(
            "unsupported_value", f"attribute {name!r} of a {container.python_type().__name__}"
        )
    return BoundMethodVariable(container, name)


def _structseq_fields(tuple_type: type) -> tuple[str, ...]:
    count = getattr(tuple_type, "n_fields", 0)
    return tuple(
        name for name in dir(tuple_type)
        if isinstance(getattr(tuple_type, name, None), type(torch.return_types.max.values))
    )[:count]


@dataclasses.dataclass(frozen=True, eq=False)
class SizeVariable(TupleVariable):
    """``torch.Size``: a tuple of ints that folds at trace time."""

    tuple_type: type = torch.Size

    @staticmethod
    def of(size: torch.Size) -> SizeVariable:
        return SizeVariable(tuple(ConstantVariable(int(d)) for d in size))

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        return SizeVariable(items)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if name == "numel" and not args:
            return ConstantVariable(self.as_python_constant().numel())
        return super().call_method(tx, name, args, kwargs)


@dataclasses.dataclass(frozen=True, eq=False)
class ListVariable(BaseSequenceVariable):
    def python_type(self) -> type:
        return list

    def _build(self, codegen: PyCodegen) -> None:
        for item in self.items:
            codegen(item)
        codegen.append(bc.Instr("BUILD_LIST", len(self.items)))


@dataclasses.dataclass(frozen=True, eq=False)
class DictVariable(VariableTracker):
    """A dict with constant keys, in insertion order."""

    items: dict[Any, VariableTracker]
    dict_type: type = dict

    def python_type(self) -> type:
        return self.dict_type

    def as_python_constant(self) -> Any:
        return self.dict_type((k, v.as_python_constant()) for k, v in self.items.items())

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.items)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        return method_of(self, name)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.items]

    def getitem(self, tx: InstructionTranslatorBase, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if key not in self.items:
            raise Unsupported("unsupported_value", f"missing dict key {key!r} (raises in eager)")
        return self.items[key]

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        keys = [ConstantVariable(k) for k in self.items]
        if name == "keys" and not args:
            return TupleVariable(tuple(keys), tuple_type=type({}.keys()))
        if name == "values" and not args:
            return TupleVariable(tuple(self.items.values()), tuple_type=type({}.values()))
        if name == "items" and not args:
            pairs = (TupleVariable((k, v)) for k, v in zip(keys, self.items.values()))
            return TupleVariable(tuple(pairs), tuple_type=type({}.items()))
        if name in ("get", "__getitem__") and 1 <= len(args) <= 2:
            key = args[0].as_python_constant()
            if key in self.items:
                return self.items[key]
            if name == "get":
                return args[1] if len(args) == 2 else ConstantVariable(None)
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(args[0].as_python_constant() in self.items)
        raise Unsupported("unsupported_call", f"dict.{name}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        for key, value in self.items.items():
            codegen.load_const(key)
            codegen(value)
        codegen.append(bc.Instr("BUILD_MAP", len(self.items)))
        if self.dict_type is not dict:
            codegen.call_const_on_stack(self.dict_type)
