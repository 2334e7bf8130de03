"""SubgraphTracer: the fx graph of one body, and how outer values reach it.

A higher-order operator (``torch.cond``, ``checkpoint``, ``vmap``...) takes
Python callables; bytegraph traces each body into a graph of its own and
calls it through the operator in the graph around it. The OutputGraph keeps
a stack of tracers, the root at the bottom; the top one receives every node
the trace creates (``OutputGraph.create_node``). The mechanism, step by step:

1. ``OutputGraph.subtracer()`` pushes a ``SubgraphTracer`` whose parent is
   the tracer below; the body's explicit inputs become its first placeholders.
2. The body is traced like any inlined function. An op whose argument is a
   node of another graph (a tensor the body closes over, a graph input first
   read inside the body, a symbolic size) *lifts* it: ``lift`` makes a
   placeholder here and asks the parent for its own handle of the node,
   which lifts it there too if needed, so a free variable is threaded
   through every enclosing level down to the graph that owns it.
3. The body's outputs close the graph; ``module()`` makes the GraphModule,
   whose attributes are the bodies of operators nested inside it.
4. The caller installs that module as an attribute of the parent
   (``install``), reads it with a ``get_attr`` node and calls the operator
   with the explicit inputs followed by ``lifted_inputs()``: the parent's
   handles of the free variables, in placeholder order.

``own_tensors`` remembers the storages of the tensors (metadata examples)
that ops of this body created, so an in-place write can tell a body's own tensor from one
that lives outside it (``OutputGraph.note_write``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from bytegraph.exc import InternalError


class SubgraphTracer:
    """Creates the nodes of one fx graph: the root graph, or a body's."""

    def __init__(self, parent: SubgraphTracer | None = None) -> None:
        self.graph = torch.fx.Graph()
        self.parent = parent
        self.modules: dict[str, torch.nn.Module] = {}  # bodies called from this graph
        self.shared: dict[Any, str] = {}  # install_shared's key -> the attribute's name
        # node of an enclosing graph -> (its placeholder here, the parent's handle of it)
        self.lifted: dict[torch.fx.Node, tuple[torch.fx.Node, torch.fx.Node]] = {}
        self.own_tensors: dict[int, torch.Tensor] = {}  # storage id -> a tensor, kept alive
        self._last_placeholder: torch.fx.Node | None = None

    @property
    def depth(self) -> int:
        """0 for the root graph, 1 for a body called from it, ..."""
        return 0 if self.parent is None else self.parent.depth + 1

    def create_node(self, kind: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
        if self.parent is not None:
            args, kwargs = torch.fx.node.map_arg((args, kwargs), self.lift)
        # The node is made bare and given its arguments after: fx's create_node walks
        # every argument with pytree to warn about raw SymInts (about half its time),
        # and the translator never passes one (a symbolic size travels as its node,
        # ``_lower`` in variables/tensor.py). Assigning ``args``/``kwargs`` keeps the
        # users and input nodes exactly as create_node would (test_graph_nodes.py).
        node = self.graph.create_node(kind, target)
        if kwargs:
            node.kwargs = kwargs
        if args:
            node.args = args
        return node

    def create_placeholder(self, name: str) -> torch.fx.Node:
        """A placeholder after the existing ones, even if ops were recorded already."""
        graph = self.graph
        if self._last_placeholder is not None:
            point = graph.inserting_after(self._last_placeholder)
        else:
            point = graph.inserting_before(next(iter(graph.nodes), None))
        with point:
            node = graph.placeholder(name)
        # fx names the function's parameter after the target, which it does not make
        # unique the way it makes node names unique.
        node.target = node.name
        self._last_placeholder = node
        return node

    def lift(self, node: torch.fx.Node) -> torch.fx.Node:
        """This graph's handle of ``node``: itself, or a placeholder fed from outside."""
        if node.graph is self.graph:
            return node
        found = self.lifted.get(node)
        if found is not None:
            return found[0]
        if self.parent is None:
            raise InternalError(f"node {node.name} belongs to no graph being traced")
        outer = self.parent.lift(node)
        placeholder = self.create_placeholder(node.name)
        self.lifted[node] = (placeholder, outer)
        return placeholder

    def lifted_inputs(self) -> list[torch.fx.Node]:
        """The parent's handles of the lifted free variables, in placeholder order."""
        return [outer for _, outer in self.lifted.values()]

    def note_created(self, tensor: torch.Tensor) -> None:
        self.own_tensors[storage_id(tensor)] = tensor

    def owns(self, tensor: torch.Tensor) -> bool:
        """Whether an op of this body created the memory of ``tensor`` (views and
        ``detach()`` share their source's storage)."""
        return storage_id(tensor) in self.own_tensors

    def install(self, prefix: str, module: torch.nn.Module) -> torch.fx.Node:
        """Make ``module`` an attribute of this graph's module; the get_attr node reading it."""
        name = f"{prefix}_{len(self.modules)}"
        self.modules[name] = module
        return self.graph.create_node("get_attr", name, (), {})

    def install_shared(self, prefix: str, key: Any, module: torch.nn.Module) -> torch.fx.Node:
        """``install``, but a module installed before under the same key (not None) is
        read again instead: calls that share one subgraph."""
        name = self.shared.get(key) if key is not None else None
        if name is not None:
            return self.graph.create_node("get_attr", name, (), {})
        node = self.install(prefix, module)
        if key is not None:
            self.shared[key] = node.target
        return node

    def module(self, outputs: tuple[torch.fx.Node, ...]) -> torch.fx.GraphModule:
        """Close a body's graph with ``outputs`` (each lifted here if it lives outside)."""
        self.graph.output(tuple(self.lift(n) for n in outputs))
        self.graph.lint()
        return torch.fx.GraphModule(self.root_module(), self.graph)

    def root_module(self) -> torch.nn.Module:
        """The module whose attributes the graph's get_attr nodes read."""
        root = torch.nn.Module()
        for name, module in self.modules.items():
            root.add_module(name, module)
        return root


def add_unused_inputs(
    tracer: SubgraphTracer, nodes: list[torch.fx.Node]
) -> None:
    """Lift each of ``nodes`` into ``tracer`` even if its body never read it: the two
    branches of a cond take the same inputs."""
    for node in nodes:
        tracer.lift(node)


def order_lifted(tracer: SubgraphTracer, order: list[torch.fx.Node]) -> None:
    """Put the lifted placeholders in the order of the outer nodes ``order``, after the
    explicit inputs, so that several bodies share one signature."""
    anchor = next(n for n in tracer.graph.nodes if n.op != "placeholder")
    tracer.lifted = {node: tracer.lifted[node] for node in order}
    for placeholder, _ in tracer.lifted.values():
        anchor.prepend(placeholder)


def storage_id(tensor: torch.Tensor) -> int:
    """Identity of the memory a (meta or fake) tensor uses."""
    return tensor.untyped_storage()._cdata
