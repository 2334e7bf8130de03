"""numpy on tensors: ndarrays as tensors in the graph, numpy calls as torch._numpy calls.

The mechanism (``config.trace_numpy``, on by default, as in torch.compile):

1. An ndarray in the trace is an ``NdarrayVariable``: the TensorVariable that holds
   its data (the same memory) and an ``ArraySpec`` (numpy's dtype, shape, strides,
   and whether eager has a numpy scalar there rather than an array). It comes from
   ``x.numpy()`` / ``np.asarray(x)`` (the tensor's own node), from an ndarray argument
   of the frame (a graph input read as ``torch.from_numpy(a)``: ``NumpyTensorSource``,
   guarded on dtype, shape and strides), or from a numpy call.
2. A numpy call (``np.sin(a)``, ``a.sum(axis=0)``, ``a * 2``, ``a[0]``, ``a.T``) is one
   graph node calling torch._numpy's function of the same name on the tensors
   (``numpy_calls.graph_function``). numpy itself runs the same call once on
   stand-in arrays (``numpy_calls.probe``): where the two disagree on what comes
   back, the trace breaks. A call on constants only (``np.sqrt(2.0)``,
   ``np.finfo(np.float32)``) runs in numpy at trace time.
   (Values of the frame: ``numpy_frame.py``.)
3. ``torch.from_numpy(a)`` / ``torch.as_tensor(a)`` is a view of the tensor (the same
   memory, as in eager); ``torch.tensor(a)`` a copy with the same strides. Either breaks
   where torch._numpy's tensor is laid out otherwise than numpy's array.
4. At the graph's edge, an ndarray the rest of the program needs is rebuilt from the
   graph's tensor output (``tensor.numpy()``, or ``tensor.numpy()[()]`` for a numpy
   scalar); an ndarray argument is the caller's object itself.

What is not modelled breaks the graph (``numpy_unsupported``): numpy.random, a numpy
function called on a torch.Tensor (eager returns what Tensor.__array_wrap__ makes),
in-place writes into an array, dtypes torch has not, dynamic shapes. numpy is
imported only once a program uses it.
"""

from __future__ import annotations

import dataclasses
import operator
import sys
from typing import TYPE_CHECKING, Any

import torch

from bytegraph import config
from bytegraph.exc import Unsupported
from bytegraph.variables import numpy_calls
from bytegraph.variables.base import (
    BoundMethodVariable,
    PythonValueVariable,
    ValueMutationNew,
    VariableTracker,
)
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.tensor import TensorVariable, tensor_op

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

_NEW = ValueMutationNew(1)  # codegen rebuilds one object per VT: ``return a, a`` is one array


def refuse(detail: str) -> Unsupported:
    return Unsupported("numpy_unsupported", detail)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NdarrayVariable(VariableTracker):
    """A numpy array (or numpy scalar) whose data is ``tensor``'s."""

    tensor: TensorVariable
    spec: numpy_calls.ArraySpec = dataclasses.field(metadata={"no_vts": True})

    def python_type(self) -> type:
        import numpy as np

        return self.spec.dtype.type if self.spec.scalar else np.ndarray

    def as_python_constant(self) -> Any:
        raise Unsupported("not_a_constant", f"the values of {self} (a numpy array)")

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        raise Unsupported("data_dependent_branch", "bool() of a numpy array decides control flow")

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        import numpy as np

        spec = self.spec
        folded = {
            "shape": lambda: spec.shape, "ndim": lambda: len(spec.shape),
            "size": lambda: _numel(spec.shape), "dtype": lambda: spec.dtype,
            "itemsize": lambda: spec.dtype.itemsize,
            "nbytes": lambda: _numel(spec.shape) * spec.dtype.itemsize,
            "strides": lambda: tuple(s * spec.dtype.itemsize for s in spec.strides),
        }.get(name)
        if folded is not None:
            return wrap_numpy_constant(folded())
        if name in _GRAPH_ATTRIBUTES:
            return numpy_call(tx, "attribute", name, lambda a: getattr(a, name), [self], {})
        if name in _REFUSED_METHODS:
            raise refuse(f"ndarray.{name} (writes into the array or reads its values)")
        if callable(getattr(np.ndarray, name, None)):
            return BoundMethodVariable(self, name)
        raise refuse(f"ndarray attribute {name!r}")

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if name in _REFUSED_METHODS:
            raise refuse(f"ndarray.{name} (writes into the array or reads its values)")
        if name == "__len__" and not args and not kwargs and self.spec.shape:
            return ConstantVariable(self.spec.shape[0])
        return numpy_call(
            tx, "method", name, lambda a, *r, **k: getattr(a, name)(*r, **k), [self, *args], kwargs
        )

    def getitem(self, tx: InstructionTranslatorBase, index: VariableTracker) -> VariableTracker:
        return numpy_operator(tx, operator.getitem, [self, index])

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        """``for row in a``: ``a[0]``, ``a[1]``... (rows are views, items numpy scalars)."""
        if self.spec.scalar or not self.spec.shape:
            raise Unsupported("operation_raises", "iteration over a 0-d array (TypeError)")
        return [self.getitem(tx, ConstantVariable(i)) for i in range(self.spec.shape[0])]

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        convert = numpy_calls.to_numpy_scalar if self.spec.scalar else numpy_calls.to_ndarray
        codegen.call_const(convert, [self.tensor])

    def __repr__(self) -> str:
        kind = "scalar" if self.spec.scalar else list(self.spec.shape)
        return f"NdarrayVariable({self.tensor.node.name}, {self.spec.dtype}, {kind})"


def _same_layout(example: torch.Tensor, spec: numpy_calls.ArraySpec) -> bool:
    """Whether the tensor's strides are numpy's (a dimension of size 1 has no stride
    that matters: numpy gives ``a[None]`` stride 0 there)."""
    if _numel(spec.shape) <= 1:
        return True
    pairs = zip(spec.shape, example.stride(), spec.strides)
    return all(n == 1 or mine == theirs for n, mine, theirs in pairs)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for n in shape:
        total *= n
    return total


_GRAPH_ATTRIBUTES = frozenset({"T", "real", "imag", "mT"})
# Methods that write into the array, expose its memory, or read its values into Python.
_REFUSED_METHODS = frozenset({
    "fill", "sort", "partition", "put", "itemset", "resize", "setflags", "setfield",
    "byteswap", "dump", "dumps", "tofile", "tolist", "item", "tobytes", "tostring",
    "__setitem__", "__array__", "__array_wrap__", "__buffer__", "__dlpack__", "view",
    "getfield", "ctypes", "data", "base", "flags", "__iter__",
    "__bool__", "__int__", "__float__", "__index__", "__complex__",
})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NumpyFunctionVariable(PythonValueVariable):
    """A numpy function or ufunc; ``name`` is its path in torch._numpy (None: none)."""

    name: str | None = None

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        converted = _tensor_conversion(tx, self.value, self.name, args, kwargs)
        if converted is not None:
            return converted
        if self.name in _METADATA_FUNCTIONS and len(args) == 1 and not kwargs and isinstance(
            args[0], NdarrayVariable
        ):
            return args[0].var_getattr(tx, self.name)  # np.shape(a): a.shape
        # Run at trace time only what torch._numpy also has (pure array functions): numpy's
        # others include np.seterr, np.save, np.load, whose effects belong to run time.
        if (self.name is not None or self.value in _PURE_EXTRAS()) and _all_constant(
            tx, args, kwargs
        ):
            folded = _fold(tx, self.value, args, kwargs)
            if folded is not None:
                return folded
        if self.name is None:
            name = getattr(self.value, "__name__", repr(self.value))
            raise refuse(f"numpy.{name} has no torch._numpy counterpart")
        return numpy_call(tx, "function", self.name, self.value, args, kwargs)

    def __repr__(self) -> str:
        return f"NumpyFunctionVariable({self.name or self.value!r})"


_METADATA_FUNCTIONS = frozenset({"shape", "ndim", "size"})


def _PURE_EXTRAS() -> tuple[Any, ...]:  # noqa: N802  (a constant that needs numpy)
    """numpy functions without a torch._numpy counterpart that compute on dtypes only."""
    np = sys.modules["numpy"]
    return (np.promote_types, np.min_scalar_type, np.iscomplexobj, np.isrealobj)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NumpyTypeVariable(PythonValueVariable):
    """A numpy scalar type (``np.float32``: a dtype argument, or a constant's constructor),
    or ``np.dtype`` / ``np.finfo`` / ``np.iinfo``, called on constants at trace time."""

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if _all_constant(tx, args, kwargs):
            folded = _fold(tx, self.value, args, kwargs)
            if folded is not None:
                return folded
        raise refuse(f"numpy.{self.value.__name__}(...) of an array")


def _tensor_conversion(
    tx: InstructionTranslatorBase, fn: Any, name: str | None, args: list, kwargs: dict
) -> VariableTracker | None:
    """``np.asarray(x)`` / ``np.array(x)`` of a tensor, and ufuncs of tensors; other
    numpy functions given a tensor break (``np.sum(x)`` calls ``x.sum(axis=...)``)."""
    tensors = any(isinstance(a, TensorVariable) for a in (*args, *kwargs.values()))
    if not tensors:
        if name == "asarray" and len(args) == 1 and not kwargs and isinstance(
            args[0], NdarrayVariable
        ) and not args[0].spec.scalar:
            return args[0]  # numpy returns the array itself
        return None
    if name in ("asarray", "array") and len(args) == 1 and not kwargs:
        array = tensor_to_ndarray(tx, args[0])
        if name == "asarray":
            return array
        return numpy_call(tx, "method", "copy", lambda a: a.copy(), [array], {})
    if name is not None and not kwargs and isinstance(fn, sys.modules["numpy"].ufunc):
        return _ufunc_of_tensors(tx, fn, name, args)
    raise refuse(f"numpy.{name} called on a torch.Tensor")


def _ufunc_of_tensors(
    tx: InstructionTranslatorBase, ufunc: Any, name: str, args: list
) -> VariableTracker:
    """``np.exp(x)``: numpy reads each tensor as an array (``Tensor.__array__``), and
    ``Tensor.__array_wrap__`` makes the result ``torch.from_numpy`` of numpy's array:
    a tensor, also where numpy would return a scalar."""
    arrays = [tensor_to_ndarray(tx, a) if isinstance(a, TensorVariable) else a for a in args]
    result = numpy_call(tx, "function", name, ufunc, arrays, {})
    if not isinstance(result, NdarrayVariable):
        raise refuse(f"numpy.{name} of a torch.Tensor returning several arrays")
    return _tensor_view(tx, result)


def _all_constant(tx: InstructionTranslatorBase, args: list, kwargs: dict) -> bool:
    from bytegraph.variables.containers import is_python_constant_now

    return all(is_python_constant_now(tx, a) for a in (*args, *kwargs.values()))


def _fold(
    tx: InstructionTranslatorBase, fn: Any, args: list, kwargs: dict
) -> VariableTracker | None:
    """``fn`` on constants, in numpy now; None where it makes an array (a graph value)."""
    import numpy as np

    from bytegraph.variables.containers import python_constant

    values = [python_constant(tx, a) for a in args]
    kw_values = {k: python_constant(tx, v) for k, v in kwargs.items()}
    answer = numpy_calls.probe(lambda: (fn(*values, **kw_values), []), None)
    if _has_array(answer.value):
        return None
    with np.errstate(all="ignore"):
        return wrap_numpy_constant(fn(*values, **kw_values))


def _has_array(summary: Any) -> bool:
    if isinstance(summary, numpy_calls.ArraySpec):
        return not summary.scalar
    if type(summary) in (tuple, list):
        return any(_has_array(s) for s in summary)
    return False


def wrap_numpy_constant(value: Any) -> VariableTracker:
    """A value numpy computed from constants: numpy scalars, dtypes, finfo are immutable."""
    import numpy as np

    from bytegraph.variables.builder import wrap_constant_result

    if isinstance(value, (np.generic, np.dtype, np.finfo, np.iinfo)):
        return ConstantVariable(value)
    if isinstance(value, np.ndarray):
        raise refuse("a numpy array computed at trace time")
    if type(value) is tuple:
        from bytegraph.variables.containers import TupleVariable

        return TupleVariable(tuple(wrap_numpy_constant(v) for v in value))
    return wrap_constant_result(value)


# -- the call ------------------------------------------------------------------------------


def numpy_operator(
    tx: InstructionTranslatorBase, fn: Any, args: list[VariableTracker]
) -> VariableTracker:
    """``a * 2``, ``a[0]``, ``-a``: an operator with an ndarray operand."""
    if any(isinstance(a, TensorVariable) for a in args):
        raise refuse(f"operator {fn.__name__} between a numpy array and a torch.Tensor")
    return numpy_call(tx, "operator", fn.__name__, fn, args, {})


def numpy_call(
    tx: InstructionTranslatorBase,
    kind: str,
    name: str,
    real: Any,
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> VariableTracker:
    """One numpy call as a graph node, checked against numpy's own answer (``real``
    called on stand-ins)."""
    if "out" in kwargs:
        raise refuse(f"numpy {name}(out=...) writes into an array")
    lowered = [_lower(tx, a) for a in args]
    lowered_kw = {k: _lower(tx, v) for k, v in kwargs.items()}
    key = (kind, name, real if kind == "function" else None,
           tuple(p[2] for p in lowered), tuple((k, p[2]) for k, p in lowered_kw.items()))
    try:
        hash(key)
    except TypeError:
        key = None

    def on_stand_ins() -> tuple[Any, list[Any]]:
        stand_ins = [p[1]() for p in lowered]
        kw_stand_ins = {k: p[1]() for k, p in lowered_kw.items()}
        return real(*stand_ins, **kw_stand_ins), [*stand_ins, *kw_stand_ins.values()]

    answer = numpy_calls.probe(on_stand_ins, key)
    _refuse_integer_edge_cases(tx, name, args, answer.value)
    target = numpy_calls.graph_function(kind, name)
    graph_args = [p[0] for p in lowered]
    graph_kwargs = {k: p[0] for k, p in lowered_kw.items()}
    result = tensor_op(tx, "call_function", target, graph_args, graph_kwargs)
    what = f"{name}" if kind != "method" else f"ndarray.{name}"
    try:
        numpy_calls.check_answer(answer.value, _examples(result), what)
    except Unsupported:
        retried = _with_numpy_dtype(tx, kind, name, real, args, kwargs, answer.value, result)
        if retried is None:
            raise
        return retried
    inputs = _input_bases([*graph_args, *graph_kwargs.values()])
    return _as_ndarrays(tx, result, answer.value, inputs, what)


_ACCUMULATORS = frozenset({"sum", "prod", "cumsum", "cumprod"})


def _with_numpy_dtype(
    tx: InstructionTranslatorBase, kind: str, name: str, real: Any,
    args: list[VariableTracker], kwargs: dict[str, VariableTracker], expected: Any,
    wrong: VariableTracker,
) -> VariableTracker | None:
    """The call again with ``dtype=`` numpy's result dtype, where that is how numpy
    computed it anyway: a ufunc with a loop of that one dtype (``np.square`` of int64:
    ``'ll->l'``, ``np.hypot`` of int8: ``'ee->e'``), or an accumulation (``cumsum`` of a
    bool mask accumulates in int64). torch._numpy picks other dtypes for some of them.
    None where that does not apply; the retry is checked against numpy like any call."""
    np = sys.modules["numpy"]
    if "dtype" in kwargs or not isinstance(expected, numpy_calls.ArraySpec):
        return None
    if not isinstance(wrong, TensorVariable) or expected.dtype.kind not in "iufc":
        return None
    char = expected.dtype.char
    ufunc = isinstance(real, np.ufunc) and real.nout == 1 and (
        f"{char * real.nin}->{char}" in real.types)
    if not ufunc and (name not in _ACCUMULATORS or kind not in ("function", "method")):
        return None
    if not wrong.node.users:
        wrong.node.graph.erase_node(wrong.node)
    retried = numpy_call(tx, kind, name, real, args,
                         {**kwargs, "dtype": ConstantVariable(expected.dtype)})
    spec = getattr(retried, "spec", None)
    if spec != expected:
        raise Unsupported("numpy_divergence", f"numpy's {name} with dtype= differs")
    return retried


# Integer operations whose edge cases numpy and torch answer differently: a zero divisor
# (numpy: 0 and a warning; torch raises), a negative exponent (numpy raises), a shift by
# the width or more. Refused where the right operand is an array (its values unknown).
_INTEGER_EDGES = frozenset({
    "floordiv", "mod", "ifloordiv", "imod", "floor_divide", "remainder", "fmod", "divmod",
    "pow", "ipow", "power", "lshift", "rshift", "ilshift", "irshift", "left_shift",
    "right_shift", "__floordiv__", "__mod__", "__pow__", "__lshift__", "__rshift__",
})


def _refuse_integer_edge_cases(
    tx: InstructionTranslatorBase, name: str, args: list[VariableTracker], answer: Any
) -> None:
    if name not in _INTEGER_EDGES or len(args) < 2:
        return
    leaves = answer if isinstance(answer, (tuple, list)) else (answer,)
    integer = any(isinstance(leaf, numpy_calls.ArraySpec) and leaf.dtype.kind in "iub"
                  for leaf in leaves)
    right = args[1]
    if integer and (isinstance(right, NdarrayVariable) or _unsafe_constant(tx, name, right)):
        raise Unsupported(
            "numpy_divergence", f"integer {name} by an array or an edge value: numpy and "
            "torch differ on zero divisors, negative exponents and wide shifts",
        )


def _unsafe_constant(tx: InstructionTranslatorBase, name: str, vt: VariableTracker) -> bool:
    from bytegraph.variables.containers import python_constant

    try:
        value = python_constant(tx, vt)
    except Unsupported:
        return True
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return True
    if "shift" in name:
        return not 0 <= value < 8
    return value == 0 or value < 0


def _lower(tx: InstructionTranslatorBase, vt: VariableTracker) -> tuple[Any, Any, Any]:
    """(graph argument VT, maker of numpy's stand-in, memo key) for one argument."""
    import numpy as np

    from bytegraph.variables.containers import BaseSequenceVariable, ListVariable, TupleVariable

    if isinstance(vt, NdarrayVariable):
        return vt.tensor, vt.spec.stand_in, vt.spec
    if isinstance(vt, TensorVariable):
        raise refuse("a numpy operation on a torch.Tensor")
    if isinstance(vt, BaseSequenceVariable) and not vt.is_python_constant():
        parts = [_lower(tx, item) for item in vt.items_now(tx)]
        rebuild = list if vt.python_type() is list else tuple
        graph_items = tuple(p[0] for p in parts)
        graph = (ListVariable(graph_items, mutation_type=_NEW) if rebuild is list
                 else TupleVariable(graph_items))
        return graph, lambda: rebuild(p[1]() for p in parts), (rebuild, tuple(p[2] for p in parts))
    from bytegraph.variables.containers import python_constant

    value = python_constant(tx, vt)
    key = (type(value), value) if not isinstance(value, (list, dict, set)) else None
    if isinstance(value, np.generic):  # a strong-typed scalar: a 0-d tensor of its dtype
        dtype = numpy_calls.torch_dtype(value.dtype)
        graph = tensor_op(tx, "call_function", numpy_calls.graph_scalar,
                          [ConstantVariable(value.item()), ConstantVariable(dtype)], {})
        return graph, lambda: value, key
    if isinstance(value, np.dtype) or value in _PYTHON_DTYPES or (
        isinstance(value, type) and issubclass(value, np.generic)
    ):
        return ConstantVariable(numpy_calls.torch_dtype(np.dtype(value))), lambda: value, key
    if isinstance(value, (list, tuple)) and _has_numpy_constants(value):
        raise refuse("numpy scalars or dtypes inside a list argument")
    return ConstantVariable(value) if not isinstance(value, list) else vt, lambda: value, key


_PYTHON_DTYPES = (float, int, bool, complex)  # a.astype(float): numpy's float64


def _has_numpy_constants(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_has_numpy_constants(v) for v in value)
    return type(value).__module__ == "numpy"


def _examples(result: VariableTracker) -> Any:
    from bytegraph.variables.containers import BaseSequenceVariable

    if isinstance(result, TensorVariable):
        return result.example
    if isinstance(result, BaseSequenceVariable):
        kind = list if result.python_type() is list else tuple
        return kind(_examples(item) for item in result.items)
    return result


def _input_bases(args: list[Any]) -> set[int]:
    """ids of the memory (base meta tensors) the call's tensor arguments view."""
    from bytegraph.graph.metadata import base_of
    from bytegraph.variables.containers import BaseSequenceVariable

    found: set[int] = set()
    for arg in args:
        if isinstance(arg, TensorVariable):
            found.add(id(base_of(arg.example)))
        elif isinstance(arg, BaseSequenceVariable):
            found |= _input_bases(list(arg.items))
    return found


def _as_ndarrays(
    tx: InstructionTranslatorBase, result: VariableTracker, summary: Any, inputs: set[int],
    what: str,
) -> VariableTracker:
    """The graph's result as numpy's: NdarrayVariables, copied where numpy copies (a
    numpy scalar, ``a.flatten()``) but torch._numpy returns a view, or lays out a new
    array otherwise (``np.square(a.T) - b``); a break where numpy returns a view and
    torch._numpy a copy (a later write would show in one only)."""
    from bytegraph.graph.metadata import base_of
    from bytegraph.variables.containers import ListVariable, TupleVariable

    if isinstance(summary, numpy_calls.ArraySpec):
        shares = id(base_of(result.example)) in inputs
        if summary.view and not shares:
            raise Unsupported("numpy_divergence",
                              f"torch._numpy's {what} gives a copy where numpy returns a view")
        if not _same_layout(result.example, summary):
            if summary.view:
                raise Unsupported("numpy_divergence",
                                  f"torch._numpy's {what} lays out a view otherwise than numpy")
            # numpy's layout for a new array (the edge's ndarray, torch.from_numpy's strides)
            result = tensor_op(tx, "call_function", numpy_calls.restride,
                               [result, ConstantVariable(summary.strides)], {})
        elif shares and not summary.view:
            result = tensor_op(tx, "call_method", "clone", [result], {})
        return NdarrayVariable(result, summary, mutation_type=_NEW)
    items = tuple(_as_ndarrays(tx, r, s, inputs, what) for r, s in zip(result.items, summary))
    if type(summary) is list:
        return ListVariable(items, mutation_type=_NEW)
    return TupleVariable(items)


# -- tensors to arrays and back -----------------------------------------------------------


def tensor_to_ndarray(tx: InstructionTranslatorBase, t: VariableTracker) -> NdarrayVariable:
    """``x.numpy()``: an array over the tensor's memory; what eager refuses breaks."""
    if not isinstance(t, TensorVariable):
        raise refuse(f"numpy conversion of {t}")
    if not config.trace_numpy:
        raise Unsupported("tolist_call", "Tensor.numpy needs the tensor's values")
    no_dynamic_shapes(tx)
    example = t.example
    if t.python_type() not in (torch.Tensor, torch.nn.Parameter):
        raise refuse(f"numpy() of a {t.python_type().__name__}")
    if example.requires_grad:
        raise Unsupported("operation_raises", "Tensor.numpy() of a tensor that requires grad")
    if t.device.type != "cpu":
        raise Unsupported("operation_raises", f"Tensor.numpy() of a {t.device.type} tensor")
    if example.is_conj() or example.is_neg():
        raise Unsupported("operation_raises", "Tensor.numpy() of a conjugate or negative view")
    dtype = numpy_calls.numpy_dtype(example.dtype)
    return NdarrayVariable(t, numpy_calls.ArraySpec(dtype, tuple(example.shape),
                                                    tuple(example.stride())), mutation_type=_NEW)


def no_dynamic_shapes(tx: InstructionTranslatorBase) -> None:
    if tx.output.shapes is not None:
        raise refuse("numpy arrays in a trace with dynamic shapes")


_TORCH_BRIDGES = {torch.from_numpy: "view", torch.as_tensor: "view", torch.asarray: "view",
                  torch.tensor: "copy"}


def ndarray_to_tensor(
    tx: InstructionTranslatorBase, fn: Any, args: list, kwargs: dict
) -> VariableTracker:
    """``torch.from_numpy(a)`` (a view of the same memory), ``torch.tensor(a)`` (a copy)."""
    array = args[0]
    how = _TORCH_BRIDGES.get(fn)
    if how is None or len(args) != 1 or kwargs:
        raise refuse(f"{getattr(fn, '__name__', fn)} of a numpy array")
    if array.spec.scalar and fn is torch.from_numpy:
        raise Unsupported("operation_raises", "torch.from_numpy of a numpy scalar (TypeError)")
    if how == "copy":  # torch.tensor(a) keeps a dense array's strides, as clone() does
        return tensor_op(tx, "call_method", "clone", [_tensor_view(tx, array)], {})
    return _tensor_view(tx, array)


def _tensor_view(tx: InstructionTranslatorBase, array: NdarrayVariable) -> VariableTracker:
    """A new tensor over the array's memory, laid out as numpy lays the array out."""
    t = array.tensor
    if not _same_layout(t.example, array.spec):
        raise Unsupported("numpy_divergence",
                          "torch._numpy's array has another memory layout than numpy's")
    return tensor_op(tx, "call_method", "view_as", [t, t], {})
