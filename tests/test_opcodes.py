"""Every opcode of the running interpreter is handled or refused with a reason.

``translate/registry.py`` builds the dispatch table from the handlers
registered by ``translate/ops/*`` and from class overrides (a translator
method named after the opcode). An opcode deliberately left unhandled is
declared with ``unsupported_opcode(name, reason)`` in the module of its
family, and its slot raises ``Unsupported`` naming that reason. Coverage on
3.11 when this was written: 87 handled, 23 refused (async, class and module
bodies, ``import *``, the exception path, the interactive PRINT_EXPR), 110/110
accounted for; the assertion messages print the live figures. On 3.12 and 3.13
the opcodes are the interpreter's real ones: ``dis.opmap`` also lists the
compiler's pseudo-instructions (numbered from 256) and the INSTRUMENTED_*
variants of monitoring, neither of which ever appears in a code object.
"""

from __future__ import annotations

import dis

import pytest
import torch

import bytegraph
from bytegraph.translate import registry
from bytegraph.translate.translator import (
    InliningInstructionTranslator,
    InstructionTranslator,
    InstructionTranslatorBase,
)

TRANSLATORS = (InstructionTranslatorBase, InstructionTranslator, InliningInstructionTranslator)


def _overridden(opname: str) -> bool:
    return any(callable(getattr(cls, opname, None)) for cls in TRANSLATORS)


OPCODES = {
    name: op for name, op in dis.opmap.items() if op < 256 and not name.startswith("INSTRUMENTED")
}


def _coverage() -> tuple[set[str], set[str], set[str]]:
    handled = set(registry.registered_handlers()) | {op for op in OPCODES if _overridden(op)}
    refused = set(registry.UNSUPPORTED)
    return handled, refused, set(OPCODES) - handled - refused


def test_every_opcode_is_handled_or_refused_with_a_reason() -> None:
    handled, refused, missing = _coverage()
    total = len(OPCODES)
    figure = (
        f"{len(handled & set(OPCODES))} handled + {len(refused)} refused = "
        f"{len(set(OPCODES) - missing)}/{total} opcodes accounted for"
    )
    assert not missing, f"{figure}; neither handled nor refused: {sorted(missing)}"
    assert len(handled) + len(refused) == total, figure


def test_no_opcode_is_both_handled_and_refused() -> None:
    handled, refused, _ = _coverage()
    assert not handled & refused, sorted(handled & refused)


def test_every_reason_is_a_sentence_and_names_a_real_opcode() -> None:
    for opname, reason in registry.UNSUPPORTED.items():
        assert opname in OPCODES, f"{opname} is no opcode of this interpreter"
        assert len(reason.split()) >= 3, f"{opname}: give a reason, not {reason!r}"


def test_every_registered_handler_names_a_real_opcode() -> None:
    unknown = set(registry.registered_handlers()) - set(OPCODES)
    assert not unknown, sorted(unknown)


@pytest.mark.parametrize("cls", TRANSLATORS, ids=lambda c: c.__name__)
def test_dispatch_table_slots(cls) -> None:
    """Each slot is its handler; a refused opcode's slot raises with the declared reason."""
    handlers = registry.registered_handlers()
    for opname, opcode in OPCODES.items():
        slot = cls.dispatch_table[opcode]
        override = getattr(cls, opname, None)
        if override is not None:
            assert slot is override, opname
        elif opname in handlers:
            assert slot is handlers[opname], opname
        else:
            with pytest.raises(bytegraph.Unsupported) as info:
                slot(None, None)
            assert opname in str(info.value)
            assert registry.UNSUPPORTED[opname] in str(info.value)


def test_unknown_opcode_number_is_unsupported_not_a_crash() -> None:
    unused = next(i for i in range(256) if i not in OPCODES.values())
    with pytest.raises(bytegraph.Unsupported):
        InstructionTranslator.dispatch_table[unused](None, None)


def defines_class_inside(x):
    class Local:
        pass

    return x * 2


def test_refused_opcode_is_a_graph_break_with_its_reason(monkeypatch) -> None:
    """LOAD_BUILD_CLASS is traced (tests/programs/test_made_classes.py); refused here for
    the test, as no opcode still refused is reached by a plain function's normal path."""
    fn, opname = defines_class_inside, "LOAD_BUILD_CLASS"
    monkeypatch.setitem(registry.UNSUPPORTED, opname, "refused for this test")
    table, slot = InstructionTranslator.dispatch_table, dis.opmap[opname]
    handled, table[slot] = table[slot], registry._missing(opname)
    try:
        # A raise is no longer refused: tests/programs/test_exceptions.py.
        with pytest.raises(bytegraph.Unsupported) as info:
            bytegraph.compile(fn, backend="eager", fullgraph=True)(torch.randn(3))
        assert opname in str(info.value)
        assert registry.UNSUPPORTED[opname] in str(info.value)
        compiled = bytegraph.compile(fn, backend="eager")
        x = torch.randn(3)
        assert torch.equal(compiled(x), fn(x))
    finally:
        table[slot] = handled
