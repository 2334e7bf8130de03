"""bytegraph's own shape rules (graph/shape_rules.py) against torch's meta kernels.

Every accepted form must give exactly what the meta kernel gives (shape, strides,
dtype, requires_grad, is_leaf), under grad mode and no_grad; every form the rules
do not model must be refused (None: the meta kernel decides). The models built from
these ops compile without importing torch._dynamo or sympy (a fresh process).
"""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 (the universal alias)
from torch import nn

from bytegraph.graph import shape_rules

META = torch.device("meta")


def t(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device=META, requires_grad=grad)


def channels_last(*shape: int) -> torch.Tensor:
    return t(*shape).to(memory_format=torch.channels_last)


# (kind, target, args, kwargs) of forms the rules accept.
ACCEPTED: dict[str, Callable[[bool], tuple[str, Any, tuple, dict]]] = {
    "linear": lambda g: (
        "call_function", F.linear, (t(8, 32), t(64, 32, grad=g), t(64, grad=g)), {}),
    "linear 3d no bias": lambda g: ("call_function", F.linear, (t(2, 5, 32, grad=g), t(7, 32)), {}),
    "linear bias kw": lambda g: (
        "call_function", F.linear, (t(3, 4), t(6, 4)), {"bias": t(6, grad=g)}),
    "linear transposed weight": lambda g: (
        "call_function", F.linear, (t(3, 4, grad=g), t(4, 6).t()), {}),
    "linear float64": lambda g: ("call_function", F.linear, (
        t(3, 4, dtype=torch.float64), t(5, 4, dtype=torch.float64, grad=g)), {}),
    "F.relu": lambda g: ("call_function", F.relu, (t(8, 64, grad=g),), {"inplace": False}),
    "torch.relu": lambda g: ("call_function", torch.relu, (t(2, 3, 4, grad=g),), {}),
    "gelu": lambda g: ("call_function", F.gelu, (t(8, 64, grad=g),), {"approximate": "none"}),
    "gelu tanh bf16": lambda g: ("call_function", F.gelu,
                                 (t(4, 6, dtype=torch.bfloat16, grad=g),), {"approximate": "tanh"}),
    "conv2d": lambda g: ("call_function", torch.conv2d, (
        t(2, 3, 16, 16), t(8, 3, 3, 3, grad=g), t(8, grad=g), (1, 1), (1, 1), (1, 1), 1), {}),
    "conv2d strided dilated": lambda g: (
        "call_function", F.conv2d, (t(2, 4, 17, 13, grad=g), t(6, 2, 3, 2)),
        {"stride": (2, 3), "padding": 2, "dilation": (2, 1), "groups": 2}),
    "batch_norm eval": lambda g: ("call_function", F.batch_norm, (
        t(2, 8, 16, 16), t(8), t(8), t(8, grad=g), t(8, grad=g), False, 0.1, 1e-5), {}),
    "batch_norm 2d no affine": lambda g: ("call_function", F.batch_norm,
                                          (t(4, 8, grad=g), t(8), t(8)), {}),
    "max_pool2d": lambda g: ("call_function", F.max_pool2d, (t(2, 8, 16, 16, grad=g), 2), {}),
    "max_pool2d padded": lambda g: ("call_function", F.max_pool2d, (t(2, 3, 15, 11, grad=g), 3),
                                    {"stride": 2, "padding": 1, "dilation": 1}),
    "mean": lambda g: ("call_method", "mean", (t(2, 16, 8, 8, grad=g),), {"dim": (2, 3)}),
    "mean negative dim": lambda g: ("call_method", "mean", (t(2, 3, 4, grad=g), -1), {}),
    "x + y": lambda g: ("call_function", operator.add, (t(4, 4, grad=g), t(4, 4)), {}),
    "x * int": lambda g: ("call_function", operator.mul, (t(2, 3, 4, grad=g), 2), {}),
    "float - x": lambda g: ("call_function", operator.sub, (0.5, t(3, 5, grad=g)), {}),
    "float / x f16": lambda g: (
        "call_function", operator.truediv, (1.5, t(3, 5, dtype=torch.float16, grad=g)), {}),
    "x * huge float bf16": lambda g: (
        "call_function", operator.mul, (t(3, dtype=torch.bfloat16, grad=g), 1e300), {}),
    "x * int 2**64-1": lambda g: ("call_function", operator.mul, (t(3, grad=g), 2**64 - 1), {}),
    "torch.add": lambda g: ("call_function", torch.add, (t(6, grad=g), t(6, grad=g)), {}),
    "x.div(y) f64": lambda g: ("call_method", "div", (
        t(2, 2, dtype=torch.float64), t(2, 2, dtype=torch.float64, grad=g)), {}),
    "torch.tanh": lambda g: ("call_function", torch.tanh, (t(8, 8, grad=g),), {}),
    "-x": lambda g: ("call_function", operator.neg, (t(8, 1, grad=g),), {}),
    "x.sigmoid()": lambda g: ("call_method", "sigmoid", (t(3, 7, grad=g),), {}),
    "silu": lambda g: ("call_function", F.silu, (t(2, 9, grad=g),), {}),
    "F.softmax": lambda g: ("call_function", F.softmax, (t(4, 16, 16, grad=g),), {"dim": -1}),
    "torch.softmax dim 0": lambda g: ("call_function", torch.softmax, (t(4, 5, grad=g), 0), {}),
    "x.softmax(1)": lambda g: ("call_method", "softmax", (t(3, 4, 5, grad=g), 1), {}),
    "mm": lambda g: ("call_function", operator.matmul, (t(16, 64, grad=g), t(64, 32)), {}),
    "mm transposed operands": lambda g: (
        "call_function", torch.matmul, (t(64, 16).t(), t(8, 64, grad=g).t()), {}),
    "3d @ 2d": lambda g: ("call_function", operator.matmul, (t(2, 5, 6), t(6, 3, grad=g)), {}),
    "3d @ transposed 2d": lambda g: (
        "call_function", operator.matmul, (t(2, 5, 6, grad=g), t(3, 6).t()), {}),
    "bmm": lambda g: ("call_method", "matmul", (t(2, 5, 6, grad=g), t(2, 6, 3)), {}),
    "4d @ transposed 4d": lambda g: ("call_function", torch.matmul, (
        t(2, 4, 16, 8, grad=g), t(2, 4, 16, 8).transpose(-2, -1)), {}),
    "transposed 4d @ 4d": lambda g: ("call_function", torch.matmul, (
        t(2, 4, 8, 16).transpose(-2, -1), t(2, 4, 8, 3, grad=g)), {}),
}


def _run_meta(kind: str, target: Any, args: tuple, kwargs: dict) -> torch.Tensor:
    if kind == "call_method":
        return getattr(args[0], target)(*args[1:], **kwargs)
    return target(*args, **kwargs)


def _facts(x: torch.Tensor) -> tuple:
    return (tuple(x.shape), x.stride(), x.storage_offset(), x.dtype, x.requires_grad, x.is_leaf)


@pytest.mark.parametrize("grad_mode", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("inputs_need_grad", [True, False], ids=["grad_inputs", "plain_inputs"])
@pytest.mark.parametrize("name", list(ACCEPTED))
def test_a_rule_gives_what_the_meta_kernel_gives(name, grad_mode, inputs_need_grad) -> None:
    from bytegraph.graph.metadata import _inferred_tensor

    kind, target, args, kwargs = ACCEPTED[name](inputs_need_grad)
    with torch.set_grad_enabled(grad_mode):
        expected = _run_meta(kind, target, args, kwargs)
        inferred = shape_rules.infer(kind, target, args, kwargs)
        assert inferred is not None, f"the rule refused {name}"
        actual = _inferred_tensor(inferred)
    assert _facts(actual) == _facts(expected)


REFUSED: dict[str, tuple[str, Any, tuple, dict]] = {
    "linear channels mismatch": ("call_function", F.linear, (t(3, 4), t(5, 6)), {}),
    "linear transposed input": ("call_function", F.linear, (t(4, 3).t(), t(5, 4)), {}),
    "linear mixed dtypes": ("call_function", F.linear, (t(3, 4), t(5, 4, dtype=torch.float64)), {}),
    "linear broadcast bias": ("call_function", F.linear, (t(3, 4), t(5, 4), t(1)), {}),
    "linear 1d": ("call_function", F.linear, (t(4), t(5, 4)), {}),
    "linear empty": ("call_function", F.linear, (t(0, 4), t(5, 4)), {}),
    "linear int": (
        "call_function", F.linear, (t(3, 4, dtype=torch.int64), t(5, 4, dtype=torch.int64)), {}),
    "relu in place": ("call_function", F.relu, (t(3, 4),), {"inplace": True}),
    "relu channels last": ("call_function", torch.relu, (channels_last(2, 3, 4, 5),), {}),
    "gelu unknown": ("call_function", F.gelu, (t(3, 4),), {"approximate": "erf"}),
    "gelu positional approximate": ("call_function", F.gelu, (t(3, 4), "tanh"), {}),
    "mean positional dtype": ("call_method", "mean", (t(2, 3, 4), 1, False, None), {}),
    "conv2d channels last": (
        "call_function", torch.conv2d, (channels_last(2, 3, 8, 8), t(4, 3, 3, 3)), {}),
    "conv2d same": ("call_function", F.conv2d, (t(2, 3, 8, 8), t(4, 3, 3, 3)), {"padding": "same"}),
    "conv2d size 1": ("call_function", F.conv2d, (t(2, 3, 8, 8), t(4, 3, 1, 1)), {}),
    "conv2d groups mismatch": ("call_function", F.conv2d, (t(2, 3, 8, 8), t(4, 2, 3, 3)), {}),
    "conv2d 1x1 output": ("call_function", F.conv2d, (t(2, 3, 3, 3), t(4, 3, 3, 3)), {}),
    "batch_norm training": (
        "call_function", F.batch_norm, (t(2, 8, 4, 4), t(8), t(8)), {"training": True}),
    "batch_norm stats need grad": (
        "call_function", F.batch_norm, (t(2, 8, 4, 4), t(8, grad=True), t(8)), {}),
    "max_pool2d ceil": ("call_function", F.max_pool2d, (t(2, 3, 9, 9), 2), {"ceil_mode": True}),
    "max_pool2d indices": (
        "call_function", F.max_pool2d, (t(2, 3, 9, 9), 2), {"return_indices": True}),
    "max_pool2d big padding": ("call_function", F.max_pool2d, (t(2, 3, 9, 9), 2), {"padding": 2}),
    "max_pool2d tensor stride": (
        "call_function", F.max_pool2d, (t(2, 3, 9, 9), 2), {"stride": t(2)}),
    "gelu tensor approximate": ("call_function", F.gelu, (t(3, 4),), {"approximate": t(2)}),
    "max_pool2d 3d": ("call_function", F.max_pool2d, (t(3, 9, 9), 2), {}),
    "mean keepdim": ("call_method", "mean", (t(2, 3, 4),), {"dim": 1, "keepdim": True}),
    "mean repeated dim": ("call_method", "mean", (t(2, 3, 4),), {"dim": (1, -2)}),
    "mean dtype": ("call_method", "mean", (t(2, 3, 4),), {"dim": 1, "dtype": torch.float64}),
    "mean all": ("call_method", "mean", (t(2, 3, 4),), {}),
    "mean out of range": ("call_method", "mean", (t(2, 3, 4),), {"dim": 3}),
    "no rule": ("call_function", torch.erf, (t(3, 4),), {}),
    "add broadcast": ("call_function", operator.add, (t(4, 1), t(1, 4)), {}),
    "add 0-d tensor": ("call_function", operator.add, (t(4, 4), t()), {}),
    "add transposed": ("call_function", operator.add, (t(4, 3).t(), t(3, 4)), {}),
    "add mixed dtypes": ("call_function", operator.add, (t(3), t(3, dtype=torch.float64)), {}),
    "add int tensors": (
        "call_function", operator.add, (t(3, dtype=torch.int64), t(3, dtype=torch.int64)), {}),
    "torch.mul number first": ("call_function", torch.mul, (2.0, t(3)), {}),
    "add alpha": ("call_function", torch.add, (t(3), t(3)), {"alpha": 2}),
    "mul bool": ("call_function", operator.mul, (t(3), True), {}),
    "mul complex": ("call_function", operator.mul, (t(3), 1j), {}),
    "mul int beyond 64 bits": ("call_function", operator.mul, (t(3), 2**64), {}),
    "div rounding": ("call_function", torch.div, (t(3), 2.0), {"rounding_mode": "floor"}),
    "tanh out": ("call_function", torch.tanh, (t(3),), {"out": t(3)}),
    "tanh channels last": ("call_method", "tanh", (channels_last(2, 3, 4, 5),), {}),
    "silu in place": ("call_function", F.silu, (t(3, 4),), {"inplace": True}),
    "softmax dtype": (
        "call_function", F.softmax, (t(3, 4),), {"dim": 1, "dtype": torch.float64}),
    "softmax no dim": ("call_function", F.softmax, (t(3, 4),), {}),
    "softmax dim out of range": ("call_function", torch.softmax, (t(3, 4), 2), {}),
    "softmax transposed": ("call_function", F.softmax, (t(4, 3).t(),), {"dim": -1}),
    "matmul vector": ("call_function", operator.matmul, (t(3, 4), t(4)), {}),
    "matmul size mismatch": ("call_function", operator.matmul, (t(3, 4), t(5, 2)), {}),
    "matmul broadcast batch": ("call_function", torch.matmul, (t(2, 3, 4), t(1, 4, 5)), {}),
    "matmul 2d @ 3d": ("call_function", torch.matmul, (t(3, 4), t(2, 4, 5)), {}),
    "matmul transposed 3d @ 2d": (
        "call_function", operator.matmul, (t(2, 6, 5).transpose(1, 2), t(6, 3)), {}),
    "matmul mixed dtypes": (
        "call_function", operator.matmul, (t(3, 4), t(4, 5, dtype=torch.float64)), {}),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_form_the_rules_do_not_model_goes_to_the_meta_kernel(name) -> None:
    assert shape_rules.infer(*REFUSED[name]) is None


def test_no_rule_under_a_function_mode_inference_mode_or_autocast() -> None:
    kind, target, args, kwargs = ACCEPTED["linear"](False)

    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        assert shape_rules.infer(kind, target, args, kwargs) is None
    with torch.inference_mode():
        assert shape_rules.infer(kind, target, args, kwargs) is None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert shape_rules.infer(kind, target, args, kwargs) is None


def test_no_rule_inside_a_functorch_transform() -> None:
    """A vmap body's tensors are meta tensors whose shape is one example's: the meta
    kernel gives a batched result, a rule would give an unbatched one."""
    seen = []

    def body(x: torch.Tensor) -> torch.Tensor:
        seen.append(shape_rules.infer("call_function", torch.relu, (x,), {}))
        return torch.relu(x)

    torch.func.vmap(body)(t(3, 4))
    assert seen == [None]


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.head(x.mean(dim=(2, 3)))


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 10))


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("make, shape", [(_mlp, (8, 32)), (SmallCNN, (2, 3, 16, 16))],
                         ids=["mlp", "cnn"])
def test_models_of_ruled_ops_equal_eager(differential, make, shape, grad) -> None:
    module = make().eval()
    compiled = differential.compile(module)
    with torch.set_grad_enabled(grad):
        out = differential.check(module, compiled, (torch.randn(shape),))
    assert out.requires_grad == grad
    assert differential.backend.calls == 1


def test_models_of_ruled_ops_compile_without_torchs_lazy_imports() -> None:
    """In a fresh process: the MLP and the CNN compile and run with none of the modules
    torch's Python meta kernels import on first use (seconds of a cold start)."""
    code = textwrap.dedent("""
        import sys
        import torch
        from torch import nn
        import bytegraph
        from tests.test_shape_rules import SmallCNN, _mlp

        for module, x in ((_mlp(), torch.randn(8, 32)), (SmallCNN(), torch.randn(2, 3, 16, 16))):
            module.eval()
            with torch.no_grad():
                assert torch.equal(bytegraph.compile(module, backend="eager")(x), module(x))
        heavy = [m for m in ("torch._dynamo", "sympy") if m in sys.modules]
        assert not heavy, heavy
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": root}, cwd=root,
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
