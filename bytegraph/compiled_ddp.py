"""``compile(DistributedDataParallel(model))``: DDP's forward as Python, the model inside compiled.

DDP's forward is bookkeeping around one call of its module: it broadcasts
buffers, tells the C++ reducer a forward is starting, marks itself the active
DDP module (``DistributedDataParallel._get_active_ddp_module()``), calls
``self.module(*inputs)``, and hands the output to the reducer (which, with
``find_unused_parameters``, walks its autograd graph). None of that is tensor
work for a graph, and all of it must run exactly as in eager. torch.compile
does the same split: its frame hook skips DDP's file and compiles the frame
of the module's forward.

bytegraph has no frame hook, so ``CompiledDDP`` (a CompiledModule, so the
wrapper's state_dict, attributes and hooks behave as for any compiled module)
runs ``DistributedDataParallel.__call__`` in Python and, for the length of
that call, sets the wrapped module's instance attribute ``forward`` to the
compiled ``type(module).forward`` bound to it (``module_calls.py``):
nn.Module's ``__call__`` (and DDP's ``self.module.forward`` when it delays
all-reduce) read ``forward`` from the instance first, so module hooks still
run around the compiled forward, and the attribute is removed when the call
ends. The model's graphs
are compiled inside DDP's forward, so they are cut at DDP's buckets
(``graph/ddp.py``).

The wrapped module runs uncompiled (DDP as eager runs it) when it already
has an instance ``forward`` of its own, when it is itself a compiled module
(``compile(DDP(compile(m)))``: it compiles its own forward), or when its
class's forward is no longer the one compiled.
"""

from __future__ import annotations

from typing import Any

import torch

from bytegraph.compiled_module import CompiledModule
from bytegraph.module_calls import forward_installed


def is_ddp(module: Any) -> bool:
    """A DistributedDataParallel (or a subclass), where torch.distributed exists."""
    if not torch.distributed.is_available():
        return False
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(module, DistributedDataParallel)


class CompiledDDP(CompiledModule):
    """A compiled DistributedDataParallel: DDP's forward in Python, its module's compiled."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        from bytegraph.compile_targets import see_through

        ddp = self._orig_mod
        inner = ddp.module
        compiled = self._compiled_forward
        if (
            "forward" in inner.__dict__
            or isinstance(inner, CompiledModule)
            or see_through(type(inner).forward) is not compiled.fn
        ):
            return ddp(*args, **kwargs)
        with forward_installed(inner, compiled):
            return ddp(*args, **kwargs)


    @classmethod
    def hooked_class(cls) -> type:
        return HookedCompiledDDP


class HookedCompiledDDP(CompiledDDP):
    """A CompiledDDP with hooks of its own: called through nn.Module's hook machinery."""

    __call__ = torch.nn.Module.__call__

    @classmethod
    def hooked_class(cls) -> type:
        return HookedCompiledDDP


def compile_ddp(ddp: Any, make_forward: Any) -> CompiledDDP:
    """``ddp`` compiled: ``make_forward(fn)`` compiles the wrapped module's class forward."""
    from bytegraph.compile_targets import see_through

    inner = ddp.module
    forward = make_forward(see_through(type(inner).forward))
    return CompiledDDP(ddp, forward)
