"""Collectives of ``torch.distributed`` called in the trace, captured as functional collectives.

A collective inside compiled code (``dist.all_reduce(t)`` in a model's
forward, a functional collective from ``torch.distributed._functional_collectives``)
becomes nodes of the graph, as torch.compile captures it, in the forms whose
meaning the graph keeps exactly; every other form is a graph break
(``collective_call``, B121) that runs the call as Python between two graphs.

1. **The in-place APIs** ``all_reduce``, ``all_gather_single`` (or its older
   name ``all_gather_into_tensor``), ``reduce_scatter_single`` (or
   ``reduce_scatter_tensor``) and ``broadcast`` become their functional op, a
   wait, and a copy into the tensor the call writes::

       dist.all_reduce(t, op, group)
       -> t.copy_(wait_tensor(torch.ops._c10d_functional.all_reduce(t, "sum", group_name)))

   The copy is an ordinary in-place op (``Tensor.copy_``), so writing into a
   frame input is modelled as any other write: the caller sees it as in eager.
   Only ``async_op=False`` (``async_op=True`` returns a Work the trace does not
   model), the reduce ops SUM, AVG, PRODUCT, MIN and MAX, contiguous tensors
   that need no gradient, and output shapes the call fills exactly; anything
   else breaks, and Python then runs the call (or raises eager's error).
2. **Functional collectives** (``funcol.all_reduce``, ``all_gather_single``,
   ``reduce_scatter_single`` on dim 0 (and their older ``_tensor`` names),
   ``broadcast``, ``wait_tensor``) become
   the op and its wait: the result is a plain tensor where eager hands an
   ``AsyncCollectiveTensor`` that waits on first use; the values are the same.
   ``torch.ops._c10d_functional.<op>`` called directly is one node, as written.
3. **The group** is the default one (``group=None``) or a ProcessGroup known
   at trace time (``dist.group.WORLD``, or one from the frame), guarded by
   identity (the default one as ``_world.default_pg``): its name, rank and
   size are then fixed, and a new process group (destroyed and created again)
   traces again. A list of ranks, a DeviceMesh or a rank outside the group
   breaks. ``dist.get_rank()`` and ``dist.get_world_size()`` fold to constants
   the same way, as under torch.compile; ``dist.is_initialized()`` folds
   guarded by its value, ``dist.is_available()`` (the build's) unguarded.
   Each rank's guards are the same checks, so the ranks compile the same
   graphs for the same inputs.
4. **No hang, no repeat.** fx counts a functional collective as pure (torch
   lists ``wait_tensor`` as side-effectful only once its
   ``_functional_collectives`` module is imported), so a backend may drop one
   whose result nothing reads: this rank would then skip a collective its
   peers wait in. Every collective's result is made a
   graph output (``OutputGraph.collective_results``), so none is dropped. A
   graph that communicates never reruns as Python when it raises
   (``graph/rerun.py``): the rerun would communicate twice. Inside a
   higher-order body or under a TorchFunctionMode a collective breaks. In a
   trace with dynamic shapes the shape checks above are decisions about
   symbols, guards like any other (an all-gather's output is ``2*s0`` long).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.graph.metadata import op_namespace
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource, ModuleGlobalSource, Source, StateCallSource
from bytegraph.variables.base import BoundMethodVariable, PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.torch_ops import TorchOperatorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_C10D = "torch.distributed.distributed_c10d"
_FUNCOL = "torch.distributed._functional_collectives"
# The functional ops a graph may hold, called directly; the others (in-place, coalesced,
# all_to_all) break.
_DIRECT_OPS = frozenset({
    "all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast", "wait_tensor",
})
_REDUCE_NAMES = ("SUM", "AVG", "PRODUCT", "MIN", "MAX")


_OP_TYPES = (torch._ops.OpOverloadPacket, torch._ops.OpOverload)


def _op_name(op: Any) -> str:
    packet = op.overloadpacket if isinstance(op, torch._ops.OpOverload) else op
    return packet._qualified_op_name.split("::")[-1]


def _c10d() -> Any:
    return sys.modules.get(_C10D)


def _reduce_ops() -> dict[Any, str]:
    """``ReduceOp.SUM`` -> ``"sum"``, for the ops every functional reduction takes."""
    reduce_op = _c10d().ReduceOp
    return {getattr(reduce_op, name): name.lower() for name in _REDUCE_NAMES}


def wrap_distributed(value: Any, source: Source) -> VariableTracker | None:
    """The VT of a torch.distributed object the trace models, or None. Called by the builder
    for objects wrapped by identity (their ID_MATCH guard is installed)."""
    c10d = _c10d()
    if c10d is None:
        return None
    if isinstance(value, _OP_TYPES):
        if op_namespace(value) in ("_c10d_functional", "c10d", "_c10d_functional_autograd"):
            return FunctionalOpVariable(value, source=source)
        return None
    kind = _function_kinds().get(value) if isinstance(value, types.FunctionType) else None
    if kind is not None:
        return CollectiveFunctionVariable(value, kind, source=source)
    if isinstance(value, c10d.ProcessGroup):
        return ProcessGroupVariable(value, source=source)
    if value is c10d.group:
        return GroupNamespaceVariable(value, source=source)
    if value is c10d.ReduceOp:
        return ReduceOpClassVariable(value, source=source)
    if type(value) is type(c10d.ReduceOp.SUM):
        return ReduceOpVariable(value, source=source)
    return None


_KINDS: dict[bool, dict[Any, str]] = {}


def _function_kinds() -> dict[Any, str]:
    """The functions modelled here, by what each one does; funcol's only once imported."""
    funcol_imported = _FUNCOL in sys.modules
    kinds = _KINDS.get(funcol_imported)
    if kinds is None:
        kinds = _KINDS[funcol_imported] = _make_function_kinds()
    return kinds


def _make_function_kinds() -> dict[Any, str]:
    c10d = _c10d()
    kinds: dict[Any, str] = {
        c10d.all_reduce: "all_reduce_", c10d.all_gather_into_tensor: "all_gather_",
        c10d.reduce_scatter_tensor: "reduce_scatter_", c10d.broadcast: "broadcast_",
        c10d.all_gather_single: "all_gather_", c10d.reduce_scatter_single: "reduce_scatter_",
        c10d.get_rank: "get_rank", c10d.get_world_size: "get_world_size",
        c10d.is_initialized: "is_initialized",
        sys.modules["torch.distributed"].is_available: "is_available",
    }
    funcol = sys.modules.get(_FUNCOL)
    if funcol is not None:
        kinds.update({
            funcol.all_reduce: "all_reduce", funcol.broadcast: "broadcast",
            funcol.all_gather_tensor: "all_gather", funcol.all_gather_single: "all_gather",
            funcol.reduce_scatter_tensor: "reduce_scatter",
            funcol.reduce_scatter_single: "reduce_scatter", funcol.wait_tensor: "wait",
        })
    return kinds


def _refuse(detail: str) -> Unsupported:
    return Unsupported("collective_call", detail)


# --- process groups and reduce ops -------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ProcessGroupVariable(PythonValueVariable):
    """A ProcessGroup known at trace time, guarded by identity: its name, rank and size."""

    def call_method(self, tx: Tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in ("rank", "size") and not args and not kwargs:
            return ConstantVariable(getattr(self.value, name)())
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name == "group_name":
            return ConstantVariable(self.value.group_name)
        if name in ("rank", "size"):
            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"ProcessGroupVariable({self.value.group_name!r})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GroupNamespaceVariable(PythonValueVariable):
    """``torch.distributed.group``: its ``WORLD`` is the default group, guarded by identity."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name != "WORLD" or self.source is None:
            return super().var_getattr(tx, name)
        group = self.value.WORLD
        if group is None:
            raise _refuse("dist.group.WORLD before init_process_group")
        source = AttrSource(self.source, "WORLD")
        tx.output.add_guard(GuardKind.ID_MATCH, source, group)
        return ProcessGroupVariable(group, source=source)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ReduceOpClassVariable(PythonValueVariable):
    """``torch.distributed.ReduceOp``: its members are constants (pybind enum values)."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in _REDUCE_NAMES or name in ("BAND", "BOR", "BXOR", "PREMUL_SUM"):
            return ReduceOpVariable(getattr(self.value, name))
        return super().var_getattr(tx, name)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ReduceOpVariable(PythonValueVariable):
    """``ReduceOp.SUM`` and its siblings, loaded as constants where code needs them."""

    rebuilt_as_constant = True


def _group(tx: Tx, group: VariableTracker | None) -> Any:
    """The ProcessGroup a call works on, guarded; a break for one the trace cannot fix."""
    c10d = _c10d()
    if group is None or (isinstance(group, ConstantVariable) and group.value is None):
        pg = c10d._world.default_pg
        if pg is None:
            raise _refuse("a collective before init_process_group")
        source = AttrSource(ModuleGlobalSource(_C10D, "_world"), "default_pg")
        tx.output.add_guard(GuardKind.ID_MATCH, source, pg)
        return pg
    if isinstance(group, ProcessGroupVariable) and group.source is not None:
        tx.output.add_guard(GuardKind.ID_MATCH, group.source, group.value)
        if c10d._rank_not_in_group(group.value):
            raise _refuse("a collective on a group this rank is not a member of")
        return group.value
    raise _refuse(f"a collective on the group {group} (a list of ranks, a DeviceMesh or a "
                  "group not known at trace time)")


def _reduce_name(op: VariableTracker | None, functional: bool) -> str:
    """``"sum"`` for ``ReduceOp.SUM`` (or funcol's ``"sum"``); a break for other ops."""
    if op is None:
        return "sum"
    value = op.as_python_constant() if op.is_python_constant() else None
    if functional and isinstance(value, str) and value.upper() in _REDUCE_NAMES:
        return value.lower()
    name = _reduce_ops().get(value) if not isinstance(value, str) else None
    if name is None:
        raise _refuse(f"a reduction with op {op} (captured: {', '.join(_REDUCE_NAMES)})")
    return name


# --- the calls -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CollectiveFunctionVariable(PythonValueVariable):
    """``dist.all_reduce`` and the other collectives modelled here, and the queries
    (``dist.get_rank``, ``is_initialized``...) folded to constants."""

    kind: str = ""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        try:
            bound = inspect.signature(self.value).bind(*args, **kwargs).arguments
        except TypeError as error:  # Python raises eager's own error
            raise _refuse(f"{self.value.__name__} called with {error}") from error
        if self.kind == "is_available":  # the build's: the same all the process long
            return ConstantVariable(self.value())
        if self.kind == "is_initialized":
            initialized = self.value()
            tx.output.add_guard(GuardKind.CONSTANT_MATCH, StateCallSource(self.value), initialized)
            return ConstantVariable(initialized)
        if self.kind in ("get_rank", "get_world_size"):
            pg = _group(tx, bound.get("group"))
            return ConstantVariable(getattr(_c10d(), self.kind)(pg))
        _check_trace(tx, self.value.__name__)
        if self.kind == "wait":
            return _wait(tx, _tensor(bound["tensor"]))
        if self.kind.endswith("_"):
            return _in_place(tx, self.kind, bound)
        return _functional(tx, self.kind, bound)

    def __repr__(self) -> str:
        return f"CollectiveFunctionVariable({self.value.__name__})"


def _check_trace(tx: Tx, name: str) -> None:
    """The trace can hold a collective here: not in a higher-order body or under a mode."""
    output = tx.output
    if output.tracer.parent is not None:
        raise _refuse(f"{name} inside a higher-order op's body")
    if output.function_modes:
        raise _refuse(f"{name} under a TorchFunctionMode")


def _tensor(vt: VariableTracker | None) -> Any:
    from bytegraph.variables.tensor import TensorVariable

    if type(vt) is not TensorVariable or vt.tensor_type is not torch.Tensor:
        raise _refuse(f"a collective on {vt}, not a plain tensor")
    if vt.example.requires_grad:
        raise _refuse("a collective on a tensor that requires grad")
    if not vt.example.is_contiguous():
        raise _refuse("a collective on a non-contiguous tensor")
    return vt


def _constant(vt: VariableTracker | None, default: Any, what: str) -> Any:
    if vt is None:
        return default
    if not vt.is_python_constant():
        raise _refuse(f"{what} not known at trace time")
    return vt.as_python_constant()


def _in_place(tx: Tx, kind: str, bound: dict) -> VariableTracker:
    """``dist.all_reduce(t)`` and siblings: the functional op, its wait, a copy into the
    tensor eager writes; None, as eager returns with ``async_op=False``."""
    if _constant(bound.get("async_op"), False, "async_op"):
        raise _refuse(f"dist.{kind[:-1]} with async_op=True (it returns a Work)")
    pg = _group(tx, bound.get("group"))
    if kind == "all_reduce_":
        target = _tensor(bound["tensor"])
        result = _all_reduce(tx, target, _reduce_name(bound.get("op"), False), pg)
    elif kind == "broadcast_":
        target = _tensor(bound["tensor"])
        result = _broadcast(tx, target, _source_rank(bound, pg), pg)
    elif kind == "all_gather_":
        target = _tensor(bound["output_tensor"])
        result = _all_gather(tx, _tensor(bound["input_tensor"]), pg, target)
    else:
        target = _tensor(bound["output"])
        name = _reduce_name(bound.get("op"), False)
        result = _reduce_scatter(tx, _tensor(bound["input"]), name, pg, target)
    target.call_method(tx, "copy_", [result], {})
    return ConstantVariable(None)


def _source_rank(bound: dict, pg: Any) -> int:
    """broadcast's ``src`` (a global rank) or ``group_src``, as the group's own rank."""
    src = _constant(bound.get("src"), None, "broadcast's src")
    group_src = _constant(bound.get("group_src"), None, "broadcast's group_src")
    if (src is None) == (group_src is None):
        raise _refuse("dist.broadcast without exactly one of src and group_src")
    if group_src is not None:
        return group_src
    if type(src) is not int or src not in _c10d().get_process_group_ranks(pg):
        raise _refuse(f"dist.broadcast from rank {src!r}, not in the group")
    return _c10d().get_group_rank(pg, src)


def _functional(tx: Tx, kind: str, bound: dict) -> VariableTracker:
    """funcol's collectives: the op and its wait (a plain tensor, not eager's
    AsyncCollectiveTensor, which waits on first use)."""
    if _constant(bound.get("tag"), "", "the tag") != "":
        raise _refuse("a functional collective with a tag")
    if not isinstance(bound["group"], ProcessGroupVariable):  # None: eager's ValueError
        raise _refuse(f"a functional collective on the group {bound['group']}")
    pg = _group(tx, bound["group"])
    tensor = _tensor(bound["self"])
    if kind == "all_reduce":
        return _all_reduce(tx, tensor, _reduce_name(bound["reduceOp"], True), pg)
    if kind == "broadcast":
        return _broadcast(tx, tensor, _constant(bound["src"], None, "broadcast's src"), pg)
    dim = "gather_dim" if kind == "all_gather" else "scatter_dim"
    if _constant(bound[dim], None, dim) != 0:
        raise _refuse(f"a functional {kind} with {dim} other than 0")
    if kind == "all_gather":
        return _all_gather(tx, tensor, pg, None)
    return _reduce_scatter(tx, tensor, _reduce_name(bound["reduceOp"], True), pg, None)


# --- the graph nodes ---------------------------------------------------------------------


def _op(name: str) -> Any:
    return getattr(torch.ops._c10d_functional, name).default


def _call(tx: Tx, name: str, args: list) -> VariableTracker:
    """One functional collective and its wait, the waited result kept as a graph output."""
    from bytegraph.variables.tensor import tensor_op

    args = [a if isinstance(a, VariableTracker) else ConstantVariable(a) for a in args]
    issued = tensor_op(tx, "call_function", _op(name), args, {})
    return _wait(tx, issued)


def _wait(tx: Tx, tensor: VariableTracker) -> VariableTracker:
    from bytegraph.variables.tensor import tensor_op

    waited = tensor_op(tx, "call_function", _op("wait_tensor"), [tensor], {})
    tx.output.collective_results.append(waited)
    return waited


def _check_reduction(tensor: Any, op: str) -> None:
    """Reductions eager and the functional op do alike on gloo (checked dtype by dtype): not
    AVG of integers or bools (eager raises; the functional op fails later, in whatever
    collective comes next), nothing of complex numbers (they raise different errors)."""
    if tensor.dtype.is_complex or (op == "avg" and not tensor.dtype.is_floating_point):
        raise _refuse(f"a reduction {op!r} of {tensor.dtype}")


def _all_reduce(tx: Tx, tensor: Any, op: str, pg: Any) -> VariableTracker:
    _check_reduction(tensor, op)
    return _call(tx, "all_reduce", [tensor, op, pg.group_name])


def _broadcast(tx: Tx, tensor: Any, src: Any, pg: Any) -> VariableTracker:
    if not isinstance(src, int) or not 0 <= src < pg.size():
        raise _refuse(f"a broadcast from rank {src!r} of a group of {pg.size()}")
    return _call(tx, "broadcast", [tensor, src, pg.group_name])


def _all_gather(tx: Tx, tensor: Any, pg: Any, into: Any) -> VariableTracker:
    size = pg.size()
    shape = (size * tensor.shape[0], *tensor.shape[1:]) if tensor.shape else (size,)
    _check_output(into, tensor, shape, "all_gather_into_tensor")
    return _call(tx, "all_gather_into_tensor", [tensor, size, pg.group_name])


def _reduce_scatter(tx: Tx, tensor: Any, op: str, pg: Any, into: Any) -> VariableTracker:
    _check_reduction(tensor, op)
    size = pg.size()
    if not tensor.shape or tensor.shape[0] % size:
        raise _refuse(f"a reduce_scatter of shape {tensor.shape} over {size} ranks")
    shape = (tensor.shape[0] // size, *tensor.shape[1:])
    _check_output(into, tensor, shape, "reduce_scatter_tensor")
    return _call(tx, "reduce_scatter_tensor", [tensor, op, size, pg.group_name])


def _check_output(into: Any, tensor: Any, shape: tuple, name: str) -> None:
    """The tensor eager writes has the functional result's shape and dtype (eager views a
    flat output of another shape, which a copy would broadcast or refuse)."""
    if into is not None and (into.shape != shape or into.dtype != tensor.dtype):
        raise _refuse(f"dist.{name} into a tensor of shape {into.shape} ({into.dtype}); "
                      f"captured: {shape} ({tensor.dtype})")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FunctionalOpVariable(TorchOperatorVariable):
    """``torch.ops._c10d_functional.<op>`` called directly: one graph node, kept as an
    output; the in-place, coalesced and c10d ops break."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        packet = self.value
        if isinstance(packet, torch._ops.OpOverloadPacket) and name in packet.overloads():
            source = None if self.source is None else AttrSource(self.source, name)
            if source is not None:
                tx.output.add_guard(GuardKind.ID_MATCH, source, getattr(packet, name))
            return FunctionalOpVariable(getattr(packet, name), source=source)
        return super().var_getattr(tx, name)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        op, name = self.value, _op_name(self.value)
        if kwargs:
            raise _refuse(f"{op} called with keyword arguments")
        if op_namespace(op) != "_c10d_functional" or name not in _DIRECT_OPS:
            raise _refuse(f"torch.ops.{op} (captured: {', '.join(sorted(_DIRECT_OPS))})")
        _check_trace(tx, name)
        for arg in args:
            if not arg.is_python_constant():
                _tensor(arg)
        if name != "wait_tensor" and not isinstance(_constant(args[-1], None, "group"), str):
            raise _refuse(f"torch.ops._c10d_functional.{name} with a group that is no name")
        result = super().call_function(tx, args, kwargs)
        tx.output.collective_results.append(result)
        return result
