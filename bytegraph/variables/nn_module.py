"""nn.Module instances: attributes through sources, calls inline ``forward``.

An ``NNModuleVariable`` is a ``UserDefinedObjectVariable`` whose failed
attribute lookups go where ``nn.Module.__getattr__`` goes: ``_parameters``,
``_buffers``, ``_modules``. Every value is read through a source, so a
parameter or buffer becomes a graph input guarded by TENSOR_MATCH, a
submodule another NNModuleVariable guarded by its type, and a plain
attribute (``self.training``, ``self.eps``) a guarded constant.

Calling a module inlines ``type(module).forward`` (its ``__call__`` machinery
only runs hooks, and a module with hooks, or any global module hook, is
unsupported; their absence is guarded). ``nn.Sequential``, ``nn.ModuleList``
and ``nn.ModuleDict`` are iterated, indexed and measured from their
``_modules`` dict, whose keys are guarded; ``modules()``, ``named_modules()``,
``children()`` and ``named_children()`` walk that guarded tree (module_tree.py).

Stores follow ``nn.Module.__setattr__``: plain attributes and buffer
reassignments are recorded and replayed (through that same ``__setattr__``);
replacing parameters or submodules is unsupported.
"""

from __future__ import annotations

import dataclasses
import keyword
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.modules import module as _torch_module

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource, GetItemSource, Source, source_record
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import TupleVariable
from bytegraph.variables.module_conversions import ModuleToVariable, is_conversion_method
from bytegraph.variables.module_tree import ModuleTreeMethodVariable, is_tree_method
from bytegraph.variables.tensor import TensorVariable
from bytegraph.variables.user_defined import (
    MissingAttribute,
    UserDefinedObjectVariable,
    is_plain_class,
)

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_GLOBAL_HOOKS = tuple(f"_global{name}" for name in _HOOK_DICTS)
_MODULE_LOOKUP = ("_parameters", "_buffers", "_modules")
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


@source_record
class TorchModuleGlobalSource(Source):
    """A global of ``torch.nn.modules.module`` (the global hook dicts), for guards only."""

    name: str

    def _expr(self) -> str:
        return f"__import__('torch').nn.modules.module.{self.name}"

    def reconstruct(self, codegen: PyCodegen) -> None:
        raise Unsupported("unknown_attribute", f"loading torch's {self.name}")


def has_hooks(module: nn.Module, skip: str | None = None) -> bool:
    """True if calling ``module`` would run a hook (its own or a global one), those of
    the hook dict ``skip`` aside.

    Every call of a compiled module asks this first, so the usual question (no dict
    skipped) reads the eight dicts in one expression: a loop of ``getattr`` calls and
    an import took 1-2 us a call, a fifth of a small module's compiled call.
    """
    g = _torch_module
    if (
        g._global_forward_pre_hooks or g._global_forward_hooks
        or g._global_backward_pre_hooks or g._global_backward_hooks
    ):
        return True
    if skip is None:
        try:
            return bool(
                module._forward_pre_hooks or module._forward_hooks
                or module._backward_pre_hooks or module._backward_hooks
            )
        except AttributeError:  # a dict missing (no nn.Module.__init__): as getattr's None
            pass
    return any(getattr(module, name, None) for name in _HOOK_DICTS if name != skip)


# Made once: a source's hash and text are computed once per object (guards/sources.py).
_GLOBAL_HOOK_SOURCES = tuple((name, TorchModuleGlobalSource(name)) for name in _GLOBAL_HOOKS)


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NNModuleVariable(UserDefinedObjectVariable):
    """An nn.Module from the frame (modules are never created by the trace)."""

    # -- reads ----------------------------------------------------------------
    def getattr_fallback(self, tx: Tx, name: str) -> Any:
        found = self.lookup(tx, "__getattr__")
        if found is None or found.owner is not nn.Module:
            return super().getattr_fallback(tx, name)
        for dict_name in _MODULE_LOOKUP:
            members = self.value.__dict__.get(dict_name)
            if members is not None and name in members:
                return self.member(tx, dict_name, name)
        raise MissingAttribute(f"a {self.cls.__qualname__} module", name)

    def member(self, tx: Tx, dict_name: str, name: str) -> Any:
        """A parameter, buffer or submodule, read through a source that reaches it.

        ``module.name`` where that reaches the member (readable names in
        placeholders: ``self_fc1_weight``), else ``module._modules['0']``.
        """
        from bytegraph.variables.builder import wrap

        self._check_members_unchanged(tx, dict_name)
        value = self.value.__dict__[dict_name][name]
        # Through the dict, not ``module.name``: nn.Module.__getattr__ costs about 0.4 us
        # on every guard check and every load of the input in the generated code.
        source = GetItemSource(AttrSource(self.source, dict_name), name)
        from bytegraph.variables.functional_call import override

        swapped = override(tx, source)  # torch.func.functional_call in progress
        return swapped if swapped is not None else wrap(tx, value, source)

    def _check_members_unchanged(self, tx: Tx, dict_name: str) -> None:
        """Members are read from the real dicts: the trace must not have changed them."""
        tracked = tx.output.side_effects.existing(self.value.__dict__[dict_name])
        if tracked is not None and tx.output.side_effects.is_modified(tracked):
            raise Unsupported(
                "module_structure_change", f"{dict_name} of a module changed during the trace"
            )

    def bind(self, tx: Tx, found: Any, name: str) -> Any:
        if found.pending is None and is_tree_method(found.owner, found.raw, name):
            return ModuleTreeMethodVariable(self, name)
        if found.pending is None and is_conversion_method(found.owner, found.raw, name):
            return ModuleToVariable(self)  # a no-op conversion, or a break
        return super().bind(tx, found, name)

    # -- stores ---------------------------------------------------------------
    # Recorded as plain stores: the replay's STORE_ATTR runs nn.Module.__setattr__.
    raw_attribute_stores = False

    def var_setattr(self, tx: Tx, name: str, value: Any) -> None:
        if self.cls.__setattr__ is not nn.Module.__setattr__:
            raise Unsupported("custom_setattr", f"{self.cls.__qualname__} defines __setattr__")
        if self._same_submodule(tx, name, value):
            return  # ``self.sub = self.sub.to(dtype)``: __setattr__ puts it back where it is
        self._check_plain_member(name, value)
        # Recorded as a plain store; the replay's STORE_ATTR runs nn.Module.__setattr__,
        # which puts a buffer back into _buffers.
        tx.output.side_effects.store_attr(self, name, value)

    def _same_submodule(self, tx: Tx, name: str, value: Any) -> bool:
        """Whether storing ``value`` as ``name`` puts a submodule back in its own slot,
        which ``nn.Module.__setattr__`` does without a change (no registration hook runs:
        none is installed, guarded)."""
        from torch.nn.modules import module as module_module

        from bytegraph.variables.made_modules import _REGISTRATION_HOOKS

        slot = GetItemSource(AttrSource(self.source, "_modules"), name)
        if not isinstance(value, NNModuleVariable) or value.source != slot:
            return False  # read from that very slot: the same object on every call
        hooks = getattr(module_module, _REGISTRATION_HOOKS)
        if hooks or name in self.value.__dict__ or (
            tx.output.side_effects.load_attr(self, name) is not None
        ):
            return False
        self._check_members_unchanged(tx, "_modules")
        tx.output.add_guard(GuardKind.EMPTY, TorchModuleGlobalSource(_REGISTRATION_HOOKS), hooks)
        return True

    def _check_plain_member(self, name: str, value: Any) -> None:
        real = self.value.__dict__
        if name in real.get("_parameters", ()) or name in real.get("_modules", ()):
            raise Unsupported(
                "module_structure_change", f"replacing parameter or submodule {name!r}"
            )
        if isinstance(value, NNModuleVariable) or (
            isinstance(value, TensorVariable) and issubclass(value.python_type(), nn.Parameter)
        ):
            raise Unsupported(
                "module_structure_change", f"registering {name!r} as a parameter or submodule"
            )
        if name in real.get("_buffers", ()):
            is_none = value.is_python_constant() and value.as_python_constant() is None
            if not (isinstance(value, TensorVariable) or is_none):
                raise Unsupported(
                    "module_structure_change", f"buffer {name!r} set to a non-tensor (TypeError)"
                )
        if not _identifier(name):
            raise Unsupported("attribute_mutation", f"attribute name {name!r}")

    def store_raw(self, tx: Tx, name: str, value: Any) -> None:
        raise Unsupported("custom_setattr", "object.__setattr__ on an nn.Module")

    def var_delattr(self, tx: Tx, name: str) -> None:
        real = self.value.__dict__
        if self.cls.__delattr__ is not nn.Module.__delattr__ or any(
            name in real.get(d, ()) for d in _MODULE_LOOKUP
        ):
            raise Unsupported("module_structure_change", f"deleting {name!r} of a module")
        if self.instance_attr(tx, name) is None:
            raise MissingAttribute(f"a {self.cls.__qualname__} module", name)
        self.delete_instance_attr(tx, name)

    # -- calls ----------------------------------------------------------------
    def call_function(self, tx: Tx, args, kwargs) -> Any:
        if self.cls.__call__ is not nn.Module.__call__:
            return super().call_function(tx, args, kwargs)
        hooks = self.forward_hooks(tx)
        result = self.var_getattr(tx, "forward").call_function(tx, args, kwargs)
        for hook in hooks:  # hook(module, args, output); a result other than None replaces it

            replaced = hook.call_function(tx, [self, TupleVariable(tuple(args)), result], {})
            if not (replaced.is_python_constant() and replaced.as_python_constant() is None):
                result = replaced
        return result

    def forward_hooks(self, tx: Tx) -> list[Any]:
        """The plain forward hooks a call runs after ``forward`` (Hugging Face's
        ``enable_input_require_grads`` adds one), guarded; any other hook is refused."""
        hooks = self.value._forward_hooks
        if not hooks or self.value._forward_hooks_with_kwargs or (
            self.value._forward_hooks_always_called
        ):
            self.guard_no_hooks(tx)
            return []
        from bytegraph.variables.builder import wrap

        table = wrap(tx, hooks, AttrSource(self.source, "_forward_hooks"))
        self.guard_no_hooks(tx, skip="_forward_hooks")
        from bytegraph.variables.constant import ConstantVariable

        return [table.call_method(tx, "__getitem__", [ConstantVariable(k)], {}) for k in hooks]

    def guard_no_hooks(self, tx: Tx, skip: str | None = None) -> None:
        """Calling the module runs only ``forward`` (and the hooks of ``skip``): no other
        hooks now, guarded for later calls."""
        if has_hooks(self.value, skip):
            raise Unsupported("module_hooks", f"{self.cls.__qualname__} has module hooks")
        from torch.nn.modules import module as module_module

        add_guard = tx.output.add_guard
        for name in _HOOK_DICTS:
            if name != skip:
                add_guard(GuardKind.EMPTY, AttrSource(self.source, name))
        for name in ("_forward_hooks_with_kwargs", "_forward_hooks_always_called"):
            if skip is not None:
                add_guard(GuardKind.EMPTY, AttrSource(self.source, name))
        for name, source in _GLOBAL_HOOK_SOURCES:
            # torch registers global hooks into these very dicts: check the objects.
            add_guard(GuardKind.EMPTY, source, getattr(module_module, name))

    # -- containers -----------------------------------------------------------
    def _container_kind(self) -> type | None:
        for kind in _CONTAINERS:
            if isinstance(self.value, kind):
                overridden = ("__iter__", "__getitem__", "__len__")
                if all(getattr(self.cls, m) is getattr(kind, m) for m in overridden):
                    return kind
        return None

    def _children(self, tx: Tx) -> dict[str, Any]:
        """The submodules in order, with ``_modules``'s keys guarded."""
        self._check_members_unchanged(tx, "_modules")
        modules = self.value.__dict__["_modules"]
        source = AttrSource(self.source, "_modules")
        tx.output.add_guard(GuardKind.DICT_KEYS, source, (type(modules), tuple(modules)))
        return {name: self.member(tx, "_modules", name) for name in modules}

    def unpack_sequence(self, tx: Tx) -> list[Any]:
        kind = self._container_kind()
        if kind is None:
            return super().unpack_sequence(tx)
        children = self._children(tx)
        if kind is nn.ModuleDict:
            return [ConstantVariable(name) for name in children]
        return list(children.values())

    def length(self, tx: Tx) -> int:
        if self._container_kind() is None:
            return super().length(tx)
        return len(self._children(tx))

    def getitem(self, tx: Tx, index: Any) -> Any:
        kind = self._container_kind()
        if kind is None:
            return super().getitem(tx, index)
        key = index.as_python_constant()
        children = self._children(tx)
        if kind is nn.ModuleDict:
            if key not in children:
                raise Unsupported("operation_raises", f"ModuleDict has no key {key!r} (KeyError)")
            return children[key]
        values = list(children.values())
        if isinstance(key, slice) and kind is nn.ModuleList:
            return ModuleListSliceVariable(self.cls, tuple(values[key]))
        if isinstance(key, bool) or not isinstance(key, int):
            raise Unsupported("unmodelled_value", f"{kind.__name__}[{key!r}]")
        if not -len(values) <= key < len(values):
            raise Unsupported("operation_raises", f"{kind.__name__} index {key} out of range")
        return values[key]

    def truth(self, tx: Tx) -> bool:
        if self._container_kind() is not None:
            return len(self._children(tx)) > 0
        return super().truth(tx)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ModuleListSliceVariable(VariableTracker):
    """``modules[a:b]``: what ``ModuleList.__getitem__`` builds for a slice, a new
    ModuleList of the same class holding the selected submodules."""

    container_type: type
    items: tuple[Any, ...]

    def python_type(self) -> type:
        return self.container_type

    def unpack_sequence(self, tx: Tx) -> list[Any]:
        return list(self.items)

    def truth(self, tx: Tx) -> bool:
        return bool(self.items)

    def getitem(self, tx: Tx, index: Any) -> Any:
        key = index.as_python_constant()
        if isinstance(key, slice):
            return ModuleListSliceVariable(self.container_type, self.items[key])
        if isinstance(key, bool) or not isinstance(key, int) or not (
            -len(self.items) <= key < len(self.items)
        ):
            raise Unsupported("operation_raises", f"ModuleList[{key!r}] (raises in eager)")
        return self.items[key]

    def call_method(self, tx: Tx, name: str, args: list, kwargs: dict) -> Any:
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.items))
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        raise Unsupported("unsupported_method", f"ModuleList slice .{name}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        from bytegraph.variables.containers import ListVariable

        codegen.call_const(self.container_type, [ListVariable(self.items)])

    def __repr__(self) -> str:
        return f"ModuleListSliceVariable({len(self.items)} modules)"


def is_traceable_module(value: Any) -> bool:
    """nn.Modules modelled here: no TorchScript, no custom attribute access."""
    return (
        isinstance(value, nn.Module)
        and is_plain_class(type(value))
        and not isinstance(value, torch.jit.ScriptModule)
    )
