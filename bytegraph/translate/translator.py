"""InstructionTranslator: the symbolic interpreter for one frame.

State mirrors CPython's frame: ``symbolic_locals`` (name -> VT), ``stack``
(VTs), ``instruction_pointer`` (index of the next instruction). ``step()``
is one indexed call through the class's dispatch table; ``run()`` steps
until a RETURN_VALUE sets the pointer to None. A raise in the trace reaches
``handle_raise``, which jumps to the handler the exception table names
(``translate/ops/exceptions.py`` walks the whole mechanism).
"""

from __future__ import annotations

import builtins
import linecache
import logging
import types
from typing import Any

from bytegraph import logs
from bytegraph.bytecode.instructions import Instruction, decode
from bytegraph.exc import Unsupported, UserFrame
from bytegraph.graph.output_graph import OutputGraph
from bytegraph.translate import ops  # noqa: F401  (registers every handler)
from bytegraph.translate.registry import Handler, build_dispatch_table
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.exceptions import (
    ExceptionInstanceVariable,
    ObservedRaise,
    OuterExceptionVariable,
)


class BytecodeDispatchTableMeta(type):
    """Builds, once per class, the 256-entry opcode -> handler table."""

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> None:
        super().__init__(name, bases, namespace)
        cls.dispatch_table = build_dispatch_table(cls)


class InstructionTranslatorBase(metaclass=BytecodeDispatchTableMeta):
    dispatch_table: list[Handler]

    def __init__(
        self,
        code: types.CodeType,
        symbolic_locals: dict[str, VariableTracker],
        f_globals: dict[str, Any],
        cells: dict[str, VariableTracker],
        output: OutputGraph,
        inline_depth: int = 0,
        frame_values: dict[str, Any] | None = None,
    ) -> None:
        self.code = code
        self.decoded = decode(code)
        self.instructions: tuple[Instruction, ...] = self.decoded.instructions
        self.symbolic_locals = symbolic_locals
        self.f_globals = f_globals
        self.f_builtins: dict[str, Any] = f_globals.get("__builtins__", builtins.__dict__)
        if isinstance(self.f_builtins, types.ModuleType):
            self.f_builtins = self.f_builtins.__dict__
        # Free variables' cells now; cell variables are added by MAKE_CELL.
        self.cells = dict(cells)
        self.output = output
        self.inline_depth = inline_depth
        self.stack: list[VariableTracker] = []
        self.instruction_pointer: int | None = 0
        self.current_inst: Instruction | None = None
        self.kw_names: tuple[str, ...] = ()
        self.return_value: VariableTracker | None = None
        # Real values of locals not yet read: wrapped (and guarded) on first LOAD_FAST.
        self.frame_values: dict[str, Any] = frame_values or {}
        # The exception being handled (CPython's exc_info): the root's, and each
        # generator frame's own (translate/ops/exceptions.py stacks them).
        self.handled_exception: VariableTracker = OuterExceptionVariable()
        # Generator frames running now, outermost first (their own exc_info stacks over
        # the root's); only the root's list is used.
        self.running_generators: list[InstructionTranslatorBase] = []

    def realize_local(self, name: str) -> VariableTracker:
        """The VT of an argument on its first read; guards only what is used."""
        from bytegraph.guards.sources import LocalSource
        from bytegraph.variables.builder import wrap

        if name not in self.frame_values:
            raise Unsupported("unbound_name", f"local {name!r} read before assignment")
        vt = self.symbolic_locals[name] = wrap(self, self.frame_values[name], LocalSource(name))
        return vt

    # -- the loop ---------------------------------------------------------
    def step(self) -> bool:
        inst = self.instructions[self.instruction_pointer]
        self.current_inst = inst
        self.instruction_pointer += 1
        try:
            self.dispatch_table[inst.opcode](self, inst)
        except ObservedRaise as error:
            # Its traceback is of no use, and it would keep the translator's frames alive,
            # cycles included (a frame holding the exception in a local, generators.py's
            # ``left``), and through their f_back the user frame that routed this call.
            error.__traceback__ = None
            self.handle_raise(error)
        return self.instruction_pointer is not None

    def handle_raise(self, error: ObservedRaise) -> None:
        """Unwind to the handler covering the current instruction, as CPython does."""
        inst = self.current_inst
        if error.vetted is not self:
            raise Unsupported(
                "protocol_exception",
                f"{error.exc.exc_type.__name__} raised where a protocol may catch it",
            )
        entry = self.decoded.handler_for(inst.index)
        if entry is None:
            self.uncaught(error)
            return
        del self.stack[entry.depth:]
        if entry.lasti:
            self.push(ConstantVariable(inst.offset // 2))
        self.push(error.exc)
        self.jump(entry.target)

    def uncaught(self, error: ObservedRaise) -> None:
        """The exception leaves this frame (an inlined frame's caller handles it)."""
        error.vetted = None
        raise error

    def run(self) -> None:
        try:
            if logs.enabled("bytecode"):
                self._run_logged()
            else:
                while self.step():
                    pass
        except Unsupported as e:
            raise e.with_frames(self.frames()) from e.__cause__

    def _run_logged(self) -> None:
        logger = logs.get_logger("bytecode")
        with_stack = logger.isEnabledFor(logging.DEBUG)
        depth = "  " * self.inline_depth
        while True:
            inst = self.instructions[self.instruction_pointer]
            stack = f"  stack={self.stack}" if with_stack else ""
            logger.info("%s%s %d %s %s%s", depth, self.code.co_name, inst.offset,
                        inst.opname, "" if inst.arg is None else inst.argval, stack)
            if not self.step():
                return

    # -- stack helpers ----------------------------------------------------
    def push(self, vt: VariableTracker) -> None:
        self.stack.append(vt)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def jump(self, target: int) -> None:
        self.instruction_pointer = target

    # -- reporting --------------------------------------------------------
    def frames(self) -> tuple[UserFrame, ...]:
        """The user's frame at the current instruction (callers follow, if inlined)."""
        lineno = self.current_inst.lineno if self.current_inst else self.code.co_firstlineno
        filename = self.code.co_filename
        text = linecache.getline(filename, lineno or 0).strip()
        return (UserFrame(filename, lineno, self.code.co_name, text),)


class InstructionTranslator(InstructionTranslatorBase):
    """The translator of the frame handed to ``compile`` (or a resume function).

    ``break_at`` is the step at which a previous attempt hit something
    unsupported: this attempt stops just before it and plans a graph break.
    ``break_loop`` (header, last index) instead stops when the trace first
    reaches that loop's header, to run the whole loop in Python.
    """

    def __init__(
        self,
        *args: Any,
        break_at: int | None = None,
        break_loop: tuple[int, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.break_at = break_at
        self.break_loop = break_loop
        self.loop_header = break_loop[0] if break_loop else None
        self.steps = 0
        self.break_plan: Any = None
        self.escaped: ExceptionInstanceVariable | None = None  # what left the frame, if any
        self.raise_line: int | None = None  # the user's line of the last raise seen here

    def step(self) -> bool:
        if self.steps == self.break_at or self.instruction_pointer == self.loop_header:
            from bytegraph.translate.resume import plan_break, plan_loop_break

            inst = self.instructions[self.instruction_pointer]
            self.current_inst = inst
            if self.break_loop is not None:
                self.break_plan = plan_loop_break(self, self.break_loop)
            else:
                self.break_plan = plan_break(self, inst)
            return False
        self.steps += 1
        return super().step()

    def handle_raise(self, error: ObservedRaise) -> None:
        if self.current_inst.opname != "RERAISE":  # a handler's cleanup keeps the line
            self.raise_line = self.current_inst.lineno
        super().handle_raise(error)

    def uncaught(self, error: ObservedRaise) -> None:
        """Leaving the compiled frame: the trace ends here, as at a return, and the
        transformed code raises the exception (escapes.py) at ``raise_line``."""
        self.escaped = error.exc
        self.instruction_pointer = None

    def run(self) -> None:
        try:
            super().run()
        except Unsupported as e:
            e.step = self.steps - 1  # the step whose instruction could not be traced
            e.index = self.current_inst.index if self.current_inst else None
            raise


class InliningInstructionTranslator(InstructionTranslatorBase):
    """Runs an inlined callee's code inside its caller's trace."""

    def __init__(
        self,
        *args: Any,
        parent: InstructionTranslatorBase,
        is_generator: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.parent = parent
        self.is_generator = is_generator
        self.yielded: list[VariableTracker] = []

    def frames(self) -> tuple[UserFrame, ...]:
        """This frame, then the chain of callers that inlined it."""
        return super().frames() + self.parent.frames()
