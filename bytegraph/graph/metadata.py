"""Tensor metadata propagation: meta-device tensors, a memo, and devices.

(A trace with dynamic dimensions runs its ops on fake tensors instead:
``run_fake``, and ``graph/shapes.py`` for why.)

Every tensor in a trace is represented by a meta-device tensor (shape, stride,
dtype, requires_grad; no data) plus the device the real tensor would live on,
tracked here because a meta tensor's device is always ``meta``.

Why meta and not FakeTensorMode (``bench/metadata_propagation.py``, torch
2.13 CPU, 64x64 inputs): both import ``torch._dynamo`` on first use (about
1 s), so neither saves start-up time. FakeTensorMode costs 55-180 us for
every op even with its dispatch cache warm. Meta costs 5-15 us for ops with
C++ meta kernels (views, matmul, softmax, linear without bias) and 150-1400 us
for ops whose meta kernel is Python (add, mul, relu, addmm, layer_norm). The
memo below answers a repeated op on inputs of the same metadata in 10-15 us,
and is used only for ops measured slow on their first run; model code
repeats the same ops on the same shapes layer after layer. What meta gets
wrong, and how it is covered: the device (tracked beside, by the rules in
``result_device``); ops without a meta kernel and data-dependent output shapes
(they raise, and the trace breaks there; a failure runs again on fake tensors to
tell a data-dependent op, ``nonzero`` or ``.item()``, whose break names the
config switch that would capture it); aliasing between memoized outputs
and their inputs (a memo hit returns a fresh tensor, so neither ops that
mutate nor ops whose results view an input are memoized: an in-place op on a view
must reach its base, e.g. to make the base require grad; a view of a tensor the
op made inside is, unless autograd tells it apart from a plain tensor).
The memo outlives ``bytegraph.reset()`` for torch's own ops (``reset`` below).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from bytegraph import config
from bytegraph.exc import Unsupported
from bytegraph.graph import shape_rules
from bytegraph.graph.subgraphs import storage_id

META = torch.device("meta")
CPU = torch.device("cpu")


@dataclasses.dataclass(frozen=True, slots=True)
class TensorSpec:
    """The metadata of one memoized result tensor."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: torch.dtype
    requires_grad: bool
    is_leaf: bool  # torch.zeros(3, requires_grad=True) is a leaf that requires grad
    is_view: bool = False  # a view of a tensor the op made inside (_is_fresh_result)

    def build(self) -> torch.Tensor:
        if self.is_view:  # a view of a buffer of its own, as the op's result views its own
            return _strided_view(
                self.shape, self.stride, self.storage_offset, self.dtype, self.requires_grad
            )
        t = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device=META)
        if self.storage_offset:
            t = t.as_strided(self.shape, self.stride, self.storage_offset)
        if self.requires_grad:
            t.requires_grad_()
            if not self.is_leaf:  # clone: not a leaf, so later in-place ops stay legal
                t = t.clone()
                if t.stride() != self.stride or self.storage_offset:  # a clone kept neither
                    t = _strided_view(
                        self.shape, self.stride, self.storage_offset, self.dtype,
                        requires_grad=True,
                    )
        return t


def spec_of(t: torch.Tensor) -> TensorSpec:
    return TensorSpec(
        tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.requires_grad,
        t.is_leaf, t._is_view(),
    )


_memo: dict[tuple, Any] = {}


def to_meta(real: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``real``'s metadata, a leaf exactly when ``real`` is one.

    A view is a view of a meta copy of its base: autograd refuses some in-place
    ops on views (of a leaf that requires grad...) that it allows on the same
    tensor standing alone. Grad mode is on while building: an input first read
    inside a ``no_grad`` block still requires grad as it does outside.
    """
    if not torch.is_grad_enabled():
        with torch.enable_grad():
            return to_meta(real)
    if real._base is not None:
        return _view_meta(real)
    if real.requires_grad and not real.is_leaf:
        return _strided_view(
            real.shape, real.stride(), real.storage_offset(), real.dtype, requires_grad=True
        )
    t = torch.empty_strided(real.shape, real.stride(), dtype=real.dtype, device=META)
    if real.storage_offset():
        t = t.as_strided(real.shape, real.stride(), real.storage_offset())
    if real.requires_grad:
        t.requires_grad_()
    return t


def _view_meta(real: torch.Tensor) -> torch.Tensor:
    base = to_meta(real._base)
    t = base.as_strided(real.shape, real.stride(), real.storage_offset())
    if real.requires_grad and not t.requires_grad:  # a view of a leaf, made a leaf itself
        t.requires_grad_()
    return t


def _strided_view(
    shape: Sequence[int], stride: Sequence[int], offset: int, dtype: torch.dtype,
    requires_grad: bool,
) -> torch.Tensor:
    """A view with exactly these strides and offset of a buffer of its own; one that
    requires grad views a clone, so it is no leaf (in-place ops stay legal, as on the
    tensor it stands for)."""
    size = _storage_size(shape, stride, offset)
    buffer = torch.empty(size, dtype=dtype, device=META, requires_grad=requires_grad)
    if requires_grad:
        buffer = buffer.clone()
    return buffer.as_strided(shape, stride, offset)


def _storage_size(shape: Sequence[int], stride: Sequence[int], offset: int) -> int:
    """Elements of storage a tensor of this layout reaches."""
    if math.prod(shape) == 0:
        return 0
    return offset + sum((n - 1) * s for n, s in zip(shape, stride) if n > 0) + 1


def run(kind: str, target: Any, args: tuple, kwargs: dict) -> Any:
    """Run ``target`` on meta tensors; the meta result (tensors, tuples, ...)."""
    inferred = shape_rules.infer(kind, target, args, kwargs) if config.shape_rules else None
    if inferred is not None:
        return _inferred_tensor(inferred)
    op = (kind, target)
    key = None
    if config.memoize_metadata and _worth_memoizing.get(op, True):
        key = _memo_key(kind, target, args, kwargs)
        if key is not None:
            hit = _memo.get(key)
            if hit is not None:
                return _build(hit)
    started = time.perf_counter()
    result = _run_uncached(kind, target, args, kwargs)
    if op not in _worth_memoizing:
        # A memo hit costs about 10 us: not worth it for ops whose meta kernel is C++.
        _worth_memoizing[op] = time.perf_counter() - started > _MEMO_THRESHOLD_SECONDS
    if key is not None and _is_fresh_result(result, args, kwargs):
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[key] = _specs(result)
    return result


def _inferred_tensor(inferred: shape_rules.Inferred) -> torch.Tensor:
    shape, dtype, grad = inferred
    # TensorSpec(shape, strides, 0, dtype, grad, not grad).build(), without the record
    t = torch.empty_strided(shape, shape_rules.contiguous_strides(shape), dtype=dtype, device=META)
    return t.requires_grad_().clone() if grad else t


def run_fake(
    fake_mode: Any, kind: str, target: Any, args: tuple, kwargs: dict, memo: Any = None
) -> Any:
    """Run ``target`` on the fake tensors of a dynamic trace (``graph/shapes.py``): the
    fake mode reasons about symbolic sizes, which meta kernels cannot. ``memo`` (the
    session's ``graph/fake_memo.FakeMemo``) answers a repeat of a call it has seen."""
    _refuse_overlapping_write(kind, target, args, kwargs)
    _refuse_mixed_dtypes(kind, target, args, kwargs)
    key = memo.key(kind, target, args, kwargs) if memo is not None else None
    if key is not None:
        hit = memo.lookup(key, args, kwargs)
        if hit is not None:
            return hit
    result = _run_fake_uncached(fake_mode, kind, target, args, kwargs)
    if key is not None:
        memo.record(key, args, kwargs, result)
    return result


def _run_fake_uncached(fake_mode: Any, kind: str, target: Any, args: tuple, kwargs: dict) -> Any:
    fn: Callable = getattr(args[0], target) if kind == "call_method" else target
    call_args = args[1:] if kind == "call_method" else args
    from torch.fx.experimental.symbolic_shapes import (
        compute_unbacked_bindings,
        free_unbacked_symbols,
    )

    name = getattr(target, "__name__", target)
    try:
        with fake_mode:
            result = fn(*call_args, **kwargs)
    except Unsupported:
        raise
    except Exception as e:  # the op failed, has no fake kernel, or its shape needs data
        refused = data_dependent_break(name, e)
        if refused is not None:
            raise refused from e
        raise Unsupported(
            "op_failed_on_metadata", f"{name} failed on metadata: {type(e).__name__}: {e}"
        ) from e
    env = fake_mode.shape_env
    captures = env.allow_scalar_outputs or env.allow_dynamic_output_shape_ops
    # Only tensors and symbolic numbers hold symbols (a dtype among the results, as
    # ``torch._C._nn._parse_to`` returns, is no sympy expression).
    symbolic = [
        leaf for leaf in torch.utils._pytree.tree_leaves(result)
        if isinstance(leaf, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))
    ]
    if not captures and free_unbacked_symbols(symbolic):  # a size or value the data decides
        raise Unsupported(
            "data_dependent_result", f"{name} gives a result the tensor's data decides"
        )
    if env.pending_fresh_unbacked_symbols:
        # The symbols this op made are bound to its result: left pending, a backend's
        # own trace on this ShapeEnv (AOTAutograd) would take them for its own.
        compute_unbacked_bindings(env, result)
    return result


def data_dependent_break(name: str, error: BaseException) -> Unsupported | None:
    """The break for an op that failed because it needs the tensor's values (the fake
    mode refused it, or a decision needs a value only the data fixes), naming the
    switch that would keep it in the graph; None for any other failure."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
    )
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    if isinstance(error, DynamicOutputShapeException):
        return Unsupported(
            "dynamic_output_shape",
            f"{name} makes a tensor whose size depends on the tensor's values "
            f"({error.args[0] if error.args else 'a dynamic output shape'}); set "
            "bytegraph.config.capture_dynamic_output_shape_ops = True to keep it in the graph",
        )
    if isinstance(error, DataDependentOutputException):
        return Unsupported(
            "data_dependent_result",
            f"{name} reads a tensor's value into Python; set "
            "bytegraph.config.capture_scalar_outputs = True to keep it in the graph",
        )
    if isinstance(error, GuardOnDataDependentSymNode):
        return Unsupported(
            "unbacked_value_needed",
            f"{name} needs to decide on a value only the tensor's data fixes",
        )
    return None


def _diagnose_on_fake(kind: str, target: Any, args: tuple, kwargs: dict) -> Unsupported | None:
    """The data-dependent break an op that failed on meta tensors fails for, found by
    running it again on fake tensors that refuse data-dependent results (a failure
    path only: it costs a fake mode and a copy of the arguments)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv(allow_scalar_outputs=False, allow_dynamic_output_shape_ops=False)
    fake_mode = FakeTensorMode(shape_env=env, allow_non_fake_inputs=True)
    try:
        args, kwargs = _map_tensors(fake_mode.from_tensor, (args, kwargs))
        fn: Callable = getattr(args[0], target) if kind == "call_method" else target
        with fake_mode:
            fn(*(args[1:] if kind == "call_method" else args), **kwargs)
    except Exception as e:  # noqa: BLE001  (only a data-dependent failure is of interest)
        return data_dependent_break(getattr(target, "__name__", target), e)
    return None


def _map_tensors(fn: Callable[[torch.Tensor], Any], value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map_tensors(fn, v) for v in value)
    if isinstance(value, dict):
        return {k: _map_tensors(fn, v) for k, v in value.items()}
    return value


_MEMO_THRESHOLD_SECONDS = 30e-6
_MEMO_LIMIT = 20_000  # entries; a full memo is emptied (a long run over many shapes)
_worth_memoizing: dict[tuple[str, Any], bool] = {}


def _leaves(value: Any, out: list[Any]) -> list[Any]:
    """Flatten tuples, lists and dict values (cheaper than pytree for op arguments)."""
    if isinstance(value, (tuple, list)):
        for item in value:
            _leaves(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _leaves(item, out)
    else:
        out.append(value)
    return out


def _structure(value: Any) -> Any:
    """A hashable picture of the containers around the leaves."""
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_structure(v) for v in value))
    if isinstance(value, dict):
        return (dict, tuple((k, _structure(v)) for k, v in value.items()))
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class _SequenceSpec:
    """A memoized tuple/list result (or a torch.return_types structseq)."""

    cls: type
    items: tuple[Any, ...]


def _specs(result: Any) -> Any:
    if isinstance(result, torch.Tensor):
        return spec_of(result)
    if isinstance(result, (tuple, list)):
        return _SequenceSpec(type(result), tuple(_specs(r) for r in result))
    return result


def _build(specs: Any) -> Any:
    if isinstance(specs, TensorSpec):
        return specs.build()
    if isinstance(specs, _SequenceSpec):
        return specs.cls(_build(s) for s in specs.items) if specs.cls in (tuple, list) else (
            specs.cls(tuple(_build(s) for s in specs.items))
        )
    return specs


def _run_uncached(kind: str, target: Any, args: tuple, kwargs: dict) -> Any:
    _refuse_overlapping_write(kind, target, args, kwargs)
    _refuse_mixed_dtypes(kind, target, args, kwargs)
    kind, target, args, kwargs = _device_args_to_meta(kind, target, args, kwargs)
    fn: Callable = getattr(args[0], target) if kind == "call_method" else target
    call_args = args[1:] if kind == "call_method" else args
    has_tensor = any(isinstance(a, torch.Tensor) for a in _leaves((args, kwargs), []))
    try:
        if has_tensor:
            return fn(*call_args, **kwargs)
        with META:  # a factory: make it allocate nothing
            return fn(*call_args, **kwargs)
    except Unsupported:
        raise
    except Exception as e:  # the op itself failed, has no meta kernel, or needs data
        name = getattr(target, "__name__", target)
        refused = _diagnose_on_fake(kind, target, args, kwargs)
        if refused is not None:
            raise refused from e
        raise Unsupported(
            "op_failed_on_metadata", f"{name} failed on metadata: {type(e).__name__}: {e}"
        ) from e


# In-place ops that may write through a tensor whose elements share memory (an
# expand: stride 0). Eager refuses most of them ("more than one element of the
# written-to tensor refers to a single memory location"); meta kernels never check.
_WRITES_OVERLAP_SAFELY = frozenset({"fill_", "zero_", "requires_grad_"})
_IN_PLACE_OPERATORS = ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand",
                       "ior", "ixor", "ilshift", "irshift", "imatmul", "setitem")
# Functions and dunder methods that write into their first argument (``t[i] = v`` included).
_WRITES_FIRST_ARGUMENT = frozenset(
    [getattr(operator, name) for name in _IN_PLACE_OPERATORS]
    + [f"__{name}__" for name in _IN_PLACE_OPERATORS]
)


def op_name(kind: str, target: Any) -> str:
    """``add_`` for ``x.add_(...)``, ``add`` for ``torch.add``: what the op is called."""
    name = target if kind == "call_method" else getattr(target, "__name__", "")
    return name if isinstance(name, str) else ""


_TORCH_OPERATORS = (torch._ops.OpOverloadPacket, torch._ops.OpOverload)


def op_namespace(target: Any) -> str | None:
    """``"_c10d_functional"`` for ``torch.ops._c10d_functional.all_reduce[.default]``."""
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.split("::")[0]
    return None


def writes_first_argument(kind: str, target: Any) -> bool:
    """Whether the op writes into its first argument: ``x.add_(y)``, ``x += y``, ``x[i] = v``."""
    if isinstance(target, _TORCH_OPERATORS):  # its schema says (a name may not)
        from bytegraph.variables.torch_ops import writes_first_argument as schema_writes

        return schema_writes(target)
    if target in _WRITES_FIRST_ARGUMENT:
        return True
    if getattr(target, "__module__", None) == "_operator":  # and_, or_, not_, is_: no writes
        return False
    name = op_name(kind, target)
    return name.endswith("_") and not name.endswith("__")


def base_of(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose memory ``t`` views (``t`` itself if it is no view)."""
    return t if t._base is None else t._base


# In-place ops that eager refuses when a source argument shares any memory with the
# tensor written; the others accept a source that is exactly the written view (x += x).
_NO_SHARED_SOURCE = frozenset({
    "index_add_", "index_copy_", "index_put_", "put_", "scatter_", "scatter_add_",
    "scatter_reduce_", "masked_scatter_",
})


def written_argument(kind: str, target: Any, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The tensor argument an op writes into: ``out=``, or an in-place op's first argument."""
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor):
        return out
    if args and isinstance(args[0], torch.Tensor) and writes_first_argument(kind, target):
        return args[0]
    return None


def _split_write(
    kind: str, target: Any, args: tuple, kwargs: dict
) -> tuple[torch.Tensor | None, list[Any]]:
    """The tensor an op writes through (for ``t[i] = v``, the view ``t[i]``), and the
    leaves of its other arguments. The view is made before the op runs: made after,
    it would change the autograd state of ``t`` (in-place checks on a view's base)."""
    written = written_argument(kind, target, args, kwargs)
    if written is None:
        return None, []
    sources = dict(kwargs)
    if sources.pop("out", None) is not written:
        args = args[1:]
        if op_name(kind, target) in ("setitem", "__setitem__") and args:
            written, args = _item_written(written, args[0]), args[1:]
    return written, _leaves((args, sources), [])


def _refuse_overlapping_write(kind: str, target: Any, args: tuple, kwargs: dict) -> None:
    """Break before a write eager may refuse for overlapping memory: let eager decide.

    The written tensor may overlap itself (an expand) or share memory with another
    argument (``x.add_(x.t())``); meta kernels check neither.
    """
    written, sources = _split_write(kind, target, args, kwargs)
    if written is None:
        return
    name = op_name(kind, target)
    refused = (
        name not in _WRITES_OVERLAP_SAFELY and torch._debug_has_internal_overlap(written) == 1
    ) or any(_shares_memory_refused(name, written, source) for source in sources)
    if refused:
        raise Unsupported(
            "op_refused_in_eager",
            f"{name} writes into a tensor whose memory overlaps itself or another "
            "argument (an expand, a transposed copy...), which eager usually refuses",
        )


def _item_written(tensor: torch.Tensor, index: Any) -> torch.Tensor:
    """The view ``tensor[index] = v`` writes through (``tensor`` itself for a tensor index)."""
    if any(isinstance(i, torch.Tensor) for i in _leaves(index, [])):
        return tensor
    try:
        return tensor[index]
    except Exception:  # noqa: BLE001  (an index eager refuses: the op itself fails later)
        return tensor


def _shares_memory_refused(name: str, written: torch.Tensor, source: Any) -> bool:
    if not isinstance(source, torch.Tensor) or base_of(source) is not base_of(written):
        return False
    if _disjoint_spans(written, source):  # rows 0 and 1 of one tensor: no shared element
        return False
    if name in _NO_SHARED_SOURCE:
        return True
    same_view = (
        source.shape == written.shape and source.stride() == written.stride()
        and source.storage_offset() == written.storage_offset()
    )
    return not same_view


def _disjoint_spans(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views of one storage certainly share no element: the ranges of storage
    they span (first to last element) do not meet."""
    def span(t: torch.Tensor) -> tuple[int, int] | None:
        start, sizes, strides = t.storage_offset(), tuple(t.shape), t.stride()
        if not all(type(v) is int for v in (start, *sizes, *strides)):
            raise _Symbolic  # deciding would guard on the sizes: not certainly disjoint
        if 0 in sizes:
            return None
        return start, start + sum((n - 1) * s for n, s in zip(sizes, strides))

    try:
        first, second = span(a), span(b)
    except _Symbolic:
        return False
    return first is None or second is None or first[1] < second[0] or second[1] < first[0]


class _Symbolic(Exception):
    """A view's extent is symbolic."""


# Ops whose floating-point tensor arguments must share one dtype: eager raises on a mix
# (``double @ float``), where several meta kernels compute a result anyway.
_SAME_DTYPE_OPS = frozenset({
    "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "mv", "dot", "vdot", "inner", "addmm",
    "addmm_", "addbmm", "addbmm_", "baddbmm", "baddbmm_", "addmv", "addmv_", "addr", "addr_",
    "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "einsum", "tensordot", "chain_matmul", "multi_dot", "layer_norm",
    "group_norm", "batch_norm", "instance_norm", "rms_norm", "index_add", "index_add_",
    "index_copy", "index_copy_", "scatter", "scatter_", "scatter_add", "scatter_add_",
    "scatter_reduce", "scatter_reduce_", "masked_scatter", "masked_scatter_", "index_put",
    "index_put_", "lerp", "lerp_", "scaled_dot_product_attention", "cross", "linalg_cross",
    "cdist", "prelu",
})


def _refuse_mixed_dtypes(kind: str, target: Any, args: tuple, kwargs: dict) -> None:
    """Break before an op that eager refuses for mixed floating dtypes: let eager raise."""
    name = op_name(kind, target)
    if name not in _SAME_DTYPE_OPS:
        return
    dtypes = {
        t.dtype for t in _leaves((args, kwargs), [])
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
    }
    if len(dtypes) > 1:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        raise Unsupported("op_refused_in_eager", f"{name} of tensors of mixed dtypes ({names})")


def _device_args_to_meta(kind: str, target: Any, args: tuple, kwargs: dict) -> tuple:
    """The same call with every device argument pointing at meta.

    A meta tensor cannot be copied to a real device; the real result's device
    is worked out separately by ``result_device``.
    """
    if "device" in kwargs:
        kwargs = {**kwargs, "device": META}
    if kind == "call_method" and target in ("cpu", "cuda"):
        return kind, "to", (args[0], META), {}
    if kind == "call_method" and target == "to":
        args = tuple(META if isinstance(a, (str, torch.device)) else a for a in args)
    return kind, target, args, kwargs


def _memo_key(kind: str, target: Any, args: tuple, kwargs: dict) -> tuple | None:
    if kind == "call_method" and target.endswith("_"):
        return None
    if "out" in kwargs or getattr(target, "__name__", "").endswith("_"):
        return None
    # Global state that changes results: grad mode (requires_grad), the default
    # dtype (factories, Python scalars) and the default device (factories).
    parts: list[Any] = [
        kind, target, None, torch.is_grad_enabled(), torch.get_default_dtype(),
        default_device(),
    ]
    if not kwargs and _flat_leaves(args, parts):
        # The common case, tensors and numbers side by side: no containers to picture.
        parts[2] = len(args)
    else:
        del parts[6:]
        parts[2] = _structure((args, kwargs))
        if not _flat_leaves(_leaves((args, kwargs), []), parts):
            return None
    try:
        key = tuple(parts)
        hash(key)
    except TypeError:
        return None
    return key


_KEY_SCALARS = (int, float, bool, str, type(None), torch.dtype, torch.device)


def _flat_leaves(values: Any, parts: list[Any]) -> bool:
    """Append the key part of each of ``values`` to ``parts``; False at a value that
    has none (a container, an object): the key must picture it otherwise."""
    for value in values:
        if isinstance(value, torch.Tensor):
            if not value.is_meta:
                # A real tensor with data (``torch.div`` of two ints): its value may decide
                # the result (a size of ``new_zeros``), and an op on it gives a real one.
                return False
            # spec_of's fields, as a plain tuple: a frozen dataclass costs more to make
            parts.append((
                value.shape, value.stride(), value.storage_offset(), value.dtype,
                value.requires_grad, value.is_leaf,
            ))
        elif isinstance(value, _KEY_SCALARS):
            parts.append((type(value), value))
        else:
            return False
    return True


def default_device() -> torch.device:
    """``torch.get_default_device()``, read in one C call in the usual case where neither
    a device context (``with torch.device(...)``, a mode) nor ``set_default_device`` is
    active: then it is the CPU."""
    if (
        torch._C._len_torch_function_stack() == 0
        and getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is None
    ):
        return CPU
    return torch.get_default_device()


def _is_fresh_result(result: Any, args: tuple, kwargs: dict) -> bool:
    """Memoize only results made of new meta tensors (and Nones), each on memory of its
    own: not inputs returned as-is, nor anything sharing an input's memory, not tensors
    with data (``torch.div(512, 256)`` of Python numbers makes a real 0-d tensor even
    under the meta device, and a later ``view(n, that, ...)`` reads its value; a memo hit
    would give a meta tensor without it). A view of a tensor the op made inside
    (``multi_head_attention_forward``'s output) is kept, and rebuilt as a view of a
    buffer of its own (``TensorSpec.build``), unless autograd tells it apart from such
    a view: a view of a multi-output op or made under no_grad, where eager refuses some
    in-place ops."""
    inputs = [t for t in _leaves((args, kwargs), []) if isinstance(t, torch.Tensor)]
    taken = {storage_id(t) for t in inputs}
    input_ids = {id(t) for t in inputs}
    for t in _leaves(result, []):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or not t.is_meta or id(t) in input_ids:
            return False
        storage = storage_id(t)
        if storage in taken or (
            t._is_view() and torch._C._autograd._get_creation_meta(t) != _PLAIN_VIEW
        ):
            return False
        taken.add(storage)
    return True


_PLAIN_VIEW = torch._C._autograd.CreationMeta.DEFAULT


def result_device(
    kind: str, target: Any, args: tuple, kwargs: dict, input_devices: list[torch.device]
) -> torch.device:
    """The device the real result lives on, from the op and its inputs' devices."""
    if kind == "call_method" and target in ("cuda", "cpu"):
        return torch.device(target) if target == "cpu" else torch.device("cuda")
    if kind == "call_method" and target == "to":
        for arg in (*args[1:], kwargs.get("device")):
            if isinstance(arg, (str, torch.device)):
                return torch.device(arg)
            if isinstance(arg, torch.Tensor):  # x.to(other): other's device
                return input_devices[1]
    if kwargs.get("device") is not None:
        return torch.device(kwargs["device"])
    for device in input_devices:
        if device.type != "cpu":
            return device
    if input_devices:
        return input_devices[0]
    return default_device()


def reset() -> None:
    """Forget the results of ops torch does not own: a custom op's fake kernel may be
    registered again. Torch's own ops keep theirs (a pure function of the op and its
    inputs' metadata), as torch's FakeTensorMode dispatch cache outlives
    ``torch._dynamo.reset()``."""
    for key in [key for key in _memo if not _owned_by_torch(key[1])]:
        del _memo[key]
    for op in [op for op in _worth_memoizing if not _owned_by_torch(op[1])]:
        del _worth_memoizing[op]


def _owned_by_torch(target: Any) -> bool:
    """Whether an op's metadata is torch's own: a Tensor method (by name), an ``aten`` or
    ``prims`` operator, or a function of torch's modules or of ``operator``."""
    if isinstance(target, str):
        return True
    namespace = op_namespace(target)
    if namespace is not None:
        return namespace in ("aten", "prims")
    module = getattr(target, "__module__", None) or ""
    return module in ("torch", "_operator") or module.startswith("torch.")
