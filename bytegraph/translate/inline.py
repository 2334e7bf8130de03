"""Inlining: a call of a user function runs a child translator on its code.

The child shares the parent's OutputGraph, so the callee's tensor work lands
in the same graph and its guards in the same cache entry. Arguments are
bound exactly as CPython binds them; a binding error (which raises
TypeError in eager mode) is an Unsupported, so the frame runs in Python and
raises there. Calling a generator function runs nothing: the generator
resumes its inlined frame each time the caller asks for an item
(``variables/generators.py``).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from bytegraph import config
from bytegraph.exc import Unsupported
from bytegraph.translate.fragments import inline_with_reuse
from bytegraph.translate.translator import InliningInstructionTranslator
from bytegraph.variables.base import ValueMutationNew, VariableTracker
from bytegraph.variables.containers import DictVariable, TupleVariable
from bytegraph.variables.exceptions import ObservedRaise
from bytegraph.variables.generators import GeneratorVariable, SuspendedFrame

if TYPE_CHECKING:
    from bytegraph.translate.translator import (
        InliningInstructionTranslator,
        InstructionTranslatorBase,
    )
    from bytegraph.variables.functions import BaseFunctionVariable

CO_VARARGS, CO_VARKEYWORDS = 0x04, 0x08
CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR = 0x20, 0x80, 0x200
NEW_VALUE = ValueMutationNew(1)


def inline_call(
    tx: InstructionTranslatorBase,
    fn: BaseFunctionVariable,
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> VariableTracker:
    code = fn.code()
    if code.co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR):
        raise Unsupported("coroutine_call", f"async function {code.co_name}")
    if tx.inline_depth >= config.inline_depth_limit:
        raise Unsupported("inline_depth", f"inlining {code.co_name} at depth {tx.inline_depth}")
    positional_defaults, keyword_defaults = fn.defaults(tx)
    symbolic_locals = bind_arguments(code, args, kwargs, positional_defaults, keyword_defaults)
    if code.co_flags & CO_GENERATOR:  # nothing runs until the consumer asks for an item
        frame = SuspendedFrame(_child(tx, fn, symbolic_locals))
        call = (fn, tuple(args), tuple(kwargs.items()))
        return GeneratorVariable((), frame, call, mutation_type=NEW_VALUE)
    # A repeated call (the next block of a model) may be a copy of an earlier one.
    return inline_with_reuse(tx, fn, symbolic_locals, lambda: _run(tx, fn, symbolic_locals))


def _child(
    tx: InstructionTranslatorBase,
    fn: BaseFunctionVariable,
    symbolic_locals: dict[str, VariableTracker],
) -> InliningInstructionTranslator:
    code = fn.code()
    return InliningInstructionTranslator(
        code, symbolic_locals, fn.f_globals(), fn.cells(tx), tx.output,
        inline_depth=tx.inline_depth + 1, parent=tx,
        is_generator=bool(code.co_flags & CO_GENERATOR),
    )


def _run(
    tx: InstructionTranslatorBase,
    fn: BaseFunctionVariable,
    symbolic_locals: dict[str, VariableTracker],
) -> VariableTracker:
    """Inline: a child translator runs ``fn``'s code with ``symbolic_locals``."""
    child = _child(tx, fn, symbolic_locals)
    try:
        child.run()
    except ObservedRaise as error:
        error.left = tx  # the caller's opcode handler vets it (ops/exceptions.py)
        raise
    return child.return_value


def bind_arguments(
    code: types.CodeType,
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
    positional_defaults: list[VariableTracker],
    keyword_defaults: dict[str, VariableTracker],
) -> dict[str, VariableTracker]:
    """The callee's initial locals, bound as CPython binds a call."""
    names = code.co_varnames
    npos, nkwonly = code.co_argcount, code.co_kwonlyargcount
    positional_names = names[:npos]
    keyword_only_names = names[npos : npos + nkwonly]
    rest = npos + nkwonly
    varargs_name = names[rest] if code.co_flags & CO_VARARGS else None
    varkw_name = names[rest + bool(varargs_name)] if code.co_flags & CO_VARKEYWORDS else None

    def fail(why: str) -> Unsupported:
        return Unsupported("call_raises_type_error", f"{code.co_name}() {why} (TypeError in eager)")

    bound: dict[str, VariableTracker] = dict(zip(positional_names, args))
    extra_positional = args[npos:]
    if extra_positional and varargs_name is None:
        raise fail(f"takes {npos} positional arguments but {len(args)} were given")
    by_keyword = set(positional_names[code.co_posonlyargcount :]) | set(keyword_only_names)
    extra_keywords: dict[str, VariableTracker] = {}
    for name, value in kwargs.items():
        if name in by_keyword:
            if name in bound:
                raise fail(f"got multiple values for argument {name!r}")
            bound[name] = value
        elif varkw_name is not None:
            extra_keywords[name] = value
        else:
            raise fail(f"got an unexpected keyword argument {name!r}")
    first_default = npos - len(positional_defaults)
    for i, name in enumerate(positional_names):
        if name not in bound:
            if i < first_default:
                raise fail(f"missing required argument {name!r}")
            bound[name] = positional_defaults[i - first_default]
    for name in keyword_only_names:
        if name not in bound:
            if name not in keyword_defaults:
                raise fail(f"missing keyword-only argument {name!r}")
            bound[name] = keyword_defaults[name]
    if varargs_name is not None:
        bound[varargs_name] = TupleVariable(tuple(extra_positional))
    if varkw_name is not None:
        bound[varkw_name] = DictVariable(extra_keywords, mutation_type=NEW_VALUE)
    return bound
