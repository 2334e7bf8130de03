"""CompiledModule: what ``compile(module)`` returns, behaving as torch.compile's OptimizedModule.

Calling it is calling the original module: ``type(module).forward`` runs
compiled (a CompiledFunction) with the module as ``self``. A module with
hooks of its own, a global module hook, or a ``forward`` set on the instance
runs as plain Python, so hooks run exactly as eager runs them.

Everything else users do with torch.compile's wrapper works the same:

* the original is ``_orig_mod``, a submodule, so ``state_dict()``,
  ``named_parameters()`` and ``repr`` carry torch's ``_orig_mod.`` prefix;
  ``load_state_dict`` takes those keys and the original module's own;
* ``training`` is the original's (``train()``/``eval()`` on either is seen by
  both); attributes the wrapper does not own are read, set and deleted on the
  original; ``len()``, truth and ``dir()`` are the original's;
* hooks registered on the wrapper run around the call as nn.Module runs them:
  registering one turns the object into ``HookedCompiledModule``, whose call
  goes through ``nn.Module.__call__`` (so a wrapper without hooks pays nothing
  for them on its call path);
* pickling saves the original module and the compile settings, and loading
  compiles it again (torch pickles the original with its compile context);
  ``copy.deepcopy`` copies the module and keeps the same backend.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch

from bytegraph.module_calls import call_with_hooks
from bytegraph.variables.nn_module import has_hooks

_PREFIX = "_orig_mod."
# The wrapper's own attributes; any other attribute set on the wrapper is set on the original.
_OWN = frozenset({"_orig_mod", "_compiled_forward", "_ready", "forward", "__dict__"})


class CompiledModule(torch.nn.Module):
    """An nn.Module whose forward runs through a CompiledFunction (see the module docstring)."""

    def __init__(self, module: torch.nn.Module, compiled_forward: Any) -> None:
        # First: a miss in nn.Module.__init__ reads _orig_mod (__getattr__), and __init__
        # sets ``training``, which the property must not hand to the original yet.
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_ready", False)
        super().__init__()
        self._orig_mod = module  # registered as the submodule torch's wrapper has
        # Also in __dict__ so the call path reads it without nn.Module.__getattr__.
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled_forward", compiled_forward)
        object.__setattr__(self, "_ready", True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Not nn.Module.__call__: its hook machinery costs microseconds, and the wrapper has
        # no hooks (registering one makes this a HookedCompiledModule).
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        module = self._orig_mod
        if "forward" in module.__dict__:
            return module(*args, **kwargs)
        if has_hooks(module):  # the hooks in Python, the forward compiled (module_calls.py)
            return call_with_hooks(module, self._compiled_forward, args, kwargs)
        return self._compiled_forward(module, *args, **kwargs)

    # --- the original's state -----------------------------------------------------------

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, mode: bool) -> None:
        if self.__dict__.get("_ready"):  # nn.Module.__init__'s default is not the original's
            self._orig_mod.training = mode

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """torch's ``_orig_mod.``-prefixed keys, or the original module's own keys."""
        if state_dict and not any(key.startswith(_PREFIX) for key in state_dict):
            return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def _owns(self, name: str) -> bool:
        """The wrapper's own attribute: its fixed few, nn.Module's (set by its __init__, such
        as ``_is_full_backward_hook``, which torch's wrapper sends to the original and so
        loses its own full backward hooks), or one its class defines."""
        return name in _OWN or name in self.__dict__ or hasattr(type(self), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._owns(name):
            super().__setattr__(name, value)
            if name == "_orig_mod" and self.__dict__.get("_ready"):
                object.__setattr__(self, "_orig_mod", value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if self._owns(name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __len__(self) -> int:
        return len(self._orig_mod)  # TypeError, as for the original, if it has no len()

    def __bool__(self) -> bool:
        # The original's truth (an empty Sequential is false), not __len__'s TypeError:
        # torch's wrapper raises on ``if model:`` for a module without len().
        return bool(self._orig_mod)

    def __dir__(self) -> list[str]:
        original = self._orig_mod.__dir__()
        seen = set(original)
        return [*original, *(name for name in super().__dir__() if name not in seen)]

    # --- hooks on the wrapper -------------------------------------------------------------

    def register_forward_pre_hook(self, *args: Any, **kwargs: Any) -> Any:
        return self._with_hooks(torch.nn.Module.register_forward_pre_hook, args, kwargs)

    def register_forward_hook(self, *args: Any, **kwargs: Any) -> Any:
        return self._with_hooks(torch.nn.Module.register_forward_hook, args, kwargs)

    def register_full_backward_pre_hook(self, *args: Any, **kwargs: Any) -> Any:
        return self._with_hooks(torch.nn.Module.register_full_backward_pre_hook, args, kwargs)

    def register_full_backward_hook(self, *args: Any, **kwargs: Any) -> Any:
        return self._with_hooks(torch.nn.Module.register_full_backward_hook, args, kwargs)

    def register_backward_hook(self, *args: Any, **kwargs: Any) -> Any:
        return self._with_hooks(torch.nn.Module.register_backward_hook, args, kwargs)

    @classmethod
    def hooked_class(cls) -> type:
        """The class a wrapper of this class becomes when a hook is registered on it."""
        return HookedCompiledModule

    def _with_hooks(self, register: Any, args: tuple, kwargs: dict) -> Any:
        handle = register(self, *args, **kwargs)
        object.__setattr__(self, "__class__", type(self).hooked_class())
        return handle

    # --- copies -----------------------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        compiled = self._compiled_forward
        return _rebuild, (self._orig_mod, compiled.backend, compiled.fullgraph, compiled.dynamic)

    def __deepcopy__(self, memo: dict[int, Any]) -> CompiledModule:
        compiled = self._compiled_forward
        module = copy.deepcopy(self._orig_mod, memo)
        return _rebuild(module, compiled.backend, compiled.fullgraph, compiled.dynamic)


class HookedCompiledModule(CompiledModule):
    """A CompiledModule with hooks of its own: called through nn.Module's hook machinery."""

    __call__ = torch.nn.Module.__call__


def _rebuild(
    module: torch.nn.Module, backend: Any, fullgraph: bool, dynamic: bool | None
) -> CompiledModule:
    """A CompiledModule of ``module`` with these settings (unpickling, deepcopy)."""
    from bytegraph.api import _compile_python  # a DDP gets its own wrapper (compiled_ddp.py)

    return _compile_python(module, backend, fullgraph, dynamic)
