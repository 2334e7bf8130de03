"""``torch.func.functional_call(module, params_and_buffers, args, kwargs)``.

Eager swaps the named parameters and buffers of ``module`` for the given
tensors, calls it, and swaps them back. The trace does the same without
touching the module: while the call is inlined, a read of one of those
members (``NNModuleVariable.member``, keyed by the member's source, e.g.
``model._modules['fc']._parameters['weight']``) answers the given tensor
instead of the parameter. The call is therefore traced like any module call,
inside a transform's body as well (``grad(lambda p: functional_call(m, p,
x))``), and the override ends however the call ends.

Tied weights (one tensor under two names) are refused: which names a
swapped tensor reaches would be decided by identity, which the guards do
not check.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource, GetItemSource, Source
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.containers import BaseSequenceVariable, TupleVariable
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# id(OutputGraph) -> member source -> the tensor standing for it during a call
_OVERRIDES: dict[int, dict[Source, VariableTracker]] = {}


def override(tx: Tx, source: Source) -> VariableTracker | None:
    """The tensor a functional_call in progress puts in place of the member at ``source``."""
    active = _OVERRIDES.get(id(tx.output))
    return None if active is None else active.get(source)


def overriding(output: Any) -> bool:
    """Whether a functional_call is in progress in the trace of ``output``."""
    return id(output) in _OVERRIDES


@contextlib.contextmanager
def _overriding(tx: Tx, members: dict[Source, VariableTracker]) -> Iterator[None]:
    key = id(tx.output)
    outer = _OVERRIDES.get(key)
    _OVERRIDES[key] = {**(outer or {}), **members}
    try:
        yield
    finally:
        if outer is None:
            del _OVERRIDES[key]
        else:
            _OVERRIDES[key] = outer


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FunctionalCallVariable(PythonValueVariable):
    """``torch.func.functional_call``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.higher_order import bind
        from bytegraph.variables.nn_module import NNModuleVariable

        kwargs = dict(kwargs)
        options = {k: kwargs.pop(k).as_python_constant() for k in ("tie_weights", "strict")
                   if k in kwargs}
        names = ("module", "parameter_and_buffer_dicts", "args", "kwargs")
        if len(args) + len(kwargs) == 3:
            names = names[:3]
        bound = bind("torch.func.functional_call", names, args, kwargs)
        module, tensors, call_args = bound[:3]
        call_kwargs = bound[3].items_now(tx) if len(bound) == 4 else {}
        if not isinstance(module, NNModuleVariable) or module.source is None:
            raise Unsupported("higher_order_call", f"functional_call of {module}")
        members = _members(tx, module, _dicts(tx, tensors), options.get("strict", False))
        if not isinstance(call_args, TupleVariable):
            call_args = TupleVariable((call_args,))
        with _overriding(tx, members):
            return module.call_function(tx, list(call_args.items_now(tx)), dict(call_kwargs))


def _dicts(tx: Tx, value: VariableTracker) -> dict[str, VariableTracker]:
    dicts = list(value.items_now(tx)) if isinstance(value, BaseSequenceVariable) else [value]
    merged: dict[str, VariableTracker] = {}
    for d in dicts:
        if not isinstance(d, DictVariable):
            raise Unsupported("higher_order_call", f"functional_call with {d} as the tensors")
        for name, tensor in d.items_now(tx).items():
            if name in merged:
                raise Unsupported("higher_order_call", f"functional_call: {name!r} given twice")
            merged[name] = tensor
    return merged


def _members(
    tx: Tx, module: Any, given: dict[str, VariableTracker], strict: bool
) -> dict[Source, VariableTracker]:
    """The source of each named member, mapped to the tensor replacing it."""
    root: torch.nn.Module = module.value
    named = dict(root.named_parameters(remove_duplicate=False))
    named.update(root.named_buffers(remove_duplicate=False))
    if strict and set(named) != set(given):
        raise Unsupported("higher_order_call", "functional_call(strict=True) without exactly "
                          "the module's parameters and buffers (eager raises)")
    by_identity: dict[int, list[str]] = {}
    for name, tensor in named.items():
        by_identity.setdefault(id(tensor), []).append(name)
    members: dict[Source, VariableTracker] = {}
    for name, tensor in given.items():
        if name not in named:
            raise Unsupported("higher_order_call", f"functional_call: {name!r} is no parameter "
                              "or buffer of the module")
        if len(by_identity[id(named[name])]) > 1:
            raise Unsupported("higher_order_call", "functional_call of a module with tied "
                              f"weights ({', '.join(by_identity[id(named[name])])})")
        if not isinstance(tensor, TensorVariable):
            raise Unsupported("higher_order_call", f"functional_call: {name!r} given {tensor}")
        *path, leaf = name.split(".")
        owner, source = root, module.source
        for part in path:
            owner = owner._modules[part]
            source = GetItemSource(AttrSource(source, "_modules"), part)
        kind = "_parameters" if leaf in owner._parameters else "_buffers"
        members[GetItemSource(AttrSource(source, kind), leaf)] = tensor
    return members
