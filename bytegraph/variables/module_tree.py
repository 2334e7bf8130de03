"""``Module.modules()``, ``named_modules()``, ``children()``, ``named_children()``,
``parameters()``, ``named_parameters()``, ``buffers()`` and ``named_buffers()``.

``nn.Module`` walks its tree with a ``set`` of the modules already seen, a set
of objects hashed by identity, which the set model (constants only) does not
hold. Inlined, the walk would stop at ``self not in memo``. So these four
methods are modelled here, from the module tree the trace already guards:

1. each module's ``_modules`` is read through ``NNModuleVariable._children``,
   which guards the dict's keys and wraps each child (its type guarded);
2. a module reached twice is the same VT (the builder tracks existing objects,
   guarding aliases ``is`` each other and same-type modules ``is not``), so
   duplicates are dropped by VT identity, as eager drops them by object;
3. the method found on every module walked is ``nn.Module``'s own (the class
   lookup guards it); an override on ``module`` itself is inlined as usual,
   one deeper in the tree, a ``memo`` passed in, or an argument that is not
   a constant is a graph break;
4. the result is an iterator over the walked items, as the generator yields.

Parameters and buffers are read the same way, through each walked module's
``_parameters``/``_buffers`` (their keys guarded, each tensor one graph input):
one tensor reached twice (tied weights) is one VT, dropped as eager's memo set
drops it, and the distinct ones are guarded distinct, so tying them later is a
new trace (Hugging Face's ``self.dtype`` is ``next(p.dtype for p in
self.parameters() ...)``).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import TYPE_CHECKING, Any

from torch import nn

from bytegraph.exc import Unsupported
from bytegraph.variables.base import ValueMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.nn_module import NNModuleVariable

_MEMBER_METHODS = {
    "parameters": "_parameters", "named_parameters": "_parameters",
    "buffers": "_buffers", "named_buffers": "_buffers",
}
TREE_METHODS = frozenset(
    {"modules", "named_modules", "children", "named_children", *_MEMBER_METHODS}
)
_SIGNATURES = {name: inspect.signature(getattr(nn.Module, name)) for name in TREE_METHODS}


def is_tree_method(owner: type | None, raw: Any, name: str) -> bool:
    """``raw`` is nn.Module's own tree method ``name``, not an override."""
    return name in TREE_METHODS and owner is nn.Module and raw is nn.Module.__dict__[name]


def _uses_own(tx: Tx, module: NNModuleVariable, name: str) -> None:
    found = module.lookup(tx, name)
    if found is None or found.pending is not None or found.owner is not nn.Module or (
        found.raw is not nn.Module.__dict__[name]
    ):
        raise Unsupported("module_hooks", f"{module.cls.__qualname__} overrides {name}")


def _children(tx: Tx, module: NNModuleVariable) -> list[tuple[str, NNModuleVariable]]:
    """``module._modules.items()`` without the None entries, every child a module VT."""
    from bytegraph.variables.nn_module import NNModuleVariable

    pairs = []
    for name, child in module._children(tx).items():
        if child.is_python_constant() and child.as_python_constant() is None:
            continue
        if not isinstance(child, NNModuleVariable):
            raise Unsupported("unknown_attribute", f"submodule {name!r} is {child}")
        pairs.append((name, child))
    return pairs


def _named_modules(
    tx: Tx, module: NNModuleVariable, memo: set[int], prefix: str, remove_duplicate: bool
) -> list[tuple[str, NNModuleVariable]]:
    _uses_own(tx, module, "named_modules")
    if id(module) in memo:
        return []
    if remove_duplicate:
        memo.add(id(module))
    walked = [(prefix, module)]
    for name, child in _children(tx, module):
        child_prefix = prefix + ("." if prefix else "") + name
        walked += _named_modules(tx, child, memo, child_prefix, remove_duplicate)
    return walked


def _named_children(tx: Tx, module: NNModuleVariable) -> list[tuple[str, NNModuleVariable]]:
    seen: set[int] = set()
    pairs = []
    for name, child in _children(tx, module):
        if id(child) not in seen:
            seen.add(id(child))
            pairs.append((name, child))
    return pairs


def _named_members(
    tx: Tx, module: NNModuleVariable, dict_name: str, options: dict[str, Any]
) -> list[tuple[str, VariableTracker]]:
    """``Module._named_members``: the tensors of ``dict_name`` of each module walked."""
    from bytegraph.guards.guard import GuardKind
    from bytegraph.guards.sources import AttrSource

    _uses_own(tx, module, "_named_members")
    prefix, remove_duplicate = options.get("prefix", ""), bool(options["remove_duplicate"])
    if not isinstance(prefix, str):
        raise Unsupported("unsupported_method", f"named members with prefix {prefix!r}")
    if options["recurse"]:
        walked = _named_modules(tx, module, set(), prefix, remove_duplicate)
    else:
        walked = [(prefix, module)]
    memo: dict[int, VariableTracker] = {}
    pairs = []
    for module_prefix, owner in walked:
        owner._check_members_unchanged(tx, dict_name)
        members = owner.value.__dict__[dict_name]
        source = AttrSource(owner.source, dict_name)
        tx.output.add_guard(GuardKind.DICT_KEYS, source, (type(members), tuple(members)))
        for key in members:
            value = owner.member(tx, dict_name, key)
            if value.is_python_constant() and value.as_python_constant() is None:
                continue
            if id(value) in memo:  # the same tensor: the builder hands out one VT
                continue
            if remove_duplicate:
                memo[id(value)] = value
            pairs.append((module_prefix + ("." if module_prefix else "") + key, value))
    sources = [vt.source for vt in memo.values() if vt.source is not None]
    for index, source in enumerate(sources[1:], 1):
        tx.output.add_guard(GuardKind.DISTINCT, source, tuple(sources[:index]))
    return pairs


def walk(tx: Tx, module: NNModuleVariable, name: str, args: list, kwargs: dict) -> list[Any]:
    """What ``module.name(*args, **kwargs)`` yields, as VTs."""
    from bytegraph.variables.containers import TupleVariable, python_constant

    consts = [python_constant(tx, a) for a in args]
    const_kwargs = {k: python_constant(tx, v) for k, v in kwargs.items()}
    try:
        bound = _SIGNATURES[name].bind(None, *consts, **const_kwargs)
    except TypeError as e:
        raise Unsupported("call_raises_type_error", f"Module.{name}: {e}") from None
    bound.apply_defaults()
    options = dict(list(bound.arguments.items())[1:])
    _uses_own(tx, module, name)
    if name in _MEMBER_METHODS:
        if not name.startswith("named_"):
            _uses_own(tx, module, "named_" + name)
            options = {"prefix": "", "remove_duplicate": True, **options}
        pairs = _named_members(tx, module, _MEMBER_METHODS[name], options)
    elif name in ("modules", "named_modules"):
        if options.get("memo") is not None:
            raise Unsupported("unsupported_method", "named_modules with a memo set")
        prefix = options.get("prefix", "")
        if not isinstance(prefix, str):
            raise Unsupported("unsupported_method", f"named_modules prefix {prefix!r}")
        if name == "modules":
            _uses_own(tx, module, "named_modules")
        pairs = _named_modules(tx, module, set(), prefix, bool(options["remove_duplicate"]))
    else:
        if name == "children":
            _uses_own(tx, module, "named_children")
        pairs = _named_children(tx, module)
    if name.startswith("named_"):
        return [TupleVariable((ConstantVariable(n), m)) for n, m in pairs]
    return [m for _, m in pairs]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ModuleTreeMethodVariable(VariableTracker):
    """``module.modules`` (or another tree method) bound to an NNModuleVariable."""

    module: VariableTracker
    name: str

    def python_type(self) -> type:
        return types.MethodType

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.iterators import IteratorVariable

        items = walk(tx, self.module, self.name, args, kwargs)  # type: ignore[arg-type]
        mutation = tx.output.side_effects.new_mutation(ValueMutationNew)
        return IteratorVariable(tuple(items), mutation_type=mutation)

    def __repr__(self) -> str:
        return f"ModuleTreeMethodVariable({self.name})"
