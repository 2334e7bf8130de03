"""Reuse of a traced repeated call: the blocks of a model traced once, copied after.

A model's forward calls N blocks of one class in a row (``for block in self.h:
x = block(x)``). Inlining interprets the same bytecode N times and builds the
same graph fragment N times. This module traces the first call as usual while
recording what it did, and answers a later call with the same key by copying
the recorded nodes, when that provably builds what inlining would build:

1. **Key** (``describe``): the code object and its globals, the grad / autocast
   state, and an abstract form of every bound argument: a tensor by its metadata
   (and by which earlier argument it is, or shares memory with), a constant by
   type and value, an nn.Module read through a source by its class (a *root*),
   tuples and keyword dicts of those; for a closure (a decorator's wrapper, which
   Hugging Face puts around every layer's forward), the function object itself, so
   its cells are the first call's (a write to one in the trace is in the side effect
   log, whose reads by the first call a later call compares before copying).
   Anything else: plain inlining.
2. **Record** (``_Recording``): the call is inlined as always; afterwards the
   fragment is kept only if the call left no trace outside the graph: the side
   effect log empty before and after, no flag of the OutputGraph changed (input
   writes, ops under try, checks), no higher-order body, no node other than
   ``call_function`` / ``call_method``, every node it reads from before the call
   an argument's node or a graph input, and a result built from tensors it made
   (not views, offset 0), the arguments themselves, constants and tuples.
3. **Check** (``_Template.holds``): at a later call with the same key, every
   guard of the trace that names a source under the first call's roots (the
   module, its submodules, parameters, attributes, hooks, class...) is re-rooted
   onto the new call's roots and evaluated now, on the real objects, as the guard
   function will evaluate it (the same expression text; fragment_guards.py). One
   fails: inline.
4. **Copy** (``_Template.replay``): graph inputs under the roots are read through
   the re-rooted sources (``builder.wrap``: the guards and placeholders a plain
   read makes), and must carry the same metadata and be told apart as in the
   first call; the nodes are copied with their inputs remapped; the re-rooted
   guards are installed; returned tensors get fresh meta tensors of the same
   metadata, so no VT of the first call is shared.

Dynamic-shape traces (fake tensors), calls inside a higher-order body, under a
TorchFunctionMode, autocast, inference mode or a functorch transform, and
functions made in the trace with cells of their own are never reused.
``config.reuse_fragments`` switches it off; ``STATS`` counts reused calls and the
``fragments`` log artifact names them.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from bytegraph import config, logs
from bytegraph.exc import InternalError
from bytegraph.graph.metadata import default_device
from bytegraph.graph.subgraphs import storage_id
from bytegraph.guards.compiled_text import compiled
from bytegraph.guards.sources import Source
from bytegraph.side_effects import NOTHING
from bytegraph.translate.fragment_guards import (
    Checker,
    Refused,
    Rerooting,
    evaluate,
    frame_namespace,
    reroot_local,
    resolve,
    under,
)
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import TupleVariable
from bytegraph.variables.functions import UserFunctionVariable
from bytegraph.variables.nn_module import NNModuleVariable
from bytegraph.variables.tensor import TensorVariable, getitem_as_index, unknown_layout

if TYPE_CHECKING:
    from bytegraph.graph.output_graph import OutputGraph
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.base import VariableTracker
    from bytegraph.variables.functions import BaseFunctionVariable

STATS = {"recorded": 0, "reused": 0, "refused": 0}
"""Calls recorded as a reusable fragment, answered by a copy, and refused at the check."""
REUSED: collections.Counter[str] = collections.Counter()
"""Calls answered by a copy, by the qualified name of the function called."""

MIN_NODES = 3
"""Fragments of fewer nodes are not kept: a copy's checks cost more than inlining such a
call again (measured: Linear.forward, one node, 0.4 ms to copy against 0.3 ms to inline)."""
_NEVER = object()  # a key whose first call left effects: never recorded again in this trace
_OUTPUT_FLAGS = ("writes_inputs", "ops_in_try", "checks_in_graph", "function_modes", "shapes")


def inline_with_reuse(
    tx: Tx,
    fn: BaseFunctionVariable,
    bound: dict[str, VariableTracker],
    run: Callable[[], VariableTracker],
) -> VariableTracker:
    """``run()`` (the plain inlining of ``fn`` with ``bound`` locals), or a copy of the
    fragment an earlier call with the same key recorded."""
    if not config.reuse_fragments or not _quiet(tx.output):
        return run()
    try:
        call = describe(tx, fn, bound)
    except Refused:
        call = None
    if call is None:  # inlined outside the except block: the trace reads sys.exc_info()
        return run()
    store = _store(tx.output)
    template = store.get(call.key)
    if template is _NEVER:
        return run()
    if template is not None:
        result = template.replay(tx, call)
        return run() if result is None else result
    effects = tx.output.side_effects
    outermost = effects.reads is None
    if outermost:
        effects.reads = []
    recording = _Recording.start(tx.output, call)
    try:
        result = run()
        try:
            store[call.key] = recording.finish(tx.output, call, result)
            STATS["recorded"] += 1
        except Refused:
            store[call.key] = _NEVER
    finally:
        if outermost:
            effects.reads = None
    return result


def _store(output: OutputGraph) -> dict[Any, Any]:
    return output.fragments


def _quiet(output: OutputGraph) -> bool:
    """Whether the trace is where a fragment means the same wherever it is copied: the
    root graph, static shapes, no effect logged yet, no mode or transform active."""
    from bytegraph.variables.functional_call import overriding

    return (
        output.tracer is output.root_tracer
        and output.shapes is None
        and not overriding(output)
        and unknown_layout.get() is None
        and not getitem_as_index.get()
        and not output.function_modes
        and output.node_annotations is None  # copied nodes would keep the first's meta
        and torch._C._functorch.maybe_current_level() is None
        and not torch._C._is_any_autocast_enabled()
        and not torch.is_inference_mode_enabled()
    )


# -- 1. the key ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Call:
    """One call, walked: its key, its module roots and its tensor arguments in order."""

    key: tuple[Any, ...]
    roots: tuple[NNModuleVariable, ...]
    tensors: tuple[TensorVariable, ...]


def describe(tx: Tx, fn: BaseFunctionVariable, bound: dict[str, VariableTracker]) -> Call:
    code = fn.code()
    closure = None
    if code.co_freevars:
        # A decorator's wrapper (``functools.wraps``): one function object, so the same
        # cells; a write to one in the trace is in the log, whose reads are compared.
        if type(fn) is not UserFunctionVariable or not fn.by_identity:
            raise Refused("a closure made in the trace")
        closure = fn.fn
    walk = _Walk()
    varkw = _varkw_name(code)
    args = tuple(
        (name, walk.keywords(tx, vt) if name == varkw else walk.abstract(tx, vt))
        for name, vt in bound.items()
    )
    state = (torch.is_grad_enabled(), torch.get_default_dtype(), str(default_device()))
    key = (code, id(fn.f_globals()), state, args, closure)
    return Call(key, tuple(walk.roots), tuple(walk.tensors))


def _varkw_name(code: Any) -> str | None:
    if not code.co_flags & 0x08:  # CO_VARKEYWORDS
        return None
    return code.co_varnames[code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04)]


class _Walk:
    def __init__(self) -> None:
        self.roots: list[NNModuleVariable] = []
        self.tensors: list[TensorVariable] = []
        self._storages: list[int] = []

    def abstract(self, tx: Tx, vt: Any) -> Any:
        kind = type(vt)
        if kind is TensorVariable:
            return self._tensor(vt)
        if kind is ConstantVariable:
            value = vt.value
            try:
                hash(value)
            except TypeError:
                raise Refused("an unhashable constant") from None
            return ("C", type(value), value, repr(value))
        if kind is NNModuleVariable and vt.source is not None:
            same = next((i for i, r in enumerate(self.roots) if r.value is vt.value), None)
            self.roots.append(vt)
            return ("M", type(vt.value), same)
        if kind is TupleVariable and vt.tuple_type is tuple:
            return ("tuple", *(self.abstract(tx, item) for item in vt.items))
        raise Refused(f"an argument {kind.__name__}")

    def keywords(self, tx: Tx, vt: Any) -> Any:
        """The ``**kwargs`` dict binding made for this call (the callee's own object, so
        the callee may change it); a dict from the caller is refused in ``abstract``."""
        items = vt.items_now(tx)
        return ("kwargs", *((k, self.abstract(tx, v)) for k, v in items.items()))

    def _tensor(self, vt: TensorVariable) -> tuple[Any, ...]:
        t = vt.example
        if vt.tensor_type is not torch.Tensor or t.device.type != "meta":
            raise Refused("a tensor subclass or a fake tensor")
        same = next((i for i, o in enumerate(self.tensors) if o is vt), None)
        same_node = next((i for i, o in enumerate(self.tensors) if o.node is vt.node), None)
        storage = storage_id(t)
        shares = next((i for i, s in enumerate(self._storages) if s == storage), None)
        self.tensors.append(vt)
        self._storages.append(storage)
        meta = (t.dtype, vt.device, tuple(t.shape), t.stride(), t.storage_offset(),
                t.requires_grad, t.is_leaf, t._is_view())
        return ("T", same, same_node, shares, meta, vt.source)


# -- 2. recording ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Recording:
    last: torch.fx.Node | None
    inputs: int
    flags: tuple[Any, ...]
    default_device: bool
    grad: bool
    log: int  # entries of the side effect log before the call
    reads: int  # items of its ``reads`` before the call

    arguments: tuple[Any, ...]  # the tensor arguments' metadata and versions

    @staticmethod
    def start(output: OutputGraph, call: Call) -> _Recording:
        nodes = output.graph.nodes
        last = next(iter(reversed(nodes)), None)
        effects = output.side_effects
        return _Recording(
            last, len(output.inputs), _flags(output), output.uses_default_device,
            torch.is_grad_enabled(), effects.log_length(), len(effects.reads),
            _argument_state(call),
        )

    def _state_read(self, output: OutputGraph, call: Call) -> list[tuple[Any, ...]]:
        """The reads of state from before the call, to compare by identity at a replay.

        The call may change only objects it made (or its own ``**kwargs`` dict): no
        global, no replayed call, no object of the frame, nothing reachable from the
        log as it was before the call. A pending change under the call's modules
        (read as the modules' real state at a replay) refuses too.
        """
        effects = output.side_effects
        reads = effects.reads[self.reads:]
        writes = [r for r in reads if r[0] == "write"]
        written = {(r[1], _ident(r[2]), r[3]) for r in writes}
        if writes:
            before = _reachable(effects, self.log)
            for _, table, key, _, _ in writes:
                vt = getattr(key, "vt", None)
                mutation = getattr(vt, "mutation_type", None)
                if table in ("global", "call") or mutation is None or mutation.scope == 0 or (
                    id(vt) in before
                ):
                    raise Refused("the call changes state it did not make")
        roots = {r.source for r in call.roots}
        kept, seen = [], set()
        for read in reads:
            table, key, name, found = read[:4]
            mark = (table, _ident(key), name)
            if table == "write" or mark in seen:
                continue
            seen.add(mark)
            if (("attrs" if table == "all_attrs" else table), _ident(key), name) in written or (
                table == "all_attrs" and any(w[1] == _ident(key) for w in written)
            ):
                continue  # made or changed by the call itself
            vt = getattr(key, "vt", None)
            hit = found is not NOTHING and found != ()
            if hit and vt is not None and under(getattr(vt, "source", None), roots):
                raise Refused("a pending change under the call's modules")
            kept.append((table, key, name, found))
        return kept

    def finish(self, output: OutputGraph, call: Call, result: Any) -> _Template:
        if not _quiet(output) or _flags(output) != self.flags or (
            torch.is_grad_enabled() != self.grad
        ):
            raise Refused("the call changed state beside the graph")
        if output.writes_inputs or _argument_state(call) != self.arguments:
            # A copy would leave the argument's metadata (its meta tensor) as it was.
            raise Refused("the call may write into a tensor it was given")
        state = self._state_read(output, call)
        nodes = self._new_nodes(output)
        if len(nodes) < MIN_NODES:
            raise Refused(f"{len(nodes)} nodes: inlining it again costs less than a copy")
        made = set(nodes)
        by_node = {i.node: i for i in output.inputs}
        arg_nodes = {}
        for index, vt in enumerate(call.tensors):
            arg_nodes.setdefault(vt.node, index)
        external: dict[torch.fx.Node, Any] = {}
        for node in nodes:
            for used in node.all_input_nodes:
                if used in made or used in external:
                    continue
                if used in arg_nodes:
                    external[used] = ("arg", arg_nodes[used])
                elif used in by_node:
                    external[used] = ("input", by_node[used].source)
                else:
                    raise Refused("the call reads a tensor it was not given")
        plan = _plan_result(result, made, call)
        examples = {
            node: output.source_to_var.get(what[1])
            for node, what in external.items() if what[0] == "input"
        }
        return _Template(
            call=call,
            nodes=tuple(nodes),
            external=external,
            input_examples={n: getattr(v, "example", None) for n, v in examples.items()},
            plan=plan,
            sets_default_device=output.uses_default_device and not self.default_device,
            state=state,
        )

    def _new_nodes(self, output: OutputGraph) -> list[torch.fx.Node]:
        graph = output.graph
        node = self.last.next if self.last is not None else next(iter(graph.nodes), None)
        nodes = []
        root = graph._root
        while node is not None and node is not root:
            if node.op == "placeholder":
                node = node.next
                continue
            if node.op not in ("call_function", "call_method") or node.kwargs.get("out"):
                raise Refused(f"a {node.op} node")
            nodes.append(node)
            node = node.next
        return nodes


def _argument_state(call: Call) -> tuple[Any, ...]:
    """What an in-place op on a tensor argument changes: its version, its metadata."""
    return tuple(
        (t._version, t.shape, t.stride(), t.storage_offset(), t.dtype, t.requires_grad)
        for t in (vt.example for vt in call.tensors)
    )


def _flags(output: OutputGraph) -> tuple[Any, ...]:
    tracer = output.root_tracer
    return (
        torch.get_default_dtype(), str(default_device()),
        *(getattr(output, name) for name in _OUTPUT_FLAGS),
        len(output.keyed_tensors), len(output.generator_frames), len(output.collective_results),
        len(tracer.modules), len(tracer.shared), len(output.side_effects.draws.calls),
    )


def _plan_result(result: Any, made: set[torch.fx.Node], call: Call) -> Any:
    """How to rebuild the result: ("new", node, example, device) for a tensor the call
    made, ("arg", i) for the i-th tensor argument, ("const", vt), ("tuple", plans)."""
    kind = type(result)
    if kind is ConstantVariable:
        return ("const", result)
    if kind is TupleVariable and result.tuple_type is tuple and result.source is None:
        return ("tuple", tuple(_plan_result(item, made, call) for item in result.items))
    if kind is TensorVariable and result.tensor_type is torch.Tensor:
        for index, arg in enumerate(call.tensors):
            if arg is result:
                return ("arg", index)
        t = result.example
        if result.node in made and result.source is None and t.device.type == "meta" and (
            storage_id(t) not in {storage_id(a.example) for a in call.tensors}
        ):
            return ("new", result.node, t, result.device)
    raise Refused(f"a result {kind.__name__}")


# -- 3 and 4. check and copy ---------------------------------------------------


@dataclasses.dataclass
class _Template:
    call: Call
    nodes: tuple[torch.fx.Node, ...]
    external: dict[torch.fx.Node, Any]
    input_examples: dict[torch.fx.Node, Any]
    plan: Any
    sets_default_device: bool
    state: list[tuple[Any, ...]]  # the log's entries the call read, as it found them
    checker: Checker | None = None
    rerooting: Rerooting | None = None  # made with the checker, at the first replay
    inputs: dict[torch.fx.Node, Any] = dataclasses.field(default_factory=dict)  # refs
    dead: bool = False
    reads: dict[torch.fx.Node, Any] = dataclasses.field(default_factory=dict)  # compiled

    def replay(self, tx: Tx, call: Call) -> VariableTracker | None:
        """The copied fragment's result, or None (inline instead) if a check fails."""
        if self.dead:
            return None
        try:
            mapping, made = self._check(tx, call)
        except Refused as why:
            STATS["refused"] += 1
            if logs.enabled("fragments", logging.DEBUG):
                logs.get_logger("fragments").debug(
                    "no reuse of %s: %s", self.call.key[0].co_qualname, why
                )
            return None
        result = self._copy(tx, call, mapping)
        self.checker.install(tx.output, made)
        STATS["reused"] += 1
        REUSED[self.call.key[0].co_qualname] += 1
        if logs.enabled("fragments"):
            logs.get_logger("fragments").info(
                "reused the fragment of %s (%d nodes) for %s",
                self.call.key[0].co_qualname, len(self.nodes),
                ", ".join(r.source.expr() for r in call.roots) or "a call without module",
            )
        return result

    def _check(
        self, tx: Tx, call: Call
    ) -> tuple[dict[torch.fx.Node, torch.fx.Node], list[Source]]:
        """Every check of a replay; the new node of each node the fragment reads, and the
        sources under the roots rebuilt on the new call's (``Rerooting.instantiate``)."""
        if not all(_alive(n, tx.output.graph) for n in self.nodes):
            raise Refused("the fragment's nodes left the graph")
        if not self._same_state(tx.output, call):
            raise Refused("the state the call read changed")
        if self.checker is None:
            try:
                self.rerooting = Rerooting(tuple(r.source for r in self.call.roots))
                self.checker = Checker.build(tx.output, self.call.roots, self.rerooting)
                self.inputs = {
                    node: self.rerooting.ref(what)
                    for node, (kind, what) in self.external.items() if kind == "input"
                }
            except Refused:
                self.dead = True
                raise
        made = self.rerooting.instantiate([r.source for r in call.roots])
        roots = [r.value for r in call.roots]
        env = frame_namespace(tx)
        if not self.checker.holds(env, roots):
            raise Refused("a guard fails on the new call's modules")
        self.checker.reread(tx, made, env, roots)
        return self._map_external(tx, call, made, env, roots), made

    def _same_state(self, output: OutputGraph, call: Call) -> bool:
        """The log reads as the recorded call found it, with no change pending under the
        new call's modules."""
        effects = output.side_effects
        for table, key, name, found in self.state:
            now = effects.entry(table, key, name)
            if table == "all_attrs":
                if len(now) != len(found) or any(
                    a[0] != b[0] or a[1] is not b[1] for a, b in zip(now, found, strict=True)
                ):
                    return False
            elif now is not found:
                return False
        roots = {r.source for r in call.roots}
        return not any(under(source, roots) for source in effects.pending_sources())

    def _map_external(
        self, tx: Tx, call: Call, made: list[Source], env: dict[str, Any], roots: list[Any],
    ) -> dict[torch.fx.Node, torch.fx.Node]:
        from bytegraph.variables.builder import wrap

        mapping: dict[torch.fx.Node, torch.fx.Node] = {}
        for node, (kind, what) in self.external.items():
            if kind == "arg":
                mapping[node] = call.tensors[what].node
                continue
            source = resolve(self.inputs[node], made)
            if source == what:
                mapping[node] = node
                continue
            read = self.reads.get(node)
            if read is None:
                text = reroot_local(what, self.call.roots).expr()
                read = self.reads[node] = compiled(text, "<bytegraph fragment input>", "eval")
            value = evaluate(read, env, roots)
            vt = wrap(tx, value, source)
            old = self.input_examples.get(node)
            if type(vt) is not TensorVariable or old is None or not _same_meta(vt.example, old):
                raise Refused("an input of other metadata")
            mapping[node] = vt.node
        if len(set(mapping.values())) != len(mapping):
            raise Refused("inputs told apart in the first call are one object here")
        return mapping

    def _copy(
        self, tx: Tx, call: Call, mapping: dict[torch.fx.Node, torch.fx.Node]
    ) -> VariableTracker:
        from bytegraph.variables.tensor import _under_try_block

        output = tx.output
        graph = output.graph
        env = dict(mapping)
        for node in self.nodes:
            env[node] = _copy_node(graph, node, env)
        if self.sets_default_device:
            output.uses_default_device = True
        if not output.ops_in_try and self.nodes:
            output.ops_in_try = _under_try_block(tx)
        return _rebuild(self.plan, env, call, {})


def _copy_node(
    graph: torch.fx.Graph, node: torch.fx.Node, env: dict[torch.fx.Node, torch.fx.Node]
) -> torch.fx.Node:
    """``graph.node_copy(node, env.__getitem__)`` without the pytree walk of every argument
    that fx's create_node makes for raw SymInts (a fragment has none: it is never recorded
    in a dynamic-shape trace); the arguments are given to the bare node after, as
    SubgraphTracer.create_node does."""
    new = graph.create_node(node.op, node.target, name=node.name, type_expr=node.type)
    if node.kwargs:
        new.kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
    if node.args:
        new.args = torch.fx.node.map_arg(node.args, env.__getitem__)
    new.meta = copy.copy(node.meta)
    return new


def _ident(key: Any) -> Any:
    """What tells two keys of the log apart: the VT of an object's key, a global's key."""
    vt = getattr(key, "vt", None)
    return key if vt is None else id(vt)


def _reachable(effects: Any, entries: int) -> set[int]:
    """Ids of the VTs reachable from the log's first ``entries`` entries, as they are now."""
    work = list(effects.logged(entries))
    seen: set[int] = set()
    reads, effects.reads = effects.reads, None  # this walk is no read of the call's
    try:
        while work:
            vt = work.pop()
            if id(vt) in seen:
                continue
            seen.add(id(vt))
            work.extend(effects.children(vt))
    finally:
        effects.reads = reads
    return seen


def _alive(node: torch.fx.Node, graph: torch.fx.Graph) -> bool:
    return node.graph is graph and not getattr(node, "_erased", False)


def _same_meta(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
        and a.requires_grad == b.requires_grad and a.is_leaf == b.is_leaf
        and a.device == b.device
    )


def _rebuild(plan: Any, env: dict[torch.fx.Node, torch.fx.Node], call: Call, made: dict) -> Any:
    kind = plan[0]
    if kind == "const":
        return plan[1]
    if kind == "arg":
        return call.tensors[plan[1]]
    if kind == "tuple":
        return TupleVariable(tuple(_rebuild(p, env, call, made) for p in plan[1]))
    _, node, example, device = plan
    found = made.get(node)
    if found is None:  # one tensor returned twice stays one VT
        found = made[node] = TensorVariable(env[node], _fresh(example), device)
    return found


def _fresh(example: torch.Tensor) -> torch.Tensor:
    """A new meta tensor with the metadata of ``example``, in memory of its own: a view
    (at the same offset) where the example is a view of memory the call made."""
    base = example._base if example._is_view() else example
    t = _fresh_base(base)
    if example._is_view():
        t = t.as_strided(example.shape, example.stride(), example.storage_offset())
    if not _same_meta(t, example) or t.storage_offset() != example.storage_offset():
        raise InternalError(f"a fresh meta tensor differs from {example!r}")
    return t


def _fresh_base(example: torch.Tensor) -> torch.Tensor:
    t = torch.empty_strided(example.shape, example.stride(), dtype=example.dtype, device="meta")
    if example.requires_grad:
        t.requires_grad_(True)
        if not example.is_leaf:
            t = t.clone()  # a result of an op: no leaf, as the example
    return t
