"""Emit the bytecode of a transformed function.

The transformed function keeps the original's signature and closure. Its
body loads the graph inputs from their Sources, calls the compiled graph
(held in ``co_consts``, never in the user's globals), rebuilds the live
values from graph outputs, constants and sources, replays side effects, and
returns.
"""

from __future__ import annotations

import collections
import contextlib
import types
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import bytecode as bc
import torch
import torch.fx

from bytegraph.bytecode import assemble, compat
from bytegraph.exc import InternalError, Unsupported
from bytegraph.graph.rerun import OnGraphError, rerun, rerun_unless_written
from bytegraph.guards.sources import LocalSource, Source

if TYPE_CHECKING:
    from bytegraph.graph.output_graph import GraphInput
    from bytegraph.side_effects import SideEffects
    from bytegraph.variables.base import VariableTracker

GRAPH_OUT = "___graph_out"
VERSIONS = "___written_versions"  # the written inputs' version counters (graph/rerun.py)
GRAPH_ERROR = "___graph_error"
RETURN = "___return"


class PyCodegen:
    """An instruction list plus how to load each graph output."""

    def __init__(
        self,
        side_effects: SideEffects,
        graph_outputs: dict[torch.fx.Node, int] | None = None,
    ) -> None:
        self.instructions: list[bc.Instr | bc.Label] = []
        self.side_effects = side_effects
        self.graph_outputs = graph_outputs or {}
        # Objects created during the trace are built once, then reloaded: identity holds.
        self._built: dict[int, str] = {}
        self._building: set[int] = set()  # new objects whose reconstruction is under way
        # While graph inputs load: the bases two or more of them are read through, and
        # the locals that hold the ones read so far (``share_reads``).
        self._shared: frozenset[Source] = frozenset()
        self._read: dict[Source, str] = {}

    def append(self, *instrs: bc.Instr | bc.Label) -> None:
        self.instructions.extend(instrs)

    def load_const(self, value: Any) -> None:
        self.append(bc.Instr("LOAD_CONST", value))

    def load_source(self, source: Source) -> None:
        """Leave the value ``source`` reads on the stack (from its local, if shared)."""
        name = self._read.get(source)
        if name is not None:
            self.append(bc.Instr("LOAD_FAST", name))
            return
        source.reconstruct(self)
        if source in self._shared:
            name = self._read[source] = f"___read{len(self._read)}"
            self.append(bc.Instr("COPY", 1), bc.Instr("STORE_FAST", name))

    @contextlib.contextmanager
    def share_reads(self, sources: Iterable[Source]) -> Iterator[None]:
        """Within the block, each base that two or more of ``sources`` are read through
        is read once and kept in a local. A model's parameters all start with the same
        ``self._modules['transformer']._modules['h']...``: read per parameter, those
        walks were three quarters of GPT-2's transformed code, every call. Only for a
        block that runs no user code: a later read must see what the user code set."""
        sources = set(sources)
        # A base is worth a local where the reads part ways: two distinct next steps
        # (or it is itself read and also read through).
        ways: dict[Source, set[Source | None]] = collections.defaultdict(set)
        for source in sources:
            for child, base in _steps(source):
                ways[base].add(child)
        self._shared = frozenset(
            base for base, nexts in ways.items()
            if len(nexts) + (base in sources) > 1 and not isinstance(base, LocalSource)
        )
        try:
            yield
        finally:
            self._shared, self._read = frozenset(), {}

    def __call__(self, vt: VariableTracker) -> None:
        """Leave the real value of ``vt`` on the stack."""
        if vt.source is not None:
            vt.source.reconstruct(self)
            return
        index = self.graph_outputs.get(getattr(vt, "node", None))
        if index is not None:
            self.append(bc.Instr("LOAD_FAST", GRAPH_OUT))
            self.load_const(index)
            self.append(bc.Instr("BINARY_SUBSCR"))
            return
        if vt.mutation_type is None:
            vt.reconstruct(self)
            return
        name = self._built.get(id(vt))
        if name is not None:
            self.append(bc.Instr("LOAD_FAST", name))
            return
        if id(vt) in self._building and id(vt) not in self.side_effects.rebuilding:
            # built from its own items (a list that contains itself); objects close
            # their cycles in build_object
            raise Unsupported("unrebuildable_value", f"{vt} contains itself")
        self._building.add(id(vt))
        try:
            vt.reconstruct(self)
        finally:
            self._building.discard(id(vt))
        name = self._built[id(vt)] = f"___new{len(self._built)}"
        self.append(bc.Instr("COPY", 1), bc.Instr("STORE_FAST", name))

    @staticmethod
    def call_instrs(nargs: int) -> list[bc.Instr]:
        return assemble.call(nargs)

    def load_callable(self, fn: Any) -> None:
        """Push the constant ``fn`` with the NULL slot of a plain call."""
        self.append(*assemble.with_null([bc.Instr("LOAD_CONST", fn)]))

    def load_callable_with(self, emit: Callable[[], None]) -> None:
        """Push what ``emit`` loads as a callable, with the NULL slot of a plain call."""
        if compat.NULL_BEFORE_CALLABLE:
            self.append(*assemble.push_null())
        emit()
        if not compat.NULL_BEFORE_CALLABLE:
            self.append(*assemble.push_null())

    def call_const(self, fn: Any, args: list[VariableTracker]) -> None:
        """Call the constant ``fn`` on the values of ``args``."""
        self.load_callable(fn)
        for arg in args:
            self(arg)
        self.append(*assemble.call(len(args)))

    def build_object(
        self,
        vt: VariableTracker,
        build: Callable[[], None],
        attributes: Callable[[], Iterable[tuple[str, VariableTracker]]],
    ) -> None:
        """Leave ``vt``'s new object on the stack: ``build()``, then each attribute stored.

        Attributes are stored with ``object.__setattr__``. A value that leads back to
        an object being built (``e.__context__ = e``) reloads it, so cycles close.
        """
        rebuilding = self.side_effects.rebuilding
        if id(vt) in rebuilding:
            temp = rebuilding[id(vt)]
            if temp is None:  # inside its own build(): the generated code has no object yet
                raise Unsupported(
                    "unrebuildable_value", f"{vt} refers back to itself through its constructor"
                )
            self.append(bc.Instr("LOAD_FAST", temp))
            return
        rebuilding[id(vt)] = None
        try:
            build()
        except BaseException:
            del rebuilding[id(vt)]
            raise
        temp = rebuilding[id(vt)] = f"___obj{id(vt)}"
        self.append(bc.Instr("COPY", 1), bc.Instr("STORE_FAST", temp))
        try:
            for name, value in attributes():
                self.load_callable(object.__setattr__)
                self.append(bc.Instr("LOAD_FAST", temp))
                self.load_const(name)
                self(value)
                self.append(*assemble.call(3), bc.Instr("POP_TOP"))
        finally:
            del rebuilding[id(vt)]

    def call_graph(
        self,
        compiled: Any,
        inputs: list[GraphInput],
        on_error: bc.Label | None,
        written: tuple[Source, ...] = (),
    ) -> None:
        """``___graph_out = compiled(*inputs)``; an exception jumps to ``on_error`` if given.
        The version counters of the ``written`` inputs are read first (graph/rerun.py)."""
        if written:
            self.load_tuple_of(written, "_version")
            self.append(bc.Instr("STORE_FAST", VERSIONS))
        guarded = None
        if on_error is not None:
            guarded = bc.TryBegin(on_error, push_lasti=False, stack_depth=0)
            self.append(guarded)
        self.load_callable(compiled)
        with self.share_reads(graph_input.source for graph_input in inputs):
            for graph_input in inputs:
                self.load_source(graph_input.source)
        self.append(*assemble.call(len(inputs)), bc.Instr("STORE_FAST", GRAPH_OUT))
        if guarded is not None:
            self.append(bc.TryEnd(guarded))

    def set_grad_mode(self, mode: bool) -> None:
        """``torch._C._set_grad_enabled(mode)``"""
        self.load_callable(torch._C._set_grad_enabled)
        self.load_const(mode)
        self.append(*assemble.call(1), bc.Instr("POP_TOP"))

    def handle_graph_error(self, template: types.CodeType, plan: OnGraphError) -> None:
        """The handler of the graph call: restore grad mode, then rerun or re-raise."""
        if plan.grad_mode is not None:
            self.set_grad_mode(plan.grad_mode)
        if plan.rerun is None:
            self.append(bc.Instr("RAISE_VARARGS", 1))
            return
        names = template.co_varnames
        positional = names[: template.co_argcount]
        index = template.co_argcount + template.co_kwonlyargcount
        keyword_only = names[template.co_argcount : index]
        extra = names[index] if template.co_flags & 0x04 else None  # CO_VARARGS
        extra_keywords = names[index + bool(extra)] if template.co_flags & 0x08 else None
        if plan.unless_written:
            self.append(bc.Instr("STORE_FAST", GRAPH_ERROR))
            self.load_callable(rerun_unless_written)
            self.append(bc.Instr("LOAD_FAST", GRAPH_ERROR), bc.Instr("LOAD_FAST", VERSIONS))
            self.load_tuple_of(plan.unless_written)
        else:
            self.append(bc.Instr("POP_TOP"))
            self.load_callable(rerun)
        self.load_const(plan.rerun)
        self.append(*(bc.Instr("LOAD_FAST", n) for n in positional))
        self.append(bc.Instr("BUILD_TUPLE", len(positional)))
        self.append(bc.Instr("LOAD_FAST", extra) if extra else bc.Instr("LOAD_CONST", ()))
        self.append(*(bc.Instr("LOAD_FAST", n) for n in keyword_only))
        self.load_const(tuple(keyword_only))
        self.append(bc.Instr("BUILD_CONST_KEY_MAP", len(keyword_only)))
        if extra_keywords:
            self.append(bc.Instr("LOAD_FAST", extra_keywords))
        else:
            self.load_const(None)
        arguments = 5 + 3 * bool(plan.unless_written)
        self.append(*assemble.call(arguments), bc.Instr("RETURN_VALUE"))

    def load_tuple_of(self, sources: tuple[Source, ...], attr: str | None = None) -> None:
        """The tuple of the values at ``sources`` (of their ``attr``, if given)."""
        for source in sources:
            self.load_source(source)
            if attr is not None:
                self.append(assemble.load_attr(attr))
        self.append(bc.Instr("BUILD_TUPLE", len(sources)))


def _steps(source: Source) -> Iterator[tuple[Source, Source]]:
    """(child, base) for each step of the reads that reach ``source``, nearest first."""
    base = getattr(source, "base", None)
    while isinstance(base, Source):
        yield source, base
        source, base = base, getattr(base, "base", None)


def transformed_code(
    template: types.CodeType,
    compiled: Any,
    inputs: list[GraphInput],
    graph_outputs: dict[torch.fx.Node, int],
    side_effects: SideEffects,
    emit_tail: Callable[[PyCodegen], None],
    on_graph_error: OnGraphError | None = None,
) -> types.CodeType:
    """Code that runs the graph, then whatever ``emit_tail`` emits (return or break).

    ``on_graph_error`` says how an exception from the graph call is handled
    (graph/rerun.py); None lets it through.
    """
    codegen = PyCodegen(side_effects, graph_outputs)
    on_error = bc.Label() if on_graph_error is not None and compiled is not None else None
    draws = side_effects.draws
    if on_error is not None and on_graph_error.rerun is not None:
        draws.saved_after = 0  # the rerun draws them all again
    if draws.draws:  # random numbers the graph (or the rest) needs, drawn first
        draws.emit_prologue(codegen)
    if compiled is not None:
        written = on_graph_error.unless_written if on_error is not None else ()
        codegen.call_graph(compiled, inputs, on_error, written)
    emit_tail(codegen)
    if on_error is not None:
        codegen.append(on_error)
        if draws.draws and draws.saved_after is not None:
            draws.emit_restore(codegen)
        codegen.handle_graph_error(template, on_graph_error)
    try:
        return assemble.assemble(template, codegen.instructions)
    except Exception as e:  # the bytecode package rejected what we emitted
        raise InternalError(f"assembling the transformed code failed: {e}") from e


def emit_return(return_value: VariableTracker) -> Callable[[PyCodegen], None]:
    """Tail of a frame that ran to its end: rebuild the result, replay, return."""

    def emit(codegen: PyCodegen) -> None:
        codegen(return_value)
        if codegen.side_effects.has_replay:
            # Rebuild the result before replaying: a mutation must not change what was read.
            codegen.append(bc.Instr("STORE_FAST", RETURN))
            codegen.side_effects.replay_all(codegen)
            codegen.append(bc.Instr("LOAD_FAST", RETURN))
        codegen.append(bc.Instr("RETURN_VALUE"))

    return emit
