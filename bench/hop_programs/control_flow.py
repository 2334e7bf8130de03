"""Control-flow operators: torch.cond, map, while_loop, scan, associative_scan, and wrap.

Adapted from test/dynamo/test_higher_order_ops.py (HigherOrderOpTests: cond,
map and wrap tests) and test/functorch/test_control_flow.py. Pytree operands
include a dataclass registered with torch.utils._pytree.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.utils._pytree as pytree
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.map import map as control_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop
from torch._higher_order_ops.wrap import wrap

from bench.hop_programs.registry import inputs, program, t

HOP = "test/dynamo/test_higher_order_ops.py::HigherOrderOpTests"
CF = "test/functorch/test_control_flow.py"


@dataclasses.dataclass
class Point:
    x: torch.Tensor
    y: torch.Tensor


pytree.register_dataclass(Point)


def _g(*shape: int):
    return t(*shape, grad=True)


def _true(x):
    return x.sin()


def _false(x):
    return x.cos()


class Branch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.linear(x).relu()


class CondModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Branch()
        self.b = Branch()

    def forward(self, x):
        return torch.cond(x.sum() > 0, self.a, self.b, (x,))


# -- torch.cond ------------------------------------------------------------------------


@program(f"{HOP}::test_cond_simple", inputs(t(3, 3)))
def cond_tensor_predicate(x):
    return torch.cond(x.sum() > 0, _true, _false, (x,))


@program(f"{HOP}::test_cond_python_bool_pred", inputs(t(3, 3)))
def cond_shape_predicate(x):
    return torch.cond(x.shape[0] > 2, _true, _false, (x,))


@program(f"{HOP}::test_cond_closure", inputs(t(3, 3), t(3, 3)))
def cond_branches_close_over_tensor(x, y):
    def true_fn(a):
        return a + y

    def false_fn(a):
        return a - y

    return torch.cond(x.mean() > 0, true_fn, false_fn, (x,))


@program(f"{HOP}::test_cond_no_operands", inputs(t(3, 3), t(3, 3)))
def cond_empty_operands(x, y):
    def true_fn():
        return x * y

    def false_fn():
        return x + y

    return torch.cond(x.sum() > 0, true_fn, false_fn, ())


@program(f"{HOP}::test_cond_pytree_operands", inputs(t(3), t(3), t(3)))
def cond_nested_operands(x, y, z):
    def true_fn(pair, d):
        return pair[0] + pair[1] * d["z"]

    def false_fn(pair, d):
        return pair[0] - d["z"]

    return torch.cond(x.sum() > 0, true_fn, false_fn, ((x, y), {"z": z}))


@program(f"{HOP}::test_cond_pytree_outputs", inputs(t(3), t(3)))
def cond_tuple_outputs(x, y):
    def true_fn(a, b):
        return a + b, a * b

    def false_fn(a, b):
        return a - b, a / (b.abs() + 1)

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


@program(f"{HOP}::test_cond_dict_outputs", inputs(t(3)))
def cond_dict_outputs(x):
    def true_fn(a):
        return {"out": a.sin(), "aux": a + 1}

    def false_fn(a):
        return {"out": a.cos(), "aux": a - 1}

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


@program(f"{HOP}::test_cond_nested", inputs(t(3), t(3)))
def cond_nested(x, y):
    def inner_true(a):
        return a * 2

    def inner_false(a):
        return a * 3

    def true_fn(a):
        return torch.cond(y.sum() > 0, inner_true, inner_false, (a,))

    return torch.cond(x.sum() > 0, true_fn, _false, (x,))


@program(f"{HOP}::test_cond_module_branches", inputs(t(2, 3), CondModule))
def cond_module_branches(x, model):
    return model(x)


@program(f"{HOP}::test_cond_branches_no_arguments_no_closure", inputs(t(3)))
def cond_int_operand_in_closure(x):
    k = 4

    def true_fn(a):
        return a * k

    def false_fn(a):
        return a + k

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


@program(f"{HOP}::test_grad_dataclass_input", inputs(t(3), t(3)))
def grad_registered_dataclass(x, y):
    return torch.func.grad(lambda p: (p.x * p.y.sin()).sum())(Point(x, y))


@program(f"{HOP}::test_map_dataclass_input", inputs(t(4, 3), t(4, 3)))
def map_registered_dataclass(xs, ys):
    return control_map(lambda p: p.x + p.y, Point(xs, ys))


@program(f"{HOP}::test_cond_branches_mismatched_outputs", inputs(t(3)), graphs=0)
def cond_mismatched_outputs(x):  # a bytegraph.UserError at compile time: no graph
    def true_fn(a):
        return a.sin()

    def false_fn(a):
        return a.cos(), a

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


@program(f"{CF}::TestControlFlowTraced::test_cond_autograd_simple", inputs(_g(4)),
         backward=True)
def cond_backward(x):
    return torch.cond(x.sum() > 0, _true, _false, (x,))


@program(f"{CF}::TestControlFlowTraced::test_cond_autograd_closure", inputs(_g(4), _g(4)),
         backward=True)
def cond_backward_closure(x, y):
    def true_fn(a):
        return a * y

    def false_fn(a):
        return a + y.sin()

    return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


@program(f"{CF}::TestControlFlow::test_cond_in_forloop", inputs(t(3)))
def cond_in_loop(x):
    for i in range(3):
        x = torch.cond(x.sum() > i, _true, _false, (x,))
    return x


# -- map ----------------------------------------------------------------------------------


@program(f"{HOP}::test_map_simple", inputs(t(4, 3)))
def map_simple(xs):
    return control_map(lambda x: x.sin() + 1, xs)


@program(f"{HOP}::test_map_with_extra_args", inputs(t(4, 3), t(3)))
def map_extra_argument(xs, y):
    return control_map(lambda x, b: x * b, xs, y)


@program(f"{HOP}::test_map_closure", inputs(t(4, 3), t(3)))
def map_closure(xs, y):
    return control_map(lambda x: x + y, xs)


@program(f"{HOP}::test_map_pytree_input", inputs(t(4, 3), t(4, 3)))
def map_pytree_xs(xs, ys):
    return control_map(lambda d: d["a"] * d["b"], {"a": xs, "b": ys})


@program(f"{HOP}::test_map_multi_return", inputs(t(4, 3)))
def map_tuple_return(xs):
    return control_map(lambda x: (x.sin(), x.cos()), xs)


@program(f"{HOP}::test_map_dict_return", inputs(t(4, 3)))
def map_dict_return(xs):
    return control_map(lambda x: {"s": x.sin(), "c": x.cos()}, xs)


@program(f"{CF}::TestControlFlow::test_map_autograd_simple", inputs(_g(4, 3), _g(3)),
         backward=True)
def map_backward(xs, y):
    return control_map(lambda x, b: x.sin() * b, xs, y)


# -- while_loop, scan, associative_scan ------------------------------------------------------


@program(f"{CF}::TestControlFlow::test_while_loop_simple", inputs(t(3)))
def while_loop_counter(x):
    def cond_fn(i, v):
        return i < 3

    def body_fn(i, v):
        return i + 1, v.sin()

    return while_loop(cond_fn, body_fn, (torch.tensor(0), x))


@program(f"{CF}::TestControlFlow::test_while_loop_tensor_cond", inputs(t(3)))
def while_loop_value_condition(x):
    def cond_fn(v):
        return v.sum() < 10

    def body_fn(v):
        return (v.abs() + 1,)

    return while_loop(cond_fn, body_fn, (x,))


@program(f"{CF}::TestControlFlow::test_scan_simple", inputs(t(3), t(4, 3)))
def scan_cumulative(init, xs):
    def combine(carry, x):
        nxt = carry + x
        return nxt, nxt.sin()

    return scan(combine, init, xs)


@program(f"{CF}::TestControlFlow::test_scan_closure", inputs(t(3), t(4, 3), t(3)))
def scan_closure(init, xs, w):
    def combine(carry, x):
        nxt = carry * w + x
        return nxt, nxt.clone()

    return scan(combine, init, xs)


@program(f"{CF}::TestControlFlow::test_associative_scan_generic", inputs(t(5, 3)))
def associative_scan_add(xs):
    return associative_scan(lambda a, b: a + b, xs, dim=0, combine_mode="generic")


@program(f"{CF}::TestControlFlow::test_associative_scan_tuple", inputs(t(5, 3), t(5, 3)))
def associative_scan_tuple(xs, ys):
    def combine(a, b):
        return a[0] + b[0], a[1] * b[1]

    return associative_scan(combine, (xs, ys), dim=0, combine_mode="generic")


# -- wrap (the test suite's higher-order op for a plain call) --------------------------------


@program(f"{HOP}::test_simple", inputs(t(3, 3)))
def wrap_simple(x):
    return wrap(lambda a: torch.sin(a), x)


@program(f"{HOP}::test_freevars_as_inputs_to_wrap", inputs(t(3), t(3)))
def wrap_free_variable(x, y):
    return wrap(lambda a: a + y, x)


@program(f"{HOP}::test_make_closure", inputs(t(3, 3), t(3, 3)))
def wrap_closure_inside(x, y):
    def f(a, b):
        def g(c):
            return c + b

        return g(a)

    return wrap(f, x, y)


@program(f"{HOP}::test_nested_wrap", inputs(t(3, 3), Branch))
def wrap_nested_module(x, mod):
    def gn(a):
        return torch.cos(a) + wrap(mod, a)

    return wrap(gn, x)


@program(f"{HOP}::test_wrap_pytree_output", inputs(t(3)))
def wrap_tuple_output(x):
    return wrap(lambda a: (a.sin(), {"c": a.cos()}), x)
