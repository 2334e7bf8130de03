"""Activation checkpointing programs: checkpoint's forms, checkpoint_sequential, selective AC.

Adapted from test/dynamo/test_activation_checkpointing.py. Every program is
differentiated, so the recomputation in backward is exercised.
"""

from __future__ import annotations

import functools

import torch
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
)

from bench.hop_programs.registry import inputs, program, t

AC = "test/dynamo/test_activation_checkpointing.py::ActivationCheckpointingViaTagsTests"


def _g(*shape: int):
    return t(*shape, grad=True)


def gn(x, y):
    return torch.sigmoid(torch.matmul(x, y))


class MockModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.sigmoid(self.linear(x))


class CheckpointedBlocks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()) for _ in range(3)
        )

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x


def _sequential() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4), torch.nn.Tanh()
    )


def _policy(ctx, func, *args, **kwargs):
    if func == torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def _save_mm_context():
    return create_selective_checkpoint_contexts([torch.ops.aten.mm.default])


def _policy_context():
    return create_selective_checkpoint_contexts(_policy)


@program(f"{AC}::test_tags_function", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_reentrant(x, y):
    return checkpoint(gn, torch.sin(x), y, use_reentrant=True)


@program(f"{AC}::test_tags_function_with_kwargs", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_non_reentrant(x, y):
    return checkpoint(gn, torch.sin(x), y, use_reentrant=False)


@program(f"{AC}::test_checkpoint_shows_tags_in_tlparse", inputs(_g(4, 4), _g(4, 4)),
         backward=True)
def checkpoint_without_rng_state(x, y):
    return checkpoint(gn, torch.sin(x), y, use_reentrant=True, preserve_rng_state=False)


@program(f"{AC}::test_tags_module", inputs(_g(4, 4), MockModule), backward=True)
def checkpoint_module(x, mod):
    return checkpoint(mod, torch.sin(x), use_reentrant=False)


@program("test/dynamo/test_higher_order_ops.py::ActivationCheckpointingTests::"
         "test_without_functionalization_turned_on", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_between_ops(x, y):
    return torch.cos(checkpoint(gn, torch.sin(x), y, use_reentrant=False))


@program(f"{AC}::test_tags_multiple_checkpoints", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_twice(x, y):
    a = checkpoint(gn, torch.sin(x), y, use_reentrant=False)
    return checkpoint(gn, torch.sin(a), y, use_reentrant=False)


@program(f"{AC}::test_tags_nested", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_nested(x, y):
    def outer(a, b):
        return checkpoint(gn, a.cos(), b, use_reentrant=False) + a

    return checkpoint(outer, x, y, use_reentrant=False)


@program(f"{AC}::test_tags_non_tensor_arg", inputs(_g(4, 4)), backward=True)
def checkpoint_non_tensor_argument(x):
    def scaled(a, scale, power):
        return a.sin() * scale ** power

    return checkpoint(scaled, x, 0.5, 2, use_reentrant=False)


@program(f"{AC}::test_tags_kwargs_to_fn", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_keyword_argument(x, y):
    def fn(a, *, b):
        return (a @ b).relu()

    return checkpoint(fn, x, b=y, use_reentrant=False)


@program(f"{AC}::test_tags_free_variable", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_closure(x, y):
    def fn(a):
        return torch.sigmoid(a @ y)

    return checkpoint(fn, x, use_reentrant=False)


@program(f"{AC}::test_tags_lambda", inputs(_g(4, 4)), backward=True)
def checkpoint_lambda(x):
    return checkpoint(lambda a: a.sin().cos(), x, use_reentrant=False)


@program(f"{AC}::test_tags_multiple_outputs", inputs(_g(4, 4), _g(4, 4)), backward=True)
def checkpoint_tuple_output(x, y):
    def fn(a, b):
        return a.sin(), (a @ b).cos()

    p, q = checkpoint(fn, x, y, use_reentrant=False)
    return p + q


@program(f"{AC}::test_tags_dropout", inputs(_g(4, 4), _g(4, 4)), backward=True, graphs=0)
def checkpoint_dropout(x, y):
    def fn(a, b):
        return torch.nn.functional.dropout(a @ b, p=0.2)

    return checkpoint(fn, x, y, use_reentrant=False)


@program(f"{AC}::test_tags_sequential_layers", inputs(_g(2, 4), _sequential), backward=True)
def checkpoint_sequential_module(x, seq):
    return checkpoint(seq, x, use_reentrant=False)


@program(f"{AC}::test_checkpoint_sequential", inputs(_g(2, 4), _sequential), backward=True)
def checkpoint_sequential_segments(x, seq):
    return checkpoint_sequential(seq, 2, x, use_reentrant=False)


@program(f"{AC}::test_checkpointed_blocks", inputs(_g(2, 4), CheckpointedBlocks),
         backward=True)
def checkpoint_in_module_loop(x, model):
    return model(x)


@program(f"{AC}::test_compile_selective_checkpoint_must_save_list",
         inputs(_g(4, 4), _g(4, 4)), backward=True)
def selective_checkpoint_op_list(x, y):
    def fn(a, b):
        return torch.sigmoid(torch.matmul(torch.matmul(a, b), b))

    return checkpoint(fn, x, y, use_reentrant=False, context_fn=_save_mm_context)


@program(f"{AC}::test_compile_selective_checkpoint_custom_rule",
         inputs(_g(4, 4), _g(4, 4)), backward=True)
def selective_checkpoint_policy(x, y):
    def fn(a, b):
        return torch.sigmoid(torch.matmul(torch.matmul(a, b).relu(), b))

    return checkpoint(fn, x, y, use_reentrant=False, context_fn=_policy_context)


@program(f"{AC}::test_compile_selective_checkpoint_partial_ctx_fn",
         inputs(_g(4, 4), _g(4, 4)), backward=True)
def selective_checkpoint_partial_context(x, y):
    context_fn = functools.partial(
        create_selective_checkpoint_contexts, [torch.ops.aten.mm.default]
    )
    return checkpoint(gn, x.sin(), y, use_reentrant=False, context_fn=context_fn)


@program(f"{AC}::test_tags_checkpoint_no_grad_input", inputs(t(4, 4), _g(4, 4)), backward=True)
def checkpoint_input_without_grad(x, y):
    return checkpoint(gn, x, y, use_reentrant=False)
