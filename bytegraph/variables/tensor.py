"""TensorVariable and the one path by which tensor work enters the graph.

``tensor_op(tx, kind, target, args, kwargs)`` turns a call with tensor
operands into an fx node, propagates metadata through a meta tensor (a fake
tensor in a dynamic trace: ``graph/shapes.py``), and wraps the result.
Metadata queries (``x.dtype``, ``x.dim()``, a static ``x.shape``) fold to
constants instead of becoming nodes; a dynamic size is a ``x.size(i)`` node
(``variables/symbolic.py``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from bytegraph.exc import Unsupported
from bytegraph.graph import metadata
from bytegraph.translate.regions import in_try_block
from bytegraph.variables.base import BoundMethodVariable, ValueMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value
from bytegraph.variables.containers import (
    BaseSequenceVariable,
    SizeVariable,
    TupleVariable,
    python_constant,
)
from bytegraph.variables.function_modes import refuse_undispatched_op, through_modes
from bytegraph.variables.symbolic import (
    SymIntVariable,
    SymSliceVariable,
    decide,
    size_item,
    symbolic_or_constant,
)
from bytegraph.variables.tensor_attributes import (
    read_data,
    read_grad,
    refuse_made_leaf,
    set_requires_grad,
)

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TensorVariable(VariableTracker):
    """A tensor: its fx node, a meta tensor with its metadata, and its device.

    The node is the graph-level handle (a Proxy's operator overloading would
    never be used: the translator does its own dispatch).
    """

    node: torch.fx.Node
    example: torch.Tensor
    device: torch.device
    tensor_type: type = torch.Tensor

    def python_type(self) -> type:
        return self.tensor_type

    @property
    def dtype(self) -> torch.dtype:
        return self.example.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.example.shape)

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        raise Unsupported("data_dependent_branch", "bool() of a tensor decides Python control flow")

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        if tx.output.function_modes and not callable(getattr(torch.Tensor, name, None)):
            dispatched = through_modes(tx, lambda t: getattr(t, name), [self], {})
            if dispatched is not None:
                return dispatched
        if name == "shape":
            return _size_of(tx, self)
        folded = _fold_attribute(self, name)
        if folded is not None:
            return folded
        if name in ("grad", "data"):
            return (read_grad if name == "grad" else read_data)(tx, self)
        if name in _GRAPH_ATTRIBUTES:
            return tensor_op(tx, "call_function", getattr, [self, ConstantVariable(name)], {})
        if name in _UNSUPPORTED_METHODS and name not in ("requires_grad_", "numpy"):
            # call_method decides those two
            raise refuse_method(name)
        if callable(getattr(torch.Tensor, name, None)):
            return BoundMethodVariable(self, name)
        raise Unsupported("tensor_attribute", f"Tensor attribute {name!r}")

    def var_setattr(self, tx: InstructionTranslatorBase, name: str, value: VariableTracker) -> None:
        from bytegraph.variables.tensor_attributes import store_attribute

        store_attribute(tx, self, name, value)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if tx.output.function_modes:
            if name in _UNSUPPORTED_METHODS and name not in ("requires_grad_", "numpy"):
                raise refuse_method(name)
            dispatched = through_modes(
                tx, lambda t, *a, **k: getattr(t, name)(*a, **k), [self, *args], kwargs
            )
            if dispatched is not None:
                return dispatched
        if name == "item" and not args and not kwargs:
            return _item(tx, self)
        if name == "requires_grad_" and len(args) + len(kwargs) <= 1 and kwargs.keys() <= {
            "requires_grad"
        }:
            flag = [*args, *kwargs.values()] or [ConstantVariable(True)]
            return set_requires_grad(tx, self, flag[0])
        if name in _UNSUPPORTED_METHODS:
            if name == "numpy" and not args and not kwargs:
                from bytegraph.variables.numpy import tensor_to_ndarray

                return tensor_to_ndarray(tx, self)  # a break where config.trace_numpy is off
            raise refuse_method(name)
        folded = _fold_method(tx, self, name, args, kwargs)
        if folded is not None:
            return folded
        return tensor_op(tx, "call_method", name, [self, *args], kwargs)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        if not self.shape:
            raise Unsupported("unknown_iteration", "iteration over a 0-d tensor")
        return [
            tensor_op(tx, "call_function", operator.getitem, [self, ConstantVariable(i)], {})
            for i in range(self.shape[0])
        ]

    def __repr__(self) -> str:
        return f"TensorVariable({self.node.name}, {self.dtype}, {list(self.shape)}, {self.device})"


def _item(tx: InstructionTranslatorBase, t: TensorVariable) -> VariableTracker:
    """``t.item()``: in a trace whose ShapeEnv allows scalar outputs
    (``config.capture_scalar_outputs``), a node whose value is an unbacked symbol."""
    if tx.output.shapes is None:  # a static trace: the switch is off
        raise Unsupported(
            "item_call",
            "Tensor.item() reads the tensor's value into Python; set "
            "bytegraph.config.capture_scalar_outputs = True to keep it in the graph",
        )
    return tensor_op(tx, "call_method", "item", [t], {})


_GRAPH_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag"})
_UNSUPPORTED_METHODS = frozenset({
    "tolist", "numpy", "data_ptr", "backward", "register_hook", "retain_grad",
    "storage", "untyped_storage", "set_", "requires_grad_", "apply_", "map_", "map2_",
    "share_memory_", "record_stream", "__bool__", "__index__", "__int__", "__float__",
})


def refuse_method(name: str) -> Unsupported:
    """The break for ``Tensor.<name>``, one of ``_UNSUPPORTED_METHODS``."""
    detail = f"Tensor.{name} needs the tensor's values"
    if name in ("tolist", "numpy"):
        return Unsupported("tolist_call", detail)
    if name == "__bool__":
        return Unsupported("data_dependent_branch", detail)
    if name in ("__index__", "__int__", "__float__"):
        return Unsupported("scalar_conversion", detail)
    detail = f"Tensor.{name} needs the tensor's storage or autograd state"
    return Unsupported("tensor_method_unsupported", detail)


def _fold_attribute(t: TensorVariable, name: str) -> VariableTracker | None:
    example = t.example
    if name == "shape":
        return SizeVariable.of(example.shape)
    if name == "device":
        return ConstantVariable(t.device)
    if name in ("is_cuda", "is_cpu", "is_meta", "is_mps", "is_xpu"):
        return ConstantVariable(t.device.type == name[3:])
    if name in ("is_nested", "is_mkldnn"):  # a traced tensor is strided and dense (guarded)
        return ConstantVariable(False)
    if name in ("dtype", "ndim", "requires_grad", "layout", "is_sparse", "is_quantized"):
        return ConstantVariable(getattr(example, name))
    if name == "is_leaf":  # inputs' meta tensors mirror (and guard) the real leafness
        return ConstantVariable(example.is_leaf)
    return None


# Set (to the reason) while a trace cannot know the memory layout of the tensors it
# meets: a traced autograd.Function backward gets its gradients from autograd at run
# time (an expanded, zero-stride tensor after ``out.sum().backward()``), not shaped
# like the example, so a stride read there would fold a number eager does not see.
unknown_layout: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "unknown_layout", default=None
)
_LAYOUT_METHODS = frozenset({"stride", "is_contiguous", "storage_offset", "data_ptr"})
# Set while tracing a function torch calls under its TransformGetItemToIndex mode (a
# flex_attention score_mod): ``x[i]`` with integer tensors ``i`` is ``aten.index``, as
# torch runs it there, not a read of ``i``'s value.
getitem_as_index: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "getitem_as_index", default=False
)

_FOLDED_METHODS = frozenset({
    "dim", "ndimension", "numel", "nelement", "element_size", "is_contiguous",
    "is_floating_point", "is_complex", "stride", "size", "storage_offset", "is_signed",
})


def _fold_method(
    tx: InstructionTranslatorBase,
    t: TensorVariable,
    name: str,
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> VariableTracker | None:
    if name == "get_device":
        return ConstantVariable(t.device.index if t.device.type != "cpu" else -1)
    if name in _LAYOUT_METHODS and (why := unknown_layout.get()) is not None:
        raise Unsupported("higher_order_call", f"Tensor.{name}() {why}")
    if name not in _FOLDED_METHODS:
        return None
    const_args = [python_constant(tx, a) for a in args]
    const_kwargs = {k: python_constant(tx, v) for k, v in kwargs.items()}
    try:
        result = getattr(t.example, name)(*const_args, **const_kwargs)
    except Exception as e:  # x.size(5) on a matrix: raises in eager too, so run it there
        detail = f"Tensor.{name} raised {type(e).__name__}: {e}"
        raise Unsupported("operation_raises", detail) from e
    if name == "size" and not const_args and not const_kwargs:
        return _size_of(tx, t)
    if name == "stride" and not const_args and not const_kwargs:  # symbolic ones as nodes

        return TupleVariable(tuple(
            size_item(tx, t.node, i, s, "stride") for i, s in enumerate(result)
        ))
    if name == "storage_offset":  # a number, never a graph value (see the guard's docstring)
        return ConstantVariable(_guard_storage_offsets(tx, t, result))
    if isinstance(result, torch.Size):
        return SizeVariable.of(result)
    if isinstance(result, tuple):
        return wrap_python_value(result)
    if isinstance(result, torch.SymInt):  # x.size(0), x.numel() of a dynamic tensor
        node = tx.output.create_node("call_method", name, (t.node, *const_args), const_kwargs)
        return symbolic_or_constant(tx, node, result)
    return ConstantVariable(result)


def _guard_storage_offsets(tx: InstructionTranslatorBase, t: TensorVariable, offset: Any) -> int:
    """``t.storage_offset()`` as a number, guarded: no tensor guard compares offsets
    (``ids[:, -1:]`` of a growing ``ids`` moves call to call), so an input's own offset
    is guarded, and a computed tensor's by the offset of every input (one of which it
    may view). A symbolic offset is specialised first: Inductor reads an input's
    ``sym_storage_offset`` as 0 (its data pointer includes the offset)."""
    from bytegraph.graph.shapes import is_symbolic
    from bytegraph.guards.guard import GuardKind

    offset = decide(int, offset)
    inputs = [t] if t.source is not None else list(tx.output.tensor_by_id.values())
    for tensor in inputs:
        value = tensor.example.storage_offset()
        if tensor.source is not None and not is_symbolic(value):
            text = f"{tensor.source.expr()}.storage_offset() == {int(value)}"
            tx.output.add_guard(GuardKind.SHAPE, tensor.source, text)
    return offset


def _size_of(tx: InstructionTranslatorBase, t: TensorVariable) -> VariableTracker:
    """``x.shape``: constants, and a ``x.size(i)`` node for each dynamic dimension."""
    from bytegraph.variables.containers import SizeVariable

    shape = t.example.shape
    return SizeVariable(tuple(size_item(tx, t.node, i, d) for i, d in enumerate(shape)))


def wrap_python_value(value: Any) -> VariableTracker:
    from bytegraph.variables.builder import wrap_constant_result

    return wrap_constant_result(value)


def tensor_op(
    tx: InstructionTranslatorBase,
    kind: str,
    target: Any,
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> VariableTracker:
    """Record ``target(*args, **kwargs)`` as an fx node and wrap its result."""
    if tx.output.function_modes:
        refuse_undispatched_op(tx, target)
    refuse_made_leaf(args, kwargs)
    if target is operator.getitem and getitem_as_index.get():
        kind, target, args = _as_index(kind, target, args)
    devices: list[torch.device] = []
    if _reads_size_as_shape(kind, target):
        args = [_SizeArgument(a) if _is_size(a) else a for a in args]
    graph_args, meta_args = _lower(tx, tuple(args), devices)
    graph_kwargs, meta_kwargs = _lower(tx, kwargs, devices)
    shapes = tx.output.shapes
    # Before the op runs: a body's write to an outer tensor is refused for that reason.
    tx.output.note_write(metadata.written_argument(kind, target, meta_args, meta_kwargs))
    if shapes is None:
        example = metadata.run(kind, target, meta_args, meta_kwargs)
    else:
        example = metadata.run_fake(
            shapes.fake_mode, kind, target, meta_args, meta_kwargs, shapes.memo
        )
    tx.output.note_result(example, (meta_args, meta_kwargs))
    device = metadata.result_device(kind, target, meta_args, meta_kwargs, devices)
    if not devices and meta_kwargs.get("device") is None:
        tx.output.uses_default_device = True  # a factory: its device is global state
    example = _copy_if_moved(example, args, device)
    node = tx.output.create_node(kind, target, graph_args, graph_kwargs)
    if not tx.output.ops_in_try:
        tx.output.ops_in_try = _under_try_block(tx)
    return _wrap_result(tx, node, example, device, args)


def _as_index(kind: str, target: Any, args: list[VariableTracker]) -> tuple[str, Any, list]:
    """``x[i]`` / ``x[i, j]`` with integer tensor indices as ``aten.index.Tensor``."""
    from bytegraph.variables.containers import ListVariable, TupleVariable

    base, index = args
    items = list(index.items) if isinstance(index, TupleVariable) else [index]
    if not items or not all(isinstance(i, TensorVariable) and not i.example.is_floating_point()
                            and i.example.dtype is not torch.bool for i in items):
        return kind, target, args
    return "call_function", torch.ops.aten.index.Tensor, [base, ListVariable(tuple(items))]


def _under_try_block(tx: InstructionTranslatorBase) -> bool:
    """Whether a try block of this frame or a caller's covers the current instruction."""
    frame: Any = tx
    while frame is not None:
        if frame.current_inst is not None and in_try_block(frame.decoded, frame.current_inst.index):
            return True
        frame = getattr(frame, "parent", None)
    return False


def _numpy_number(value: Any) -> bool:
    return getattr(getattr(value, "dtype", None), "kind", None) in ("i", "u", "f")


# Legacy constructors read a torch.Size as a shape and any other sequence as data
# (``x.new(x.shape)`` vs ``x.new((2, 3))``); fx turns a Size argument into a plain tuple.
_LEGACY_CONSTRUCTORS = frozenset({
    torch.Tensor, torch.FloatTensor, torch.DoubleTensor, torch.HalfTensor, torch.BFloat16Tensor,
    torch.LongTensor, torch.IntTensor, torch.ShortTensor, torch.CharTensor, torch.ByteTensor,
    torch.BoolTensor,
})


def _reads_size_as_shape(kind: str, target: Any) -> bool:
    if kind == "call_method":
        return target == "new"
    return kind == "call_function" and target in _LEGACY_CONSTRUCTORS


def _is_size(vt: VariableTracker) -> bool:
    from bytegraph.variables.containers import SizeVariable

    return isinstance(vt, SizeVariable)


@dataclasses.dataclass(frozen=True)
class _SizeArgument:
    """A torch.Size argument that must stay one: a ``torch.Size(...)`` node in the graph."""

    size: VariableTracker


def _copy_if_moved(example: Any, args: list[VariableTracker], device: torch.device) -> Any:
    """On meta, ``x.to(other_device)`` returns ``x`` itself; the real op returns a copy."""
    for arg in args:
        if isinstance(arg, TensorVariable) and arg.example is example and arg.device != device:
            return example.clone()
    return example


def lower_to_meta(tx: InstructionTranslatorBase, value: Any) -> Any:
    """``value`` (VTs in tuples and dicts) as the metadata values an op would run on."""
    return _lower(tx, value, [])[1]


def _lower(
    tx: InstructionTranslatorBase, value: Any, devices: list[torch.device]
) -> tuple[Any, Any]:
    """Map VTs inside ``value`` to (fx argument, meta argument) pairs."""
    if isinstance(value, tuple):
        pairs = [_lower(tx, v, devices) for v in value]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    if isinstance(value, dict):
        if not value:  # most ops have no keyword arguments
            return {}, {}
        pairs_by_key = {k: _lower(tx, v, devices) for k, v in value.items()}
        return (
            {k: p[0] for k, p in pairs_by_key.items()},
            {k: p[1] for k, p in pairs_by_key.items()},
        )
    if isinstance(value, TensorVariable):
        devices.append(value.device)
        return value.node, value.example
    if isinstance(value, SymIntVariable):
        return value.node, value.value
    if isinstance(value, SymSliceVariable):
        return value.lowered()
    if isinstance(value, VariableTracker):
        if isinstance(value, BaseSequenceVariable):
            # items_now: a list's contents may have changed since it was built.
            graph, meta = _lower(tx, tuple(value.items_now(tx)), devices)
            container = list if value.python_type() is list else tuple
            return container(graph), container(meta)
        constant = value.as_python_constant()
        if type(constant).__module__ == "numpy" and _numpy_number(constant):
            # torch reads numpy's integer and float scalars as the Python number (the
            # same result dtype for every tensor dtype; not so for bool and complex);
            # fx would print ``np.float64(1.5)`` in the graph's code, where no np is.
            constant = constant.item()
        if not is_constant_value(constant):
            raise Unsupported("op_argument", f"{value} as an argument of a tensor op")
        return constant, constant
    if isinstance(value, _SizeArgument):
        graph, meta = _lower(tx, tuple(value.size.items), devices)
        return tx.output.create_node("call_function", torch.Size, (graph,), {}), torch.Size(meta)
    return value, value


def _wrap_result(
    tx: InstructionTranslatorBase,
    node: torch.fx.Node,
    example: Any,
    device: torch.device,
    args: list[VariableTracker],
) -> VariableTracker:
    if isinstance(example, torch.Tensor):
        for arg in args:  # an in-place op returns its input: keep that VT
            if isinstance(arg, TensorVariable) and arg.example is example:
                return arg
        return TensorVariable(node, example, device)
    if isinstance(example, (tuple, list)):
        from bytegraph.variables.containers import TupleVariable

        items = []
        for i, item in enumerate(example):
            item_node = tx.output.create_node("call_function", operator.getitem, (node, i), {})
            items.append(_wrap_result(tx, item_node, item, device, []))
        if type(example) is list:
            from bytegraph.variables.containers import ListVariable

            return ListVariable(tuple(items), mutation_type=ValueMutationNew(1))
        return TupleVariable(tuple(items), tuple_type=type(example))
    if example is None:
        return ConstantVariable(None)
    if isinstance(example, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return symbolic_or_constant(tx, node, example)
    raise Unsupported(
        "data_dependent_result", f"operation returned a Python {type(example).__name__}"
    )
