"""VariableTracker: the immutable stand-in for a Python value during tracing.

Every value on the symbolic stack or in ``symbolic_locals`` is a
VariableTracker (VT). A VT records where the value came from (``source``) and
how it may be mutated (``mutation_type``); subclasses model one Python
protocol each. VTs are frozen: a mutation of a container or object is
recorded in SideEffects, never applied to the VT.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.guards.sources import Source

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase


@dataclasses.dataclass(frozen=True, slots=True)
class MutationType:
    """How a value may change during tracing.

    ``scope`` is 0 for values that existed before tracing began (Existing)
    and the nesting level of the higher-order op that created it otherwise.
    """

    scope: int


@dataclasses.dataclass(frozen=True, slots=True)
class ValueMutationNew(MutationType):
    """A container created during tracing; its contents may change."""


@dataclasses.dataclass(frozen=True, slots=True)
class ValueMutationExisting(MutationType):
    """A container from the frame; changes are replayed after the graph."""


@dataclasses.dataclass(frozen=True, slots=True)
class AttributeMutationNew(MutationType):
    """An object created during tracing; its attributes may change."""


@dataclasses.dataclass(frozen=True, slots=True)
class AttributeMutationExisting(MutationType):
    """An object from the frame; attribute stores are replayed after the graph."""


class CreationScope:
    """The scope new values are created in: 1 at the top level, one more inside each
    higher-order body being traced (set by ``SideEffects.enter_scope``).

    Values made during a trace get their mutation type from shared constants
    (``ValueMutationNew(1)``); ``VariableTracker.__post_init__`` moves one made
    inside a body into the body's scope, so the body may mutate it and nothing
    outside it may.
    """

    current = 1


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class VariableTracker:
    """Base of every symbolic value. Subclasses override what they model."""

    source: Source | None = dataclasses.field(default=None, kw_only=True)
    mutation_type: MutationType | None = dataclasses.field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        scope = CreationScope.current
        if scope > 1:
            mutation = self.mutation_type
            if type(mutation) in _NEW_KINDS and mutation.scope == 1:
                object.__setattr__(self, "mutation_type", type(mutation)(scope))

    def python_type(self) -> type:
        raise Unsupported("unmodelled_value", f"type of {self}")

    def is_python_constant(self) -> bool:
        try:
            self.as_python_constant()
        except Unsupported:
            return False
        return True

    def as_python_constant(self) -> Any:
        raise Unsupported("not_a_constant", f"{self} is not a Python constant")

    def python_constant_now(self, tx: InstructionTranslatorBase) -> Any:
        """The Python value, containers read as they are now (their pending writes
        applied); Unsupported where some part has no value known at trace time."""
        return self.as_python_constant()

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        raise Unsupported("unknown_attribute", f"attribute {name!r} of {self}")

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        raise Unsupported("opaque_object_call", f"call of {self}")

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        raise Unsupported("unsupported_method", f"method {name!r} of {self}")

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        """The items, for unpacking and iteration; raises if not a known sequence."""
        raise Unsupported("unknown_iteration", f"iteration over {self}")

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        """``bool(value)`` decided at trace time, or Unsupported."""
        return bool(self.as_python_constant())

    def reconstruct(self, codegen: PyCodegen) -> None:
        """Emit bytecode that leaves the real value on the stack."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        raise Unsupported("unrebuildable_value", f"cannot rebuild {self} in generated code")

    def __repr__(self) -> str:
        fields = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in dataclasses.fields(self)
            if f.name not in ("source", "mutation_type")
        ]
        text = f"{type(self).__name__}({', '.join(fields)})"
        return text if len(text) < 120 else text[:117] + "..."


_NEW_KINDS = (ValueMutationNew, AttributeMutationNew)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PythonValueVariable(VariableTracker):
    """A VT that stands for one known Python object (a class, a function, a module)."""

    value: Any
    # Without a source, the generated code may load the object as a constant of its
    # own (a class, a module's function, an enum member): the same object every call.
    rebuilt_as_constant: ClassVar[bool] = False

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def is_python_constant(self) -> bool:
        return True

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is None and self.rebuilt_as_constant:
            codegen.load_const(self.value)
            return
        super().reconstruct(codegen)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NullVariable(VariableTracker):
    """The NULL that 3.11 calls push below a callable."""


NULL = NullVariable()


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BoundMethodVariable(VariableTracker):
    """``receiver.name`` for a method the receiver's VT models in ``call_method``."""

    receiver: VariableTracker
    name: str

    def python_type(self) -> type:
        return type(getattr(self.receiver.python_type(), self.name))

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        return self.receiver.call_method(tx, self.name, args, kwargs)

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``receiver.name``: the same bound method, from the rebuilt receiver."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        codegen(self.receiver)
        codegen.append(assemble.load_attr(self.name))

    def __repr__(self) -> str:
        return f"BoundMethodVariable({self.receiver!r}.{self.name})"
