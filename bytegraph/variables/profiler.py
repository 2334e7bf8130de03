"""Profiler context managers inside the trace: ignored, as torch.compile ignores them.

``with torch.autograd.profiler.record_function("step"):`` (also reached as
``torch.profiler.record_function``) and ``with torch.profiler.profile():`` /
``torch.autograd.profiler.profile()`` only observe: they label or record the
ops that run, and change no value. torch.compile treats them as
``contextlib.nullcontext`` (``record_function`` puts nothing in the graph
unless a Dynamo setting asks, off by default), and so does bytegraph:

1. calling the class makes an ``IgnoredProfilerVariable`` (the arguments are
   not looked at: the constructors only store them);
2. ``__enter__`` returns the object itself, as both classes do; ``__exit__``
   returns None, so an exception goes on;
3. the object supports nothing else: reading ``prof.key_averages`` or any
   other attribute is a graph break, and so is rebuilding the object (it
   escapes, or is live at a break): there is no real profiler behind it, so
   the frame then runs in Python, where the profiler is real;
4. at a graph break inside the ``with`` body, the ``__exit__`` waiting on the
   stack is rebuilt as a ``contextlib.nullcontext()``'s: the rest of the body
   runs unprofiled, like the part in the graph.

The profiled region is therefore missing from a trace taken around compiled
code, which is what torch.compile gives too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.variables.base import AttributeMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.objects import ClassVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

PROFILER_CLASSES = frozenset({
    torch.autograd.profiler.record_function,
    torch.autograd.profiler.profile,
    torch.profiler.profile,
})


def is_profiler_class(value: Any) -> bool:
    return isinstance(value, type) and value in PROFILER_CLASSES


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ProfilerClassVariable(ClassVariable):
    """``record_function`` or ``profile``: calling it makes an ignored profiler."""

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        mutation = tx.output.side_effects.new_mutation(AttributeMutationNew)
        return IgnoredProfilerVariable(self.value, mutation_type=mutation)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class IgnoredProfilerVariable(VariableTracker):
    """A profiler context manager made in the trace, standing in for a nullcontext."""

    cls: type

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in ("__enter__", "__exit__"):
            return ProfilerMethodVariable(self, name)
        raise Unsupported(
            "unknown_attribute", f"{name!r} of a {self.cls.__name__} the trace ignores"
        )

    def reconstruct(self, codegen: PyCodegen) -> None:
        raise Unsupported(
            "unrebuildable_value", f"a {self.cls.__name__} the trace ignored, used after it"
        )

    def __repr__(self) -> str:
        return f"IgnoredProfilerVariable({self.cls.__name__})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ProfilerMethodVariable(VariableTracker):
    """``__enter__`` or ``__exit__`` of an ignored profiler."""

    profiler: IgnoredProfilerVariable
    name: str

    def python_type(self) -> type:
        return types.MethodType

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if self.name == "__enter__" and not args and not kwargs:
            return self.profiler
        if self.name == "__exit__" and len(args) == 3 and not kwargs:
            return ConstantVariable(None)
        raise Unsupported("call_raises_type_error", f"{self.name} with these arguments")

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``__exit__`` pending at a graph break: a nullcontext's, as the trace treated it."""
        if self.name != "__exit__":
            raise Unsupported("unrebuildable_value", f"{self.name} of an ignored profiler")
        codegen.load_callable(contextlib.nullcontext)
        codegen.append(*assemble.call(0), assemble.load_attr("__exit__"))

    def __repr__(self) -> str:
        return f"ProfilerMethodVariable({self.name})"
