"""Class statements inside the trace: ``class A(Base): ...`` in a compiled function.

LOAD_BUILD_CLASS pushes ``BuildClassVariable``; calling it (what the class
statement compiles to: ``__build_class__(body, 'A', *bases)``) builds a
``MadeClassVariable``:

1. the bases must be classes the trace models (``object``, plain user
   classes, nn.Modules, classes made here), whose ``__init_subclass__`` is
   ``object``'s, under the metaclass ``type`` or ``ABCMeta`` (any other, or
   class keywords, is a graph break);
2. the body runs in a ``ClassBodyTranslator`` (translate/class_body.py),
   which leaves its namespace as VTs: functions made by MAKE_FUNCTION (with
   their closures, the ``__class__`` cell included) and constants;
3. a real *stand-in* class is made at trace time, ``meta(name, bases, ns)``
   with each function replaced by a placeholder of the same code (never
   called), so everything the translator reads off a class (its MRO, its
   ``__setattr__``, ``__new__``, ``__dict__`` slots...) is what the real class
   would have. Names that change creation or lookups (``__slots__``,
   ``__new__``, ``__init_subclass__``, ``__getattribute__``, ``__del__``,
   descriptors) are refused;
4. the namespace's VTs are the class's pending attributes in SideEffects,
   so lookups find the traced functions first, and ``super()`` reads the
   ``__class__`` cell, which holds the class VT;
5. instances are made like those of any user class (``__init__`` inlined);
6. if the class escapes (returned, stored, an instance escapes, live at a
   graph break), the generated code makes it as CPython's ``__build_class__``
   would from the same namespace: ``meta(name, bases, ns)`` with the traced
   functions rebuilt over their cells and ``__classcell__`` the rebuilt
   ``__class__`` cell (type.__new__ fills it); class-level stores made after
   the statement are applied afterwards. One class object per call, as in
   eager.
"""

from __future__ import annotations

import abc
import builtins
import dataclasses
import types
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource, GetItemSource, Source
from bytegraph.side_effects import DELETED
from bytegraph.variables.base import AttributeMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.functions import CellVariable, NestedFunctionVariable
from bytegraph.variables.user_defined import MissingAttribute, UserDefinedClassVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_PLAIN_METACLASSES = (type, abc.ABCMeta)
_REFUSED_NAMES = frozenset({
    "__slots__", "__new__", "__init_subclass__", "__del__", "__getattribute__", "__get__",
    "__set__", "__delete__", "__set_name__", "__class_getitem__", "__mro_entries__",
    "__prepare__",
})
_METADATA = ("__name__", "__qualname__")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BuildClassVariable(VariableTracker):
    """``builtins.__build_class__``, as LOAD_BUILD_CLASS pushes it."""

    def python_type(self) -> type:
        return types.BuiltinFunctionType

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        return build_class(tx, list(args), dict(kwargs))

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_const(builtins.__build_class__)


def build_class(tx: Tx, args: list, kwargs: dict) -> MadeClassVariable:
    if len(args) < 2 or not isinstance(args[0], NestedFunctionVariable):
        raise Unsupported("object_creation", "__build_class__ called directly")
    name = args[1].as_python_constant()
    if not isinstance(name, str):
        raise Unsupported("object_creation", f"class name {name!r}")
    bases = tuple(args[2:])
    real_bases = tuple(_base_class(b) for b in bases)
    meta = _metaclass(real_bases, kwargs)
    namespace, classcell = _run_body(tx, args[0])
    stand_in = _stand_in(tx, meta, name, real_bases, namespace)
    mutation = tx.output.side_effects.new_mutation(AttributeMutationNew)
    made = MadeClassVariable(
        stand_in, meta=meta, name=name, bases=bases, namespace=namespace, classcell=classcell,
        mutation_type=mutation,
    )
    side_effects = tx.output.side_effects
    side_effects.track_made(stand_in, made)
    for key, value in namespace.items():
        side_effects.store_attr(made, key, value)
    if classcell is not None:
        classcell.store(tx, made)
    return made


def _base_class(base: VariableTracker) -> type:
    from bytegraph.variables.user_classes import is_user_class

    value = base.as_python_constant() if base.is_python_constant() else None
    if not isinstance(value, type) or not (
        value is object or is_user_class(value) or isinstance(base, MadeClassVariable)
    ):
        raise Unsupported("object_creation", f"a class statement over the base {base}")
    if any("__init_subclass__" in vars(k) for k in value.__mro__ if k is not object):
        raise Unsupported("object_creation", f"{value.__qualname__} defines __init_subclass__")
    return value


def _metaclass(bases: tuple[type, ...], kwargs: dict) -> type:
    """The most derived metaclass, as CPython picks it; only ``type`` and ``ABCMeta``."""
    explicit = kwargs.pop("metaclass", None)
    if kwargs:
        raise Unsupported("object_creation", f"class keywords {sorted(kwargs)}")
    winner = type if explicit is None else explicit.as_python_constant()
    for base in bases:
        kind = type(base)
        if issubclass(kind, winner):
            winner = kind
        elif not issubclass(winner, kind):
            raise Unsupported("object_creation", "metaclass conflict (TypeError in eager)")
    if winner not in _PLAIN_METACLASSES:
        raise Unsupported("object_creation", f"a class statement under the metaclass {winner}")
    return winner


def _run_body(tx: Tx, body: NestedFunctionVariable) -> tuple[dict, CellVariable | None]:
    from bytegraph import config
    from bytegraph.translate.class_body import ClassBodyTranslator

    if tx.inline_depth >= config.inline_depth_limit:
        raise Unsupported("inline_depth", "a class body too deep in inlined calls")
    child = ClassBodyTranslator(
        body.code(), {}, body.f_globals(), body.cells(tx), tx.output,
        inline_depth=tx.inline_depth + 1, parent=tx,
    )
    child.run()
    namespace = dict(child.namespace)
    classcell = namespace.pop("__classcell__", None)
    if classcell is not None and not isinstance(classcell, ClassCellVariable):
        raise Unsupported("object_creation", "a class body setting __classcell__")
    return namespace, classcell


def _stand_in(tx: Tx, meta: type, name: str, bases: tuple, namespace: dict) -> type:
    """The real class the trace reads types and flags from; its functions are placeholders."""
    real = {key: _placeholder(tx, key, value) for key, value in namespace.items()}
    try:
        return meta(name, bases, real)
    except Exception as e:  # a layout conflict, an MRO that cannot be made: eager raises
        raise Unsupported("operation_raises", f"class {name}: {type(e).__name__}: {e}") from e


def _placeholder(tx: Tx, key: str, value: VariableTracker) -> Any:
    from bytegraph.variables.containers import python_constant

    if key in _REFUSED_NAMES:
        raise Unsupported("object_creation", f"a class made in the trace defines {key}")
    if isinstance(value, NestedFunctionVariable):
        if tx.output.side_effects.pending_attrs(value):  # a decorator marked it
            raise Unsupported("object_creation", f"class attribute {key}: a marked function")
        code = value.code()
        cells = tuple(types.CellType() for _ in code.co_freevars) or None
        fn = types.FunctionType(code, value.f_globals(), code.co_name, None, cells)
        fn.__qualname__ = value.qualname
        return fn
    constant = python_constant(tx, value)
    if hasattr(type(constant), "__get__") or hasattr(constant, "__set_name__"):
        raise Unsupported("object_creation", f"class attribute {key}: a descriptor")
    return constant


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ClassCellVariable(CellVariable):
    """The ``__class__`` cell of a class body: ``type.__new__`` fills it with the class."""

    def reconstruct(self, codegen: PyCodegen) -> None:
        made = codegen.side_effects.load_attr(self, "cell_contents")
        if not isinstance(made, MadeClassVariable):
            super().reconstruct(codegen)
        elif id(made) in codegen.side_effects.rebuilding:  # the class being made fills it
            codegen.call_const(types.CellType, [])
        else:  # making the class makes this cell (reloaded from the codegen's memo)
            codegen(made)
            codegen.append(bc.Instr("POP_TOP"))
            codegen(self)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MadeClassVariable(UserDefinedClassVariable):
    """A class made by a class statement in the trace; ``value`` is its stand-in."""

    meta: type = type
    name: str = ""
    bases: tuple[VariableTracker, ...] = ()
    namespace: dict[str, VariableTracker] = dataclasses.field(default_factory=dict)
    classcell: VariableTracker | None = None

    def python_type(self) -> type:
        return self.meta

    def _source(self, tx: Tx) -> Source | None:
        return None

    def mro_source(self, klass: type) -> Source | None:
        """Where ``klass`` of this class's MRO is read from: through a base's source
        (None for this class, a class made here, or ``object``)."""
        for base in self.bases:
            if isinstance(base, MadeClassVariable) and klass in base.value.__mro__:
                return base.mro_source(klass) if klass is not base.value else None
            real = base.as_python_constant()
            if base.source is None or klass is object or klass not in real.__mro__:
                continue
            if klass is real:
                return base.source
            return GetItemSource(AttrSource(base.source, "__mro__"), real.__mro__.index(klass))
        return None

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        from bytegraph.variables.builder import wrap
        from bytegraph.variables.user_defined import guard_class_lacks, lookup_class_attr

        found = lookup_class_attr(tx, self.value, None, name)
        if found is None:
            if name in _METADATA:
                return ConstantVariable(getattr(self.value, name))
            if name in type(self.value).__dict__:
                raise Unsupported("unknown_attribute", f"{name!r} of a class made in the trace")
            guard_class_lacks(tx, self.value, None, name)
            raise MissingAttribute(f"class {self.value.__qualname__}", name)
        raw = found.raw
        if found.pending is None and not isinstance(
            raw, (staticmethod, classmethod, types.FunctionType)
        ) and not hasattr(type(raw), "__get__"):
            if found.source is None:
                raise Unsupported("unknown_attribute", f"{name!r} of a class made in the trace")
            return wrap(tx, raw, found.source)
        return super().var_getattr(tx, name)

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if getattr(self.value, "__abstractmethods__", None):
            raise Unsupported(
                "call_raises_type_error", f"{self.name} has abstract methods (TypeError)"
            )
        return super().call_function(tx, args, kwargs)

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``meta(name, bases, ns)`` from the traced namespace, then later class stores."""
        from bytegraph.variables.containers import TupleVariable
        from bytegraph.variables.dicts import DictVariable

        rebuilding = codegen.side_effects.rebuilding
        temp = rebuilding.get(id(self))
        if temp is not None:
            codegen.append(bc.Instr("LOAD_FAST", temp))
            return
        temp = rebuilding[id(self)] = f"___cls{id(self)}"
        try:
            items = dict(self.namespace)
            if self.classcell is not None:
                items["__classcell__"] = self.classcell
            codegen.call_const(self.meta, [
                ConstantVariable(self.name), TupleVariable(self.bases), DictVariable(items),
            ])
            codegen.append(bc.Instr("COPY", 1), bc.Instr("STORE_FAST", temp))
            self._later_stores(codegen, temp)
        finally:
            del rebuilding[id(self)]

    def _later_stores(self, codegen: PyCodegen, temp: str) -> None:
        """``setattr``/``delattr`` for what the trace changed on the class after making it."""
        for key, value in codegen.side_effects.pending_attrs(self).items():
            if value is self.namespace.get(key):
                continue
            if value is DELETED:
                codegen.load_callable(delattr)
                codegen.append(bc.Instr("LOAD_FAST", temp))
                codegen.load_const(key)
                codegen.append(*codegen.call_instrs(2), bc.Instr("POP_TOP"))
                continue
            codegen.load_callable(setattr)
            codegen.append(bc.Instr("LOAD_FAST", temp))
            codegen.load_const(key)
            codegen(value)
            codegen.append(*codegen.call_instrs(3), bc.Instr("POP_TOP"))

    def __repr__(self) -> str:
        return f"MadeClassVariable({self.name})"
