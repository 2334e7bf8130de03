"""Objects whose class defines ``__getattribute__``: the method is inlined.

``obj.name`` on such an object means ``type(obj).__getattribute__(obj, name)``,
then, if that raises AttributeError, ``type(obj).__getattr__(obj, name)``.
Both are Python functions and are inlined like any other, so the trace sees
the program's own pending stores and every read is guarded through the
sources the inlined code reads from. Inside, ``object.__getattribute__``
(reached through ``super()`` or directly) is the generic lookup that
``UserDefinedObjectVariable`` models; the values it reads from the instance
are reached through ``object.__getattribute__(obj, name)`` too
(``GenericAttrSource``), never through ``obj.name``, which would run the
custom method again in guards and generated code.

The tracer never propagates exceptions, so an AttributeError inside the
inlined method is modelled only where CPython's outcome is certain (see
raising.py): raised by the method's own frame at an instruction that no
``try`` or ``with`` covers. It then leaves ``__getattribute__`` exactly as in
eager mode, and ``__getattr__``, ``hasattr`` and ``getattr(obj, name,
default)`` handle it. Anything else is a graph break.

Why not evaluate the read for real at trace time and guard its result? The
guard would be sound for later calls (it re-runs the same read), but a real
read cannot see what the trace has changed and not yet replayed: Hugging
Face's ``capture_outputs`` stores into a global collector before the model
reads its config, and a real read would have to refuse from then on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import ChildSource, source_record
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.user_defined import Found, UserDefinedObjectVariable


@source_record
class GenericAttrSource(ChildSource):
    """``object.__getattribute__(base, attr)``: the lookup a custom method builds on."""

    attr: str

    def _expr(self) -> str:
        return f"object.__getattribute__({self.base.expr()}, {self.attr!r})"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(object.__getattribute__)
        codegen.load_source(self.base)
        codegen.load_const(self.attr)
        codegen.append(*assemble.call(2))


@source_record
class TypeSource(ChildSource):
    """``type(base)``: the class of an object whose attribute reads are customised."""

    def _expr(self) -> str:
        return f"type({self.base.expr()})"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(type)
        codegen.load_source(self.base)
        codegen.append(*assemble.call(1))


@source_record
class HasAttrSource(ChildSource):
    """``hasattr(base, attr)``: guards that an attribute is still absent (or present)."""

    attr: str

    def _expr(self) -> str:
        return f"hasattr({self.base.expr()}, {self.attr!r})"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(hasattr)
        codegen.load_source(self.base)
        codegen.load_const(self.attr)
        codegen.append(*assemble.call(2))


def tensor_hasattr(tx: Tx, tensor: VariableTracker, name: str) -> bool:
    """``hasattr(t, name)``: the class's attributes, else the tensor's own ``__dict__``.

    A tensor made by the trace has no attributes of its own; an input's are
    read from the real tensor and guarded.
    """
    if hasattr(tensor.python_type(), name):  # Tensor, or Parameter
        return True
    if tensor.source is None:
        return False
    real = next((i.example for i in tx.output.inputs if i.node is tensor.node), None)
    if real is None:
        raise Unsupported("tensor_attribute", f"hasattr({tensor}, {name!r})")
    found = hasattr(real, name)
    tx.output.add_guard(GuardKind.CONSTANT_MATCH, HasAttrSource(tensor.source, name), found)
    return found


def custom_getattr(
    tx: Tx, obj: UserDefinedObjectVariable, found: Found, name: str
) -> VariableTracker:
    """``obj.name`` through the inlined ``type(obj).__getattribute__``, then ``__getattr__``."""
    from bytegraph.variables.raising import FrameRaised, inline_frame

    method = obj.bind(tx, found, "__getattribute__")
    fn = getattr(method, "fn", None)
    if fn is None or not hasattr(fn, "code"):
        raise Unsupported("descriptor_access", f"__getattribute__ of {obj.cls.__qualname__}")
    try:
        return inline_frame(tx, fn, [obj, ConstantVariable(name)])
    except FrameRaised as e:
        if not issubclass(e.exc_type, AttributeError):
            raise e.unsupported from None
    return obj.getattr_fallback(tx, name)  # AttributeError again if there is none
