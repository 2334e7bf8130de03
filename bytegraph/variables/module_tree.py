"""``Module.modules()``, ``named_modules()``, ``children()``, ``named_children()``.

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

TREE_METHODS = frozenset({"modules", "named_modules", "children", "named_children"})
_SIGNATURES = {name: inspect.signature(getattr(nn.Module, name)) for name in TREE_METHODS}


def is_tree_method(owner: type | None, raw: Any, name: str) -> bool:
    """``raw`` is nn.Module's own tree method ``name``, not an override."""
    return name in TREE_METHODS and owner is nn.Module and raw is nn.Module.__dict__[name]


def _uses_own(tx: Tx, module: NNModuleVariable, name: str) -> None:
    found = module.lookup(tx, name)
    if found is None or found.pending is not None or not is_tree_method(
        found.owner, found.raw, name
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
    if name in ("modules", "named_modules"):
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
