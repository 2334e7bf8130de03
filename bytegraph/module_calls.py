"""Calling a module with its hooks run by nn.Module and its forward compiled.

A module with forward hooks, backward hooks or global module hooks must be
called through ``nn.Module.__call__``, which runs the hooks in Python
around ``self.forward``. bytegraph has no frame hook to catch the forward's
frame inside that call, so for the length of the call it sets the module's
instance attribute ``forward`` to the compiled forward bound to the module:
``nn.Module.__call__`` reads ``forward`` from the instance first, the hooks
run exactly as in eager around it, and the attribute is removed when the
call returns or raises. Used by CompiledModule (a compiled module with hooks),
the router (a hooked module called from code run as Python, such as a layer
that FSDP's ``fully_shard`` hooks, called at a graph break) and CompiledDDP
(DDP's forward around the compiled module).

A module that already has an instance ``forward`` of its own is called as it
is by each caller: that attribute is the user's, and is never replaced.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch


@contextlib.contextmanager
def forward_installed(module: torch.nn.Module, forward: Callable[..., Any]) -> Iterator[None]:
    """``module.forward`` is ``forward`` bound to it until the block ends."""
    module.__dict__["forward"] = types.MethodType(forward, module)
    try:
        yield
    finally:
        module.__dict__.pop("forward", None)


def call_with_hooks(
    module: torch.nn.Module, forward: Callable[..., Any], args: tuple, kwargs: dict
) -> Any:
    """``module(*args, **kwargs)`` through nn.Module's hooks, with ``forward`` as its forward."""
    with forward_installed(module, forward):
        return module(*args, **kwargs)
