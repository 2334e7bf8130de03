"""OutputGraph: the fx graph under construction, its inputs, guards and effects.

One OutputGraph per translated frame (shared by inlined callees). It owns
the stack of SubgraphTracers that create fx nodes (the root graph's, and one
per higher-order body being traced: ``graph/subgraphs.py``), the graph
inputs (each tied to the Source it is loaded from at run time), the guards
every Source read installed, and the SideEffects log. ``finish_graph`` turns the graph into a
GraphModule with the given outputs, pruning inputs nothing uses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx

from bytegraph.graph.metadata import base_of
from bytegraph.graph.shapes import ShapeSession
from bytegraph.graph.subgraphs import SubgraphTracer, storage_id
from bytegraph.guards.guard import KEYED_BY_EXPECTED, Guard, GuardKind
from bytegraph.guards.sources import Source
from bytegraph.random_draws import RandomValueSource
from bytegraph.side_effects import SideEffects
from bytegraph.variables.base import AttributeMutationExisting
from bytegraph.variables.functions import CellVariable


@dataclasses.dataclass(frozen=True, slots=True)
class GraphInput:
    """A placeholder and where its value comes from on every call."""

    source: Source
    node: torch.fx.Node
    example: Any  # the real value seen while tracing: the backend's example input
    fake: Any = None  # in a dynamic trace, its fake tensor (symbolic sizes)


class OutputGraph:
    def __init__(self) -> None:
        self.root_tracer = SubgraphTracer()
        self.tracer = self.root_tracer  # the top of the stack: where nodes go now
        self.inputs: list[GraphInput] = []
        self.guards: dict[tuple[GuardKind, Source], Guard] = {}
        self.source_to_var: dict[Source, Any] = {}
        # The class VT of each object read through a source (variables/user_defined.py).
        self.class_vts: dict[Source, Any] = {}
        # The source of each such object's ``__dict__`` (its absent names are guarded).
        self.instance_dict_sources: dict[Source, Source] = {}
        self.tensor_by_id: dict[int, Any] = {}
        # Frame tensors used as dict keys or set elements, each guarded distinct from the
        # earlier ones (variables/object_keys.py), by source.
        self.keyed_tensors: dict[Source, Any] = {}
        self.side_effects = SideEffects(self.add_guard)
        self.uses_default_device = False  # a factory followed torch.get_default_device()
        self._cells: dict[int, Any] = {}
        # ids of the meta tensors inputs are views of -> those inputs' sources
        self._input_bases: dict[int, list[Source]] = {}
        self.written_inputs: dict[Source, None] = {}  # inputs whose memory an op wrote
        self.writes_inputs = False  # an op wrote into an input (or a view of one)
        # Set for a trace with dynamic dimensions: every tensor is then a fake tensor.
        self.shapes: ShapeSession | None = None
        # an op was recorded under a try block: failing at run time, it must reach a handler
        self.ops_in_try = False
        # a torch._check_tensor_all is an assert in the graph: it must rerun as Python
        self.checks_in_graph = False
        # Called with each guard when first installed; set only while dumping (inspect/dump.py).
        self.on_new_guard: Any = None
        # The paused frames of this trace's generators (variables/generators.py). Held here,
        # not in a table keyed by this object: they lead back to it, and would keep the
        # trace (and through its frame values the caller's objects) alive for good.
        self.generator_frames: list[Any] = []
        # The TorchFunctionModes entered in the trace, innermost last (function_modes.py).
        self.function_modes: tuple[Any, ...] = ()
        # torch.fx.traceback.annotate's items in force, copied into new nodes' meta["custom"]
        # (variables/fx_annotations.py); None outside every annotate block.
        self.node_annotations: tuple[tuple[Any, Any], ...] | None = None
        # The results of the collectives in the graph, each made a graph output so that no
        # backend drops a collective the peers wait in (variables/collectives.py).
        self.collective_results: list[Any] = []
        # Calls recorded for reuse, by key (translate/fragments.py).
        self.fragments: dict[Any, Any] = {}

    def release(self) -> None:
        """The trace is over (its graphs compiled, its guards built): drop what it read
        from the frame, so those objects are freed when the caller lets go of them."""
        self.source_to_var.clear()
        self.class_vts.clear()
        self.instance_dict_sources.clear()
        self.tensor_by_id.clear()
        self.keyed_tensors.clear()
        self._cells.clear()
        self.side_effects.release()

    def cell_for(self, cell: Any, source: Source | None) -> Any:
        """The one CellVariable standing for a real closure cell."""
        vt = self._cells.get(id(cell))
        if vt is not None and source is not None and vt.source is not None and source != vt.source:
            # Reached again another way (a resume function's own cell, and a closure's):
            # the trace relies on the two being one cell.
            self.add_guard(GuardKind.SAME_OBJECT, source, vt.source)
        if vt is None:
            vt = CellVariable(cell=cell, source=source, mutation_type=AttributeMutationExisting(0))
            self._cells[id(cell)] = vt
            self.side_effects.keepalive.append(cell)
        return vt

    @property
    def graph(self) -> torch.fx.Graph:
        """The root graph (a body's graph is ``tracer.graph`` while it is traced)."""
        return self.root_tracer.graph

    @contextlib.contextmanager
    def subtracer(self) -> Iterator[SubgraphTracer]:
        """Trace a higher-order op's body: new nodes go to a graph of its own."""
        tracer = SubgraphTracer(self.tracer)
        self.tracer = tracer
        try:
            yield tracer
        finally:
            self.tracer = tracer.parent

    def add_guard(self, kind: GuardKind, source: Source, expected: Any = None) -> None:
        # guard_key's, inline: most guards are installed again (each nn.Module call guards
        # its hooks and the names its instance lacks), and the first one is kept
        key = (kind, source, expected) if kind in KEYED_BY_EXPECTED else (kind, source)
        if key in self.guards:
            return
        guard = self.guards[key] = Guard(kind, source, expected)
        if self.on_new_guard is not None:
            self.on_new_guard(guard)

    def add_input(
        self, source: Source, example: Any, meta: Any = None, fake: Any = None
    ) -> torch.fx.Node:
        """A placeholder for ``example``; ``meta`` is the meta tensor standing for it, and
        ``fake`` what a dynamic trace's backend gets (a symbolic int's SymInt)."""
        # Always the root graph's: a body reaching it first lifts it (subgraphs.py).
        node = self.root_tracer.create_placeholder(_placeholder_name(source))
        if fake is None and self.shapes is not None:
            fake = meta
        self.inputs.append(GraphInput(source, node, example, fake))
        if meta is not None:
            self._input_bases.setdefault(id(base_of(meta)), []).append(source)
        return node

    def guard_tensor_inputs_distinct(self) -> None:
        """Guard the frame's tensor inputs distinct objects (one id-set test): a graph that
        writes into an input was traced with each input its own tensor, and AOTAutograd's
        functionalized graph reads another input's old value when the two are one. A
        random draw's tensor is made afresh by the code, after the guards: none of theirs."""
        sources = [
            i.source for i in self.inputs
            if isinstance(i.example, torch.Tensor) and not isinstance(i.source, RandomValueSource)
        ]
        for index in range(1, len(sources)):
            self.add_guard(GuardKind.DISTINCT, sources[index], tuple(sources[:index]))

    def note_write(self, written: Any) -> None:
        """An op wrote into the meta tensor ``written``: remember if that is an input's memory.
        Inside a higher-order body, only a tensor the body created may be written."""
        if not isinstance(written, torch.Tensor):
            return
        if self.tracer.parent is not None and not self.tracer.owns(written):
            from bytegraph.exc import Unsupported

            raise Unsupported(
                "side_effect_in_higher_order_body",
                "in-place write, inside a higher-order op's body, to a tensor that lives "
                "outside the body (an input of the body or of the frame)",
            )
        sharing = self._input_bases.get(id(base_of(written)))
        if sharing is not None:
            self.writes_inputs = True
            self.written_inputs.update(dict.fromkeys(sharing))

    def note_result(self, result: Any, inputs: Any) -> None:
        """Inside a body: remember the memory an op allocated (not its inputs' memory:
        a view, ``detach()`` or an input returned as is)."""
        if self.tracer.parent is None:
            return
        used = {storage_id(t) for t in _tensors(inputs)}
        for tensor in _tensors(result):
            if storage_id(tensor) not in used:
                self.tracer.note_created(tensor)

    def create_node(self, kind: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
        node = self.tracer.create_node(kind, target, args, kwargs)
        if self.node_annotations is not None:
            node.meta["custom"] = dict(self.node_annotations)
        return node

    def count_calls(self) -> int:
        """The graph's operations, size arithmetic aside (variables/symbolic.py)."""
        return sum(
            1 for n in self.graph.nodes
            if n.op in ("call_function", "call_method") and "bytegraph_size_math" not in n.meta
        )

    def grad_mode_switches(self) -> list[bool]:
        """The modes the graph's ``torch._C._set_grad_enabled`` nodes switch to, in order."""
        return [n.args[0] for n in self.graph.nodes if n.target is torch._C._set_grad_enabled]

    def finish_graph(
        self, outputs: list[torch.fx.Node]
    ) -> tuple[torch.fx.GraphModule, list[GraphInput]]:
        """Close the graph with ``outputs``; the GraphModule and the inputs it uses."""
        graph = self.graph
        graph.output(tuple(outputs))
        used = []
        for graph_input in self.inputs:
            if graph_input.node.users:
                used.append(graph_input)
            else:
                graph.erase_node(graph_input.node)
        graph.lint()
        return torch.fx.GraphModule(self.root_tracer.root_module(), graph), used


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors inside nested tuples, lists and dicts."""
    found, work = [], [value]
    while work:
        item = work.pop()
        if isinstance(item, (tuple, list)):
            work.extend(item)
        elif isinstance(item, dict):
            work.extend(item.values())
        elif isinstance(item, torch.Tensor):
            found.append(item)
    return found


_MEMBER_READ = re.compile(r"\._(?:parameters|buffers|modules)\['([^']*)'\]")
_NOT_WORD = re.compile(r"\W+")


def _placeholder_name(source: Source) -> str:
    """A readable identifier: ``x``, ``G_weight``, ``self_fc1_weight``."""
    text = source.expr().replace("___G[", "G_").replace("___B[", "B_")
    if "._" in text:
        text = _MEMBER_READ.sub(r".\1", text)
    return _NOT_WORD.sub("_", text).strip("_") or "input"


def reachable_tensors(roots: list[Any], side_effects: SideEffects) -> list[Any]:
    """TensorVariables (and symbolic sizes) the generated code must load: from ``roots``
    and pending effects; they become graph outputs.

    Walks containers (with their current contents), cells and the attributes
    stored on objects, visiting each VT once.
    """
    from bytegraph.variables.symbolic import SymIntVariable
    from bytegraph.variables.tensor import TensorVariable

    found: dict[int, Any] = {}
    seen: set[int] = set()
    work = list(roots) + list(side_effects.pending_values())
    while work:
        vt = work.pop()
        if id(vt) in seen:
            continue
        seen.add(id(vt))
        if isinstance(vt, (TensorVariable, SymIntVariable)):
            found.setdefault(id(vt), vt)
            continue
        work.extend(side_effects.children(vt))
    return list(found.values())
