"""numpy corpus: numpy code on tensors and ndarrays, traced through torch._numpy.

Each program runs eager and compiled on copies of the same inputs: results (ndarrays:
the same type, dtype, shape and values; numpy scalars: the same scalar type) and every
input afterwards must agree, the graph count must be what the comment or ``graphs``
says, and a second call on new values must hit the cache. Floating values may differ
by a few units in the last place where torch and numpy compute a function differently
(``np.cos`` on float32); everything else is compared exactly.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from _harness import Corpus

import bytegraph

CORPUS = Corpus()
program = CORPUS.add


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def array(*shape: int, dtype: Any = np.float64) -> np.ndarray:
    return np.asarray(torch.randn(*shape, dtype=torch.float64).numpy(), dtype=dtype)


# --- tensors to arrays and back ------------------------------------------------------------


@program(lambda: (randn(3, 4),))
def sin_of_numpy(x):
    return torch.from_numpy(np.sin(x.numpy()) * 2)


@program(lambda: (randn(3, 4),))
def conversions(x):
    a = np.asarray(x)
    b = np.array(x)
    c = x.detach().cpu().numpy()
    return torch.as_tensor(a + b), torch.tensor(c * 3), torch.from_numpy(a.T)


@program(lambda: (randn(10), 4096, np.int64(8), np.float64(1.5)))
def numpy_number_scalars_in_tensor_ops(x, a, b, c):  # Dynamo's test_numpy_int_constant
    half = x.to(torch.float16)
    return x + (a % b), half * c, torch.add(x.to(torch.int32), b), c - x


@program(lambda: (randn(2, 3),))
def ndarray_returned(x):
    a = np.tanh(x.numpy())
    return a, a, a.sum(), a.T


@program(lambda: (randn(2, 3),))
def astype_and_promotion(x):
    a = x.numpy()
    i = (x * 10).to(torch.int64).numpy()
    return a.astype(np.float64) + 1, i / 2, i // 3, a * i, a * 2.5, np.float32(2.5) * a


@program(lambda: (randn(3, 4),))
def attributes_and_methods(x):
    a = x.numpy()
    return (a.shape, a.ndim, a.size, a.dtype, a.T.shape, a.sum(), a.mean(axis=0),
            a.max(axis=1), a.reshape(-1).argmax(), a.cumsum(axis=1), a.std())


@program(lambda: (randn(3, 4),))
def indexing(x):
    a = x.numpy()
    return a[0], a[0, 1], a[:, 1:3] * a[:, :2], a[::2], a[..., None].shape


@program(lambda: (randn(3, 4),), graphs=1)
def copies_and_views(x):
    a = x.numpy()
    flat = a.flatten()  # numpy copies (torch._numpy views: copied in the graph)
    first = a[0, 0]  # a numpy scalar: a copy
    back = a[::-1]  # numpy views; torch has no negative strides: a break
    a[0, 0] = 100.0
    return flat, first, back, x


@program(lambda: (randn(3, 4),))
def metadata_functions_and_python_dtypes(x):
    a = x.numpy()
    return np.shape(a), np.ndim(a), np.size(a), len(a), a.astype(float), a.astype(int)


@program(lambda: (randn(3, 4),))
def iteration(x):
    a = x.numpy()
    rows = [row * 2 for row in a]
    first, *rest = a[0]
    return rows, first, rest, sum(a[1])


@program(lambda: (randn(3, 4),))
def arrays_stored_and_compared(x):
    a = x.numpy() * 2
    box = {"a": a, "pair": (a, a + 1)}
    return box, a is None, a is not None


@program(lambda: (randn(3, 4),))
def finfo_iinfo_and_dtypes(x):
    a = x.numpy()
    eps = np.finfo(np.float32).eps
    top = np.iinfo(np.int32).max
    ok = isinstance(a, np.ndarray) and a.dtype == np.float32
    promoted = np.promote_types(np.float32, np.int64)
    return a * eps, torch.from_numpy(a) * float(top), ok, np.float64(1.5) * a, promoted


@program(lambda: (randn(3, 4),))
def functions(x):
    a = x.numpy()
    return (np.maximum(a, 0), np.clip(a, -0.5, 0.5), np.where(a > 0, a, 0.0),
            np.concatenate([a, a * 2], axis=0), np.stack((a, a)), np.abs(a).sum(axis=1),
            np.exp(a).max(), np.linalg.norm(a), np.dot(a, a.T), np.zeros(3), np.arange(4))


@program(lambda: (randn(3, 4),))
def tensor_copy_keeps_strides(x):
    # fuzz seed 11 index 182: torch.tensor(a.T) keeps a.T's strides (it was made contiguous)
    return torch.tensor(np.negative(x.numpy()).T).T, torch.tensor(x.numpy()[:, ::2])


SCALE = np.float64(1.5)


@program(lambda: (randn(3),), graphs=2)
def numpy_float_constant_in_tensor_ops(x):
    # np.float64 is a float: printed as np.float64(1.5) in the graph's code, it raised
    # NameError there, and the frame silently ran again as Python
    y = x * SCALE + np.float64(0.5)
    print("between")
    return y * SCALE, torch.full((2,), SCALE)


@program(lambda: (randn(3, 4).t(), randn(4, 3)))
def layout_of_mixed_operands(x, y):
    # fuzz seed 11 index 195: numpy makes this C-contiguous, torch keeps x's transposed
    # layout; the edge's ndarray and torch.from_numpy's strides are numpy's
    r = np.square(x.numpy()) - y.numpy()
    return torch.from_numpy(r), r.strides


@program(lambda: ((randn(3, 4) * 5).to(torch.int64), (randn(3, 4) * 5).to(torch.int8)))
def dtypes_torch_numpy_picks_otherwise(i, j):
    # torch._numpy's own dtypes: int64, bool, int32; numpy's: float16, int64, int64
    a, b, mask = i.numpy(), j.numpy(), (i > 0).numpy()
    return (np.hypot(b, b), mask.cumsum(), np.cumsum(b.astype(np.int32), axis=1), mask.sum(),
            a * 2)


@program(lambda: (torch.tensor([3, 4, 5]), torch.tensor([0, 2, -1])), graphs=2)
def integer_division_by_an_array(x, y):
    # numpy: 0 where the divisor is 0 (and a warning); torch raises ZeroDivisionError
    x.add_(1)  # the graph writes an input: it cannot run again as Python if it raised
    return x.numpy() // y.numpy(), x.numpy() // 2, x.numpy() % 3, np.square(x.numpy())


# --- ndarray arguments ---------------------------------------------------------------------


@program(lambda: (array(2, 3),))
def ndarray_argument(a):
    return np.tanh(a) + 1


@program(lambda: (array(2, 3, dtype=np.float32), array(3, 2, dtype=np.float32)))
def matmul_of_arguments(a, b):
    return a @ b, np.dot(a, b).sum(axis=0)


@program(lambda: (array(2, 3), randn(2, 3)))
def argument_mixed_with_tensor(a, x):
    return torch.from_numpy(a * 2).float() + x


@program(lambda: (array(4),), graphs=0)
def ndarray_argument_returned(a):
    return a, a.shape


# --- breaks ----------------------------------------------------------------------------------


@program(lambda: (array(3),))
def in_place_write_to_argument(a):
    a += 1  # graph 1 computes nothing but the break's locals; the write runs in Python
    return a * 2


@program(lambda: (randn(3),), graphs=1)
def item_write_through_numpy(x):
    a = x.numpy()
    a[0] = 5.0  # writes into x: a break, eager's write runs in Python
    return x + 1


@program(lambda: (randn(3),), graphs=2)
def print_between(x):
    a = np.cos(x.numpy())
    print("between")
    return torch.from_numpy(a) + 1, a


@program(lambda: (randn(3),), graphs=1)
def value_read_into_python(x):
    a = x.numpy() * 2
    return float(a.sum())


@program(lambda: (randn(3), torch.tensor(2.0)))
def ufunc_of_tensors(x, s):
    # eager: numpy reads the tensors as arrays; Tensor.__array_wrap__ makes tensors again
    return np.exp(x), np.add(x, x.numpy()), np.negative(s), np.maximum(x, 0.5)


@program(lambda: (randn(3),), graphs=0)
def numpy_function_of_a_tensor(x):
    return np.clip(x, 0, 1)  # eager: calls x.clip(0, 1) (np.sum(x) raises TypeError)


@program(lambda: (randn(3),), graphs=2)
def numpy_random(x):
    a = x.numpy() * 2
    rng = np.random.default_rng(0)
    return a + rng.standard_normal(3)


@program(lambda: (array(3).astype(object),), graphs=0)
def object_dtype_argument(a):
    return a * 2


@program(lambda: ((randn(3) * 10).to(torch.int64),), graphs=1)
def truediv_default_dtype(x):
    return x.numpy() / 2  # float64 in numpy (torch._numpy's own default: float32)


# --- the recipe --------------------------------------------------------------------------------


def clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(clone(v) for v in value)
    return copy.deepcopy(value)


def assert_same(actual: Any, expected: Any, path: str = "result") -> None:
    assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
    if isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{path}: {actual.dtype} != {expected.dtype}"
        assert np.shape(actual) == np.shape(expected), f"{path}: shape differs"
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(actual, expected, rtol=4 * np.finfo(expected.dtype).eps,
                                       err_msg=path)
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=path)
    elif isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype and actual.stride() == expected.stride(), path
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length differs"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys differ"
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}[{key!r}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def assert_same_identity(actual: tuple, expected: tuple) -> None:
    """``return a, a`` is one object twice on both sides; an argument returned is itself."""
    def ids(world: tuple) -> list[int]:
        args, result = world
        objects = [*args, *_leaves(result)]
        first: dict[int, int] = {}
        return [first.setdefault(id(o), i) for i, o in enumerate(objects)]

    assert ids(actual) == ids(expected), "object identity differs"


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]


def check(fn: Any, make_inputs: Any, backend: Any) -> None:
    inputs = make_inputs()
    eager_args, compiled_args = clone(inputs), clone(inputs)
    expected = fn(*eager_args)
    compiled = bytegraph.compile(fn, backend=backend)
    actual = compiled(*compiled_args)
    assert_same(actual, expected)
    assert_same(compiled_args, eager_args, "args after the call")
    assert_same_identity((compiled_args, actual), (eager_args, expected))
    return compiled


@pytest.mark.parametrize("prog", list(CORPUS), ids=lambda p: p.name)
def test_program(prog, counting_backend):
    compiled = check(prog.fn, prog.make_inputs, counting_backend)
    assert counting_backend.calls == prog.graphs, (
        f"expected {prog.graphs} graph(s), got {counting_backend.calls}"
    )
    entries = len(compiled.entries)
    actual = compiled(*clone(prog.make_inputs()))  # new values, same metadata
    del actual
    assert counting_backend.calls == prog.graphs, "the second call compiled a new graph"
    assert len(compiled.entries) == entries, "the second call missed the cache"
    if prog.graphs == 1 and prog.name not in _ONE_GRAPH_AFTER_A_BREAK:
        inputs = prog.make_inputs()
        full = bytegraph.compile(prog.fn, backend="eager", fullgraph=True)
        assert_same(full(*clone(inputs)), prog.fn(*clone(inputs)))


# One graph, then a break whose rest computes nothing (or runs in Python).
_ONE_GRAPH_AFTER_A_BREAK = {
    "in_place_write_to_argument", "item_write_through_numpy", "value_read_into_python",
    "copies_and_views",
}


def test_recompiles_on_dtype_and_shape(counting_backend):
    compiled = bytegraph.compile(lambda a: np.tanh(a) * 2, backend=counting_backend)
    for a in (np.ones(3), np.ones(3, np.float32), np.ones((2, 2)), np.ones(3)):
        assert_same(compiled(a), np.tanh(a) * 2)
    assert counting_backend.calls == 3


def test_ndarray_argument_not_copied():
    a = np.ones(3)
    assert bytegraph.compile(lambda a: (a, np.sin(a)), backend="eager")(a)[0] is a


def test_trace_numpy_off(counting_backend, monkeypatch):
    monkeypatch.setattr(bytegraph.config, "trace_numpy", False)
    x = randn(3, 4)
    compiled = bytegraph.compile(sin_of_numpy, backend=counting_backend)
    assert_same(compiled(x), sin_of_numpy(x))
    assert counting_backend.calls == 0
    report = bytegraph.explain(sin_of_numpy)(x)
    assert any("numpy" in str(b.reason) for b in report.break_reasons)


def test_aot_eager_backend():
    x = randn(3, 4)
    compiled = bytegraph.compile(functions, backend="aot_eager")
    assert_same(compiled(x.clone()), functions(x.clone()))


def test_numpy_imported_only_inside_functions():
    """numpy is optional: no bytegraph module imports it at import time (it is imported
    inside the functions that run once a program uses numpy)."""
    import ast
    import pathlib

    package = pathlib.Path(bytegraph.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:  # module level only
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "numpy" or n.startswith("numpy.") for n in names), path


def test_numpy_state_functions_run_at_run_time():
    """np.seterr has no torch._numpy counterpart: it runs in Python on every call (a
    break), not once while tracing."""
    def f(x):
        np.seterr(divide="ignore")
        return x.numpy() * 2

    compiled = bytegraph.compile(f, backend="eager")
    old = np.geterr()
    try:
        for _ in range(2):
            np.seterr(divide="raise")
            compiled(randn(3))
            assert np.geterr()["divide"] == "ignore"
    finally:
        np.seterr(**old)
