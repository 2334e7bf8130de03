"""User Python functions, closures and cells, inlined by a child translator.

``UserFunctionVariable`` wraps a real function (from a global, attribute or
argument); ``NestedFunctionVariable`` is a function made by MAKE_FUNCTION
during the trace (lambdas, inner defs, comprehensions), whose closure cells
are ``CellVariable``s. Calling either inlines the callee's bytecode into the
same graph.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource, GetItemSource, Source
from bytegraph.side_effects import DELETED
from bytegraph.torch_markers import disabled_reason, is_disabled_module, torch_marking
from bytegraph.variables.base import AttributeMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value
from bytegraph.variables.containers import DictVariable, TupleVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

NEW_CELL = AttributeMutationNew(1)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CellVariable(VariableTracker):
    """A closure cell. Its contents are read through SideEffects ("cell_contents").

    ``source`` (for a cell that exists outside the trace) reaches the cell
    object itself; the contents are ``AttrSource(source, "cell_contents")``.
    """

    cell: types.CellType | None = None

    def python_type(self) -> type:
        return types.CellType

    def load(self, tx: InstructionTranslatorBase) -> VariableTracker:
        from bytegraph.variables.builder import wrap, wrap_constant_result

        pending = tx.output.side_effects.load_attr(self, "cell_contents")
        if pending is DELETED or (pending is None and self.cell is None):
            raise Unsupported("unbound_name", "free variable read before assignment")
        if pending is not None:
            return pending
        try:
            value = self.cell.cell_contents
        except ValueError:
            raise Unsupported("unbound_name", "empty closure cell (raises in eager)") from None
        if self.source is None:
            return wrap_constant_result(value)
        return wrap(tx, value, AttrSource(self.source, "cell_contents"))

    def store(self, tx: InstructionTranslatorBase, value: VariableTracker) -> None:
        tx.output.side_effects.store_attr(self, "cell_contents", value)

    def reconstruct(self, codegen: PyCodegen) -> None:
        """The cell by its source, or a new ``types.CellType()`` holding the contents
        (built once: every closure and resume function that shares it gets the same)."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        from bytegraph.side_effects import DELETED

        def contents() -> list[tuple[str, VariableTracker]]:
            value = codegen.side_effects.load_attr(self, "cell_contents")
            return [] if value is None or value is DELETED else [("cell_contents", value)]

        codegen.build_object(self, lambda: codegen.call_const(types.CellType, []), contents)


def new_cell(initial: VariableTracker | None, tx: InstructionTranslatorBase) -> CellVariable:
    cell = CellVariable(mutation_type=NEW_CELL)
    if initial is not None:
        cell.store(tx, initial)
    return cell


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BaseFunctionVariable(VariableTracker):
    """What inlining needs: code, globals, defaults and closure cells."""

    def code(self) -> types.CodeType:
        raise NotImplementedError

    def f_globals(self) -> dict[str, Any]:
        raise NotImplementedError

    def defaults(
        self, tx: InstructionTranslatorBase
    ) -> tuple[list[VariableTracker], dict[str, VariableTracker]]:
        raise NotImplementedError

    def cells(self, tx: InstructionTranslatorBase) -> dict[str, CellVariable]:
        raise NotImplementedError

    def python_type(self) -> type:
        return types.FunctionType

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return True  # a function is always true

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        from bytegraph.translate.inline import inline_call

        return inline_call(tx, self, args, kwargs)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class UserFunctionVariable(BaseFunctionVariable):
    """A real Python function; the trace relies on its identity (ID_MATCH), or, for
    a nested function made anew each call (``by_identity`` False), only on its code,
    globals, defaults and the cell contents it reads (builder._wrap_by_code): then it
    is no constant (``f is g`` is not known)."""

    fn: types.FunctionType
    by_identity: bool = True

    def code(self) -> types.CodeType:
        return self.fn.__code__

    def f_globals(self) -> dict[str, Any]:
        return self.fn.__globals__

    def is_python_constant(self) -> bool:
        return self.by_identity

    def as_python_constant(self) -> Any:
        if not self.by_identity:
            raise Unsupported("not_a_constant", f"the identity of {self.fn.__qualname__}")
        return self.fn

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        from bytegraph.variables.compile_regions import call_region, marked_function
        from bytegraph.variables.made_modules import unwrapped_torch_compile_patch

        unwrapped = unwrapped_torch_compile_patch(self.fn)  # however it was reached
        if unwrapped is not None:
            return UserFunctionVariable(unwrapped).call_function(tx, args, kwargs)
        region = marked_function(self.fn)  # a nested_compile_region's method, say
        if region is not None:
            return call_region(tx, UserFunctionVariable(region), args, kwargs)
        return super().call_function(tx, args, kwargs)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        from bytegraph.variables.builder import wrap, wrap_constant_result

        if not hasattr(self.fn, name):
            raise Unsupported("unknown_attribute", f"function attribute {name!r}")
        value = getattr(self.fn, name)
        if self.source is None:
            return wrap_constant_result(value)
        return wrap(tx, value, AttrSource(self.source, name))

    def defaults(self, tx):
        positional = [
            self._default(tx, "__defaults__", i, v)
            for i, v in enumerate(self.fn.__defaults__ or ())
        ]
        keyword = {
            k: self._default(tx, "__kwdefaults__", k, v)
            for k, v in (self.fn.__kwdefaults__ or {}).items()
        }
        return positional, keyword

    def _default(self, tx, attr: str, key: Any, value: Any) -> VariableTracker:
        """A default value: constants as such, anything else read through its source."""
        from bytegraph.variables.builder import wrap, wrap_constant_result

        if is_constant_value(value):
            return wrap_constant_result(value)
        if self.source is None:
            raise Unsupported("unrebuildable_value", f"default argument {value!r}")
        return wrap(tx, value, GetItemSource(AttrSource(self.source, attr), key))

    def cells(self, tx):
        closure = self.fn.__closure__ or ()
        result = {}
        for i, (name, cell) in enumerate(zip(self.fn.__code__.co_freevars, closure)):
            source: Source | None = None
            if self.source is not None:
                source = GetItemSource(AttrSource(self.source, "__closure__"), i)
            result[name] = tx.output.cell_for(cell, source)
        return result

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NestedFunctionVariable(BaseFunctionVariable):
    """A function object created by MAKE_FUNCTION during the trace."""

    fn_code: types.CodeType
    # The module's real globals: no VTs inside, and too big (and maybe cyclic) to walk.
    globals_dict: dict[str, Any] = dataclasses.field(metadata={"no_vts": True})
    qualname: str
    defaults_tuple: TupleVariable | None = None
    kwdefaults_dict: DictVariable | None = None
    closure: tuple[CellVariable, ...] = ()

    def code(self) -> types.CodeType:
        return self.fn_code

    def f_globals(self) -> dict[str, Any]:
        return self.globals_dict

    def defaults(self, tx):
        positional = list(self.defaults_tuple.items) if self.defaults_tuple else []
        keyword = dict(self.kwdefaults_dict.items_now(tx)) if self.kwdefaults_dict else {}
        return positional, keyword

    def cells(self, tx):
        return dict(zip(self.fn_code.co_freevars, self.closure))

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        """What MAKE_FUNCTION fixed for good: names, module and code; and the plain
        attributes stored on it since (``wrapper.__wrapped__ = fn``)."""
        from bytegraph.side_effects import DELETED
        from bytegraph.variables.constant import ConstantVariable

        stored = tx.output.side_effects.pending_attrs(self).get(name)
        if stored is not None and stored is not DELETED:
            return stored
        if name in ("__defaults__", "__kwdefaults__"):  # MAKE_FUNCTION's; stores are refused
            given = self.defaults_tuple if name == "__defaults__" else self.kwdefaults_dict
            return ConstantVariable(None) if given is None else given
        known = {
            "__name__": self.fn_code.co_name,
            "__qualname__": self.qualname,
            "__module__": self.globals_dict.get("__name__"),
            "__code__": self.fn_code,
        }
        if name not in known:
            raise Unsupported("unknown_attribute", f"attribute {name!r} of {self}")
        return ConstantVariable(known[name])

    def var_setattr(self, tx: InstructionTranslatorBase, name: str, value: VariableTracker) -> None:
        """A plain attribute (in the function's ``__dict__``); the ones the function type
        itself defines change how it runs or reads, and are left to Python."""
        if not name.isidentifier() or hasattr(types.FunctionType, name):
            raise Unsupported("attribute_mutation", f"setting attribute {name!r} of {self}")
        tx.output.side_effects.store_attr(self, name, value)

    def reconstruct(self, codegen: PyCodegen) -> None:
        """The function, then the attributes stored on it (``object.__setattr__``)."""
        from bytegraph.side_effects import DELETED

        def attributes() -> list[tuple[str, VariableTracker]]:
            stored = codegen.side_effects.pending_attrs(self).items()
            return [(name, value) for name, value in stored if value is not DELETED]

        codegen.build_object(self, lambda: self._make_function(codegen), attributes)

    def _make_function(self, codegen: PyCodegen) -> None:
        """MAKE_FUNCTION again, over the same cells (CellVariable.reconstruct): a closure
        rebuilt after the trace still shares its cells with the frame's code."""
        flags = 0
        if self.defaults_tuple is not None:
            codegen(self.defaults_tuple)
            flags |= 0x01
        if self.kwdefaults_dict is not None:
            codegen(self.kwdefaults_dict)
            flags |= 0x02
        if self.closure:
            for cell in self.closure:
                codegen(cell)
            codegen.append(bc.Instr("BUILD_TUPLE", len(self.closure)))
            flags |= 0x08
        codegen.load_const(self.fn_code)  # MAKE_FUNCTION pops the code object first
        codegen.append(*assemble.make_function(flags))

    def __repr__(self) -> str:
        return f"NestedFunctionVariable({self.qualname})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)``"""

    fn: VariableTracker
    args: tuple[VariableTracker, ...]
    kwargs: dict[str, VariableTracker]

    def python_type(self) -> type:
        return functools.partial

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return functools.partial(
            self.fn.as_python_constant(), *(a.as_python_constant() for a in self.args),
            **{k: v.as_python_constant() for k, v in self.kwargs.items()},
        )

    def call_function(self, tx, args, kwargs):
        return self.fn.call_function(tx, [*self.args, *args], {**self.kwargs, **kwargs})

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``functools.partial(fn, *args, **kwargs)`` again (or the original, by its source)."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        parts = [self.fn, TupleVariable(self.args), DictVariable(dict(self.kwargs))]
        codegen.call_const(_rebuild_partial, parts)

    def var_getattr(self, tx, name):
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return DictVariable(dict(self.kwargs))
        raise Unsupported("unknown_attribute", f"partial attribute {name!r}")


def _rebuild_partial(fn: Any, args: tuple, kwargs: dict) -> functools.partial:
    return functools.partial(fn, *args, **kwargs)



@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MarkedFunctionVariable(VariableTracker):
    """A function marked for bytegraph or torch.compile (markers.py, torch_markers.py):
    disabled, disallowed in graph, graph_break(), a constant result, is_compiling."""

    fn: Any
    marking: str

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs):
        if self.marking == "graph_break":
            name = "bytegraph" if torch_marking(self.fn) is None else "torch._dynamo"
            raise Unsupported("explicit_graph_break", f"{name}.graph_break()")
        if self.marking == "constant":
            return _call_constant_result(tx, self.fn, args, kwargs)
        if self.marking == "compiling":  # torch._dynamo.is_compiling(): yes, while traced
            return ConstantVariable(True)
        if torch_marking(self.fn) == "disabled" or is_disabled_module(self.fn):
            raise Unsupported("disabled_function", disabled_reason(self.fn))
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        raise Unsupported("disabled_function", f"{name} is marked {self.marking}")


def _call_constant_result(
    tx: InstructionTranslatorBase, fn: Any, args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> VariableTracker:
    """``fn(*args)`` now, its result a constant of the trace with no guard: the promise
    of assume_constant_result. Arguments and result must be constants, or it breaks."""
    from bytegraph.variables.builder import wrap_constant_result
    from bytegraph.variables.containers import python_constant

    values = [python_constant(tx, a) for a in args]
    keywords = {k: python_constant(tx, v) for k, v in kwargs.items()}
    name = getattr(fn, "__qualname__", repr(fn))
    try:
        result = fn(*values, **keywords)
    except Exception as error:  # noqa: BLE001  (Python makes the call, and raises it)
        raise Unsupported("trace_time_value", f"{name}() raised {error!r}") from None
    return wrap_constant_result(result)
