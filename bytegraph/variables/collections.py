"""What ``collections`` adds to the mappings: ``__missing__`` of dict subclasses, and
``Counter``'s C helper.

``defaultdict`` and ``OrderedDict`` are ``DictVariable``s (``dicts.py``: the
factory is called for a missing key, ``move_to_end``, ``popitem(last=)``,
order-sensitive equality). ``Counter`` is a dict subclass written in Python,
so it is a ``UserDictObjectVariable`` (``user_dicts.py``) whose methods are
inlined like any user class's. Two pieces of it run in C, modelled here:

* ``d[key]`` of a dict subclass that defines ``__missing__`` (Counter's
  returns 0): ``dict.__getitem__`` finds the key in the contents, or calls
  ``type(d).__missing__(d, key)``, inlined (``MissingGetItemVariable``);
* ``_collections._count_elements(mapping, iterable)``, Counter's tally of an
  iterable: for each element, ``mapping[elem] = mapping.get(elem, 0) + 1``
  through the mapping's own ``get`` and ``__setitem__`` (CPython takes a
  dict fast path only where neither is overridden, with the same result).
"""

from __future__ import annotations

import dataclasses
import heapq
import operator
from typing import TYPE_CHECKING, Any

from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.dicts import dict_key
from bytegraph.variables.iterators import iterate

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.user_dicts import UserDictObjectVariable

try:
    from _collections import _count_elements as c_count_elements
except ImportError:  # an interpreter without the accelerator runs the Python version
    c_count_elements = None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MissingGetItemVariable(VariableTracker):
    """``dict.__getitem__`` bound to an object whose class defines ``__missing__``."""

    owner: UserDictObjectVariable | None = None

    def call_function(
        self, tx: Tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
    ) -> VariableTracker:
        mapping = self.owner.mapping
        if len(args) != 1 or kwargs:
            return mapping.call_method(tx, "__getitem__", args, kwargs)  # its TypeError
        items = mapping.items_now(tx)
        key = dict_key(args[0].as_python_constant())
        if key in items:
            return items[key]
        return self.owner.call_special(tx, "__missing__", [args[0]])

    def __repr__(self) -> str:
        return f"MissingGetItemVariable({self.owner!r})"


def collections_function(value: Any, source: Any) -> VariableTracker | None:
    """The VT of a C helper modelled here (``_count_elements``, ``heapq.nlargest``...)."""
    if value is c_count_elements and value is not None:
        return CountElementsVariable(value, source=source)
    if value is heapq.nlargest or value is heapq.nsmallest:
        return HeapSelectVariable(value, source=source)
    return None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CountElementsVariable(PythonValueVariable):
    """``_collections._count_elements``: Counter's tally of an iterable."""

    rebuilt_as_constant = True

    def call_function(
        self, tx: Tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
    ) -> VariableTracker:
        from bytegraph.exc import Unsupported
        from bytegraph.variables.builtin import call

        if len(args) != 2 or kwargs:
            raise Unsupported("call_raises_type_error", "_count_elements() takes 2 arguments")
        mapping, iterable = args
        get = mapping.var_getattr(tx, "get")
        iterator = iterate(tx, iterable)
        while (element := iterator.next_item(tx)) is not None:
            count = get.call_function(tx, [element, ConstantVariable(0)], {})
            count = call(tx, operator.add, count, ConstantVariable(1))
            mapping.call_method(tx, "__setitem__", [element, count], {})
        return ConstantVariable(None)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class HeapSelectVariable(CountElementsVariable):
    """``heapq.nlargest(n, iterable, key)`` (``Counter.most_common(n)``) and ``nsmallest``:
    what the documentation gives as their equivalent, ``sorted(iterable, key=key,
    reverse=...)[:n]`` (the same items, ties in the same order, the key called once per
    item in the same order)."""

    def call_function(
        self, tx: Tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
    ) -> VariableTracker:
        from bytegraph.exc import Unsupported
        from bytegraph.variables.builtin import BuiltinVariable, call

        if len(args) != 2 or set(kwargs) - {"key"}:
            raise Unsupported("call_raises_type_error", f"{self.value.__name__}() arguments")
        n, iterable = args
        if type(n.as_python_constant()) is not int:
            raise Unsupported("not_a_constant", f"{self.value.__name__}() n is not an int")
        reverse = ConstantVariable(self.value is heapq.nlargest)
        options = {"key": kwargs.get("key", ConstantVariable(None)), "reverse": reverse}
        ordered = BuiltinVariable(sorted).call_function(tx, [iterable], options)
        return call(tx, operator.getitem, ordered, ConstantVariable(slice(None, n.value)))
