"""Stores and deletes that change state outside the frame: attributes and globals.

None of them runs at trace time. Attribute stores and deletes go to the VT
that models the target (``var_setattr``/``var_delattr``: user objects,
classes, modules), which records them in SideEffects; global writes are
recorded there directly. All are replayed after the graph. An item store
into a container is its ``__setitem__``/``__delitem__`` (recorded the same
way); into a tensor it is an in-place graph op (``operator.setitem``), so the
compiled graph changes the real tensor exactly once, where eager would.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from bytegraph.dropped_values import check_replaced_global
from bytegraph.exc import Unsupported
from bytegraph.side_effects import DELETED
from bytegraph.translate.ops.build import build_slice
from bytegraph.translate.ops.exceptions import vet_item_method
from bytegraph.translate.ops.names import global_source
from bytegraph.translate.registry import handler
from bytegraph.variables.builtin import BuiltinVariable
from bytegraph.variables.exceptions import ObservedRaise
from bytegraph.variables.tensor import TensorVariable, tensor_op

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.base import VariableTracker


def _attribute_protocol(obj: VariableTracker, method: str, name: str):
    protocol = getattr(obj, method, None)
    if protocol is None:
        action = "setting" if method == "var_setattr" else "deleting"
        raise Unsupported("attribute_mutation", f"{action} attribute {name!r} of {obj}")
    return protocol


@handler("STORE_ATTR")
def STORE_ATTR(tx: Tx, inst: Instruction) -> None:
    """(value obj -- ): ``obj.name = value``"""
    obj = tx.pop()
    value = tx.pop()
    _attribute_protocol(obj, "var_setattr", inst.argval)(tx, inst.argval, value)


@handler("DELETE_ATTR")
def DELETE_ATTR(tx: Tx, inst: Instruction) -> None:
    """(obj -- ): ``del obj.name``"""
    obj = tx.pop()
    _attribute_protocol(obj, "var_delattr", inst.argval)(tx, inst.argval)


@handler("STORE_GLOBAL")
def STORE_GLOBAL(tx: Tx, inst: Instruction) -> None:
    """(value -- ): a write to the module's globals, replayed after the graph."""
    check_replaced_global(tx, inst.argval)
    tx.output.side_effects.store_global(tx.f_globals, inst.argval, tx.pop())


@handler("DELETE_GLOBAL")
def DELETE_GLOBAL(tx: Tx, inst: Instruction) -> None:
    """( -- ): the global must exist now (NameError in eager otherwise)."""
    from bytegraph.variables.builder import wrap

    name = inst.argval
    side_effects = tx.output.side_effects
    pending = side_effects.load_global(tx.f_globals, name)
    if pending is DELETED or (pending is None and name not in tx.f_globals):
        raise Unsupported("unbound_name", f"del of undefined global {name!r} (NameError)")
    if pending is None:  # the trace relies on it existing: read it, which guards it
        wrap(tx, tx.f_globals[name], global_source(tx, name))
    check_replaced_global(tx, name)
    side_effects.delete_global(tx.f_globals, name)


@handler("STORE_SUBSCR")
def STORE_SUBSCR(tx: Tx, inst: Instruction) -> None:
    """(value container index -- ): ``container[index] = value``"""
    index = tx.pop()
    _store_subscript(tx, tx.pop(), index, tx.pop())


@handler("STORE_SLICE", min_ver=(3, 12))
def STORE_SLICE(tx: Tx, inst: Instruction) -> None:
    """(value container start stop -- ): ``container[start:stop] = value``"""
    stop, start = tx.pop(), tx.pop()
    _store_subscript(tx, tx.pop(), build_slice([start, stop]), tx.pop())


def _store_subscript(
    tx: Tx, container: VariableTracker, index: VariableTracker, value: VariableTracker
) -> None:
    if isinstance(container, TensorVariable):
        if tx.output.function_modes:  # Tensor.__setitem__ through the mode
            BuiltinVariable(operator.setitem).call_function(tx, [container, index, value], {})
            return
        tensor_op(tx, "call_function", operator.setitem, [container, index, value], {})
        return
    container.call_method(tx, "__setitem__", [index, value], {})


@handler("DELETE_SUBSCR")
def DELETE_SUBSCR(tx: Tx, inst: Instruction) -> None:
    """(container index -- ): ``del container[index]``"""
    index = tx.pop()
    container = tx.pop()
    if isinstance(container, TensorVariable):
        raise Unsupported("operation_raises", "del of a tensor item (TypeError in eager)")
    try:
        container.call_method(tx, "__delitem__", [index], {})
    except ObservedRaise as error:  # ``del d[missing]``: the dict's own KeyError
        vet_item_method(tx, error, container)
        raise
