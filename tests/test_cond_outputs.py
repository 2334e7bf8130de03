"""torch.cond's branches returning different things (variables/cond_outputs.py).

A different pytree structure, dtype or number of dimensions is the user's
mistake, which eager raises too: a ``bytegraph.UserError`` at compile time
naming both sides, with or without ``fullgraph``. Inside a ``try`` the handler
sees eager's own error (a break). Differences eager decides at run time (ints
of other values, other strides) are breaks: the compiled program does what
eager does.
"""

from __future__ import annotations

import pytest
import torch

import bytegraph


def _cond(true_fn, false_fn):
    def program(x):
        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))

    return program


MISTAKES = {
    "tensor_vs_tuple": (_cond(lambda a: a.sin(), lambda a: (a.cos(), a.sin())),
                        "true_fn returns a float32 tensor, false_fn returns (a float32 tensor, "
                        "a float32 tensor)"),
    "list_vs_tuple": (_cond(lambda a: [a.sin()], lambda a: (a.cos(),)),
                      "true_fn returns [a float32 tensor], false_fn returns (a float32 tensor,)"),
    "dict_keys": (_cond(lambda a: {"p": a.sin()}, lambda a: {"q": a.cos()}),
                  "{'p': a float32 tensor}, false_fn returns {'q': a float32 tensor}"),
    "dtype": (_cond(lambda a: a.sin(), lambda a: a.cos().double()),
              "the output: a float32 tensor of shape (3,) and a float64 tensor of shape (3,)"),
    "dims": (_cond(lambda a: (a.sin(), a), lambda a: (a.cos(), a.cos()[None])),
             "output[1]: a float32 tensor of shape (3,) and a float32 tensor of shape (1, 3)"),
}


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("name", list(MISTAKES))
def test_mismatched_branches_are_a_user_error(name: str, fullgraph: bool) -> None:
    program, says = MISTAKES[name]
    x = torch.randn(3)
    with pytest.raises(Exception):  # noqa: B017  (eager raises torch._dynamo's own errors)
        program(x)
    with pytest.raises(bytegraph.UserError) as info:
        bytegraph.compile(program, backend="eager", fullgraph=fullgraph)(x)
    assert says in str(info.value) and "test_cond_outputs.py" in str(info.value)
    assert isinstance(info.value, RuntimeError)


def caught(x):
    try:
        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: (a.cos(), a.sin()), (x,))
    except Exception:
        return x * 100


def test_inside_a_try_the_handler_sees_eagers_error() -> None:
    x = torch.randn(3)
    torch.testing.assert_close(bytegraph.compile(caught, backend="eager")(x), caught(x))


def test_ints_of_other_values_are_left_to_eager() -> None:
    program = _cond(lambda a: (a.sin(), 1), lambda a: (a.cos(), 2))
    for sign in (1.0, -1.0):
        x = torch.full((3,), sign)
        out, expected = bytegraph.compile(program, backend="eager")(x), program(x)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1] == expected[1]


def test_other_strides_are_left_to_eager() -> None:
    # eager raises here (torch merges the branches' strides); the graph took the true
    # branch's strides for both and returned a result before
    program = _cond(lambda a: a.sin().reshape(3, 1).expand(3, 2).contiguous(),
                    lambda a: a.cos().reshape(1, 3).expand(2, 3).t())
    x = torch.randn(3)
    with pytest.raises(Exception) as eager:  # noqa: B017
        program(x)
    with pytest.raises(type(eager.value)):
        bytegraph.compile(program, backend="eager")(x)
    with pytest.raises(bytegraph.Unsupported, match="strides"):
        bytegraph.compile(program, backend="eager", fullgraph=True)(x)
