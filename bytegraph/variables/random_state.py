"""Python's ``random`` module in the trace: its generators and the numbers they draw.

A generator is a ``GeneratorVariable``: the module's own (behind ``random.random``,
``random.randint``...), a ``random.Random`` handed to the frame, or one made in the
trace (``random.Random(3)``). What the trace knows of its state lives in SideEffects
as the generator's contents:

* **known** (a state tuple): a generator made in the trace with a constant seed, or
  any generator after ``seed(n)`` / ``setstate(state)`` in the trace. Every draw is
  made at trace time on a private copy, so the numbers are constants (the same on
  every call, as eager's are), and ``shuffle``/``choice``/``sample`` act on the
  trace's own lists. A pre-existing generator gets its final state back after the
  graph (``setstate``); a new one that escapes is rebuilt with its state.
* **unknown** (None): the state of the call. Draws of numbers (``random``,
  ``randint``, ``randrange``, ``uniform``, ``gauss``...) with constant arguments
  are made for real by the transformed code before the graph, in program order
  (``bytegraph/random_draws.py``); the trace gets a ``RandomValueVariable``.
  What would need its value now (a branch, an index, a shuffle) is a clean break.

A ``RandomValueVariable`` stays Python arithmetic with constants and other draws,
is rebuilt where it lives on (returned, stored, across a break), and enters the
graph as a 0-d tensor input only in ``+ - * /`` with a tensor whose result type is
the same as with a Python number (``x * random.random()``).
"""

from __future__ import annotations

import dataclasses
import operator
import random
import types
from typing import TYPE_CHECKING, Any

import bytecode as bc
import torch

from bytegraph.exc import Unsupported
from bytegraph.graph import metadata
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource
from bytegraph.random_draws import EXPR_OPERATORS, RandomValueSource, as_tensor
from bytegraph.side_effects import TOP_SCOPE
from bytegraph.variables.base import (
    AttributeMutationExisting,
    AttributeMutationNew,
    BoundMethodVariable,
    ValueMutationNew,
    VariableTracker,
)
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.guards.sources import Source
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# Draws of one number: made at run time when the state is unknown.
NUMBER_METHODS = frozenset({
    "random", "randint", "randrange", "uniform", "gauss", "normalvariate", "triangular",
    "expovariate", "betavariate", "gammavariate", "lognormvariate", "vonmisesvariate",
    "paretovariate", "weibullvariate", "getrandbits",
})
# Draws that act on a sequence: only on a known state.
SEQUENCE_METHODS = frozenset({"choice", "shuffle", "sample", "choices"})
STATE_METHODS = frozenset({"seed", "setstate", "getstate"})
METHODS = NUMBER_METHODS | SEQUENCE_METHODS | STATE_METHODS
_TENSOR_OPERATORS = {
    operator.add: "__radd__", operator.sub: "__rsub__", operator.mul: "__rmul__",
    operator.truediv: "__rtruediv__", operator.iadd: "__radd__", operator.isub: "__rsub__",
    operator.imul: "__rmul__", operator.itruediv: "__rtruediv__",
}


def _refuse(detail: str) -> Unsupported:
    return Unsupported("random_call", detail)


def is_plain_generator(value: Any) -> bool:
    """An exact ``random.Random`` whose methods are the class's own."""
    if type(value) is not random.Random:
        return False
    return not (set(vars(value)) - {"gauss_next"})


def _generator_method(value: Any) -> str | None:
    """The name of ``value`` if it is a modelled method bound to a plain generator."""
    if type(value) not in (types.MethodType, types.BuiltinMethodType):
        return None  # (never an attribute read on anything else: it may run user code)
    owner = value.__self__
    name = getattr(value, "__name__", None)
    if name not in METHODS or not is_plain_generator(owner):
        return None
    if isinstance(value, types.MethodType):
        return name if value.__func__ is getattr(random.Random, name) else None
    if isinstance(value, types.BuiltinMethodType):
        return name if value == getattr(random.Random, name).__get__(owner) else None
    return None


def wrap_random(tx: Tx, value: Any, source: Source) -> VariableTracker | None:
    """The VT of ``random.Random``, a plain generator, or a method bound to one."""
    guard = tx.output.add_guard
    if value is random.Random:
        guard(GuardKind.ID_MATCH, source, value)
        return RandomClassVariable(source=source)
    if is_plain_generator(value):  # (builder.wrap keeps one VT per generator object)
        guard(GuardKind.TYPE_MATCH, source, random.Random)
        return GeneratorVariable(value, source=source, mutation_type=AttributeMutationExisting(0))
    name = _generator_method(value)
    if name is None:
        return None
    guard(GuardKind.ID_MATCH, source, value)
    from bytegraph.variables.builder import wrap

    receiver = wrap(tx, value.__self__, AttrSource(source, "__self__"))
    return BoundMethodVariable(receiver, name, source=source)


def _constants(tx: Tx, args: list, kwargs: dict) -> tuple[tuple, dict]:
    from bytegraph.variables.containers import python_constant

    try:
        return (
            tuple(python_constant(tx, a) for a in args),
            {k: python_constant(tx, v) for k, v in kwargs.items()},
        )
    except Unsupported as e:
        raise _refuse(
            f"a random-module call with an argument that is not a constant: {e}"
        ) from None


def _copy(state: tuple) -> random.Random:
    rng = random.Random()
    rng.setstate(state)
    return rng


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RandomClassVariable(VariableTracker):
    """``random.Random``: called with a constant seed, a new generator of known state."""

    def python_type(self) -> type:
        return type

    def as_python_constant(self) -> Any:
        return random.Random

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        consts, const_kwargs = _constants(tx, args, kwargs)
        if not consts or consts[0] is None or const_kwargs:
            raise _refuse("random.Random() without a seed (seeded from the OS)")
        try:
            state = random.Random(*consts).getstate()
        except Exception as e:
            raise _refuse(f"random.Random{consts} raises {type(e).__name__}") from None
        return GeneratorVariable(None, state, mutation_type=AttributeMutationNew(TOP_SCOPE))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GeneratorVariable(VariableTracker):
    """A ``random.Random``: ``value`` the real one (None if made in the trace, then
    ``initial`` is its state when made). The state now is the SideEffects contents."""

    value: random.Random | None
    initial: tuple | None = None

    def python_type(self) -> type:
        return random.Random

    def state(self, tx: Tx) -> tuple | None:
        return tx.output.side_effects.contents(self, self.initial)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name not in METHODS:
            raise _refuse(f"attribute {name!r} of a random.Random")
        return BoundMethodVariable(self, name)

    def call_method(self, tx: Tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        side_effects = tx.output.side_effects
        if side_effects.scope > TOP_SCOPE:
            raise Unsupported(
                "side_effect_in_higher_order_body", f"random {name}() inside a higher-order op"
            )
        if name not in METHODS:
            raise _refuse(f"method {name!r} of a random.Random")
        state = self.state(tx)
        if name in SEQUENCE_METHODS:
            return self._sequence_call(tx, name, state, args, kwargs)
        consts, const_kwargs = _constants(tx, args, kwargs)
        if name in ("seed", "setstate"):
            return self._set_state(tx, name, consts, const_kwargs)
        if state is None:
            return self._draw_at_run_time(tx, name, consts, const_kwargs)
        rng = _copy(state)
        try:
            value = getattr(rng, name)(*consts, **const_kwargs)
        except Exception as e:
            raise _refuse(f"random {name}{consts} raises {type(e).__name__}") from None
        side_effects.set_contents(self, rng.getstate())
        from bytegraph.variables.builder import wrap_constant_result

        return wrap_constant_result(value)

    def _set_state(self, tx: Tx, name: str, consts: tuple, kwargs: dict) -> VariableTracker:
        if name == "seed" and (not consts or consts[0] is None):
            raise _refuse("random.seed() without a seed (seeded from the OS)")
        rng = random.Random()
        try:
            getattr(rng, name)(*consts, **kwargs)
        except Exception as e:
            raise _refuse(f"random {name}() raises {type(e).__name__}") from None
        tx.output.side_effects.set_contents(self, rng.getstate())
        return ConstantVariable(None)

    def _draw_at_run_time(self, tx: Tx, name: str, consts: tuple, kwargs: dict) -> VariableTracker:
        if name not in NUMBER_METHODS or self.value is None:
            raise _refuse(f"random {name}() of a generator whose state is known only at run time")
        plan = tx.output.side_effects.draws
        shadow = plan.shadow(self.value)
        try:
            example = getattr(shadow, name)(*consts, **kwargs)
        except Exception as e:
            raise _refuse(f"random {name}{consts} raises {type(e).__name__}") from None
        index = plan.draw(self, name, consts, kwargs, tx.output.count_calls(), _root_step(tx))
        return RandomValueVariable(("draw", index), example, plan, _fits_int64(name, consts))

    def _sequence_call(
        self, tx: Tx, name: str, state: tuple | None, args: list, kwargs: dict
    ) -> VariableTracker:
        from bytegraph.variables.containers import ListVariable, store_contents

        if state is None:
            raise _refuse(f"random {name}() of a generator whose state is known only at run time")
        if not args or kwargs or name == "choices":
            raise _refuse(f"random {name}() with these arguments")
        target = args[0]
        if name == "shuffle" and not isinstance(target, ListVariable):
            raise _refuse("random shuffle() of something other than a list")
        items = list(target.unpack_sequence(tx))
        consts, _ = _constants(tx, args[1:], {})
        rng = _copy(state)
        try:
            picked = _pick(rng, name, len(items), consts)
        except Exception as e:
            raise _refuse(f"random {name}() raises {type(e).__name__}") from None
        tx.output.side_effects.set_contents(self, rng.getstate())
        if name == "choice":
            return items[picked]
        chosen = tuple(items[i] for i in picked)
        if name == "shuffle":
            store_contents(tx, target, chosen)
            return ConstantVariable(None)
        return ListVariable(chosen, mutation_type=tx.output.side_effects.new_mutation(
            ValueMutationNew))

    def replay_contents(self, codegen: PyCodegen, state: tuple | None) -> None:
        """After the graph: a generator from the frame gets its known final state."""
        from bytegraph.bytecode import assemble

        if state is None or self.value is None:
            return
        codegen(self)
        codegen.append(assemble.load_method("setstate"))
        codegen.load_const(state)
        codegen.append(*codegen.call_instrs(1), bc.Instr("POP_TOP"))

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        state = codegen.side_effects.contents(self, self.initial)
        codegen.load_callable(_copy)
        codegen.load_const(state)
        codegen.append(*codegen.call_instrs(1))


_INT64 = range(-(2**63), 2**63)


def _fits_int64(name: str, consts: tuple) -> bool:
    """Whether every int ``name(*consts)`` can draw fits an int64."""
    if name in ("randint", "randrange"):
        return all(type(c) is int and c in _INT64 for c in consts)
    return name == "getrandbits" and len(consts) == 1 and type(consts[0]) is int and (
        consts[0] <= 63
    )


def _pick(rng: random.Random, name: str, n: int, consts: tuple) -> Any:
    """The indices ``name`` picks among ``n`` items: the same draws as on the items."""
    if name == "choice":
        return rng.choice(range(n))
    if name == "sample":
        return rng.sample(range(n), *consts)
    indices = list(range(n))
    rng.shuffle(indices)
    return indices


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RandomValueVariable(VariableTracker):
    """A number drawn at run time (or arithmetic of such numbers with constants)."""

    expr: tuple = dataclasses.field(metadata={"no_vts": True})
    example: int | float = 0
    plan: Any = dataclasses.field(default=None, metadata={"no_vts": True})
    # An int known to fit an int64 whatever is drawn (a randint of bounds that fit):
    # only such an int may enter the graph as a 0-d tensor.
    fits_int64: bool = False

    def python_type(self) -> type:
        return type(self.example)

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self) -> Any:
        raise Unsupported(
            "random_value_needed",
            f"the value of a number drawn from the random module ({self.expr[0]}) is "
            "known only at run time",
        )

    def truth(self, tx: Tx) -> bool:
        return self.as_python_constant()

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        return self.as_python_constant()

    def reconstruct(self, codegen: PyCodegen) -> None:
        RandomValueSource(self.plan.value(self.expr)).reconstruct(codegen)

    def __repr__(self) -> str:
        return f"RandomValueVariable({self.example!r})"


def _expr(vt: VariableTracker) -> tuple | None:
    if isinstance(vt, RandomValueVariable):
        return vt.expr
    if isinstance(vt, ConstantVariable) and type(vt.value) in (int, float):
        return ("const", vt.value)
    return None


def random_arithmetic(tx: Tx, fn: Any, args: list, kwargs: dict) -> VariableTracker | None:
    """``fn(*args)`` where a drawn number takes part: Python arithmetic kept as an
    expression, or a tensor op; None where this is no such call."""
    if kwargs or fn not in EXPR_OPERATORS:
        return None
    drawn = [a for a in args if isinstance(a, RandomValueVariable)]
    if not drawn:
        return None

    exprs = [_expr(a) for a in args]
    if all(e is not None for e in exprs):
        try:
            example = fn(*(a.example if isinstance(a, RandomValueVariable) else a.value
                           for a in args))
        except Exception:
            return None  # the ordinary path needs the value: a clean break
        if type(example) not in (int, float):
            return None
        return RandomValueVariable((fn, *exprs), example, drawn[0].plan)
    if len(args) == 2 and fn in _TENSOR_OPERATORS and isinstance(
        args[1 - args.index(drawn[0])], TensorVariable
    ):
        return _tensor_arithmetic(tx, fn, args)
    return None


def _tensor_arithmetic(tx: Tx, fn: Any, args: list) -> VariableTracker | None:
    """``x * r`` / ``r * x``: ``r`` as a 0-d tensor input, where that gives eager's
    result type (a Python number never promotes a tensor across kinds)."""
    from bytegraph.variables.tensor import tensor_op

    drawn_first = isinstance(args[0], RandomValueVariable)
    drawn, tensor = (args[0], args[1]) if drawn_first else (args[1], args[0])
    if type(drawn.example) is not float and not (
        type(drawn.example) is int and drawn.fits_int64
    ):
        return None
    zero_d = as_tensor(drawn.example)
    if torch.result_type(tensor.example, drawn.example) != torch.result_type(
        tensor.example, zero_d.to("meta")
    ):
        return None
    number = _tensor_input(tx, drawn, zero_d)
    if drawn_first:  # ``r - x`` is ``x.__rsub__(r)`` in eager (``r / x``: reciprocal * r)
        return tensor_op(
            tx, "call_function", getattr(torch.Tensor, _TENSOR_OPERATORS[fn]), [tensor, number], {}
        )
    return tensor_op(tx, "call_function", fn, [tensor, number], {})


def _tensor_input(tx: Tx, drawn: RandomValueVariable, example: torch.Tensor) -> VariableTracker:
    """The graph input the prologue fills with ``drawn``'s value as a 0-d tensor."""
    from bytegraph.variables.tensor import TensorVariable

    output = tx.output
    source = RandomValueSource(drawn.plan.tensor_input(drawn.expr))
    known = drawn.plan.inputs.get(source)
    if known is not None:  # one graph input per value, however often it is used
        return known
    if output.shapes is not None:
        meta = output.shapes.fake_mode.from_tensor(example, static_shapes=True)
    else:
        meta = metadata.to_meta(example)
    node = output.add_input(source, example, meta)
    vt = drawn.plan.inputs[source] = TensorVariable(node, meta, example.device, source=source)
    return vt


def _root_step(tx: Tx) -> tuple[int, int] | None:
    """The root frame's current step and instruction index: where a break at this draw
    goes (random_draws.settle_on_error); None where the root is no frame being compiled."""
    from bytegraph.translate.ops.exceptions import root_translator

    root = root_translator(tx)
    steps, inst = getattr(root, "steps", None), getattr(root, "current_inst", None)
    if steps is None or inst is None:
        return None
    return steps - 1, inst.index
