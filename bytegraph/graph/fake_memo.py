"""The memo of a dynamic trace's op results, keyed by symbolic metadata.

A dynamic trace runs every op on fake tensors (``graph/shapes.py``), and a
fake op on symbolic sizes is slow: 0.5-10 ms, most of it sympy arithmetic in
the op's Python decomposition (a ``view`` decides how ``-1`` splits
``2*s0*64``, a ``relu`` broadcasts through ``where``). Model code repeats the
same ops on the same sizes (layer after layer, q/k/v), so one ShapeSession
keeps, per op and per symbolic description of its arguments, what the op
made, and a repeat builds that again (one ``empty_strided`` or ``as_strided``
on the same SymInts, about 0.3 ms) instead of running the op.

Why this is sound, for one trace's ShapeEnv (the memo dies with its session):

* the key names every input the result's metadata depends on: the op, the
  grad, autocast and inference modes and the defaults, each tensor's dtype,
  device, sizes, strides and offset as sympy expressions over the session's
  symbols, requires_grad, and every other argument by value (a SymInt by its
  expression);
* what the first run decided about symbols (a ``Ne(s0, 1)`` while
  broadcasting) is already a guard of this ShapeEnv, so a repeat on the same
  expressions would decide the same: the guards are complete without it;
* only results the op made are kept: new tensors, and views of one input
  (rebuilt as ``as_strided`` of that input, so they share its memory as the
  op's own result would). Ops that write into an argument, ops that return
  an input itself, results with symbols only the data decides (unbacked),
  and any argument or result of another kind are never memoized.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from bytegraph.graph.metadata import base_of


@dataclasses.dataclass(frozen=True, slots=True)
class _NewTensor:
    """A tensor the op allocated: rebuilt with ``empty_strided`` on the same SymInts."""

    shape: tuple[Any, ...]
    stride: tuple[Any, ...]
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    is_leaf: bool

    def build(self, args: list[Any], mode: Any) -> torch.Tensor:
        from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

        # What the fake mode's own cache does for a hit, less a dispatch (half the cost);
        # any guard the sizes need was added when the op ran.
        with in_kernel_invocation_manager(mode), mode.shape_env.suppress_guards():
            meta = torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device="meta")
        t = FakeTensor(mode, meta, self.device)
        if self.requires_grad:
            t.requires_grad_()
            if not self.is_leaf:  # the op's result has a grad_fn: in-place ops stay legal
                t = t.clone()
        return t


@dataclasses.dataclass(frozen=True, slots=True)
class _View:
    """A view of the op's tensor argument ``index``: rebuilt with ``as_strided`` of it."""

    index: int
    shape: tuple[Any, ...]
    stride: tuple[Any, ...]
    offset: Any

    def build(self, args: list[Any], mode: Any) -> torch.Tensor:
        return args[self.index].as_strided(self.shape, self.stride, self.offset)


@dataclasses.dataclass(frozen=True, slots=True)
class _Sequence:
    """A tuple/list result (or a torch.return_types structseq) of memoized results."""

    cls: type
    items: tuple[Any, ...]

    def build(self, args: list[Any], mode: Any) -> Any:
        items = (item.build(args, mode) for item in self.items)
        if self.cls in (tuple, list):
            return self.cls(items)
        return self.cls(tuple(items))


class FakeMemo:
    """One dynamic trace's memo: ``lookup`` before running an op, ``record`` after."""

    def __init__(self, fake_mode: Any) -> None:
        self.fake_mode = fake_mode
        self._results: dict[tuple, Any] = {}

    def key(self, kind: str, target: Any, args: tuple, kwargs: dict) -> tuple | None:
        """The symbolic description of one call, or None if it is not memoizable."""
        from bytegraph.graph.metadata import (
            _leaves,
            _structure,
            default_device,
            writes_first_argument,
        )

        if writes_first_argument(kind, target) or "out" in kwargs:
            return None
        parts: list[Any] = [
            kind, target, _structure((args, kwargs)), torch.is_grad_enabled(),
            torch.get_default_dtype(), default_device(), _autocast_state(),
            torch.is_inference_mode_enabled(),
        ]
        for leaf in _leaves((args, kwargs), []):
            part = _describe(leaf)
            if part is None:
                return None
            parts.append(part)
        return tuple(parts)

    def lookup(self, key: tuple, args: tuple, kwargs: dict) -> Any:
        """The memoized result of the call ``key`` describes, built anew; None if unseen."""
        from bytegraph.graph.metadata import _leaves

        spec = self._results.get(key)
        if spec is None:
            return None
        tensors = [t for t in _leaves((args, kwargs), []) if isinstance(t, torch.Tensor)]
        with self.fake_mode:
            return spec.build(tensors, self.fake_mode)

    def record(self, key: tuple, args: tuple, kwargs: dict, result: Any) -> None:
        """Keep what the call made, if it is a result the memo can build again."""
        from bytegraph.graph.metadata import _leaves

        tensors = [t for t in _leaves((args, kwargs), []) if isinstance(t, torch.Tensor)]
        spec = _spec(result, tensors)
        if spec is not None:
            self._results[key] = spec


def _autocast_state() -> tuple:
    """Autocast changes the dtype ops compute in (a matmul in bfloat16)."""
    return tuple(
        (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
        for device in ("cpu", "cuda")
    )


def _describe(leaf: Any) -> Any:
    """A hashable description of one argument, or None if it has none."""
    if isinstance(leaf, torch.Tensor):
        if leaf.layout is not torch.strided or leaf.is_conj() or leaf.is_neg():
            return None
        sizes = (*leaf.shape, *leaf.stride(), leaf.storage_offset())
        return (torch.Tensor, leaf.dtype, leaf.device, leaf.requires_grad, _exprs(sizes))
    if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(leaf), _exprs((leaf,))[0])
    if isinstance(leaf, (int, float, bool, str, type(None), torch.dtype, torch.device)):
        return (type(leaf), leaf)
    if isinstance(leaf, slice):
        parts = tuple(_describe(p) for p in (leaf.start, leaf.stop, leaf.step))
        return None if None in parts else (slice, parts)
    return None


def _exprs(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Ints as themselves, SymInts by their expressions (their values if the ShapeEnv
    fixed them): within one ShapeEnv, equal expressions are equal values (an unbacked
    symbol's too, which is why keys may hold them and results may not)."""
    exprs = []
    for value in values:
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            expr = value.node.expr
            value = value.node.pytype(expr) if expr.is_number else expr
        exprs.append(value)
    return tuple(exprs)


def _spec(result: Any, inputs: list[torch.Tensor]) -> Any:
    """How to build ``result`` again from the same inputs, or None."""
    if isinstance(result, (tuple, list)):
        items = tuple(_spec(r, inputs) for r in result)
        return None if any(i is None for i in items) else _Sequence(type(result), items)
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(result, FakeTensor):
        return None
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    if free_unbacked_symbols(result) or result.is_conj() or result.is_neg():
        return None  # a symbol only the data decides is bound to the op that made it
    if any(result is t for t in inputs) or result.layout is not torch.strided:
        return None
    if result._is_view():
        for index, t in enumerate(inputs):
            # Autograd's view checks (a view made under no_grad, one of several outputs)
            # refuse later in-place ops by how the view was made: as_strided differs.
            if result._base is base_of(t) and not t.requires_grad:
                return _View(index, tuple(result.shape), result.stride(), result.storage_offset())
        return None
    from bytegraph.graph.subgraphs import storage_id

    if any(storage_id(result) == storage_id(t) for t in inputs) or result.storage_offset():
        return None  # shares an input's memory without being its view (``detach()``)
    return _NewTensor(
        tuple(result.shape), result.stride(), result.dtype, result.device,
        result.requires_grad, result.is_leaf,
    )
