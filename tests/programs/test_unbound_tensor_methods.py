"""``torch.Tensor.<method>`` read from the class and called with the tensor first.

``torch.Tensor.sum(x)``, a method kept in a variable, one passed to a
higher-order op (``torch.vmap(torch.Tensor.sum)``) and one returned: each
compiles to one graph (they were a break that sent the frame to Python), and
a call with something else first is still eager's error.
"""

from __future__ import annotations

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


@add(lambda: (randn(3, 4),))
def called_from_the_class(x):
    return torch.Tensor.sum(x), torch.Tensor.add(x, 1, alpha=2), torch.Tensor.transpose(x, 0, 1)


@add(lambda: (randn(3, 4),))
def kept_in_a_variable(x):
    method = torch.Tensor.softmax
    return method(x, dim=-1) * 2


@add(lambda: (randn(3, 4),))
def passed_to_vmap(x):
    return torch.vmap(torch.Tensor.sum)(x)


@add(lambda: (randn(3, 4),))
def mapped_over_a_list(x):
    return [f(x) for f in (torch.Tensor.relu, torch.Tensor.sigmoid)]


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_unbound_tensor_method(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def not_a_tensor_first(x):
    return torch.Tensor.sum(3) + x


def test_called_without_a_tensor_is_eagers_error() -> None:
    with pytest.raises(TypeError):
        not_a_tensor_first(torch.ones(2))
    with pytest.raises(TypeError):
        bytegraph.compile(not_a_tensor_first, backend="eager")(torch.ones(2))
