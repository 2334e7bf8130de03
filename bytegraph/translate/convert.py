"""Translate one call of a function into a cache entry.

``convert_frame`` binds the call's arguments, runs the InstructionTranslator,
compiles the graph through the backend, generates the transformed code, and
builds the guard function. When the trace meets something unsupported, it
is translated again, stopping just before that instruction to break the
graph there (translate/resume.py). A frame whose trace records no tensor
operation, or where no break is possible, gets an entry that runs the
original function (behind the same guards), so it is never traced twice for
the same inputs.
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Callable
from typing import Any

from bytegraph import config, events, logs
from bytegraph.bytecode.instructions import decode
from bytegraph.codegen import PyCodegen, emit_return, transformed_code
from bytegraph.escapes import emit_raise
from bytegraph.exc import Unsupported
from bytegraph.graph.backends import Backend, call_backend
from bytegraph.graph.ddp import wrap_for_ddp
from bytegraph.graph.output_graph import OutputGraph, reachable_tensors
from bytegraph.graph.rerun import OnGraphError
from bytegraph.graph.shapes import DynamicSpec, ShapeSession
from bytegraph.graph.static_fakes import needs_shape_env, static_fake_inputs
from bytegraph.guards.build import build_guard_function
from bytegraph.guards.cache import CacheEntry
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import ClosureCellSource, LocalSource
from bytegraph.translate.regions import call_region, loop_region, truth_region, with_regions
from bytegraph.translate.resume import (
    FrameContext,
    emit_break,
    is_entered_code,
    live_roots,
    received_cells,
)
from bytegraph.translate.routing import routed_code
from bytegraph.translate.stage_times import timed
from bytegraph.translate.translator import InstructionTranslator
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.ctx import preserve_global_state
from bytegraph.variables.exceptions import ExceptionInstanceVariable, raised_in_trace
from bytegraph.variables.function_modes import refuse_entry_under_modes, refuse_open_modes
from bytegraph.variables.generators import (
    refuse_abandoned_generators,
    release_generator_frames,
)
from bytegraph.variables.materialize_grads import check_dropped_outputs
from bytegraph.variables.tensor_attributes import keep_leaf_flags
from bytegraph.variables.torch_checks import checks_break

_STAR_ARGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


def bind_arguments(fn: types.FunctionType, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The frame's initial locals for ``fn(*args, **kwargs)``, as CPython binds them.

    The signature is read from the code and the defaults, never from a
    ``__signature__`` attribute, which ``inspect.signature`` prefers even with
    follow_wrapped=False: a function may advertise parameters that are not its
    own (the kernels package gives a ``forward(self, *args, **kwargs)`` the
    wrapped function's), and binding by them would trace with the wrong locals.
    """
    code = fn.__code__
    count = code.co_argcount
    if not kwargs and not code.co_kwonlyargcount and not code.co_flags & _STAR_ARGS:
        # Positional arguments only (most calls): bound in order, the defaults fill the
        # rest, without building a Signature (about 50 us).
        # A comprehension's ``.0`` is no identifier: inspect names it ``implicit0``.
        names = code.co_varnames[:count]
        defaults = fn.__defaults__ or ()
        missing = count - len(args)
        if 0 <= missing <= len(defaults) and all(name.isidentifier() for name in names):
            values = (*args, *defaults[len(defaults) - missing:]) if missing else args
            return dict(zip(names, values))
    plain = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    plain.__kwdefaults__ = fn.__kwdefaults__
    bound = inspect.signature(plain, follow_wrapped=False).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def convert_frame(
    ctx: FrameContext,
    frame_values: dict[str, Any],
    backend: Backend,
    fullgraph: bool,
    dynamic: DynamicSpec | None = None,
) -> CacheEntry:
    """A cache entry for a call of ``ctx.fn`` whose arguments bound to ``frame_values``;
    ``dynamic``: the dimensions of tensor arguments to trace size-generic."""
    fn = ctx.fn
    dynamic = dynamic or DynamicSpec()
    tx = _translator(fn, frame_values, dynamic)
    try:
        _run(tx)
        if tx.escaped is not None:
            return _compile(fn, tx, backend, [tx.escaped], _raise_tail(tx, tx.escaped))
        return _compile(fn, tx, backend, [tx.return_value], emit_return(tx.return_value))
    except Unsupported as reason:
        if reason.entry.name == "check_not_rerunnable":
            with checks_break():
                return convert_frame(ctx, frame_values, backend, fullgraph, dynamic)
        if fullgraph:
            if reason.entry.name in _UNBACKED_ENTRIES and not _capturing_data_dependent():
                return _with_data_dependent_capture(ctx, frame_values, backend, dynamic)
            raise
        if reason.step is None:  # the trace finished but its result cannot be rebuilt
            return _entry(fn, tx.output, _python_run(ctx), breaks=(reason,))
        return _translate_with_break(ctx, frame_values, backend, reason, dynamic)
    finally:
        _release_trace(tx)


# torch.compile(fullgraph=True) "opts into unbacked semantics": .item() and ops whose output
# size the data decides stay in the graph, as with both config switches below on. A
# fullgraph trace that meets one of these is traced again with both on for that trace.
_UNBACKED_ENTRIES = frozenset({"item_call", "dynamic_output_shape", "data_dependent_result"})
_CAPTURE_SWITCHES = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops")


def _capturing_data_dependent() -> bool:
    return all(getattr(config, name) for name in _CAPTURE_SWITCHES)


def _with_data_dependent_capture(
    ctx: FrameContext, frame_values: dict[str, Any], backend: Backend, dynamic: DynamicSpec
) -> CacheEntry:
    """The fullgraph entry traced with data-dependent values captured (compiling holds the
    compile lock, so no other trace sees the switches on)."""
    saved = [getattr(config, name) for name in _CAPTURE_SWITCHES]
    for name in _CAPTURE_SWITCHES:
        setattr(config, name, True)
    try:
        return convert_frame(ctx, frame_values, backend, True, dynamic)
    finally:
        for name, value in zip(_CAPTURE_SWITCHES, saved):
            setattr(config, name, value)


def _release_trace(tx: InstructionTranslator) -> None:
    """The trace is over: its translator, generator frames and OutputGraph let go of
    the frame's objects (see ``SideEffects.release``)."""
    release_generator_frames(tx.output)
    tx.output.release()
    tx.frame_values = {}
    tx.symbolic_locals.clear()
    tx.stack.clear()


def _translate_with_break(
    ctx: FrameContext,
    frame_values: dict[str, Any],
    backend: Backend,
    reason: Unsupported,
    dynamic: DynamicSpec,
    region: tuple[int, int] | None = None,
) -> CacheEntry:
    """Translate again, stopping before the unsupported step to break there (or before
    ``region``, a stretch to run as Python)."""
    fn = ctx.fn
    decoded = decode(fn.__code__)
    loop = region or (
        loop_region(decoded, reason.index) or call_region(decoded, reason.index)
        or truth_region(decoded, reason.index)
    )
    if loop is not None:
        tx = _translator(fn, frame_values, dynamic, break_loop=loop)
    else:
        tx = _translator(fn, frame_values, dynamic, break_at=reason.step)
    try:
        _run(tx)
        if tx.break_plan is None:  # the trace did not retrace the same way
            raise reason
        plan = tx.break_plan
        tail = emit_break(tx, plan, ctx)
        entry = _compile(fn, tx, backend, live_roots(plan), tail, (reason,), require_graph=False)
    except Unsupported as refused:
        if refused.entry.name == "check_not_rerunnable":
            with checks_break():
                return _translate_with_break(ctx, frame_values, backend, reason, dynamic, region)
        if refused.entry.name == "random_draw_not_rerunnable" and refused.step is not None:
            # The draw comes before this break: break there instead.
            return _translate_with_break(ctx, frame_values, backend, refused, dynamic)
        wider = _wider_with_region(decoded, reason.index, loop)
        if wider is not None:
            return _translate_with_break(ctx, frame_values, backend, reason, dynamic, wider)
        # No break possible here: the whole frame runs as Python behind the guards seen.
        _log_break(fn, reason, refused)
        return _entry(fn, tx.output, _python_run(ctx), breaks=(reason, refused))
    finally:
        _release_trace(tx)
    _log_break(fn, reason, None)
    return entry


def _wider_with_region(
    decoded: Any, index: int | None, tried: tuple[int, int] | None
) -> tuple[int, int] | None:
    """The innermost with statement around ``index`` wider than the region ``tried``."""
    if index is None:
        return None
    for span in with_regions(decoded, index):
        if tried is None or (span != tried and span[0] <= tried[0] and tried[1] <= span[1]):
            return span
    return None


def _python_run(ctx: FrameContext) -> types.FunctionType:
    """``ctx.fn`` to run as Python, its calls routed through bytegraph (routing.py)."""
    fn = ctx.fn
    if ctx.route is None or is_entered_code(fn.__code__):
        # A resume function's code jumps into the middle of try ranges its prologue
        # never opens: decoded again, ``bytecode`` cannot recompute its stack depths.
        return fn
    code = routed_code(fn.__code__, ctx.route)
    return fn if code is fn.__code__ else _function_like(fn, code)


def _log_break(fn: types.FunctionType, reason: Unsupported, refused: Unsupported | None) -> None:
    if not logs.enabled("graph_breaks"):
        return
    outcome = (
        f"the whole frame runs as Python: {refused.detail}" if refused else "graph break"
    )
    logs.get_logger("graph_breaks").info("%s in %s: %s", outcome, fn.__qualname__, reason)


def _run(tx: InstructionTranslator) -> None:
    """Run the trace; the real grad mode it switched is put back however it ends."""
    refuse_entry_under_modes()
    with preserve_global_state(), timed("translate"):
        tx.run()
        refuse_abandoned_generators(tx.output)
    refuse_open_modes(tx, "a break" if tx.break_plan is not None else "a return")


def _translator(
    fn: types.FunctionType,
    frame_values: dict[str, Any],
    dynamic: DynamicSpec,
    **break_point: Any,
) -> InstructionTranslator:
    output = OutputGraph()
    events.TRACE_STARTED.publish(output)  # the dump notes where each guard came from
    if dynamic or ShapeSession.captures_data():
        output.shapes = ShapeSession(dynamic)
    cells = {
        name: output.cell_for(cell, ClosureCellSource(name))
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())
    }
    frame_values = dict(frame_values)
    for name in received_cells(fn.__code__):  # a resume function's cells: its arguments
        cells[name] = output.cell_for(frame_values.pop(name), LocalSource(name))
    with timed("translate"):  # decoding the code: the first time, after a reset
        return InstructionTranslator(
            fn.__code__, {}, fn.__globals__, cells, output,
            frame_values=frame_values, **break_point,
        )


def _compile(
    fn: types.FunctionType,
    tx: InstructionTranslator,
    backend: Backend,
    roots: list[VariableTracker],
    tail: Callable[[PyCodegen], None],
    breaks: tuple[Unsupported, ...] = (),
    require_graph: bool = True,
) -> CacheEntry:
    """Compile the graph and generate the code of one entry."""
    output = tx.output
    switches = output.grad_mode_switches()
    has_ops = output.count_calls() > len(switches)
    if not has_ops and not require_graph and output.shapes is not None:
        # A symbolic size that lives on (across a break) comes out of a graph.
        has_ops = any(
            t.source is None for t in reachable_tensors(roots, output.side_effects)
        )
    if not has_ops and require_graph:
        return _entry(fn, output, fn, breaks=breaks)
    pending, inputs, gm, outputs = None, [], None, []
    if not has_ops and switches:  # no graph for switches alone: set the last mode directly
        tail = _after_setting_grad_mode(switches[-1], tail)
    if has_ops:
        if output.writes_inputs:
            output.guard_tensor_inputs_distinct()
        tensors = reachable_tensors(roots + output.collective_results, output.side_effects)
        outputs = [t for t in tensors if t.source is None]
        with timed("graph"):
            gm, inputs = output.finish_graph([t.node for t in outputs])
        check_dropped_outputs(gm)
        pending = _PendingGraph()
    on_error = None
    if gm is not None:
        # A rerun only before the first write needs nothing else to depend on a rerun.
        conditional = not (
            output.checks_in_graph or output.side_effects.draws.draws or output.ops_in_try
        )
        written = tuple(output.written_inputs) if conditional else ()
        on_error = OnGraphError.plan(gm, output.writes_inputs, bool(switches), fn, written)
        if output.checks_in_graph and (on_error is None or on_error.rerun is None):
            raise Unsupported(
                "check_not_rerunnable",
                "a torch._check_tensor_all in a graph that cannot rerun as Python if it fails",
            )
        if output.side_effects.draws.draws and (on_error is None or on_error.rerun is None):
            output.side_effects.draws.settle_on_error(output.count_calls())
            if output.side_effects.draws.saved_after is not None:
                on_error = on_error or OnGraphError(None, None)  # restore, then re-raise
        if output.ops_in_try and (on_error is None or on_error.rerun is None):
            raise Unsupported(
                "op_in_try_not_rerunnable",
                "an op under a try block, in a graph that cannot rerun as Python if it fails "
                "(it writes into an input or draws random numbers): its error would miss "
                "the handler",
            )
    # The code first: if a live value cannot be rebuilt (Unsupported), the graph is
    # dropped before any backend saw it, so every graph a backend gets is one that runs.
    with timed("codegen"):
        code = transformed_code(
            fn.__code__, pending, inputs, {t.node: i for i, t in enumerate(outputs)},
            output.side_effects, tail, on_error,
        )
    if gm is not None:
        if logs.enabled("graph_code"):
            logs.get_logger("graph_code").info(
                "graph of %s:\n%s", fn.__qualname__, gm.print_readable(print_output=False)
            )
        with timed("backend"):
            compiled = _call_backend(backend, gm, inputs, output.shapes)
        compiled = keep_leaf_flags(compiled, outputs)
        code = code.replace(co_consts=tuple(
            compiled if const is pending else const for const in code.co_consts
        ))
    if logs.enabled("output_code"):
        logs.get_logger("output_code").info(
            "transformed code of %s:\n%s", fn.__qualname__, dis.Bytecode(code).dis()
        )
    graphs = (gm,) if gm is not None else ()
    return _entry(fn, output, _function_like(fn, code), graphs, breaks)


def _call_backend(
    backend: Backend, gm: Any, inputs: list[Any], shapes: ShapeSession | None
) -> Callable[..., Any]:
    """The backend on real example inputs; a dynamic graph gets the fake ones, whose
    symbols make backends that trace again (AOTAutograd, Inductor) size-generic.
    Inside a DDP forward, the graph is cut at DDP's buckets (graph/ddp.py)."""
    backend = wrap_for_ddp(backend)
    if shapes is None:
        examples = [i.example for i in inputs]
        if needs_shape_env(gm):
            with static_fake_inputs(examples) as fakes:
                return call_backend(backend, gm, fakes)
        return call_backend(backend, gm, examples)
    with shapes.backend_context():
        return call_backend(backend, gm, [i.fake for i in inputs])


def _raise_tail(
    tx: InstructionTranslator, exc: ExceptionInstanceVariable
) -> Callable[[PyCodegen], None]:
    raised = raised_in_trace(tx.output.side_effects, exc)
    keep_context = raised is not None and not raised.context_unknown
    return emit_raise(exc, tx.raise_line, keep_context)


def _after_setting_grad_mode(
    mode: bool, tail: Callable[[PyCodegen], None]
) -> Callable[[PyCodegen], None]:
    def emit(codegen: PyCodegen) -> None:
        codegen.set_grad_mode(mode)
        tail(codegen)

    return emit


class _PendingGraph:
    """Stands in the generated code's constants for the graph the backend has yet to compile."""


def _entry(
    fn: types.FunctionType,
    output: OutputGraph,
    run: Callable[..., Any],
    graphs: tuple = (),
    breaks: tuple[Unsupported, ...] = (),
) -> CacheEntry:
    if output.shapes is not None:
        output.shapes.add_guards(output)
    with timed("guards"):
        guard = build_guard_function(
            list(output.guards.values()), fn, output.uses_default_device
        )
    if logs.enabled("guards"):
        logs.get_logger("guards").info("guards of %s:\n%s", fn.__qualname__, guard)
    tensor_inputs = tuple(
        (g.source, g.expected.shape) for g in output.guards.values()
        if g.kind is GuardKind.TENSOR_MATCH
    )
    int_inputs = tuple(
        g.source for g in output.guards.values()
        if g.kind is GuardKind.CONSTANT_MATCH and type(g.expected) is int
    )
    entry = CacheEntry(
        guard, run, graphs, _detached(breaks), tensor_inputs=tensor_inputs, int_inputs=int_inputs
    )
    events.ENTRY_MADE.publish(fn, entry, output)  # the dump writes it out
    return entry


def _detached(breaks: tuple[Unsupported, ...]) -> tuple[Unsupported, ...]:
    """The break reasons without tracebacks, their chains' included. A traceback's frames
    reach, through ``f_back``, the user frames that called the compiler, and a cache entry
    lives as long as the function: it would keep their locals alive (a generator's
    ``finally`` never running, tensors never freed)."""
    work: list[BaseException | None] = list(breaks)
    seen: set[int] = set()
    while work:
        error = work.pop()
        if error is not None and id(error) not in seen:
            seen.add(id(error))
            error.__traceback__ = None
            work += [error.__cause__, error.__context__]
    return breaks


def _function_like(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    """A function running ``code`` with ``fn``'s globals, defaults and closure."""
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new
