"""Dynamic shapes: symbolic sizes from a ShapeEnv, fake tensors, and the guards on them.

Shapes start static: a trace sees every size as a number, and its entry's
guard checks each size. When a dimension is *dynamic* (``dynamic=True``,
``mark_dynamic``, torch._dynamo's marks on the tensor (``torch_markers.py``),
or a size that changed between calls: ``DynamicDims``),
the trace runs with a ``ShapeSession``: every tensor of that trace is a fake
tensor of one ``FakeTensorMode`` over one ``ShapeEnv``
(``torch.fx.experimental.symbolic_shapes``), dynamic dimensions get a symbol
(``s0``), strides are expressions of the sizes or symbols of their own (a
stride whose layout changed between calls is dynamic too: ``Layout``), and
metadata propagates through the fake mode, which reasons about symbols where
meta tensors cannot. Static traces never pay for this: they
keep the meta-tensor path (``graph/metadata.py``). With
``config.capture_scalar_outputs`` or ``config.capture_dynamic_output_shape_ops``
on, every trace has a session: ``t.item()`` and the size of ``x.nonzero()``
are unbacked symbols of its ShapeEnv (``variables/symbolic.py``).

What the trace decides about a symbol (``if x.size(0) > 2``, a broadcast of
``s0`` against 1, an ``int(s0)`` for a ``range``) becomes a guard in the
ShapeEnv; ``guard_code`` turns them, with the sizes' ranges (a dynamic size
is at least 2: 0 and 1 specialise) and the equalities duck sizing relied on,
into Python text over the guard function's own names
(``2 <= x.size()[0]``, ``x.size()[0] == y.size()[0]``).

Symbols reach the graph as ``x.size(i)`` nodes (``variables/symbolic.py``),
so the graph's inputs stay tensors and any backend sees a size-generic
program: fake example inputs carry the symbols to backends that trace again
(``graph/backends.py``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

import torch
import torch._guards

from bytegraph import config
from bytegraph.graph.fake_memo import FakeMemo
from bytegraph.guards.sources import AttrSource, GetItemSource, LocalSource
from bytegraph.torch_markers import marked_dynamic, marked_static

if TYPE_CHECKING:
    from bytegraph.guards.sources import Source


@dataclasses.dataclass(frozen=True)
class InferredStride:
    """A stride recorded as ``size(dim) * stride(dim)``: what it is when the tensor is
    dense past dimension ``dim`` (the dimension with the next smaller stride)."""

    dim: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """One call's sizes and strides of a tensor, its strides also in inferred form.

    The inferred form is torch.compile's (``record_automatic_dynamic``): walking the
    strides from smallest to largest, a stride equal to ``size * stride`` of a dimension
    already walked is recorded as ``InferredStride`` of that dimension, any other as its
    number. A contiguous tensor whose sizes change keeps its form: ``(InferredStride(1),
    1)`` for every ``(b, n)``; ``ids[:, -1:]`` of a growing ``ids`` does not: ``(n, 1)``.
    """

    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @staticmethod
    def of(t: torch.Tensor) -> Layout:
        return Layout(tuple(t.shape), tuple(t.stride()))

    @functools.cached_property
    def forms(self) -> tuple[int | InferredStride, ...]:
        """The strides in inferred form (worked out when compared: a model's parameters
        are noted at every compile, and compared only if one changes)."""
        shape, stride = self.shape, self.stride
        forms: list[int | InferredStride] = list(stride)
        candidates: dict[int, InferredStride] = {}
        for value, minus_dim in sorted((s, -i) for i, s in enumerate(stride)):
            dim = -minus_dim
            forms[dim] = candidates.get(value, value)
            candidates.setdefault(value * shape[dim], InferredStride(dim))
        return tuple(forms)


@dataclasses.dataclass
class DynamicDims:
    """Per compiled function: which dimensions of which arguments are dynamic.

    ``automatic``: a dimension whose size changed between two compiles becomes
    dynamic for every later one (the first compile is always static), and so does a
    stride whose inferred form changed (``Layout``: a slice of a growing tensor).
    ``everything``: every dimension of every tensor argument is dynamic from
    the first call (``dynamic=True``); strides are then symbolic where the sizes do
    not determine them.
    """

    automatic: bool = True
    everything: bool = False
    seen: dict[Source, Layout] = dataclasses.field(default_factory=dict)
    dims: dict[Source, frozenset[int]] = dataclasses.field(default_factory=dict)
    strides: dict[Source, frozenset[int]] = dataclasses.field(default_factory=dict)
    # Tensors the graphs read through an argument object (a KV cache's
    # ``cache.layers[0].keys``): their layouts at the last compile (``note_inputs``).
    inputs: dict[Source, Layout] = dataclasses.field(default_factory=dict)
    seen_ints: dict[Source, int] = dataclasses.field(default_factory=dict)
    ints: set[Source] = dataclasses.field(default_factory=set)
    # Ints the graphs fixed by value through an argument object (a KV cache layer's
    # ``cumulative_length``): their values at the last compile.
    inner_ints: dict[Source, int] = dataclasses.field(default_factory=dict)

    def update(self, frame_values: dict[str, Any]) -> list[str]:
        """Note this call's argument sizes and strides; what changed (one line each,
        for the log)."""
        changes = []
        for source, number in argument_ints(frame_values):
            before = self.seen_ints.get(source)
            self.seen_ints[source] = number
            if self.automatic and before not in (None, number) and source not in self.ints:
                self.ints.add(source)
                changes.append(f"{source.expr()} changed {before} -> {number}: now dynamic")
        for source, value in argument_tensors(frame_values):
            layout = Layout.of(value)
            before = self.seen.get(source)
            self.seen[source] = layout
            if self.automatic and before is not None:
                changes += self._compare(source, before, layout)
        return changes

    def note_inputs(
        self,
        tensor_inputs: tuple[tuple[Source, tuple[int, ...]], ...],
        int_inputs: tuple[Source, ...],
        frame_values: dict[str, Any],
    ) -> None:
        """Remember the layouts of a new entry's tensor inputs that are no arguments, and
        the values of the ints it fixed that are read through an argument."""
        from bytegraph.guards.sources import ChildSource

        read: dict[Source, Any] = {}  # a model's parameters share their modules' reads
        for source, _ in tensor_inputs:
            if isinstance(source, ChildSource) and source not in self.seen:
                value = read_source(source, frame_values, read)
                if type(value) in (torch.Tensor, torch.nn.Parameter):
                    self.inputs[source] = Layout.of(value)
        for source in int_inputs:
            if isinstance(source, ChildSource) and source not in self.ints:
                value = read_source(source, frame_values, read)
                if type(value) is int:
                    self.inner_ints[source] = value

    def update_inputs(self, frame_values: dict[str, Any]) -> list[str]:
        """Like ``update``, for the tensors earlier graphs read through an argument
        object: a size or stride that changed makes that dimension dynamic for them."""
        changes = []
        if not self.automatic:
            return changes
        read: dict[Source, Any] = {}
        for source, before in self.inputs.items():
            value = read_source(source, frame_values, read)
            if type(value) in (torch.Tensor, torch.nn.Parameter):
                changes += self._compare(source, before, Layout.of(value))
        for source, before in list(self.inner_ints.items()):
            number = read_source(source, frame_values, read)
            if type(number) is int and number != before:
                del self.inner_ints[source]
                self.ints.add(source)
                changes.append(f"{source.expr()} changed {before} -> {number}: now dynamic")
        return changes

    def _compare(self, source: Source, before: Layout, now: Layout) -> list[str]:
        """Make what changed from ``before`` to ``now`` dynamic; a log line for each."""
        if len(before.shape) != len(now.shape):
            return []
        sizes = (before.shape, now.shape)
        return _newly_dynamic(self.dims, source, "size", sizes, sizes) + _newly_dynamic(
            self.strides, source, "stride", (before.forms, now.forms), (before.stride, now.stride)
        )

    def for_call(self, frame_values: dict[str, Any]) -> DynamicSpec:
        """The dynamic dimensions and strides of this call's tensor arguments (marks
        included), and its int arguments that are symbolic."""
        sizes, strides = {}, {}
        for source, value in argument_tensors(frame_values):
            dims = set(self.dims.get(source, ()))
            if self.everything:
                dims.update(range(value.dim()))
            dims.update(marked_dynamic(value, getattr(value, MARKED_DYNAMIC, {})))
            static = marked_static(value, getattr(value, MARKED_STATIC, frozenset()))
            dims.difference_update(static)
            if dims:
                sizes[source] = frozenset(dims)
            if self.strides.get(source, frozenset()) - static:
                strides[source] = self.strides[source] - static
        sizes.update((s, d) for s, d in self.dims.items() if s in self.inputs)
        strides.update((s, d) for s, d in self.strides.items() if s in self.inputs)
        ints = {s for s, _ in argument_ints(frame_values)} if self.everything else self.ints
        return DynamicSpec(sizes, frozenset(ints), strides)


def _newly_dynamic(
    table: dict[Source, frozenset[int]],
    source: Source,
    what: str,
    compared: tuple[tuple[Any, ...], tuple[Any, ...]],
    shown: tuple[tuple[int, ...], tuple[int, ...]],
) -> list[str]:
    """Add to ``table`` the dimensions of ``source`` whose ``compared`` values differ and
    are not dynamic yet; a log line for each, with the ``shown`` values."""
    changed = {i for i, (a, b) in enumerate(zip(*compared)) if a != b}
    changed -= table.get(source, frozenset())
    if changed:
        table[source] = table.get(source, frozenset()) | changed
    before, now = shown
    return [
        f"{source.expr()}.{what}({i}) changed {before[i]} -> {now[i]}: now dynamic"
        for i in sorted(changed)
    ]


@dataclasses.dataclass(frozen=True)
class DynamicSpec:
    """What one trace makes symbolic: tensor dimensions by source, int arguments, and
    strides by source (beyond those the sizes make symbolic)."""

    tensors: dict[Source, frozenset[int]] = dataclasses.field(default_factory=dict)
    ints: frozenset[Source] = frozenset()
    strides: dict[Source, frozenset[int]] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.tensors or self.ints or self.strides)


def argument_ints(frame_values: dict[str, Any]) -> list[tuple[Source, int]]:
    """The int arguments of a call (bools excluded), each with its source."""
    from bytegraph.guards.sources import LocalSource

    return [(LocalSource(n), v) for n, v in frame_values.items() if type(v) is int]


def read_source(
    source: Source, frame_values: dict[str, Any], read: dict[Source, Any] | None = None
) -> Any:
    """The value ``source`` reads in a call with these arguments (attributes and items of
    an argument), or ``_UNREADABLE``; ``read`` keeps what was read, by source, for the
    sources of one call that share their bases (a model's parameters, their modules')."""
    if read is not None and source in read:
        return read[source]
    if isinstance(source, LocalSource):
        value = frame_values.get(source.name, _UNREADABLE)
    elif not isinstance(source, (AttrSource, GetItemSource)):
        value = _UNREADABLE
    else:
        value = read_source(source.base, frame_values, read)
        if value is not _UNREADABLE:
            try:
                value = getattr(value, source.attr) if isinstance(source, AttrSource) else (
                    value[source.index]
                )
            except Exception:  # noqa: BLE001  (the object changed: nothing to compare)
                value = _UNREADABLE
    if read is not None:
        read[source] = value
    return value


_UNREADABLE = object()


def argument_tensors(frame_values: dict[str, Any]) -> list[tuple[Source, torch.Tensor]]:
    """The tensors among a call's arguments, and directly inside a tuple, list or dict
    argument (``*args``, ``**kwargs``), each with its source."""
    from bytegraph.guards.sources import GetItemSource, LocalSource

    found = []
    for name, value in frame_values.items():
        source = LocalSource(name)
        if type(value) in (torch.Tensor, torch.nn.Parameter):
            found.append((source, value))
        elif type(value) in (tuple, list):
            found += [
                (GetItemSource(source, i), v) for i, v in enumerate(value)
                if type(v) in (torch.Tensor, torch.nn.Parameter)
            ]
        elif type(value) is dict:
            found += [
                (GetItemSource(source, k), v) for k, v in value.items()
                if type(k) is str and type(v) in (torch.Tensor, torch.nn.Parameter)
            ]
    return found


# Attributes ``mark_dynamic``/``mark_static`` set on a tensor: dimension -> (min, max).
MARKED_DYNAMIC = "_bytegraph_dynamic_dims"
MARKED_STATIC = "_bytegraph_static_dims"


def mark_dynamic(t: torch.Tensor, dim: int, min: int | None = None, max: int | None = None) -> None:
    """Compile ``t``'s dimension ``dim`` size-generic from the first call."""
    _check_dim(t, dim, "mark_dynamic")
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min={min} is greater than max={max}")
    marks = dict(getattr(t, MARKED_DYNAMIC, {}))
    marks[dim % t.dim()] = (min, max)
    setattr(t, MARKED_DYNAMIC, marks)


def mark_static(t: torch.Tensor, dim: int) -> None:
    """Never make ``t``'s dimension ``dim`` dynamic, whatever sizes it takes."""
    _check_dim(t, dim, "mark_static")
    setattr(t, MARKED_STATIC, frozenset(getattr(t, MARKED_STATIC, ())) | {dim % t.dim()})


def _check_dim(t: Any, dim: int, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} takes a tensor, not {type(t).__name__}")
    if not -t.dim() <= dim < t.dim():
        raise IndexError(f"{what}: dimension {dim} out of range for a {t.dim()}-d tensor")


class ShapeSession:
    """The ShapeEnv and fake mode of one dynamic trace, and the inputs with symbols."""

    def __init__(self, dynamic: DynamicSpec) -> None:
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        self.dynamic = dynamic.tensors  # argument tensor's source -> its dynamic dimensions
        self.strides = dynamic.strides  # argument tensor's source -> its dynamic strides
        self.ints = dynamic.ints  # int arguments that are symbolic
        self.env = ShapeEnv(  # data-dependent values: only where a switch lets them in
            allow_scalar_outputs=config.capture_scalar_outputs,
            allow_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops,
        )
        self.fake_mode = FakeTensorMode(shape_env=self.env)
        # The trace memoizes whole calls itself (``graph/fake_memo.py``). Torch's own
        # cache of aten calls checks every new entry by building its output once more,
        # which costs a trace more than its hits save (a fake ``linear`` on a symbolic
        # batch: 13 ms with it, 5 ms without); backends get it back (``backend_context``).
        self._backend_cache_enabled = self.fake_mode.cache_enabled  # torch's own default
        self.fake_mode.cache_enabled = False
        self.memo = FakeMemo(self.fake_mode)
        self._symbolic: list[tuple[Any, Source]] = []
        self._ranges: list[tuple[Source, int, int | None, int | None]] = []

    @staticmethod
    def captures_data() -> bool:
        """Whether every trace needs a session, static sizes or not: the values and
        sizes the data decides live in a ShapeEnv (``config.capture_scalar_outputs``,
        ``config.capture_dynamic_output_shape_ops``)."""
        return config.capture_scalar_outputs or config.capture_dynamic_output_shape_ops

    def fake_input(self, real: torch.Tensor, source: Source) -> torch.Tensor:
        """The fake tensor standing for the input ``real`` read through ``source``.

        Dynamic sizes get a symbol each; a dynamic stride (one whose layout changed)
        gets its own, and any other stride is inferred as torch.compile infers it: from
        the sizes where the tensor is dense past the next smaller stride (a contiguous
        ``(s0, s1)`` has strides ``(s1, 1)``), a number where the sizes are all static,
        and a symbol of its own otherwise (``x[:, :n]`` of a buffer: ``(s2, 1)``).
        """
        from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

        dims = self.dynamic.get(source, frozenset())
        strides = self.strides.get(source, frozenset())
        if not dims and not strides:  # (a parameter, most often): no symbols, half the cost
            return self.fake_mode.from_tensor(real, static_shapes=True)
        context = StatelessSymbolicContext(
            dynamic_sizes=[
                DimDynamic.DYNAMIC if i in dims else DimDynamic.STATIC for i in range(real.dim())
            ],
            dynamic_strides=[
                DimDynamic.DYNAMIC if i in strides else DimDynamic.INFER_STRIDE
                for i in range(real.dim())
            ],
        )
        fake = self.fake_mode.from_tensor(
            real, symbolic_context=context, source=_ShapeSource(source.expr())
        )
        if any(is_symbolic(d) for d in (*fake.shape, *fake.stride())):
            self._symbolic.append((fake, source))
            for dim, bounds in marked_dynamic(real, getattr(real, MARKED_DYNAMIC, {})).items():
                self._ranges.append((source, dim, *bounds))
        return fake

    def symbolic_int(self, value: int, source: Source) -> Any:
        """A SymInt for the int argument ``value``: any int (no size: 0 and 1 too, and
        negative ones), its range narrowed only by what the trace decides."""
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        # Any int, negative ones included (create_symbol assumes a size: positive).
        number = self.env.create_unspecified_symint_and_symbol(
            value, _ShapeSource(source.expr()), DimDynamic.DYNAMIC
        )
        if is_symbolic(number):
            self._symbolic.append((number, source))
        return number

    def backend_context(self) -> Any:
        """Where a backend compiles a dynamic graph: torch's tracing context names our
        fake mode, which is how AOTAutograd and Inductor find the ShapeEnv."""
        from torch._guards import TracingContext, tracing

        self.fake_mode.cache_enabled = self._backend_cache_enabled
        return tracing(TracingContext(self.fake_mode))

    @staticmethod
    def symbolic_snapshot(snapshot: Any, fake: torch.Tensor) -> Any:
        """``snapshot`` (a TensorSnapshot) with the sizes and strides ``fake`` has
        symbolic left to SHAPE guards."""
        return dataclasses.replace(
            snapshot,
            dynamic=frozenset(i for i, d in enumerate(fake.shape) if is_symbolic(d)),
            dynamic_strides=frozenset(i for i, d in enumerate(fake.stride()) if is_symbolic(d)),
        )

    def add_guards(self, output: Any) -> None:
        """Once the trace (and the backend) decided everything: a size or stride the
        ShapeEnv fixed meanwhile (``s0 <= 2`` with sizes at least 2) is checked as a
        number by the tensor's own guard, and the relations left are SHAPE guards
        (``x.stride()[0] == x.size()[1]`` for a contiguous ``x`` of dynamic sizes)."""
        from bytegraph.guards.guard import Guard, GuardKind

        for fake, source in self._symbolic:
            key = (GuardKind.TENSOR_MATCH, source)
            guard = output.guards.get(key)
            if guard is not None and isinstance(fake, torch.Tensor):
                snapshot = self.symbolic_snapshot(guard.expected, fake)
                output.guards[key] = Guard(guard.kind, source, snapshot)
        for source, condition in self.guard_code():
            output.add_guard(GuardKind.SHAPE, source, condition)

    def guard_code(self) -> list[tuple[Source, str]]:
        """Python conditions over the guard function's names that keep this trace valid,
        each with the source of a tensor it reads (what keys the guard)."""
        if not self._symbolic:
            return []
        fakes = [fake for fake, _ in self._symbolic]
        sources = [_ShapeSource(source.expr()) for _, source in self._symbolic]
        first = self._symbolic[0][1]
        code = [(first, text) for text in self.env.produce_guards(fakes, sources)]
        for source, dim, low, high in self._ranges:
            if low is not None:
                code.append((source, f"{low} <= {source.expr()}.size()[{dim}]"))
            if high is not None:
                code.append((source, f"{source.expr()}.size()[{dim}] <= {high}"))
        return code


def is_symbolic(value: Any) -> bool:
    """A SymInt (or SymFloat/SymBool) whose value the trace does not fix: not a constant,
    and not fixed since by the ShapeEnv (``s0 <= 2`` with ``s0 >= 2`` makes it 2)."""
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return False
    node = value.node
    return not (node.is_constant() or node.expr.is_number)


@dataclasses.dataclass(frozen=True)
class _ShapeSource(torch._guards.Source):
    """How the ShapeEnv names a tensor in the guard code it writes: our expression."""

    text: str

    @property
    def name(self) -> str:  # torch's Source API: the expression of the value
        return self.text

    def guard_source(self) -> torch._guards.GuardSource:
        return torch._guards.GuardSource.LOCAL

    def reconstruct(self, codegen: Any) -> None:
        raise NotImplementedError
