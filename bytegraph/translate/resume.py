"""Graph breaks: compile what came before, run a piece in Python, resume.

When the translator meets something it cannot trace at instruction ``i`` of
the frame being compiled, translation restarts and stops just before the
piece that must run in Python: instruction ``i`` itself (with a store or pop
of its result that follows), the whole call when ``i`` is a method load,
or the outermost loop around ``i``. The transformed code then

1. calls the graph built so far,
2. materialises the live locals into their real slots and the symbolic stack
   into temporaries, then replays pending side effects,
3. returns ``part(*stack, *locals)``: the *Python part*, the original code
   entered at the piece's first instruction with the stack rebuilt from its
   arguments (a call of a user function whose body broke calls a compiled
   wrapper of it instead, so the callee's tensor work is still captured).
   At each exit of the piece (the next instruction, a jump target, a loop's
   exits) a stub returns ``resume(*stack, *live_locals)``.

The Python part runs in the original instructions and exception table, so
a with-block around it exits if it raises, and an exception that leaves it
goes on as Python to the end of the code, as in eager. A resume function is
the original code with the same kind of prologue, jumping to an exit; it is
itself a compiled entry point with its own guards and cache, generated once
per (code, exit, stack layout, locals). A bound method waiting on the stack
crosses as its receiver and is bound again in the prologue. A break inside a
try block works the same way: the Python part and the resume function run
under the original exception table, and a graph under a try block reruns as
Python if it fails (``convert`` refuses one that cannot). A frame's cell
variables cross as arguments too: the entered code declares each as an
argument that is also a cell, and the skipped MAKE_CELL leaves the cell
passed in its slot, so closures made before the break and the code after it
share every write. Breaks are refused, and the frame runs as plain Python,
inside an except or finally block while it handles an exception, or in a
frame that is itself a generator.

Code run as Python on the user's behalf (the Python part, a loop region, a
whole frame that cannot break: ``convert._python_run``) has its call sites
routed (``routing.py``): a user function, method or nn.Module it calls is
compiled at the call, with its own entries and guards, as a frame hook would
compile it. Resume functions, which are traced, are never routed.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import sysconfig
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.bytecode import assemble, compat, encode
from bytegraph.bytecode.instructions import Instruction, decode
from bytegraph.bytecode.stack_effects import loads_method, locals_written
from bytegraph.exc import InternalError, Unsupported
from bytegraph.translate.regions import (
    absorbed_after,
    deleted_in,
    exit_depths,
    instruction_exits,
    live_locals,
    refuse_reason,
)
from bytegraph.translate.routing import CallSite, call_sites, instr_positions, rewrite_sites
from bytegraph.variables.base import NullVariable, VariableTracker
from bytegraph.variables.exceptions import OuterExceptionVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslator

_FLAGS_DROPPED = (
    bc.CompilerFlags.VARARGS | bc.CompilerFlags.VARKEYWORDS | bc.CompilerFlags.GENERATOR
    | bc.CompilerFlags.COROUTINE | bc.CompilerFlags.ASYNC_GENERATOR
)
@dataclasses.dataclass(frozen=True, slots=True)
class ResumeSpec:
    """What identifies a resume function: where it continues and what it receives."""

    base_code: types.CodeType
    target: int  # instruction index in base_code
    stack_nulls: tuple[bool, ...]  # per stack slot, bottom first: True where it is a NULL
    local_names: tuple[str, ...]
    # per stack slot: the name of a method the slot's argument (its receiver) is bound to
    stack_methods: tuple[str | None, ...] = ()


@dataclasses.dataclass(frozen=True)
class FrameContext:
    """What a break needs from the compiled function it happens in."""

    fn: types.FunctionType
    compile_function: Callable[[types.FunctionType], Any]
    resume_cache: dict[ResumeSpec, Any]
    callee_cache: dict[types.FunctionType, Any]
    # The router that calls made by code run as Python go through (routing.py), if any.
    route: Callable[[Any], Any] | None = None

    def resume_function(self, spec: ResumeSpec) -> Any:
        compiled = self.resume_cache.get(spec)
        if compiled is None:
            code = build_resume_code(spec)
            fn = types.FunctionType(
                code, self.fn.__globals__, code.co_name, None, self.fn.__closure__
            )
            compiled = self.resume_cache[spec] = self.compile_function(fn)
        return compiled

    def compiled_callee(self, fn: types.FunctionType) -> Any:
        compiled = self.callee_cache.get(fn)
        if compiled is None:
            compiled = self.callee_cache[fn] = self.compile_function(fn)
        return compiled


# resume code -> (base code, per instruction of the resume code, EXTENDED_ARG prefixes not
# counted (the assembler may need more or fewer than the base), the base instruction it
# is, or -1 for the prologue's)
_origins: dict[types.CodeType, tuple[types.CodeType, tuple[int, ...]]] = {}


def is_entered_code(code: types.CodeType) -> bool:
    """Whether ``code`` is a resume function's (``build_resume_code``)."""
    return code in _origins


def received_cells(code: types.CodeType) -> tuple[str, ...]:
    """The cell variables a resume function receives as arguments (``_entered_code``)."""
    return code.co_cellvars if code in _origins else ()


def base_position(code: types.CodeType, index: int) -> tuple[types.CodeType, int]:
    """Map an instruction of a resume function back to the original code."""
    origin = _origins.get(code)
    if origin is None:
        return code, index
    base, positions = origin
    return base, positions[_real_index(code, index)]


def _real_index(code: types.CodeType, index: int) -> int:
    """``index`` among the instructions of ``code`` that are no EXTENDED_ARG."""
    instructions = decode(code).instructions
    return index - sum(inst.opname == "EXTENDED_ARG" for inst in instructions[:index])



def build_resume_code(spec: ResumeSpec) -> types.CodeType:
    base = spec.base_code
    concrete, positions = _entered_code(
        base, spec.target, spec.stack_nulls, spec.stack_methods, spec.local_names, {},
        f"{base.co_qualname}.<resume at {spec.target}>",
    )
    _origins[concrete] = (base, positions)
    return concrete


def build_generator_code(spec: ResumeSpec) -> types.CodeType:
    """A generator function's code entered after one of its yields (``spec.target``):
    calling it makes a generator that, once started, runs the rest of the original
    body from there (``variables/paused_generators.py``)."""
    concrete, positions = _entered_code(
        spec.base_code, spec.target, spec.stack_nulls, spec.stack_methods, spec.local_names,
        {}, f"{spec.base_code.co_qualname}.<paused at {spec.target}>", generator=True,
    )
    _origins[concrete] = (spec.base_code, positions)
    return concrete


def _entered_code(
    base: types.CodeType,
    target: int,
    stack_nulls: tuple[bool, ...],
    stack_methods: tuple[str | None, ...],
    local_names: tuple[str, ...],
    stubs: dict[int, list[Any]],
    qualname: str,
    route: Callable[[Any], Any] | None = None,
    generator: bool = False,
) -> tuple[types.CodeType, tuple[int, ...]]:
    """``base`` entered at instruction ``target`` with the stack rebuilt from arguments,
    and per instruction of it the base instruction it is (-1: the prologue's or a stub's).

    The arguments are the stack (``___stack<i>``, NULLs pushed by the prologue,
    methods bound again to their receivers), then ``local_names``. Before
    each instruction of ``stubs``, its stub runs instead. Every instruction
    and exception-table entry is ``base``'s own, depths included: the
    prologue jumps into the middle of ranges that no flow from the entry
    opens, so depths computed from the flow would be wrong. With ``route``,
    the call sites the code runs are routed (``routing.py``; never in code
    that is traced).
    """
    body = list(bc.Bytecode.from_code(base))
    base_index = {
        id(body[position]): index for index, position in instr_positions(decode(base), body).items()
    }
    _set_try_depths(base, body)
    routed = _routed_sites(base, body, target, stubs) if route is not None else []
    label = bc.Label()
    inserts = [(_abstract_index(base, body, index), stub) for index, stub in stubs.items()]
    inserts.append((_abstract_index(base, body, target), [label]))
    for position, items in sorted(inserts, key=lambda p: p[0], reverse=True):
        opened = _open_try(body, position)
        if opened is not None:
            position, items = _split_try(body, position, opened, items)
        body[position:position] = items
    rewrite_sites(body, routed, route)
    prologue: list[Any] = assemble.prologue(base, generator)
    methods = stack_methods or (None,) * len(stack_nulls)
    for i, (is_null, method) in enumerate(zip(stack_nulls, methods)):
        load = bc.Instr("PUSH_NULL") if is_null else bc.Instr("LOAD_FAST", f"___stack{i}")
        prologue.append(load)
        if method is not None:
            prologue.append(assemble.load_attr(method))
    prologue.append(bc.Instr("JUMP_FORWARD", label))
    body = _split_fused_locals(body, base_index)
    code = bc.Bytecode(prologue + body)
    # The user's name, so tracebacks and break reports read as the original function.
    code.name = base.co_name
    if hasattr(code, "qualname"):
        code.qualname = qualname
    code.filename = base.co_filename
    code.first_lineno = base.co_firstlineno
    code.argnames = [f"___stack{i}" for i, n in enumerate(stack_nulls) if not n]
    code.argnames += list(local_names)
    code.argcount = len(code.argnames)
    # A cell variable is an argument too: its slot receives the frame's cell, and the
    # skipped MAKE_CELL leaves it there, so LOAD_DEREF/STORE_DEREF/LOAD_CLOSURE use it.
    missing = set(base.co_cellvars) - set(local_names)
    if missing:
        raise InternalError(f"cells {sorted(missing)} of {base.co_qualname} not passed on")
    code.cellvars = list(base.co_cellvars)
    code.freevars = list(base.co_freevars)
    dropped = _FLAGS_DROPPED & ~bc.CompilerFlags.GENERATOR if generator else _FLAGS_DROPPED
    code.flags = bc.CompilerFlags(base.co_flags) & ~dropped
    # The frame's stack size is given, not computed: ``bytecode`` follows the flow
    # from the prologue, which enters try ranges in the middle; it underestimated
    # (a frame too small for a handler's stack corrupts memory) or failed outright
    # ("negative size"). Every base instruction keeps its base depth, so the base
    # code's own size bounds it, plus what a stub pushes and a routed call's one slot.
    stub = max((len(items) for items in stubs.values()), default=0)
    concrete = encode.to_code(
        code, stacksize=base.co_stacksize + stub + 1, compute_exception_stack_depths=False
    )
    positions = tuple(base_index.get(id(item), -1) for item in code if isinstance(item, bc.Instr))
    return concrete, positions


_FUSED = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def _split_fused_locals(body: list[Any], base_index: dict[int, int]) -> list[Any]:
    """3.13's fused pairs of local loads and stores as two instructions each.

    Each of the pair's locals is 4 bits of the oparg; the entered code's arguments
    (the stack first) move locals to higher numbers, where a pair cannot name them.
    Both halves stand for the fused base instruction.
    """
    split: list[Any] = []
    for item in body:
        names = _FUSED.get(item.name) if isinstance(item, bc.Instr) else None
        if names is None:
            split.append(item)
            continue
        halves = [bc.Instr(op, arg, location=item.location) for op, arg in zip(names, item.arg)]
        for half in halves:
            base_index[id(half)] = base_index.get(id(item), -1)
        split += halves
    return split


def _routed_sites(
    base: types.CodeType, body: list[Any], target: int, stubs: dict[int, list[Any]]
) -> list[tuple[CallSite, bc.Instr]]:
    """The call sites of ``base`` to route in its entered code, each with its Instr.

    A site is left alone if the entry or an exit stub lies between the
    callable's load and its call: the value would then cross the
    boundary (into a resume function, as a stack argument) already routed.
    """
    positions = instr_positions(decode(base), body)
    edges = {target, *stubs}
    return [
        (site, body[positions[site.producer]]) for site in call_sites(base)
        if not any(site.producer < edge <= max(site.calls) for edge in edges)
    ]


def _set_try_depths(base: types.CodeType, body: list[Any]) -> None:
    """Give each TryBegin of ``body`` the stack depth of its entry in ``base``'s table.

    ``bytecode`` leaves them unset when decoding and computes them from the
    flow when assembling, which cannot see ranges only reached by a jump into
    their middle.
    """
    decoded = decode(base)
    real = [inst.index for inst in decoded.instructions if inst.opname != "EXTENDED_ARG"]
    depths = {(e.start, e.target): e.depth for e in decoded.exception_table}
    at_label: dict[bc.Label, int] = {}
    pending: list[bc.Label] = []
    count = 0
    for item in body:
        if isinstance(item, bc.Label):
            pending.append(item)
        elif isinstance(item, bc.Instr):
            at_label.update((label, real[count]) for label in pending)
            pending.clear()
            count += 1
    count = 0
    for item in body:
        if isinstance(item, bc.Instr):
            count += 1
        elif isinstance(item, bc.TryBegin):
            start = real[count] if count < len(real) else len(decoded.instructions)
            target = at_label.get(item.target)
            depth = depths.get((start, target))
            # A range may start at the EXTENDED_ARG before its first instruction.
            while depth is None and start > 0 and (
                decoded.instructions[start - 1].opname == "EXTENDED_ARG"
            ):
                start -= 1
                depth = depths.get((start, target))
            if depth is None:
                raise Unsupported("break_impossible", "an exception-table entry not found")
            item.stack_depth = depth


def _abstract_index(base: types.CodeType, body: list[Any], index: int) -> int:
    """Position in ``body`` (bytecode's abstract list) of decoded instruction ``index``."""
    decoded = decode(base).instructions
    wanted = sum(1 for inst in decoded[:index] if inst.opname != "EXTENDED_ARG")
    seen = 0
    for position, item in enumerate(body):
        if isinstance(item, bc.Instr):
            if seen == wanted:
                return position
            seen += 1
    raise Unsupported("break_impossible", f"resume target {index} not found")


# -- the code a break emits -----------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BreakPlan:
    """Everything the transformed code needs to run ``inst`` in Python and resume."""

    inst: Instruction
    stack: tuple[VariableTracker, ...]
    locals: dict[str, VariableTracker | None]  # None: an argument never read, still in its slot
    exits: tuple[tuple[bc.Label | None, int, tuple[bool, ...]], ...]  # (label, index, nulls)
    callee_slot: int | None  # stack slot of a user function to call compiled
    live: dict[int, tuple[str, ...]]  # exit index -> bound locals read from there on
    region: tuple[int, int] | None = None  # a loop run in Python: first and last index
    entry_live: tuple[str, ...] = ()  # bound locals the region itself may read
    # Stack slots holding a bound method the Python part leaves in place: slot -> (receiver,
    # method name). The method crosses into resume functions as its receiver.
    methods: dict[int, tuple[VariableTracker, str]] = dataclasses.field(default_factory=dict)

    def needed_locals(self) -> list[str]:
        """Bound locals that code run after the graph may read."""
        names = set(self.entry_live).union(*self.live.values())
        return sorted(n for n in names if n in self.locals)


def plan_break(tx: InstructionTranslator, inst: Instruction) -> BreakPlan:
    """Check that a break before ``inst`` is safe and work out its exits."""
    _check_breakable(tx, inst.index)
    stack = tuple(tx.stack)
    nulls = tuple(isinstance(v, NullVariable) for v in stack)
    exits = []
    for label, target, (pops, pushed) in instruction_exits(inst):
        if pops > len(stack):
            raise Unsupported("break_impossible", f"{inst.opname} pops below the stack")
        exits.append((label, target, nulls[: len(stack) - pops] + pushed))
    bound = _bound(tx)
    absorbed: tuple[Instruction, ...] = ()
    stored: set[str] = set()  # bound by the absorbed stores, in the Python part
    if len(exits) == 1 and exits[0][0] is None:
        _, target, layout = exits[0]
        absorbed = absorbed_after(tx.instructions, target, layout)
        stored = {i.argval for i in absorbed if i.opname == "STORE_FAST"}
        exits = [(None, target + len(absorbed), layout[: len(layout) - len(absorbed)])]
    live = {target: _reads(tx, target, set(bound) | stored) for _, target, _ in exits}
    # What the part may read, exception paths included (a with-block that swallows
    # the exception goes on as Python from its end).
    entry_live = _reads(tx, inst.index, set(bound))
    callee = _callee_slot(inst, stack)
    pops = max((pops for _, _, (pops, _) in instruction_exits(inst)), default=len(stack))
    kept = len(stack) - pops
    return BreakPlan(
        inst, stack, bound, tuple(exits), callee, live, entry_live=entry_live,
        methods=_method_slots(tx, stack[: max(kept, 0)], callee),
    )


def plan_loop_break(tx: InstructionTranslator, loop: tuple[int, int]) -> BreakPlan:
    """Run the loop ``loop`` in Python: the graph ends at its header.

    (A call region from ``call_region`` is planned the same way: a stretch of
    code, entered at its first instruction, that runs as Python.)

    Each exit of the loop resumes in a compiled function, unless a local that
    is read after the loop might be unbound there (assigned only inside the
    loop): then everything from the header on runs as Python, where
    boundness is exact.
    """
    decoded = tx.decoded
    start, end = loop
    _check_breakable(tx, start)
    stack = tuple(tx.stack)
    nulls = tuple(isinstance(v, NullVariable) for v in stack)
    bound = _bound(tx)
    region = decoded.instructions[start : end + 1]
    assigned = {name for i in region for name in locals_written(i.opname, i.argval)}
    maybe_unbound = assigned - {n for n in bound if n not in deleted_in(region)}
    if all(i.target is None for i in region):  # straight line: every store happens
        maybe_unbound = deleted_in(region)
    depths = exit_depths(decoded, start, end, len(stack))
    exits, live = [], {}
    for target, depth in depths.items():
        names = live_locals(tx.code, target) & (set(bound) | assigned)
        if names & maybe_unbound:
            return _tail_plan(tx, start, stack, bound)
        layout = nulls[:depth] + (False,) * max(0, depth - len(nulls))
        exits.append((bc.Label(), target, layout))
        live[target] = _reads(tx, target, names)
    entry_live = _reads(tx, start, set(bound))
    # A loop never pops below the stack it starts on; a call region pops its receiver.
    first = decoded.instructions[start]
    kept = len(stack) - loads_method(first.opname, first.arg)
    return BreakPlan(
        decoded.instructions[start], stack, bound, tuple(exits), None, live, (start, end),
        entry_live, methods=_method_slots(tx, stack[:kept], None),
    )


def _bound(tx: InstructionTranslator) -> dict[str, VariableTracker | None]:
    """The frame's bound locals (None: an argument never read, still in its slot), and
    its cell variables (CellVariable): cells cross into the Python part and resume
    functions as arguments, so they share them with the closures made before."""
    bound: dict[str, VariableTracker | None] = dict(tx.symbolic_locals)
    bound.update({name: None for name in tx.frame_values if name not in bound})
    bound.update({name: tx.cells[name] for name in _cell_names(tx)})
    return bound


def _cell_names(tx: InstructionTranslator) -> set[str]:
    return {name for name in tx.code.co_cellvars if name in tx.cells}


def _reads(tx: InstructionTranslator, index: int, candidates: set[str]) -> tuple[str, ...]:
    """The locals code from ``index`` on may read, of ``candidates``, and every cell
    variable: its slot must hold the cell whatever path runs (``_entered_code``)."""
    return tuple(sorted((live_locals(tx.code, index) & candidates) | _cell_names(tx)))


def _check_breakable(tx: InstructionTranslator, index: int) -> None:
    """Unsupported where a break at ``index`` is unsafe (regions.refuse_reason), or
    inside an except/finally block running: the resume function would not be
    handling that exception (``sys.exc_info()``, a bare ``raise``)."""
    from bytegraph.translate.ops.exceptions import exc_info

    reason = refuse_reason(tx.decoded, index)
    if base_position(tx.code, index)[1] < 0:
        # No place in the original code: the prologue of a resume function, binding a
        # method again to its receiver (``send`` of a generator the trace cannot model).
        reason = "in the prologue of a resume function, which rebuilds its stack"
    if reason is None and not isinstance(exc_info(tx), OuterExceptionVariable):
        reason = "inside an except or finally block while it handles an exception"
    if reason is not None:
        raise Unsupported("break_impossible", f"cannot break the graph here: {reason}")


def _tail_plan(
    tx: InstructionTranslator,
    start: int,
    stack: tuple[VariableTracker, ...],
    bound: dict[str, VariableTracker | None],
) -> BreakPlan:
    """Everything from ``start`` to the end of the code runs as Python."""
    entry_live = _reads(tx, start, set(bound))
    last = len(tx.instructions) - 1
    return BreakPlan(tx.instructions[start], stack, bound, (), None, {}, (start, last), entry_live)


def _callee_slot(inst: Instruction, stack: tuple[VariableTracker, ...]) -> int | None:
    """The slot of a user function, method or nn.Module called by ``inst`` (its body is
    what broke): the Python part calls its compiled wrapper instead (``emit_break``)."""
    from bytegraph.torch_markers import nonrecursive_target
    from bytegraph.variables.functions import MarkedFunctionVariable, UserFunctionVariable
    from bytegraph.variables.nn_module import NNModuleVariable
    from bytegraph.variables.user_defined import UserMethodVariable

    if inst.opname in ("CALL", "CALL_KW"):  # CALL_KW (3.13) has the names on top
        slot = len(stack) - inst.arg - 2 - (inst.opname == "CALL_KW")
        if compat.NULL_BEFORE_CALLABLE and isinstance(stack[slot], NullVariable):
            slot += 1
    elif inst.opname == "CALL_FUNCTION_EX":
        slot = len(stack) - 2 - (inst.arg & 1) - (not compat.NULL_BEFORE_CALLABLE)
    else:
        return None
    vt = stack[slot]
    if isinstance(vt, NNModuleVariable):
        return slot
    if isinstance(vt, UserMethodVariable):  # ``obj.method(...)``: the router binds its wrapper
        vt = vt.fn
        if isinstance(vt, UserFunctionVariable) and "__class__" in vt.fn.__code__.co_freevars:
            # Zero-argument super() reads the frame's first argument, which the parts of
            # a compiled method do not keep in place (3.12's LOAD_SUPER_ATTR): as it is.
            return None
    if isinstance(vt, MarkedFunctionVariable) and nonrecursive_target(vt.fn) is not None:
        return slot  # disable(recursive=False): the router runs it, its calls routed
    if not isinstance(vt, UserFunctionVariable) or _is_standard_library(vt.fn.__code__.co_filename):
        return None
    if not vt.by_identity:  # a compiled wrapper is made for one function object
        return None
    return slot


@functools.cache
def _is_standard_library(filename: str) -> bool:
    """Whether ``filename`` is a module of Python's standard library.

    A standard-library function whose body broke runs as is rather than as a
    compiled callee: it does no tensor work worth a graph, and some of it
    looks at its callers' frames (logging's findCaller, ``stacklevel``),
    which a compiled callee's extra dispatch frame would shift.
    """
    paths = sysconfig.get_paths()
    name = os.path.abspath(filename)
    packages = [os.path.join(paths[key], "") for key in ("purelib", "platlib")]
    return (
        name.startswith(os.path.join(paths["stdlib"], ""))
        and not any(name.startswith(p) for p in packages)
        and not {"site-packages", "dist-packages"} & set(name.split(os.sep))
    )


def _method_slots(
    tx: InstructionTranslator, kept: tuple[VariableTracker, ...], callee: int | None
) -> dict[int, tuple[VariableTracker, str]]:
    """Slots of ``kept`` (left in place by the Python part) that hold a bound method.

    A bound method object is made anew by every attribute access, so handed
    to a resume function as is, the guard on its identity would fail on every
    call. Its receiver crosses instead, and the resume function's prologue
    binds the method again (``receiver.name``), where the trace sees it as
    it saw it here.
    """
    slots = {}
    for i, vt in enumerate(kept):
        if i != callee:
            rebinding = _rebinding(tx, vt)
            if rebinding is not None:
                slots[i] = rebinding
    return slots


def _rebinding(
    tx: InstructionTranslator, vt: VariableTracker
) -> tuple[VariableTracker, str] | None:
    """(receiver, name) when ``receiver.name`` in Python gives the method ``vt`` stands for."""
    from bytegraph.variables.base import BoundMethodVariable

    if isinstance(vt, BoundMethodVariable):
        return vt.receiver, vt.name  # its own reconstruction is ``receiver.name``
    if type(vt).__name__ != "UserMethodVariable":
        return None
    receiver, function = vt.obj, getattr(vt.fn, "fn", None)
    if not isinstance(function, types.FunctionType):
        return None
    name = function.__name__
    try:
        on_class = inspect.getattr_static(receiver.python_type(), name, None)
    except Exception:  # noqa: BLE001  (a python_type() the VT cannot tell: no rebinding)
        return None
    if on_class is not function:
        return None
    # An instance attribute of the same name would win over the class's method.
    if name in tx.output.side_effects.pending_attrs(receiver):
        return None
    value = getattr(receiver, "value", None)
    if value is not None and name in getattr(value, "__dict__", {}):
        return None
    return receiver, name


def live_roots(plan: BreakPlan) -> list[VariableTracker]:
    """The VTs the generated code will rebuild (their tensors become graph outputs)."""
    roots = [
        plan.methods[i][0] if i in plan.methods else v
        for i, v in enumerate(plan.stack) if not isinstance(v, NullVariable)
    ]
    locals_ = (plan.locals[name] for name in plan.needed_locals())
    return roots + [vt for vt in locals_ if vt is not None]


def emit_break(
    tx: InstructionTranslator, plan: BreakPlan, ctx: FrameContext
) -> Callable[[PyCodegen], None]:
    """The tail of the transformed code for a break described by ``plan``."""

    def emit(codegen: PyCodegen) -> None:
        if plan.inst.lineno is not None:
            # What runs from here on is the user's line: tracebacks and code that
            # inspects its caller (logging's findCaller) see the line that broke.
            codegen.append(bc.SetLineno(plan.inst.lineno))
        # Rebuild every value first, replay, store afterwards: a store must not change
        # what a later rebuild or the replay reads through a source (``x, y = y, x``, or
        # ``lst.append(1); lst = []`` before the break: the append is the input's).
        targets = []
        for i, vt in enumerate(plan.stack):
            if isinstance(vt, NullVariable):
                continue
            if i == plan.callee_slot:
                _load_compiled_callee(codegen, vt, ctx)
            elif i in plan.methods:
                codegen(plan.methods[i][0])
            else:
                codegen(vt)
            # Not ``___stack<i>``: a resume function's own arguments have those names, and
            # the replay below may still load one of them through its source.
            targets.append(f"___break{i}")
        for name in plan.needed_locals():
            vt = plan.locals[name]
            if vt is not None and not _is_own_slot(vt, name):
                codegen(vt)
                targets.append(name)
        codegen.side_effects.replay_all(codegen)
        codegen.append(*(bc.Instr("STORE_FAST", t) for t in reversed(targets)))
        part = _python_part(tx, plan, ctx)
        args = [f"___break{i}" for i, v in enumerate(plan.stack) if not isinstance(v, NullVariable)]
        args += plan.needed_locals()
        codegen.load_callable(part)
        codegen.append(*(bc.Instr("LOAD_FAST", a) for a in args))
        codegen.append(*assemble.call(len(args)), bc.Instr("RETURN_VALUE"))

    return emit


def _load_compiled_callee(codegen: PyCodegen, vt: VariableTracker, ctx: FrameContext) -> None:
    """What the Python part calls in place of ``vt``: a function's compiled wrapper; for a
    module, what the router gives at run time (the caller of its class's compiled
    forward, or the module as it is when it has hooks or a forward of its own)."""
    from bytegraph.variables.functions import UserFunctionVariable

    if isinstance(vt, UserFunctionVariable):
        codegen.load_const(ctx.compiled_callee(vt.fn))
    elif ctx.route is not None:
        codegen.load_callable(ctx.route)
        codegen(vt)
        codegen.append(*assemble.call(1))
    else:
        codegen(vt)


def _python_part(tx: InstructionTranslator, plan: BreakPlan, ctx: FrameContext) -> Any:
    """The function that runs the Python part of a break, then returns a resume call.

    It is ``tx.code`` entered where the part starts, taking the stack and the
    locals the part and its exits read; at each exit a stub returns
    ``resume(*stack, *live_locals)``. Running in the original instructions,
    the part keeps every exception handler around it: a with-block's
    ``__exit__`` runs if it raises, a try inside a loop catches, and an
    exception that leaves it goes on as Python to the end of the code, as in
    eager.
    """
    stubs = {}
    for _, target, nulls in plan.exits:
        base, base_target = base_position(tx.code, target)
        methods = tuple(
            plan.methods[i][1] if i in plan.methods else None for i in range(len(nulls))
        )
        spec = ResumeSpec(base, base_target, nulls, plan.live[target], methods)
        stubs[target] = _resume_call(ctx.resume_function(spec), nulls, plan.live[target], methods)
    entry = _entry_index(tx, plan)
    nulls = tuple(isinstance(vt, NullVariable) for vt in plan.stack)
    methods = tuple(
        plan.methods[i][1] if i in plan.methods else None for i in range(len(plan.stack))
    )
    code, _ = _entered_code(
        tx.code, entry, nulls, methods, tuple(plan.needed_locals()), stubs,
        f"{tx.code.co_qualname}.<python at {entry}>", ctx.route,
    )
    fn = ctx.fn
    return types.FunctionType(code, fn.__globals__, code.co_name, None, fn.__closure__)


def _is_own_slot(vt: VariableTracker, name: str) -> bool:
    from bytegraph.guards.sources import LocalSource

    return vt.source == LocalSource(name)


def _entry_index(tx: InstructionTranslator, plan: BreakPlan) -> int:
    """Where the Python part starts: the region's first instruction, or the broken one.

    A CALL is entered at its KW_NAMES (and PRECALL), which set up the call.
    """
    if plan.region is not None:
        return plan.region[0]
    index = plan.inst.index
    for before in ("PRECALL", "KW_NAMES"):
        if index > 0 and tx.instructions[index - 1].opname == before:
            index -= 1
    return index


def _open_try(body: list[Any], position: int) -> bc.TryBegin | None:
    """The exception-table range that covers ``body[position]``, if any."""
    opened = None
    for item in body[:position]:
        if isinstance(item, bc.TryBegin):
            opened = item
        elif isinstance(item, bc.TryEnd) and item.entry is opened:
            opened = None
    return opened


def _split_try(
    body: list[Any], position: int, opened: bc.TryBegin, items: list[Any]
) -> tuple[int, list[Any]]:
    """Where and what to insert at ``position``, inside the range ``opened``.

    A stub is put in no range: the resume function it calls handles its own
    exceptions. The entry label starts a new copy of the range, so that the
    flow from the prologue's jump passes a TryBegin: ``bytecode`` sizes a
    handler's stack from the lowest depth seen since the TryBegin its flow
    passed, and a flow that never passed one gives it a depth from before
    the range (a negative size in nested with-blocks, or a stack too small).
    """
    start = next(i for i, item in enumerate(body) if item is opened)
    if all(isinstance(item, bc.SetLineno) for item in body[start + 1 : position]):
        return start, items  # the range starts right there: insert before its TryBegin
    reopened = bc.TryBegin(opened.target, opened.push_lasti, opened.stack_depth)
    _retarget_try_end(body, position, opened, reopened)
    return position, [bc.TryEnd(opened), *items, reopened]


def _retarget_try_end(
    body: list[Any], position: int, opened: bc.TryBegin, reopened: bc.TryBegin
) -> None:
    """Make the TryEnd that closes ``opened`` after ``position`` close ``reopened``."""
    for i in range(position, len(body)):
        item = body[i]
        if isinstance(item, bc.TryEnd) and item.entry is opened:
            body[i] = bc.TryEnd(reopened)
            return


def _resume_call(
    resume: Any, nulls: tuple[bool, ...], names: tuple[str, ...], methods: tuple[str | None, ...]
) -> list[Any]:
    """Move the stack into temporaries, then ``return resume(*stack, *locals)``.

    A slot holding a bound method passes its receiver, kept in ``___stack<i>``.
    """
    instrs: list[Any] = []
    for i in reversed(range(len(nulls))):
        if nulls[i]:
            instrs += assemble.discard_null()
        elif methods[i] is not None:
            instrs.append(bc.Instr("POP_TOP"))
        else:
            instrs.append(bc.Instr("STORE_FAST", f"___exit{i}"))
    args = [
        f"___stack{i}" if methods[i] is not None else f"___exit{i}"
        for i, null in enumerate(nulls) if not null
    ] + list(names)
    instrs += assemble.with_null([bc.Instr("LOAD_CONST", resume)])
    instrs += [bc.Instr("LOAD_FAST", a) for a in args]
    instrs += [*assemble.call(len(args)), bc.Instr("RETURN_VALUE")]
    return instrs
