"""``bytegraph.bytecode.instructions.decode`` on the running interpreter (CPython 3.11-3.13).

Covers: jump targets as instruction indices (for/while loops, break, continue,
if/else, jumps long enough to need EXTENDED_ARG; FOR_ITER's target is where an
exhausted loop really lands, past the END_FOR that 3.12+'s ``dis`` names), the
exception table in index form (try/except, nested try, try/finally, with-blocks;
each entry, handler depth included, as ``dis`` parses the running interpreter's
table) and ``handler_for``, inline CACHE entries left out, and the decode cache
(one record per code object, by identity, even for code holding unhashable
constants). Version differences come from ``compat`` or ``dis``.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Callable

import pytest

from bytegraph.bytecode import compat, instructions
from bytegraph.bytecode.instructions import DecodedCode, Instruction, decode

# What an exhausted FOR_ITER skips past the instruction ``dis`` names as its target:
# 3.12's END_FOR; 3.13's END_FOR and the POP_TOP after it.
FOR_ITER_SKIPPED = ["END_FOR", "POP_TOP"][: compat.FOR_ITER_TARGET_SKIP]


def line_of(fn: Callable[..., object], marker: str) -> int:
    """The line of ``fn``'s source that ends with the comment ``# <marker>``."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    (hit,) = [i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    return first + hit


def on_line(decoded: DecodedCode, line: int) -> list[Instruction]:
    return [inst for inst in decoded.instructions if inst.lineno == line]


def only(decoded: DecodedCode, opname: str) -> Instruction:
    (inst,) = [inst for inst in decoded.instructions if inst.opname == opname]
    return inst


def dis_target(decoded: DecodedCode, inst: Instruction) -> int:
    """The index of the instruction ``dis`` names as ``inst``'s jump target."""
    return decoded.offset_to_index[inst.argval]


def check_for_iter_landing(decoded: DecodedCode, for_iter: Instruction) -> None:
    """FOR_ITER's target skips exactly what CPython skips past the one ``dis`` names."""
    named = dis_target(decoded, for_iter)
    assert for_iter.target == named + compat.FOR_ITER_TARGET_SKIP
    skipped = decoded.instructions[named : for_iter.target]
    assert [inst.opname for inst in skipped] == FOR_ITER_SKIPPED
    assert decoded.instructions[named].is_jump_target


def for_with_break_continue(xs: list[int]) -> int:
    total = 0
    for x in xs:  # loop
        if x < 0:
            continue  # continue
        if x > 100:
            break  # break
        total += x
    return total  # after


def test_for_loop_targets() -> None:
    fn = for_with_break_continue
    decoded = decode(fn.__code__)
    insts = decoded.instructions
    for_iter = only(decoded, "FOR_ITER")
    after_line = line_of(fn, "after")
    # FOR_ITER leaves the loop for ``return total``: dis names the instruction
    # right after the loop's last back edge (3.12+: END_FOR), CPython skips
    # END_FOR (3.13: and its POP_TOP) and lands on the return.
    landing = insts[for_iter.target]
    assert (landing.opname, landing.argval, landing.lineno) == ("LOAD_FAST", "total", after_line)
    assert insts[for_iter.target + 1].opname == "RETURN_VALUE"
    back_edges = [inst for inst in insts if inst.opname == "JUMP_BACKWARD"]
    assert back_edges and all(inst.target == for_iter.index for inst in back_edges)
    assert dis_target(decoded, for_iter) == max(inst.index for inst in back_edges) + 1
    check_for_iter_landing(decoded, for_iter)
    # ``continue`` goes back to FOR_ITER; ``break`` pops the iterator, then leaves.
    (cont,) = [inst for inst in on_line(decoded, line_of(fn, "continue")) if inst.target]
    assert cont.target == for_iter.index
    brk = on_line(decoded, line_of(fn, "break"))
    assert brk[0].opname == "POP_TOP"
    if brk[-1].target is not None:
        # 3.11 jumps to the code after the loop...
        assert compat.PY_VERSION < (3, 12)
        assert brk[-1].target == for_iter.target
    else:
        # ...3.12+ copies that short exit block (``return total``) in place.
        assert compat.PY_VERSION >= (3, 12)
        copied = insts[brk[-1].index + 1 : brk[-1].index + 3]
        assert [(i.opname, i.argval, i.lineno) for i in copied] == [
            (i.opname, i.argval, i.lineno) for i in insts[for_iter.target : for_iter.target + 2]
        ]


def while_with_else(n: int) -> int:
    i = 0
    while i < n:  # test
        i += 1
        if i == 7:
            break
    else:
        return -1  # else
    return i


def test_while_loop_targets() -> None:
    fn = while_with_else
    decoded = decode(fn.__code__)
    test_line = line_of(fn, "test")
    jumps = [i for i in on_line(decoded, test_line) if i.target is not None]
    else_first = on_line(decoded, line_of(fn, "else"))[0]
    # The condition is tested on entry and again at the bottom of the loop.
    top_exit = jumps[0]
    assert top_exit.target == else_first.index
    if "POP_JUMP_BACKWARD_IF_TRUE" in dis.opmap:
        # 3.11: the bottom test jumps back while the condition holds...
        (back_edge,) = jumps[1:]
        assert back_edge.opname == "POP_JUMP_BACKWARD_IF_TRUE"
    else:
        # ...3.12+ has no backward conditional jump: a forward one leaves the loop
        # for the else clause, then an unconditional JUMP_BACKWARD.
        bottom_exit, back_edge = jumps[1:]
        assert bottom_exit.target == else_first.index
        assert back_edge.opname == "JUMP_BACKWARD"
        assert back_edge.index == bottom_exit.index + 1
    # The back edge skips the test at the top and lands on the body's first instruction.
    assert back_edge.target == top_exit.index + 1
    assert decoded.instructions[back_edge.target].is_jump_target
    # Falling out of the bottom of the loop also runs the else clause.
    assert back_edge.index + 1 == else_first.index


def if_else(x: int) -> str:
    if x > 0:  # cond
        s = "pos"
    else:
        s = "nonpos"  # else
    return s


def test_conditional_jump_lands_on_else_branch() -> None:
    fn = if_else
    decoded = decode(fn.__code__)
    (jump,) = [i for i in on_line(decoded, line_of(fn, "cond")) if i.target is not None]
    target = decoded.instructions[jump.target]
    assert target.lineno == line_of(fn, "else")
    assert (target.opname, target.argval) == ("LOAD_CONST", "nonpos")


def test_every_jump_resolves_and_non_jumps_have_no_target() -> None:
    jumps = set(dis.hasjrel) | set(dis.hasjabs)
    for fn in (for_with_break_continue, while_with_else, if_else, nested_try, try_finally):
        decoded = decode(fn.__code__)
        for index, inst in enumerate(decoded.instructions):
            assert inst.index == index
            assert decoded.offset_to_index[inst.offset] == index
            if inst.opname == "FOR_ITER":
                check_for_iter_landing(decoded, inst)
            elif inst.opcode in jumps:
                assert inst.target is not None
                assert decoded.instructions[inst.target].offset == inst.argval
            else:
                assert inst.target is None
        # dis marks jump targets on its own; they must be exactly what the jumps name.
        marked = {inst.index for inst in decoded.instructions if inst.is_jump_target}
        named = {dis_target(decoded, i) for i in decoded.instructions if i.target is not None}
        assert marked == named


def long_loop_source(statements: int) -> str:
    body = "\n".join(f"        acc = acc + {i} * x" for i in range(statements))
    return f"def long_loop(xs):\n    acc = 0\n    for x in xs:\n{body}\n    return acc\n"


def test_long_jumps_with_extended_arg() -> None:
    namespace: dict[str, object] = {}
    exec(compile(long_loop_source(200), "<long_loop>", "exec"), namespace)
    fn = namespace["long_loop"]
    assert isinstance(fn, types.FunctionType)
    decoded = decode(fn.__code__)
    opnames = [inst.opname for inst in decoded.instructions]
    assert "EXTENDED_ARG" in opnames
    for_iter = only(decoded, "FOR_ITER")
    back = only(decoded, "JUMP_BACKWARD")
    # A long FOR_ITER carries an EXTENDED_ARG prefix, and jumps land on the prefix.
    assert decoded.instructions[for_iter.index - 1].opname == "EXTENDED_ARG"
    assert back.target == for_iter.index - 1
    assert dis_target(decoded, for_iter) == back.index + 1
    check_for_iter_landing(decoded, for_iter)
    assert decoded.instructions[for_iter.target].argval == "acc"


def try_except(x: int) -> int:
    try:
        y = 10 // x  # body
    except ZeroDivisionError:
        y = -1  # handler
    return y  # after


def body_of(decoded: DecodedCode, line: int) -> list[Instruction]:
    """The instructions of a try body's line, less the jump that leaves the try."""
    return [inst for inst in on_line(decoded, line) if inst.target is None]


def test_try_except_table() -> None:
    fn = try_except
    decoded = decode(fn.__code__)
    body = body_of(decoded, line_of(fn, "body"))
    entry = decoded.handler_for(body[0].index)
    assert entry is not None
    # The entry covers exactly the try body...
    assert (entry.start, entry.end) == (body[0].index, body[-1].index)
    assert decoded.handler_for(entry.start - 1) is not entry
    assert decoded.handler_for(entry.end + 1) is not entry
    # ...and lands on the handler, which starts by pushing the exception.
    handler = decoded.instructions[entry.target]
    assert handler.opname == "PUSH_EXC_INFO"
    assert decoded.instructions[entry.target + 1].argval == "ZeroDivisionError"
    assert entry.depth == 0 and not entry.lasti
    # Code outside the try has no handler.
    for inst in on_line(decoded, line_of(fn, "after")):
        assert decoded.handler_for(inst.index) is None
    # The handler body is covered by the cleanup entry (re-raise with lasti).
    cleanup = decoded.handler_for(on_line(decoded, line_of(fn, "handler"))[0].index)
    assert cleanup is not None and cleanup.lasti
    assert decoded.instructions[cleanup.target].opname == "COPY"


def nested_try(x: int) -> int:
    try:
        a = 1  # outer-only
        try:
            a = 100 // x  # inner
        except ValueError:
            a = 2
        a += int("3")  # outer-again
    except (KeyError, ZeroDivisionError):
        a = -1
    return a


def handler_catches(decoded: DecodedCode, index: int) -> str:
    """The first exception name the handler covering ``index`` tests for."""
    entry = decoded.handler_for(index)
    assert entry is not None
    assert decoded.instructions[entry.target].opname == "PUSH_EXC_INFO"
    return str(decoded.instructions[entry.target + 1].argval)


def test_nested_try_innermost_handler() -> None:
    fn = nested_try
    decoded = decode(fn.__code__)
    for marker, caught in [("outer-only", "KeyError"), ("inner", "ValueError"),
                           ("outer-again", "KeyError")]:
        for inst in body_of(decoded, line_of(fn, marker)):
            assert handler_catches(decoded, inst.index) == caught, marker


def try_finally(log: list[str]) -> None:
    try:
        log.append("body")  # body
    finally:
        log.append("finally")  # finally


def test_try_finally_table() -> None:
    fn = try_finally
    decoded = decode(fn.__code__)
    body = on_line(decoded, line_of(fn, "body"))
    entry = decoded.handler_for(body[0].index)
    assert entry is not None
    assert decoded.instructions[entry.target].opname == "PUSH_EXC_INFO"
    # The exceptional path runs its own copy of the finally body, then re-raises.
    finally_line = line_of(fn, "finally")
    rest = decoded.instructions[entry.target + 1 :]
    reraise = next(inst for inst in rest if inst.opname == "RERAISE")
    assert reraise.arg == 0
    assert {inst.lineno for inst in rest[: reraise.index - entry.target - 1]} == {finally_line}
    # The normal path has a copy too, not covered by the handler.
    normal = [i for i in on_line(decoded, finally_line) if i.index < entry.target]
    assert normal and all(decoded.handler_for(i.index) is None for i in normal)


def test_exception_table_matches_dis() -> None:
    """Each entry in index form is the running interpreter's entry, as ``dis`` parses it:
    handler depths differ between versions, so CPython's own table is the reference."""
    tables = 0
    for fn in (try_except, nested_try, try_finally, with_block, for_with_break_continue):
        decoded = decode(fn.__code__)
        offsets = [inst.offset for inst in decoded.instructions]
        expected = [
            (
                decoded.offset_to_index[entry.start],
                max(i for i, offset in enumerate(offsets) if offset < entry.end),
                decoded.offset_to_index[entry.target],
                entry.depth,
                entry.lasti,
            )
            for entry in dis._parse_exception_table(fn.__code__)
        ]
        got = [(e.start, e.end, e.target, e.depth, e.lasti) for e in decoded.exception_table]
        assert got == expected, fn.__name__
        tables += bool(expected)
    assert tables == 4, "every function but the plain loop has a table"


class Ctx:
    def __enter__(self) -> Ctx:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False


def with_block(x: int) -> int:
    with Ctx():
        y = 1 // x  # body
    return y


def test_with_block_handler() -> None:
    fn = with_block
    decoded = decode(fn.__code__)
    body = on_line(decoded, line_of(fn, "body"))
    entry = decoded.handler_for(body[0].index)
    assert entry is not None and entry.lasti
    assert [inst.opname for inst in decoded.instructions[entry.target : entry.target + 2]] == [
        "PUSH_EXC_INFO", "WITH_EXCEPT_START",
    ]


def uses_caches(obj: types.SimpleNamespace, xs: list[int]) -> int:
    return len(xs) + obj.value + xs[0]


def test_cache_entries_dropped() -> None:
    code = uses_caches.__code__
    decoded = decode(code)
    assert all(inst.opname != "CACHE" for inst in decoded.instructions)
    cache = dis.opmap["CACHE"]
    raw = code.co_code
    assert cache in raw[::2], "this function must have inline caches to test anything"
    # Each decoded instruction sits where its opcode is, never on a cache slot.
    assert all(raw[inst.offset] == inst.opcode for inst in decoded.instructions)
    n_caches = sum(op == cache for op in raw[::2])
    assert len(decoded.instructions) == len(raw) // 2 - n_caches
    # Offsets count the caches: LOAD_GLOBAL len is followed by its cache slots.
    load_global = only(decoded, "LOAD_GLOBAL")
    following = decoded.instructions[load_global.index + 1]
    assert following.offset - load_global.offset > 2


def test_decode_is_cached_across_reset_and_emptied_when_full(monkeypatch) -> None:
    import bytegraph

    code = try_except.__code__
    first = decode(code)
    assert decode(code) is first
    assert first.code is code
    bytegraph.reset()  # a pure function of the code object: kept, as torch._dynamo keeps its
    assert decode(code) is first
    # A full cache is emptied, so generated code objects are not kept forever.
    monkeypatch.setattr(instructions, "_DECODED_CACHE_LIMIT", len(instructions._decoded_cache))
    decode(code.replace(co_name=code.co_name))  # a twin: another object
    assert len(instructions._decoded_cache) == 1
    again = decode(code)
    assert again is not first
    assert again.instructions == first.instructions
    assert again.exception_table == first.exception_table


def test_decode_caches_by_identity() -> None:
    code = try_except.__code__
    twin = code.replace(co_name=code.co_name)
    assert twin == code and twin is not code
    assert decode(twin).code is twin
    assert decode(code).code is code


def test_decode_code_with_unhashable_constant() -> None:
    # Generated code may LOAD_CONST any object; decode must not hash co_consts.
    def returns_list() -> list[int]:
        return [1, 2]

    payload = [1, 2]
    code = returns_list.__code__.replace(co_consts=(*returns_list.__code__.co_consts, payload))
    with pytest.raises(TypeError):
        hash(code)
    decoded = decode(code)
    assert decode(code) is decoded
    assert decoded.instructions[-1].opname == "RETURN_VALUE"


def test_records_are_immutable() -> None:
    inst = decode(if_else.__code__).instructions[0]
    with pytest.raises(AttributeError):
        inst.target = 3  # type: ignore[misc]
    entry = decode(try_except.__code__).exception_table[0]
    with pytest.raises(AttributeError):
        entry.target = 0  # type: ignore[misc]
