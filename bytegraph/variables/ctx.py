"""Grad-mode context managers: ``no_grad``, ``enable_grad``, ``set_grad_enabled``.

Grad mode is global state that decides what an op records for autograd, so
it must hold inside the graph exactly where it held in eager. Each switch
does two things at the point of the program where eager would switch:

* records ``torch._C._set_grad_enabled(mode)`` in the graph, so the compiled
  code switches at run time where eager did (and leaves the mode as eager
  leaves it, for a plain ``torch.set_grad_enabled(False)`` call);
* switches the real grad mode, so the metadata of later ops (their
  ``requires_grad``) and ``torch.is_grad_enabled()`` fold as in eager.

``preserve_global_state()`` puts the real mode back however the trace ends,
so neither a finished nor an aborted trace leaks it into the guards or into
the program that runs next.

The classes' own Python does nothing else, so it is modelled, not inlined:
``__enter__`` records the mode it found in the instance's ``prev`` attribute
(in SideEffects, replayed onto an instance that existed before the trace) and
``__exit__`` restores it. ``@torch.no_grad()`` on a function builds a wrapper
in ``torch.utils._contextlib`` whose body is ``with ctx_factory(): return
func(*args, **kwargs)``, with ``ctx_factory`` the bound ``clone`` of an
instance; that wrapper is inlined like any user function once the bound
method is modelled here. ``torch.inference_mode`` also changes the kind of
the tensors it creates, which compiled graphs do not reproduce, so it is an
unsupported call (the frame runs in Python).
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource, Source
from bytegraph.variables.base import (
    AttributeMutationExisting,
    AttributeMutationNew,
    BoundMethodVariable,
    VariableTracker,
)
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.objects import ClassVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

NEW_OBJECT = AttributeMutationNew(1)
EXISTING_OBJECT = AttributeMutationExisting(0)

# The mode ``__enter__`` sets, by class; set_grad_enabled takes it as an argument.
_FIXED_MODE: dict[type, bool] = {torch.no_grad: False, torch.enable_grad: True}
GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)
_MODELLED_METHODS = frozenset({"__enter__", "__exit__", "clone"})
_INFERENCE_MODE_REASON = (
    "torch.inference_mode: tensors it creates are inference tensors, which compiled "
    "graphs do not reproduce"
)


@contextlib.contextmanager
def preserve_global_state() -> Iterator[None]:
    """Restore the real grad mode on the way out, whether the body returns or raises."""
    grad_enabled = torch.is_grad_enabled()
    try:
        yield
    finally:
        torch._C._set_grad_enabled(grad_enabled)


def set_grad_mode(tx: InstructionTranslatorBase, enabled: bool) -> None:
    """Switch grad mode here: a node in the graph and the real mode while tracing."""
    if torch.is_grad_enabled() is enabled:
        return  # already so: the graph holds the same mode at this point
    tx.output.create_node("call_function", torch._C._set_grad_enabled, (enabled,), {})
    torch._C._set_grad_enabled(enabled)


def _mode_argument(value: VariableTracker) -> bool:
    mode = value.as_python_constant() if value.is_python_constant() else None
    if type(mode) is not bool:
        raise Unsupported("not_a_constant", f"grad mode {value} that is not a constant bool")
    return mode


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GradModeClassVariable(ClassVariable):
    """``torch.no_grad``, ``torch.enable_grad``, ``torch.set_grad_enabled`` as classes."""

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if self.value is torch.inference_mode:
            raise Unsupported("grad_mode_call", _INFERENCE_MODE_REASON)
        if self.value is torch.set_grad_enabled:
            if len(args) + len(kwargs) != 1 or set(kwargs) - {"mode"}:
                raise Unsupported("grad_mode_call", "set_grad_enabled() takes one mode (raises)")
            mode = _mode_argument(args[0] if args else kwargs["mode"])
            return construct_set_grad_enabled(tx, mode)
        if args or kwargs:  # ``torch.no_grad(fn)``: a decorator made during the trace
            raise Unsupported("grad_mode_call", f"{self.value.__name__} used as a decorator")
        return GradModeVariable(self.value, _FIXED_MODE[self.value], mutation_type=NEW_OBJECT)


def construct_set_grad_enabled(tx: InstructionTranslatorBase, mode: bool) -> GradModeVariable:
    """``torch.set_grad_enabled(mode)``: switches at once, remembering the mode it found."""
    ctx = GradModeVariable(torch.set_grad_enabled, mode, mutation_type=NEW_OBJECT)
    ctx.store_prev(tx, torch.is_grad_enabled())
    set_grad_mode(tx, mode)
    return ctx


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GradModeVariable(VariableTracker):
    """An instance of a grad-mode class; its ``prev`` attribute lives in SideEffects.

    ``value`` is the real instance when it existed before the trace (then
    ``source`` reaches it), else None.
    """

    cls: type
    mode: bool
    value: Any = None

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        if name in _MODELLED_METHODS:
            return BoundMethodVariable(self, name)
        if name == "prev":
            return ConstantVariable(self.load_prev(tx))
        if name == "mode" and self.cls is torch.set_grad_enabled:
            return ConstantVariable(self.mode)
        raise Unsupported("unknown_attribute", f"attribute {name!r} of {self.cls.__name__}")

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if name == "__enter__" and not args and not kwargs:
            if self.cls is not torch.set_grad_enabled:  # set_grad_enabled's prev is from __init__
                self.store_prev(tx, torch.is_grad_enabled())
            set_grad_mode(tx, self.mode)
            return ConstantVariable(None)
        if name == "__exit__" and len(args) == 3 and not kwargs:
            set_grad_mode(tx, self.load_prev(tx))
            return ConstantVariable(None)  # a false value: exceptions are not swallowed
        if name == "clone" and not args and not kwargs:
            if self.cls is torch.set_grad_enabled:
                return construct_set_grad_enabled(tx, self.mode)
            return GradModeVariable(self.cls, self.mode, mutation_type=NEW_OBJECT)
        raise Unsupported("unsupported_method", f"{self.cls.__name__}.{name}")

    def store_prev(self, tx: InstructionTranslatorBase, prev: bool) -> None:
        tx.output.side_effects.store_attr(self, "prev", ConstantVariable(prev))

    def load_prev(self, tx: InstructionTranslatorBase) -> bool:
        """The mode ``__exit__`` restores: stored during the trace, else the real attribute."""
        from bytegraph.variables.builder import wrap

        pending = tx.output.side_effects.load_attr(self, "prev")
        if pending is not None:
            return pending.as_python_constant()
        if self.value is None or self.source is None or not hasattr(self.value, "prev"):
            raise Unsupported("operation_raises", f"{self.cls.__name__} exited before entered")
        return _mode_argument(wrap(tx, self.value.prev, AttrSource(self.source, "prev")))

    def reconstruct(self, codegen: PyCodegen) -> None:
        """An equal instance, built without switching the mode (``__init__`` would)."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        prev = codegen.side_effects.load_attr(self, "prev")
        args = [ConstantVariable(self.cls), ConstantVariable(self.mode)]
        codegen.call_const(_rebuild, [*args, prev if prev is not None else ConstantVariable(None)])

    def __repr__(self) -> str:
        return f"GradModeVariable({self.cls.__name__}, mode={self.mode})"


def _rebuild(cls: type, mode: bool, prev: bool | None) -> Any:
    obj = object.__new__(cls)
    if cls is torch.set_grad_enabled:
        obj.mode = mode
    if prev is not None or cls is torch.no_grad:
        obj.prev = bool(prev)
    return obj


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SetGradEnabledFunctionVariable(VariableTracker):
    """``torch._C._set_grad_enabled``, the switch the context managers call."""

    def python_type(self) -> type:
        return type(torch._C._set_grad_enabled)

    def as_python_constant(self) -> Any:
        return torch._C._set_grad_enabled

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported("grad_mode_call", "_set_grad_enabled takes one bool (raises)")
        set_grad_mode(tx, _mode_argument(args[0]))
        return ConstantVariable(None)


def wrap_context_manager(
    tx: InstructionTranslatorBase, value: Any, source: Source
) -> VariableTracker | None:
    """The VT of a grad-mode class, instance, bound method or switch; None if not one.

    Called by the builder after it installed the ID_MATCH guard on ``source``.
    """
    if value is torch._C._set_grad_enabled:
        return SetGradEnabledFunctionVariable(source=source)
    if isinstance(value, type):
        if value in GRAD_MODE_CLASSES or value is torch.inference_mode:
            return GradModeClassVariable(value, source=source)
        return None
    from bytegraph.variables.builder import wrap  # builder.py imports this module

    if type(value) in GRAD_MODE_CLASSES:
        mode = _FIXED_MODE.get(type(value))
        if mode is None:
            mode = _mode_argument(wrap(tx, value.mode, AttrSource(source, "mode")))
        return GradModeVariable(
            type(value), mode, value, source=source, mutation_type=EXISTING_OBJECT
        )
    if isinstance(value, types.MethodType) and type(value.__self__) in GRAD_MODE_CLASSES:
        name = value.__func__.__name__
        if name in _MODELLED_METHODS and getattr(type(value.__self__), name) is value.__func__:
            receiver = wrap(tx, value.__self__, AttrSource(source, "__self__"))
            return BoundMethodVariable(receiver, name)
    return None
