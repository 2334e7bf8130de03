"""nn.Modules constructed inside the trace: ``nn.ReLU()(x)``, ``nn.CrossEntropyLoss()``.

A ``MadeModuleVariable`` is the "made here" form of ``NNModuleVariable``:
an nn.Module the trace itself creates, so it has no real object and no
source. Its whole ``__dict__`` lives in SideEffects, as any object made in
the trace (user_defined.py):

1. ``Cls(...)`` makes an empty instance (``object.__new__``: nn.Module has
   no ``__new__`` of its own) and inlines ``Cls.__init__`` like a user
   class's. ``nn.Module.__init__`` is inlined too: its ``super().__setattr__``
   stores put ``training``, the member dicts ``_parameters``, ``_buffers``,
   ``_modules`` and the hook dicts on the instance, as new dicts of the trace
   (``torch._C._log_api_usage_once`` folds to nothing, as under torch.compile).
2. ``module.name = value`` follows ``nn.Module.__setattr__``: a module goes
   into the ``_modules`` dict VT, a parameter goes through the inlined
   ``register_parameter`` (``register_buffer`` is inlined when called),
   anything else is a plain instance store. Stores that would move a name
   between those dicts, or assign a buffer, are refused.
3. Reads that miss the instance and the class go where ``nn.Module.__getattr__``
   goes: the current items of the three member dicts.
4. Calling it checks that its hook dicts are still empty (and guards the
   global hooks), then inlines ``forward``.
5. If it escapes (returned, stored, live at a graph break) it is rebuilt as
   any new object: ``object.__new__(Cls)`` and ``object.__setattr__`` of every
   attribute in order, which gives the very ``__dict__`` eager builds.

Creating a parameter in the trace (``nn.Parameter(...)`` in ``nn.Linear``'s
``__init__``) is a graph break, as it is for torch.compile: the construction
then runs in Python with eager's use of the random generator.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.side_effects import DELETED
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.nn_module import (
    _GLOBAL_HOOKS,
    NNModuleVariable,
    TorchModuleGlobalSource,
)
from bytegraph.variables.user_defined import MissingAttribute, UserDefinedObjectVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_MEMBER_DICTS = ("_parameters", "_buffers", "_modules")
# Once torch.compile has run in the process, torch._dynamo.mutation_guard replaces
# nn.Module.__init__ and __setstate__ with wrappers that tag each module for its own
# bookkeeping; the wrapped method is the closure cell of this name.
_DYNAMO_WRAPPERS = {"patched_init": "init", "patched_setstate": "setstate"}


def unwrapped_torch_compile_patch(fn: Any) -> Any | None:
    """The nn.Module method a torch.compile instrumentation wrapper calls, or None:
    the trace inlines that method (the tag is torch.compile's, not the program's)."""
    cell_name = _DYNAMO_WRAPPERS.get(getattr(fn, "__name__", ""))
    if cell_name is None or getattr(fn, "__module__", None) != "torch._dynamo.mutation_guard":
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    cell = cells.get(cell_name)
    return None if cell is None else cell.cell_contents
# Every hook table ``nn.Module._call_impl`` consults on the instance.
_OWN_HOOK_DICTS = (
    "_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks",
)
_REGISTRATION_HOOKS = "_global_module_registration_hooks"


def is_constructible_module(cls: type) -> bool:
    """An nn.Module class whose construction the trace may follow."""
    from bytegraph.variables.user_classes import is_plain_class

    return (
        issubclass(cls, nn.Module)
        and is_plain_class(cls)
        and not issubclass(cls, torch.jit.ScriptModule)
    )


def _is_module(value: VariableTracker) -> bool:
    if isinstance(value, NNModuleVariable):
        return True
    try:
        kind = value.python_type()
    except Unsupported:
        return False
    return isinstance(kind, type) and issubclass(kind, nn.Module)


def _is_tensor_kind(value: VariableTracker, kind: type) -> bool:
    from bytegraph.variables.tensor import TensorVariable

    return isinstance(value, TensorVariable) and issubclass(value.python_type(), kind)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MadeModuleVariable(NNModuleVariable):
    """An nn.Module created by the trace: ``value`` is None, its state in SideEffects."""

    # -- the instance's member dicts --------------------------------------------
    def own_dict(self, tx: Tx, name: str) -> DictVariable | None:
        """The dict VT the instance holds as ``name`` (None before ``Module.__init__``)."""
        held = tx.output.side_effects.load_attr(self, name)
        if held is None or held is DELETED:
            return None
        if not isinstance(held, DictVariable):
            raise Unsupported("module_structure_change", f"{name} of a module replaced by {held}")
        return held

    def members(self, tx: Tx, name: str) -> dict[Any, VariableTracker]:
        held = self.own_dict(tx, name)
        return {} if held is None else held.items_now(tx)

    # -- reads ----------------------------------------------------------------
    def generic_getattr(self, tx: Tx, name: str, fallback: bool = True) -> VariableTracker:
        """Names that are not identifiers (``Sequential``'s ``'0'``) are no instance
        attribute (stores refuse them): the class, then the member dicts."""
        if name.isidentifier():
            return super().generic_getattr(tx, name, fallback)
        if self.lookup(tx, name) is not None:
            raise Unsupported("unknown_attribute", f"class attribute {name!r} of a module")
        if not fallback:
            raise MissingAttribute(f"a {self.cls.__qualname__} object", name)
        return self.getattr_fallback(tx, name)

    def getattr_fallback(self, tx: Tx, name: str) -> Any:
        found = self.lookup(tx, "__getattr__")
        if found is None or found.owner is not nn.Module:
            return UserDefinedObjectVariable.getattr_fallback(self, tx, name)
        for dict_name in _MEMBER_DICTS:
            members = self.members(tx, dict_name)
            if name in members:
                return members[name]
        raise MissingAttribute(f"a {self.cls.__qualname__} module", name)

    def _children(self, tx: Tx) -> dict[str, Any]:
        return dict(self.members(tx, "_modules"))

    def _container_kind(self) -> type | None:
        for kind in (nn.Sequential, nn.ModuleList, nn.ModuleDict):
            if issubclass(self.cls, kind):
                overridden = ("__iter__", "__getitem__", "__len__")
                if all(getattr(self.cls, m) is getattr(kind, m) for m in overridden):
                    return kind
        return None

    # -- stores (nn.Module.__setattr__) -----------------------------------------
    def var_setattr(self, tx: Tx, name: str, value: Any) -> None:
        if self.cls.__setattr__ is not nn.Module.__setattr__:
            UserDefinedObjectVariable.var_setattr(self, tx, name, value)
            return
        if not isinstance(name, str) or not name.isidentifier():
            raise Unsupported("attribute_mutation", f"attribute name {name!r}")
        if _is_tensor_kind(value, nn.Parameter):
            self._register(tx, "_parameters", "register_parameter", name, value)
        elif name in self.members(tx, "_parameters"):
            self._refuse_move(name, "parameter")
        elif _is_module(value):
            self._set_submodule(tx, name, value)
        elif name in self.members(tx, "_modules"):
            self._refuse_move(name, "submodule")
        elif _is_tensor_kind(value, nn.Buffer) or name in self.members(tx, "_buffers"):
            # Eager re-registers it keeping its persistence: ``register_buffer`` works.
            raise Unsupported(
                "module_structure_change", f"assigning buffer {name!r} of a new module"
            )
        else:
            self.store_raw(tx, name, value)

    def _refuse_move(self, name: str, kind: str) -> None:
        raise Unsupported("module_structure_change", f"replacing {kind} {name!r} of a new module")

    def _elsewhere(self, tx: Tx, name: str, own: str) -> bool:
        """Whether ``name`` is an instance attribute or in a member dict other than ``own``."""
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None and pending is not DELETED:
            return True
        return any(name in self.members(tx, d) for d in _MEMBER_DICTS if d != own)

    def _register(self, tx: Tx, own: str, method: str, name: str, value: Any) -> None:
        """A parameter store: the module's own ``register_parameter``, inlined."""
        if self._elsewhere(tx, name, own) or self.own_dict(tx, own) is None:
            raise Unsupported("module_structure_change", f"registering {name!r} in {own}")
        register = self.var_getattr(tx, method)
        register.call_function(tx, [ConstantVariable(name), value], {})

    def _set_submodule(self, tx: Tx, name: str, value: Any) -> None:
        modules = self.own_dict(tx, "_modules")
        if modules is None:
            raise Unsupported(
                "operation_raises", "cannot assign module before Module.__init__() call"
            )
        if self._elsewhere(tx, name, "_modules"):
            raise Unsupported("module_structure_change", f"submodule {name!r} replaces a member")
        from torch.nn.modules import module as module_module

        hooks = getattr(module_module, _REGISTRATION_HOOKS)
        if hooks:
            raise Unsupported("module_hooks", "a global module registration hook is installed")
        tx.output.add_guard(GuardKind.EMPTY, TorchModuleGlobalSource(_REGISTRATION_HOOKS), hooks)
        modules.call_method(tx, "__setitem__", [ConstantVariable(name), value], {})

    def store_raw(self, tx: Tx, name: str, value: Any) -> None:
        UserDefinedObjectVariable.store_raw(self, tx, name, value)

    def var_delattr(self, tx: Tx, name: str) -> None:
        if self.cls.__delattr__ is not nn.Module.__delattr__ or any(
            name in self.members(tx, d) for d in _MEMBER_DICTS
        ):
            raise Unsupported("module_structure_change", f"deleting {name!r} of a module")
        UserDefinedObjectVariable.var_delattr(self, tx, name)

    # -- calls ----------------------------------------------------------------
    def call_function(self, tx: Tx, args, kwargs) -> Any:
        if self.cls.__call__ is not nn.Module.__call__:
            return UserDefinedObjectVariable.call_function(self, tx, args, kwargs)
        self._check_no_hooks(tx)
        return self.var_getattr(tx, "forward").call_function(tx, args, kwargs)

    def _check_no_hooks(self, tx: Tx) -> None:
        """No hook of its own (its tables are the trace's), none global (guarded)."""
        from torch.nn.modules import module as module_module

        for name in _OWN_HOOK_DICTS:
            if self.own_dict(tx, name) is None or self.members(tx, name):
                raise Unsupported("module_hooks", f"{self.cls.__qualname__} has module hooks")
        for name in _GLOBAL_HOOKS:
            hooks = getattr(module_module, name)
            if hooks:
                raise Unsupported("module_hooks", "a global module hook is installed")
            tx.output.add_guard(GuardKind.EMPTY, TorchModuleGlobalSource(name), hooks)

    def __repr__(self) -> str:
        return f"MadeModuleVariable({self.cls.__qualname__})"
