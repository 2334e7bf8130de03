"""``decode`` walks ``co_code`` itself; this proves it gives exactly what ``dis`` gives.

The reference is the decoder bytegraph had before: ``dis.get_instructions``, each
record built from ``dis``'s fields (``lineno`` from ``positions``), the exception
table found by a scan of every offset. Both decode every code object, nested ones
included, of big real modules (torch.nn's modules and functional, GPT-2's
modelling code, asyncio, json, dataclasses, typing), of generated source that
needs EXTENDED_ARG (hundreds of locals, cells, names and constants, jumps over
hundreds of code units; names and constants past 65535, so two prefixes), of a
corpus of every construct whose argument ``dis`` resolves its own way
(generators, coroutines, comprehensions, try/except/finally, with, match,
f-string conversions, super(), keyword calls, closures, class bodies) and of
code reassembled by the ``bytecode`` package (its own line and exception tables).
Every field of every instruction must be identical: of the same type, and the
very same object where ``dis`` hands over a constant, name or local name.
"""

from __future__ import annotations

import dataclasses
import dis
import importlib.util
import pkgutil
import types
from collections.abc import Iterator
from importlib.machinery import SourceFileLoader
from pathlib import Path

import bytecode as bc
import pytest

from bytegraph.bytecode import compat
from bytegraph.bytecode.assemble import roundtrip
from bytegraph.bytecode.instructions import (
    DecodedCode,
    ExceptionTableEntry,
    Instruction,
    _decode,
)

_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def reference_decode(code: types.CodeType) -> DecodedCode:
    """What ``_decode`` returned when it was built on ``dis.get_instructions``."""
    raw = list(dis.get_instructions(code))
    offset_to_index = {inst.offset: i for i, inst in enumerate(raw)}

    def target(inst: dis.Instruction) -> int | None:
        if inst.opcode not in _JUMPS:
            return None
        if inst.opcode == dis.opmap["FOR_ITER"]:
            return offset_to_index[inst.argval] + compat.FOR_ITER_TARGET_SKIP
        return offset_to_index[inst.argval]

    instructions = tuple(
        Instruction(
            index=i,
            opcode=inst.opcode,
            opname=inst.opname,
            arg=inst.arg,
            argval=inst.argval,
            offset=inst.offset,
            lineno=inst.positions.lineno if inst.positions else None,
            is_jump_target=inst.is_jump_target,
            target=target(inst),
        )
        for i, inst in enumerate(raw)
    )
    table = tuple(
        ExceptionTableEntry(
            offset_to_index[entry.start],
            max(i for off, i in offset_to_index.items() if off < entry.end),
            offset_to_index[entry.target],
            entry.depth,
            entry.lasti,
        )
        for entry in dis._parse_exception_table(code)
    )
    return DecodedCode(code, instructions, table, offset_to_index)


def same(got: object, want: object) -> bool:
    """Identical: the same object, or equal values of the same type (``1 == True`` and
    ``1 == 1.0`` would hide a constant read from the wrong slot). A string is always the
    same object: a name or constant of the code, or an entry of a ``dis`` table."""
    if got is want:
        return True
    if type(got) is not type(want) or isinstance(want, str):
        return False
    if isinstance(want, tuple):
        return len(got) == len(want) and all(map(same, got, want))  # type: ignore[arg-type]
    return got == want


def differences(code: types.CodeType) -> list[str]:
    """Every field where ``_decode`` departs from the reference, described."""
    got, want = _decode(code), reference_decode(code)
    where = f"{code.co_filename}:{code.co_firstlineno} {code.co_qualname}"
    if len(got.instructions) != len(want.instructions):
        return [f"{where}: {len(got.instructions)} instructions, dis has {len(want.instructions)}"]
    found = []
    for mine, theirs in zip(got.instructions, want.instructions):
        if type(mine) is not Instruction:
            found.append(f"{where} @{theirs.offset}: a {type(mine).__name__}")
        for field in dataclasses.fields(Instruction):
            a, b = getattr(mine, field.name), getattr(theirs, field.name)
            if not same(a, b):
                found.append(f"{where} @{theirs.offset} {theirs.opname}.{field.name}: {a!r}, {b!r}")
    if got.exception_table != want.exception_table:
        found.append(f"{where}: exception table {got.exception_table} != {want.exception_table}")
    if got.offset_to_index != want.offset_to_index or got.code is not code:
        found.append(f"{where}: offset_to_index or code differ")
    return found


def nested(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object among its constants, recursively."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from nested(const)


def module_code(name: str, path: Path) -> types.CodeType:
    """A module's code object as its import would run it (from the .pyc if cached)."""
    return SourceFileLoader(name, str(path)).get_code(name)


def package_files(name: str) -> list[tuple[str, Path]]:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    files = [(name, Path(spec.origin))]
    for info in pkgutil.iter_modules(spec.submodule_search_locations or []):
        sub = importlib.util.find_spec(f"{name}.{info.name}")
        if sub is not None and sub.origin and sub.origin.endswith(".py"):
            files.append((sub.name, Path(sub.origin)))
    return files


def real_module_codes() -> list[types.CodeType]:
    files = package_files("torch.nn.modules") + package_files("asyncio") + package_files("json")
    for name in ("torch.nn.functional", "dataclasses", "typing", "inspect", "enum", "argparse"):
        files += package_files(name)
    transformers = importlib.util.find_spec("transformers")  # finds, does not import
    assert transformers is not None and transformers.submodule_search_locations
    gpt2 = Path(transformers.submodule_search_locations[0], "models/gpt2/modeling_gpt2.py")
    files.append(("transformers.models.gpt2.modeling_gpt2", gpt2))
    return [code for name, path in files for code in nested(module_code(name, path))]


def numbered(template: str, count: int, sep: str) -> str:
    return sep.join(template.format(i=i) for i in range(count))


def generated_source() -> str:
    """Functions whose opargs and jumps pass 255: one EXTENDED_ARG."""
    many = 300
    body = "\n".join(f"    v{i} = {i}.5" for i in range(many))
    return f"""
def many_locals_and_consts():
{body}
    return {numbered("v{i}", many, " + ")}

def many_names(o):
    return [{numbered("g{i}", many, ", ")}, {numbered("o.a{i}", many, ", ")},
            {numbered("o.m{i}()", many, ", ")}]

def many_cells():
{body}
    def inner():
        return {numbered("v{i}", many, " + ")}
    return inner

def long_jumps(x):
    while x:
        if x > 3:
{numbered("            x = x - {i} or x", many, chr(10))}
        else:
            x -= 1
    return x
"""


CONSTRUCTS = '''
import contextlib

def gen(xs):
    yield 1
    got = yield from xs
    return got

async def coro(aws, lock):
    async with lock:
        async for x in aws:
            await x
    return [y async for y in aws]

async def agen(n):
    for i in range(n):
        yield i

def comprehensions(xs, ys):
    a = [x * y for x in xs for y in ys if x < y]
    b = {x: y for x, y in zip(xs, ys)}
    c = {x for x in xs}
    d = (x for x in xs)
    e = [lambda: x for x in xs]
    return a, b, c, d, e

def handlers(f, g):
    try:
        f()
    except (ValueError, TypeError) as exc:
        g(exc)
    else:
        g()
    finally:
        g(None)
    try:
        return f()
    finally:
        g()

def exception_groups(f):
    try:
        f()
    except* OSError as group:
        f(group)
    except* ValueError:
        pass

def withs(path, cm):
    with open(path) as a, cm as b:
        with contextlib.suppress(KeyError):
            return a, b

def matching(cmd):
    match cmd:
        case ["go", ("north" | "south") as direction]:
            return direction
        case {"x": x, **rest} if x > 0:
            return rest
        case Point(x=0, y=y):
            return y
        case [1, *others]:
            return others
        case str() | bytes():
            return cmd
        case _:
            return None

def strings(a, b, w):
    return f"{a!r:>{w}} {b!s} {a!a} {b:x} {a}{b=}"

def calls(f, *args, **kwargs):
    f(1, 2, key=3, other=4)
    f(*args, **kwargs)
    f(*args, key=1)
    return sorted(args, key=len, reverse=True)

def closures(x):
    y = x + 1
    def inner(z):
        nonlocal y
        y += z
        del z
        return x + y
    return inner

def operators(a, b, xs):
    c = a < b <= 3 != a
    d = a is b, a is not None, a in xs, b not in xs
    a += b; a -= b; a *= b; a //= b; a **= 2; a @= b; a |= b; a ^= b; a <<= 1
    e, *f, g = xs
    xs[1:2] = xs[a:b]
    del xs[0]
    h = (n := len(xs)) and not n
    return c, d, e, f, g, h, -a, ~b, +a

def names():
    global G
    G = 1
    del G
    import os.path as p
    from collections import OrderedDict as od, deque
    return p, od, deque

class Base:
    attr = 1

    def method(self):
        return self.attr

class Point(Base):
    x: int = 0
    y: int = 0
    __match_args__ = ("x", "y")

    def method(self):
        return super().method() + super(Point, self).method()

    @classmethod
    def make(cls):
        return cls()

def class_in_function(v):
    class Local:
        value = v
        def get(self):
            return v + self.value
    return Local

def loops(xs):
    total = 0
    for x in xs:
        if x:
            continue
        for y in range(x):
            if y > 3:
                break
            total += y
        else:
            total -= 1
    while total > 0:
        total //= 2
    return total

def asserts(x):
    assert x, "message"
    raise ValueError(x) from None
'''

PEP_695 = '''
type Alias[T] = list[T]

def generic[T: int, *Ts, **P](x: T) -> T:
    return x

class Box[T]:
    def get(self) -> T: ...
'''


class Base:
    c = 1

    def d(self) -> int:
        return 2


class Far(Base):
    def far(self, o: object) -> tuple[object, ...]:
        return G.a, o.b(key=1.5), super().c, super().d()  # type: ignore[attr-defined]  # noqa: F821


def far_indices(code: types.CodeType, filler: int = 1 << 16) -> types.CodeType:
    """``code`` with ``filler`` names and constants before its own: opargs past 65535,
    so two EXTENDED_ARG prefixes (compiling that many would take seconds)."""
    concrete = bc.ConcreteBytecode.from_code(code)
    for instr in concrete:
        if isinstance(instr, bc.ConcreteInstr) and instr.opcode in dis.hasname:
            instr.arg += filler << compat.NAME_OPARG_FLAG_BITS.get(instr.name, 0)
        elif isinstance(instr, bc.ConcreteInstr) and instr.opcode in dis.hasconst:
            instr.arg += filler
    concrete.names = [f"filler{i}" for i in range(filler)] + list(concrete.names)
    concrete.consts = [float(i) for i in range(filler)] + list(concrete.consts)
    return concrete.to_code(stacksize=code.co_stacksize, compute_exception_stack_depths=False)


def generated_codes() -> list[types.CodeType]:
    sources = [generated_source(), CONSTRUCTS]
    if compat.PY_VERSION >= (3, 12):
        sources.append(PEP_695)
    codes = [c for src in sources for c in nested(compile(src, "<generated>", "exec"))]
    codes.append(far_indices(Far.far.__code__))
    # The assembler writes its own line tables and exception tables.
    return codes + [roundtrip(c) for c in nested(compile(CONSTRUCTS, "<constructs>", "exec"))]


def check(codes: list[types.CodeType]) -> None:
    found = [diff for code in codes for diff in differences(code)]
    assert not found, f"{len(found)} differences, the first ones:\n" + "\n".join(found[:20])


def test_real_modules_decode_as_dis_does() -> None:
    codes = real_module_codes()
    assert len(codes) > 3000, "the corpus lost its modules"
    check(codes)


def test_generated_code_decodes_as_dis_does() -> None:
    codes = generated_codes()
    insts = [inst for code in codes for inst in _decode(code).instructions]
    prefixes = [inst.arg for inst in insts if inst.opname == "EXTENDED_ARG"]
    # One and two EXTENDED_ARG prefixes, on a jump too, and the argument kinds
    # that ``dis`` resolves each its own way: all present, or the corpus proves less.
    assert any(arg > 255 for arg in prefixes) and any(arg <= 255 for arg in prefixes)
    jumps = {inst.index - 1: inst for inst in insts if inst.target is not None}
    assert any(insts[i].opname == "EXTENDED_ARG" for i in jumps if i >= 0)
    ops = {inst.opname for inst in insts}
    real = {name for name, op in dis.opmap.items() if op < 256}  # 3.12+: no pseudo-ops
    expected = {"LOAD_GLOBAL", "LOAD_ATTR", "LOAD_DEREF", "COMPARE_OP", "FOR_ITER", "SEND"}
    expected |= {"LOAD_SUPER_ATTR", "LOAD_FAST_LOAD_FAST", "CONVERT_VALUE"} & real
    expected |= {"FORMAT_VALUE", "KW_NAMES", "LOAD_METHOD", "LOAD_CLASSDEREF"} & real
    expected |= {"LOAD_FROM_DICT_OR_DEREF", "STORE_FAST_STORE_FAST", "RETURN_CONST"} & real
    assert expected <= ops, expected - ops
    check(codes)


def test_records_are_real_instructions() -> None:
    """Each record is a frozen ``Instruction``: equal to, hashed and printed like one built
    through its constructor."""
    code = compile(CONSTRUCTS, "<constructs>", "exec")
    for mine, theirs in zip(_decode(code).instructions, reference_decode(code).instructions):
        assert type(mine) is Instruction
        assert mine == theirs and hash(mine) == hash(theirs) and repr(mine) == repr(theirs)
        with pytest.raises(dataclasses.FrozenInstanceError):
            mine.index = 0  # type: ignore[misc]
        assert dataclasses.replace(mine, target=None) == dataclasses.replace(theirs, target=None)
