"""The body of a class statement, traced into a namespace of VTs.

``class A(Base): body`` compiles to ``__build_class__(<body function>, 'A', Base)``,
and CPython runs the body function with a fresh dict as its locals: the body
reads and writes names with LOAD_NAME/STORE_NAME (the namespace, then the
module's globals, then builtins), reads the enclosing function's variables
with LOAD_CLASSDEREF (3.11; 3.12+: LOAD_LOCALS then LOAD_FROM_DICT_OR_DEREF),
and returns the ``__class__`` cell its methods share (or None).

``ClassBodyTranslator`` is an inlining translator whose name opcodes work on
``namespace`` (name -> VT), its own state like ``symbolic_locals``. Every
other opcode is the ordinary handler. ``variables/made_classes.py`` builds
the class from the namespace it leaves.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.translate.ops.names import load_global
from bytegraph.translate.translator import InliningInstructionTranslator
from bytegraph.variables.base import AttributeMutationNew, ValueMutationNew, VariableTracker
from bytegraph.variables.dicts import DictVariable

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LocalsMarkerVariable(VariableTracker):
    """What LOAD_LOCALS pushes in a class body: the namespace, read only by the
    LOAD_FROM_DICT_OR_DEREF that follows it."""


class ClassBodyTranslator(InliningInstructionTranslator):
    """Runs a class body; its names live in ``namespace``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.namespace: dict[str, VariableTracker] = {}

    def load_name(self, name: str) -> VariableTracker:
        value = self.namespace.get(name)
        return value if value is not None else load_global(self, name)

    def LOAD_NAME(self, inst: Instruction) -> None:
        """( -- value): the namespace, then globals, then builtins."""
        self.push(self.load_name(inst.argval))

    def STORE_NAME(self, inst: Instruction) -> None:
        """(value -- )"""
        self.namespace[inst.argval] = self.pop()

    def DELETE_NAME(self, inst: Instruction) -> None:
        """( -- )"""
        if self.namespace.pop(inst.argval, None) is None:
            raise Unsupported("unbound_name", f"del of {inst.argval!r} (NameError in eager)")

    def LOAD_CLASSDEREF(self, inst: Instruction) -> None:
        """( -- value): the namespace, then the enclosing function's cell (3.11)."""
        value = self.namespace.get(inst.argval)
        self.push(value if value is not None else self.cells[inst.argval].load(self))

    def LOAD_LOCALS(self, inst: Instruction) -> None:
        """( -- locals) (3.12+)"""
        self.push(LocalsMarkerVariable())

    def LOAD_FROM_DICT_OR_DEREF(self, inst: Instruction) -> None:
        """(locals -- value) (3.12+): the namespace, then the cell."""
        if not isinstance(self.pop(), LocalsMarkerVariable):
            raise Unsupported("opcode_unsupported", "LOAD_FROM_DICT_OR_DEREF of another mapping")
        self.LOAD_CLASSDEREF(inst)

    def SETUP_ANNOTATIONS(self, inst: Instruction) -> None:
        """( -- ): ``__annotations__ = {}`` unless the body has one."""
        if "__annotations__" not in self.namespace:
            mutation = self.output.side_effects.new_mutation(ValueMutationNew)
            self.namespace["__annotations__"] = DictVariable({}, mutation_type=mutation)

    def MAKE_CELL(self, inst: Instruction) -> None:
        """( -- ): the ``__class__`` cell type.__new__ fills, or an ordinary cell."""
        from bytegraph.translate.ops.functions import MAKE_CELL
        from bytegraph.variables.made_classes import ClassCellVariable

        if inst.argval != "__class__":
            MAKE_CELL(self, inst)
            return
        mutation = self.output.side_effects.new_mutation(AttributeMutationNew)
        self.cells["__class__"] = ClassCellVariable(mutation_type=mutation)

