"""Wrap real Python values as VariableTrackers, installing their guards.

``wrap(tx, value, source)`` is the only way a value from the frame enters a
trace: it picks the VT family by the value's type and records the guard that
keeps the trace valid (tensor metadata, constant value, object identity,
length, dict keys). ``wrap_constant_result`` wraps values computed at trace
time, which need no guard.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import inspect
import io
import logging
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree

from bytegraph.exc import Unsupported
from bytegraph.graph import metadata
from bytegraph.guards.guard import GuardKind, TensorSnapshot
from bytegraph.guards.sources import (
    AttrSource,
    GetItemSource,
    GlobalSource,
    LocalSource,
    ModuleGlobalSource,
    Source,
)
from bytegraph.markers import marking
from bytegraph.torch_markers import is_disabled_module
from bytegraph.variables.base import (
    AttributeMutationExisting,
    ValueMutationExisting,
    VariableTracker,
)
from bytegraph.variables.builtin import BuiltinVariable, is_builtin_callable
from bytegraph.variables.collections import collections_function
from bytegraph.variables.collectives import wrap_distributed
from bytegraph.variables.constant import ConstantVariable, is_constant_value
from bytegraph.variables.containers import (
    DICT_TYPES,
    NEW_VALUE,
    DictVariable,
    ListVariable,
    SizeVariable,
    TupleVariable,
    is_namedtuple_class,
)
from bytegraph.variables.ctx import GRAD_MODE_CLASSES, wrap_context_manager
from bytegraph.variables.deques import DequeClassVariable, wrap_frame_deque
from bytegraph.variables.enums import EnumClassVariable, EnumMemberVariable, is_enum_class
from bytegraph.variables.environ import EnvironVariable, is_environ
from bytegraph.variables.exceptions import ExcInfoFunctionVariable
from bytegraph.variables.function_modes import wrap_mode_switch
from bytegraph.variables.functions import (
    MarkedFunctionVariable,
    PartialVariable,
    UserFunctionVariable,
)
from bytegraph.variables.fx_annotations import wrap_fx_annotate
from bytegraph.variables.higher_order import higher_order_variable
from bytegraph.variables.itertools import ItertoolsFunctionVariable, is_itertools_function
from bytegraph.variables.logging_calls import (
    DeferredLogCallVariable,
    GetLoggerVariable,
    LoggerVariable,
    is_module_log_function,
    module_log_function,
)
from bytegraph.variables.lru_cache import LruCacheFunctionVariable, is_lru_cache_wrapper
from bytegraph.variables.namedtuples import NamedTupleClassVariable
from bytegraph.variables.nn_module import NNModuleVariable, is_traceable_module
from bytegraph.variables.numpy import wrap_numpy_constant
from bytegraph.variables.numpy_frame import wrap_numpy_object, wrap_numpy_value
from bytegraph.variables.object_builtins import (
    OBJECT_BUILTIN_IDS,
    DataclassReplaceVariable,
    ObjectBuiltinVariable,
)
from bytegraph.variables.object_copies import CopyFunctionVariable, is_copy_function
from bytegraph.variables.object_ids import ObjectIdFunctionVariable
from bytegraph.variables.object_keys import wrap_frame_table
from bytegraph.variables.objects import ClassVariable, ObjectVariable, WeakRefVariable
from bytegraph.variables.profiler import ProfilerClassVariable, is_profiler_class
from bytegraph.variables.pytree import (
    PytreeFunctionVariable,
    TreeSpecVariable,
    is_pytree_function,
)
from bytegraph.variables.raising import ExceptionClassVariable, is_plain_exception_class
from bytegraph.variables.random_state import wrap_random
from bytegraph.variables.scalars import SymbolicScalarVariable
from bytegraph.variables.sets import wrap_frame_set
from bytegraph.variables.signatures import SignatureFunctionVariable
from bytegraph.variables.slices import wrap_frame_slice
from bytegraph.variables.tensor import TensorVariable
from bytegraph.variables.torch import (
    PythonModuleVariable,
    TorchFunctionVariable,
    is_graph_function,
    is_torch_helper,
    is_trace_time_function,
)
from bytegraph.variables.torch_ops import TorchOperatorVariable, is_torch_operator
from bytegraph.variables.user_defined import (
    UserDefinedClassVariable,
    UserDefinedObjectVariable,
    UserMethodVariable,
    function_vt,
    is_user_class,
    mapping_base,
)
from bytegraph.variables.user_dicts import wrap_user_mapping
from bytegraph.variables.user_exceptions import UserExceptionClassVariable, is_user_exception_class

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase

EXISTING_VALUE = ValueMutationExisting(0)
EXISTING_OBJECT = AttributeMutationExisting(0)


def wrap(tx: InstructionTranslatorBase, value: Any, source: Source) -> VariableTracker:
    """The VT for ``value``, read from the frame through ``source``."""
    output = tx.output
    cached = output.source_to_var.get(source)
    if cached is not None:
        return cached
    vt = _tracked(tx, value, source)
    if vt is None:
        vt = _wrap(tx, value, source)
        _track(tx, value, vt)
    output.source_to_var[source] = vt
    return vt


def _tracked(tx: InstructionTranslatorBase, value: Any, source: Source) -> VariableTracker | None:
    """The VT of a mutable object already reached through another source (an alias)."""
    vt = tx.output.side_effects.existing(value)
    if vt is not None:
        kind = GuardKind.ID_MATCH if isinstance(value, type) else GuardKind.SAME_OBJECT
        tx.output.add_guard(kind, source, value if kind is GuardKind.ID_MATCH else vt.source)
    return vt


def _track(tx: InstructionTranslatorBase, value: Any, vt: VariableTracker) -> None:
    """One VT per mutable object, so every source of it sees the same pending mutations.

    Objects of one type compared by type (lists, dicts, user objects) are also
    guarded distinct from each other: the trace assumed they do not alias.
    """
    if not isinstance(vt.mutation_type, (ValueMutationExisting, AttributeMutationExisting)):
        return
    earlier = tx.output.side_effects.track_existing(value, vt)
    if earlier and (
        type(value) in (list, set, collections.deque, *DICT_TYPES)
        or isinstance(vt, UserDefinedObjectVariable)
    ):
        tx.output.add_guard(GuardKind.DISTINCT, vt.source, tuple(e.source for e in earlier))


# Objects a frame makes per call and hands to its resume function (a generator the
# frame started in Python, a buffer for ``redirect_stdout``).
_PASSED_THROUGH = frozenset({types.GeneratorType, io.StringIO, io.BytesIO})

# Where an int or float is a setting or counter, guarded only when its value is used.
_SYMBOLIC_SCALAR_SOURCES = (AttrSource, GlobalSource, ModuleGlobalSource)


def _wrap(tx: InstructionTranslatorBase, value: Any, source: Source) -> VariableTracker:
    guard = tx.output.add_guard
    if isinstance(value, torch.Tensor):
        return _wrap_tensor(tx, value, source)
    shapes = tx.output.shapes
    if type(value) is int and shapes is not None and source in shapes.ints:
        return _wrap_symbolic_int(tx, value, source)
    if type(value) in (int, float) and isinstance(source, _SYMBOLIC_SCALAR_SOURCES):
        # A counter or setting: its value is guarded only if the trace relies on it.
        guard(GuardKind.TYPE_MATCH, source, type(value))
        return SymbolicScalarVariable(value, tx.output, source=source)
    if is_constant_value(value) and type(value) not in (tuple, frozenset):
        guard(GuardKind.CONSTANT_MATCH, source, value)
        return ConstantVariable(value, source=source)
    if type(value) is torch.Size:
        guard(GuardKind.CONSTANT_MATCH, source, value)
        return SizeVariable(tuple(ConstantVariable(d) for d in value), source=source)
    if (isinstance(value, tuple) and _no_instance_attrs(tx, value, source)) or type(
        value
    ) is list:  # a list subclass is no ListVariable
        guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
        items = tuple(wrap(tx, v, GetItemSource(source, i)) for i, v in enumerate(value))
        if isinstance(value, list):
            return ListVariable(items, source=source, mutation_type=EXISTING_VALUE)
        return TupleVariable(items, tuple_type=type(value), source=source)
    if type(value) is collections.deque:
        return wrap_frame_deque(tx, value, source)
    if type(value) in DICT_TYPES and all(is_constant_value(k) for k in value):
        guard(GuardKind.DICT_KEYS, source, (type(value), tuple(value)))
        items = {k: wrap(tx, v, GetItemSource(source, k)) for k, v in value.items()}
        factory = None
        if type(value) is collections.defaultdict:
            factory = wrap(tx, value.default_factory, AttrSource(source, "default_factory"))
        return DictVariable(
            items, type(value), factory, source=source, mutation_type=EXISTING_VALUE
        )
    if type(value) in (set, frozenset):
        frame_set = wrap_frame_set(tx, value, source)
        if frame_set is not None:
            return frame_set
    if type(value) in (set, *DICT_TYPES):  # keys that are objects: tensors, modules...
        table = wrap_frame_table(tx, value, source)
        if table is not None:
            return table
    if _is_container_method(value):
        # ``d.get`` handed over as a value (e.g. across a graph break): the receiver's method.
        guard(GuardKind.TYPE_MATCH, source, type(value))
        receiver = wrap(tx, value.__self__, AttrSource(source, "__self__"))
        return receiver.var_getattr(tx, value.__name__)
    if type(value) in GRAD_MODE_CLASSES or isinstance(value, types.MethodType):
        # Rebuilt at every graph break: guard the kind of object, not its identity.
        context = wrap_context_manager(tx, value, source)
        if context is not None:
            guard(GuardKind.TYPE_MATCH, source, type(value))
            if isinstance(value, types.MethodType):
                guard(GuardKind.ID_MATCH, AttrSource(source, "__func__"), value.__func__)
            return context
    if type(value) is weakref.ReferenceType:
        guard(GuardKind.TYPE_MATCH, source, weakref.ReferenceType)
        return WeakRefVariable(value, source=source)
    if is_environ(value):  # os.environ: each variable read is guarded by its value
        guard(GuardKind.ID_MATCH, source, value)
        return EnvironVariable(source=source)
    generator = wrap_random(tx, value, source)  # random.Random, its instances and methods
    if generator is not None:
        return generator
    if is_lru_cache_wrapper(value):  # called for real at trace time, on constants
        tx.output.add_guard(GuardKind.ID_MATCH, source, value)
        return LruCacheFunctionVariable(value, source=source)
    if type(value) is slice:  # with a part that is no constant (a tensor bound)
        return wrap_frame_slice(tx, value, source)
    if type(value) in _PASSED_THROUGH:
        # Made per call, then only passed through (their methods break): guarded by type,
        # as an identity guard would keep each alive and miss on the next call.
        guard(GuardKind.TYPE_MATCH, source, type(value))
        return ObjectVariable(value, source=source, mutation_type=EXISTING_OBJECT)
    user = _wrap_user_object(tx, value, source)
    if user is not None:
        return user
    array = wrap_numpy_value(tx, value, source)  # an ndarray or numpy scalar argument
    if array is not None:
        return array
    return _wrap_by_identity(tx, value, source)


def _no_instance_attrs(tx: InstructionTranslatorBase, value: tuple, source: Source) -> bool:
    """A tuple (a named tuple subclass without ``__slots__`` has a ``__dict__``) that
    has no attributes of its own, guarded so: a TupleVariable knows its items only."""
    attrs = getattr(value, "__dict__", None)
    if attrs is None or type(value).__dictoffset__ == 0:
        return True
    if attrs:
        return False
    tx.output.add_guard(GuardKind.DICT_KEYS, AttrSource(source, "__dict__"), (dict, ()))
    return True


def _is_container_method(value: Any) -> bool:
    """A builtin method bound to a list, dict or set (``xs.append``, ``d.get``)."""
    return isinstance(value, types.BuiltinMethodType) and type(
        getattr(value, "__self__", None)
    ) in (list, dict, set, collections.OrderedDict, collections.defaultdict)


def _wrap_user_object(
    tx: InstructionTranslatorBase, value: Any, source: Source
) -> VariableTracker | None:
    """nn.Modules and instances of plain user classes, guarded by their type."""
    cls = type(value)
    if is_disabled_module(value):  # torch.compiler.disable(module): called as it is
        tx.output.add_guard(GuardKind.ID_MATCH, source, value)
        return MarkedFunctionVariable(value, "disabled", source=source)
    if is_traceable_module(value):
        tx.output.add_guard(GuardKind.TYPE_MATCH, source, cls)
        return NNModuleVariable(value, cls, source=source, mutation_type=EXISTING_OBJECT)
    if is_user_class(cls) and not isinstance(value, torch.nn.Module):
        if mapping_base(cls) is not None:  # a dict subclass: items and attributes
            return wrap_user_mapping(tx, value, source, EXISTING_OBJECT)
        tx.output.add_guard(GuardKind.TYPE_MATCH, source, cls)
        if isinstance(value, logging.Logger):  # its log methods may be deferred
            return LoggerVariable(value, cls, source=source, mutation_type=EXISTING_OBJECT)
        return UserDefinedObjectVariable(value, cls, source=source, mutation_type=EXISTING_OBJECT)
    if cls is types.MethodType and _is_function_apply(value):
        # ``mod_index = ModIndex.apply`` held as a value: the class's apply, traced
        tx.output.add_guard(GuardKind.TYPE_MATCH, source, cls)
        tx.output.add_guard(GuardKind.ID_MATCH, AttrSource(source, "__func__"), value.__func__)
        return wrap(tx, value.__self__, AttrSource(source, "__self__")).var_getattr(tx, "apply")
    if cls is types.MethodType and _is_user_method(value):
        # A bound method from the frame (``obj.__exit__`` on a resumed stack): its
        # function and its receiver, each guarded; not the fresh method object's id.
        tx.output.add_guard(GuardKind.TYPE_MATCH, source, cls)
        receiver = wrap(tx, value.__self__, AttrSource(source, "__self__"))
        fn = function_vt(tx, value.__func__, AttrSource(source, "__func__"))
        return UserMethodVariable(fn, receiver, source=source)
    return None


def _is_function_apply(method: types.MethodType) -> bool:
    from bytegraph.variables.autograd_function import is_autograd_function_class

    owner = method.__self__
    return is_autograd_function_class(owner) and method.__func__ is getattr(
        owner.apply, "__func__", None
    )


def _is_user_method(method: types.MethodType) -> bool:
    owner = method.__self__
    if not isinstance(method.__func__, types.FunctionType):
        return False
    if isinstance(owner, type):
        return is_user_class(owner)
    return is_user_class(type(owner)) or is_traceable_module(owner)


def _made_per_call(fn: types.FunctionType, source: Source) -> bool:
    """A nested function handed to the frame (an argument, or a closure a resume
    function receives): a new object each call, the same code and constant defaults."""
    if "<locals>" not in fn.__qualname__ or not isinstance(source.root, LocalSource):
        return False
    defaults = (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values())
    return all(is_constant_value(d) for d in defaults) and marking(fn) is None


def _wrap_by_code(
    tx: InstructionTranslatorBase, fn: types.FunctionType, source: Source
) -> VariableTracker:
    """Guarded by what the trace reads of it, not its identity: its code, globals and
    defaults (the cells' contents are guarded when read, through ``__closure__``)."""
    guard = tx.output.add_guard
    guard(GuardKind.TYPE_MATCH, source, types.FunctionType)
    guard(GuardKind.ID_MATCH, AttrSource(source, "__code__"), fn.__code__)
    guard(GuardKind.ID_MATCH, AttrSource(source, "__globals__"), fn.__globals__)
    guard(GuardKind.CONSTANT_MATCH, AttrSource(source, "__defaults__"), fn.__defaults__)
    guard(GuardKind.CONSTANT_MATCH, AttrSource(source, "__kwdefaults__"), fn.__kwdefaults__)
    return UserFunctionVariable(fn, by_identity=False, source=source)


def _hashes_in_user_code(value: Any) -> bool:
    """Whether ``hash(value)`` runs a ``__hash__`` written outside torch and enum."""
    user_hash = type(value).__hash__
    if not isinstance(user_hash, types.FunctionType) or user_hash is enum.Enum.__hash__:
        return False
    return not (getattr(user_hash, "__module__", None) or "").startswith("torch")


def _wrap_by_identity(tx: InstructionTranslatorBase, value: Any, source: Source) -> VariableTracker:
    """Modules, functions and classes: the trace relies on the very object."""
    if isinstance(value, types.FunctionType) and _made_per_call(value, source):
        return _wrap_by_code(tx, value, source)
    tx.output.add_guard(GuardKind.ID_MATCH, source, value)
    if _hashes_in_user_code(value):
        # Every registry below is a hashed lookup: none holds such an object, and
        # asking would run (and count) its __hash__ at trace time.
        return ObjectVariable(value, source=source, mutation_type=EXISTING_OBJECT)
    marked = marking(value)
    if marked == "allowed":
        return TorchFunctionVariable(value, source=source)
    if marked is not None:
        return MarkedFunctionVariable(value, marked, source=source)
    context = wrap_context_manager(tx, value, source)  # grad-mode classes, instances, methods
    if context is not None:
        return context
    switch = wrap_mode_switch(value, source)  # TorchFunctionMode.__enter__/__exit__
    if switch is None:
        switch = wrap_fx_annotate(value, source)  # torch.fx.traceback.annotate
    if switch is not None:
        return switch
    numpy_object = wrap_numpy_object(value, source)  # np.sin, np.sum, np.float32...
    if numpy_object is not None:
        return numpy_object
    distributed = wrap_distributed(value, source)  # collectives, process groups, ReduceOp
    if distributed is not None:
        return distributed
    if isinstance(value, types.ModuleType):
        return PythonModuleVariable(value, source=source)
    higher_order = higher_order_variable(value, source)
    if higher_order is not None:
        return higher_order
    if is_torch_operator(value):
        return TorchOperatorVariable(value, source=source)
    if is_trace_time_function(value) or is_graph_function(value):
        return TorchFunctionVariable(value, source=source)
    if is_pytree_function(value):
        return PytreeFunctionVariable(value, source=source)
    if isinstance(value, pytree.TreeSpec):
        return TreeSpecVariable(value, source=source)
    if id(value) in OBJECT_BUILTIN_IDS:
        return ObjectBuiltinVariable(value, source=source)
    if value is dataclasses.replace:
        return DataclassReplaceVariable(source=source)
    if is_copy_function(value):
        return CopyFunctionVariable(value, source=source)
    if value is inspect.signature:
        return SignatureFunctionVariable(source=source)
    if value is id:
        return ObjectIdFunctionVariable(source=source)
    if value is collections.deque:
        return DequeClassVariable(value, source=source)
    if value is sys.exc_info or value is sys.exception:
        return ExcInfoFunctionVariable(fn=value, source=source)
    if value is print:  # a graph break, or deferred (config.reorderable_logging)
        return DeferredLogCallVariable(None, "print", source=source)
    if value is logging.getLogger:
        return GetLoggerVariable(source=source)
    if is_module_log_function(value):
        return module_log_function(value, source)
    if is_itertools_function(value):
        return ItertoolsFunctionVariable(value, source=source)
    modelled = collections_function(value, source)
    if modelled is not None:
        return modelled
    if is_builtin_callable(value):
        return BuiltinVariable(value, source=source)
    if is_namedtuple_class(value):
        return NamedTupleClassVariable(value, source=source)
    if is_user_exception_class(value):
        return UserExceptionClassVariable(value, source=source)
    if is_plain_exception_class(value):
        return ExceptionClassVariable(value, source=source)
    if is_enum_class(value):
        return EnumClassVariable(value, source=source)
    if isinstance(value, enum.Enum):
        return EnumMemberVariable(value, source=source)
    if is_profiler_class(value):  # record_function, profile: ignored, as by torch.compile
        return ProfilerClassVariable(value, source=source)
    if isinstance(value, type):
        if is_user_class(value):
            return UserDefinedClassVariable(value, source=source, mutation_type=EXISTING_OBJECT)
        return ClassVariable(value, source=source)
    if isinstance(value, types.FunctionType):
        if (getattr(value, "__module__", None) or "").startswith("torch") and not (
            is_torch_helper(value)
        ):
            # torch internals are graph functions (above), helpers of torch's module
            # code (inlined like user code), or not traced at all.
            return ObjectVariable(value, source=source, mutation_type=EXISTING_OBJECT)
        return UserFunctionVariable(value, source=source)
    if type(value) is functools.partial:
        return PartialVariable(
            wrap(tx, value.func, AttrSource(source, "func")),
            tuple(wrap(tx, v, GetItemSource(AttrSource(source, "args"), i))
                  for i, v in enumerate(value.args)),
            {k: wrap(tx, v, GetItemSource(AttrSource(source, "keywords"), k))
             for k, v in value.keywords.items()},
            source=source,
        )
    return ObjectVariable(value, source=source, mutation_type=EXISTING_OBJECT)


def _wrap_tensor(
    tx: InstructionTranslatorBase, value: torch.Tensor, source: Source
) -> VariableTracker:
    if type(value) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported("unsupported_tensor_kind", f"tensor subclass {type(value).__name__}")
    output = tx.output
    seen = output.tensor_by_id.get(id(value))
    if seen is not None:  # the same tensor through a second source: one graph input
        output.add_guard(GuardKind.SAME_OBJECT, source, seen.source)
        return seen
    snapshot = TensorSnapshot.of(value)  # Unsupported for what is not traced (sparse...)
    if output.shapes is not None:  # a dynamic trace: fake tensors, some sizes symbolic
        meta = output.shapes.fake_input(value, source)
        snapshot = output.shapes.symbolic_snapshot(snapshot, meta)
    else:
        meta = metadata.to_meta(value)
    output.add_guard(GuardKind.TENSOR_MATCH, source, snapshot)
    node = output.add_input(source, value, meta)
    vt = TensorVariable(node, meta, value.device, tensor_type=type(value), source=source)
    output.tensor_by_id[id(value)] = vt
    return vt


def _wrap_symbolic_int(
    tx: InstructionTranslatorBase, value: int, source: Source
) -> VariableTracker:
    """An int argument whose value changes between calls: a graph input with a symbol
    (its relations guarded by the ShapeEnv), or a constant where the ShapeEnv fixes it."""
    from bytegraph.variables.symbolic import SymIntVariable

    output = tx.output
    output.add_guard(GuardKind.TYPE_MATCH, source, int)
    number = output.shapes.symbolic_int(value, source)
    if not isinstance(number, torch.SymInt) or number.node.expr.is_number:
        output.add_guard(GuardKind.CONSTANT_MATCH, source, value)
        return ConstantVariable(value)
    node = output.add_input(source, value, fake=number)
    return SymIntVariable(node, number, source=source)


def wrap_constant_result(value: Any) -> VariableTracker:
    """Wrap a value computed at trace time from constants (no source, no guard)."""
    if type(value) is torch.Size:
        return SizeVariable.of(value)
    if isinstance(value, tuple):
        return TupleVariable(tuple(wrap_constant_result(v) for v in value), tuple_type=type(value))
    if isinstance(value, list):
        return ListVariable(tuple(wrap_constant_result(v) for v in value), mutation_type=NEW_VALUE)
    if type(value) in DICT_TYPES and all(is_constant_value(k) for k in value):
        items = {k: wrap_constant_result(v) for k, v in value.items()}
        factory = getattr(value, "default_factory", None)
        factory_vt = None if factory is None else wrap_constant_result(factory)
        return DictVariable(items, type(value), factory_vt, mutation_type=NEW_VALUE)
    if is_constant_value(value):
        return ConstantVariable(value)
    if is_namedtuple_class(value):
        return NamedTupleClassVariable(value)
    if isinstance(value, type):
        return ClassVariable(value)
    if is_builtin_callable(value):
        return BuiltinVariable(value)
    if type(value).__module__ == "numpy":  # np.finfo(...).eps, a.dtype.type(1)...

        return wrap_numpy_constant(value)
    raise Unsupported("trace_time_value", f"a {type(value).__name__} computed at trace time")
