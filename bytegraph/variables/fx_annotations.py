"""``torch.fx.traceback.annotate(d)``: a with-block whose nodes carry ``node.meta["custom"]``.

In eager, ``with annotate({"fallback_to_eager": True}): ...`` updates the
``custom`` entry of torch.fx.traceback's ``current_meta`` and restores it on
the way out; only tracers read it, so it changes nothing the program
computes. torch's own code enters it (flex_attention's ``_dense_to_ordered``
asks Inductor to run its argsort eagerly), and torch.compile copies the
annotation onto the nodes recorded inside. bytegraph does the same:

1. ``annotate(d)`` with a constant dict is an ``AnnotateContextVariable``.
2. ``__enter__`` remembers the annotation in force (its ``prev``, kept in
   SideEffects as ``GradModeVariable`` keeps its mode) and sets the
   OutputGraph's ``node_annotations`` to it updated with ``d``;
   ``OutputGraph.create_node`` copies a non-empty one into each new node's
   ``meta["custom"]``, which AOTAutograd and Inductor carry on.
3. ``__exit__`` puts ``prev`` back, whatever was entered in between, as
   eager's ``finally`` does, and swallows nothing.

A graph break inside the block rebuilds an entered ``annotate(d)`` for the
resumed code to exit, so ``current_meta`` is restored at run time as eager
restores it. Anything else (a dict that is not constant, ``annotate_fn``) is
a call of torch's internals, left to Python.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch.fx.traceback

from bytegraph.exc import Unsupported
from bytegraph.variables.base import AttributeMutationNew, BoundMethodVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.guards.sources import Source
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

Items = tuple[tuple[Any, Any], ...]  # a dict's items: a constant the side effects can hold
_NOT_ENTERED = "not entered"  # ``prev`` before ``__enter__`` (None: no annotation in force)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AnnotateFunctionVariable(VariableTracker):
    """``torch.fx.traceback.annotate`` itself."""

    def python_type(self) -> type:
        return type(torch.fx.traceback.annotate)

    def as_python_constant(self) -> Any:
        return torch.fx.traceback.annotate

    def call_function(self, tx: Tx, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if len(args) != 1 or kwargs or not args[0].is_python_constant():
            raise Unsupported("torch_internal_call", "torch.fx.traceback.annotate of "
                              "anything but one constant dict")
        annotation = args[0].as_python_constant()
        if type(annotation) is not dict or not is_constant_value(tuple(annotation.items())):
            raise Unsupported("torch_internal_call", "torch.fx.traceback.annotate of "
                              f"{annotation!r}, not a dict of constants")
        return AnnotateContextVariable(tuple(annotation.items()),
                                       mutation_type=AttributeMutationNew(1))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AnnotateContextVariable(VariableTracker):
    """The context manager ``annotate(d)`` returned; its ``prev`` lives in SideEffects."""

    items: Items

    def python_type(self) -> type:
        return type(torch.fx.traceback.annotate({}))

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in ("__enter__", "__exit__"):
            return BoundMethodVariable(self, name)
        raise Unsupported("unknown_attribute", f"attribute {name!r} of torch.fx.traceback."
                          "annotate's context manager")

    def call_method(self, tx: Tx, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        output = tx.output
        if name == "__enter__" and not args and not kwargs and self._prev(tx) == _NOT_ENTERED:
            prev = output.node_annotations
            tx.output.side_effects.store_attr(self, "prev", ConstantVariable(prev))
            output.node_annotations = (*(prev or ()), *self.items)
            return ConstantVariable(None)
        if name == "__exit__" and len(args) == 3 and not kwargs:
            prev = self._prev(tx)
            if prev == _NOT_ENTERED:
                raise Unsupported("operation_raises", "annotate's context manager exited "
                                  "before it was entered")
            output.node_annotations = prev
            return ConstantVariable(None)  # a false value: exceptions go on
        raise Unsupported("unsupported_method", f"annotate's context manager .{name}")

    def _prev(self, tx: Tx) -> Any:
        stored = tx.output.side_effects.load_attr(self, "prev")
        return _NOT_ENTERED if stored is None else stored.as_python_constant()

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``annotate(d)``, entered if the trace entered it (a break inside the block)."""
        prev = codegen.side_effects.load_attr(self, "prev")
        entered = prev is not None and prev.as_python_constant() != _NOT_ENTERED
        codegen.call_const(_rebuild, [ConstantVariable(self.items), ConstantVariable(entered)])

    def __repr__(self) -> str:
        return f"AnnotateContextVariable({dict(self.items)!r})"


def _rebuild(items: Items, entered: bool) -> Any:
    manager = torch.fx.traceback.annotate(dict(items))
    if entered:
        manager.__enter__()
    return manager


def wrap_fx_annotate(value: Any, source: Source) -> VariableTracker | None:
    """The VT of ``torch.fx.traceback.annotate``; None for anything else."""
    if value is torch.fx.traceback.annotate:
        return AnnotateFunctionVariable(source=source)
    return None
