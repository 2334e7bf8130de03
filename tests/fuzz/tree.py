"""The program tree the fuzzer generates, renders and shrinks.

A program is a list of module-level statements (helper functions and ``f``)
under a fixed prelude of classes and globals, plus the code that builds the
inputs of its three calls. Every node is a small dataclass:

- ``Expr``: a format template (``"({0} + {1})"``) with child expressions and a
  ``kind`` saying what it evaluates to (``T`` tensor of x's shape, ``V``
  vector, ``S`` 0-dim tensor, ``I`` int, ``F`` float, ``B`` bool), so the
  shrinker can swap it for a simpler expression of the same kind.
- ``Stmt``: a line template with expressions and, when compound, ``Clause``s
  (``if``/``elif``/``else``, ``try``/``except``/``finally``, ``def``...),
  each with ``fixed`` lines the shrinker never deletes (a while loop's
  counter increment, ``nonlocal``) and a ``body`` it may edit.

``render_program`` turns a tree into the module source both runs exec.
"""

from __future__ import annotations

import dataclasses
import re

from tests.fuzz.prelude import NEEDS, SNIPPETS

INDENT = "    "

LEAVES: dict[str, str] = {
    "T": "x", "V": "w", "S": "x.sum()", "I": "1", "F": "1.0", "B": "True",
}
"""The simplest expression of each kind: what the shrinker replaces an expression with."""


@dataclasses.dataclass
class Expr:
    """An expression of one kind: ``template`` filled with the rendered ``args``."""

    kind: str
    template: str
    args: list[Expr] = dataclasses.field(default_factory=list)

    def render(self) -> str:
        return self.template.format(*(arg.render() for arg in self.args))


@dataclasses.dataclass
class Clause:
    """One header and its indented block: ``fixed`` lines first, then the editable body."""

    header: str
    exprs: list[Expr] = dataclasses.field(default_factory=list)
    body: list[Stmt] = dataclasses.field(default_factory=list)
    fixed: list[str] = dataclasses.field(default_factory=list)
    removable: bool = False


@dataclasses.dataclass
class Stmt:
    """A simple statement (``text``), or a compound one: optional ``text`` lines, then clauses."""

    text: str = ""
    exprs: list[Expr] = dataclasses.field(default_factory=list)
    clauses: list[Clause] = dataclasses.field(default_factory=list)

    def render(self, depth: int) -> list[str]:
        pad = INDENT * depth
        lines = []
        if self.text:
            filled = self.text.format(*(e.render() for e in self.exprs))
            lines.extend(pad + line for line in filled.split("\n"))
        for clause in self.clauses:
            lines.append(pad + clause.header.format(*(e.render() for e in clause.exprs)))
            inner = [INDENT * (depth + 1) + line for line in clause.fixed]
            for stmt in clause.body:
                inner.extend(stmt.render(depth + 1))
            lines.extend(inner or [INDENT * (depth + 1) + "pass"])
        return lines


@dataclasses.dataclass(frozen=True)
class CallInputs:
    """The arguments of one call of ``f``, as the values that build them."""

    torch_seed: int
    rows: int
    cols: int
    n: int
    lst: tuple[int, ...]
    dct_a: int
    obj_a: int
    transposed: bool
    w_grad: bool
    x_double: bool = False
    x_grad: bool = False
    alias: bool = False  # y is x
    opt: bool = True  # a tensor, else None
    dct_c: bool = False  # dct has an extra key 'c'
    obj_float: bool = False  # obj.a is a float
    training: bool = True

    def render(self, call: int) -> list[str]:
        x = (
            f"torch.randn({self.cols}, {self.rows}).t()" if self.transposed
            else f"torch.randn({self.rows}, {self.cols})"
        )
        x += ".double()" if self.x_double else ""
        x += ".requires_grad_()" if self.x_grad else ""
        y = "x" if self.alias else f"torch.randn({self.rows}, {self.cols})"
        extra = ", 'c': 1" if self.dct_c else ""
        obj_a = f"{self.obj_a + 0.5}" if self.obj_float else f"{self.obj_a}"
        opt = f"torch.randn({self.cols})" if self.opt else "None"
        mod = f"Net({self.cols})" + ("" if self.training else ".eval()")
        return [
            f"def inputs_{call}():",
            f"    torch.manual_seed({self.torch_seed})",
            f"    x = {x}",
            f"    y = {y}",
            f"    w = torch.randn({self.cols}, requires_grad={self.w_grad})",
            f"    dct = {{'a': {self.dct_a}, 'b': torch.randn({self.cols}){extra}}}",
            f"    obj = Obj({obj_a}, torch.randn({self.cols}))",
            f"    opt = {opt}",
            f"    mod = {mod}",
            f"    return x, y, w, {self.n}, {list(self.lst)}, dct, obj, opt, mod",
        ]


@dataclasses.dataclass
class Program:
    """One generated program: where it came from, its module statements, its three calls."""

    seed: int
    index: int
    module: list[Stmt]
    calls: tuple[CallInputs, ...]

    def source(self) -> str:
        return render_program(self)


IMPORTS = '''\
import collections
import contextlib
import dataclasses
import enum
import functools
import itertools
import random
import sys

import numpy as np
import torch
import torch.nn.functional as F

import bytegraph

G = 0
GL = []
GD = {}
'''

OBJ = '''
class Obj:
    def __init__(self, a, t):
        self.a = a
        self.t = t

    def scale(self, v):
        return v * self.a

    def bump(self):
        self.a += 1
        return self.a
'''

NET = '''
class Net(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
        self.seq = torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.ReLU())
        self.register_buffer('steps', torch.zeros(()))
        self.scale = 1.0

    def forward(self, z):
        if self.training:
            self.steps.add_(1)
        return self.seq(self.lin(z)) * self.scale
'''

PAIR = '''
@dataclasses.dataclass
class Pair:
    a: int
    t: torch.Tensor

    def total(self):
        return self.t.sum() * self.a
'''

CTX = '''
class Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append(1)
        return self

    def __exit__(self, *exc):
        self.log.append(2)
        return False
'''

SUPPRESS = '''
class Suppress:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        return kind is not None and issubclass(kind, ArithmeticError)
'''

PRELUDE = IMPORTS + OBJ + NET + PAIR + CTX + SUPPRESS
"""Every class a program may use; ``render_program`` keeps only those it names."""

OPTIONAL_CLASSES = {"Pair": PAIR, "Ctx": CTX, "Suppress": SUPPRESS, **SNIPPETS}

STATE_GLOBALS = ("G", "GL", "GD")
"""The module globals programs mutate, compared after every call."""


def render_program(program: Program) -> str:
    lines = []
    for stmt in program.module:
        lines.append("")
        lines.extend(stmt.render(0))
        lines.append("")
    body = "\n".join(lines)
    lines = [IMPORTS, OBJ, NET, *used_snippets(body), body]
    for call, inputs in enumerate(program.calls, 1):
        lines.append("")
        lines.extend(inputs.render(call))
    return "\n".join(lines) + "\n"


def used_snippets(body: str) -> list[str]:
    """The optional prelude snippets ``body`` names (and those they need), each once, in order."""
    names = [name for name in OPTIONAL_CLASSES if re.search(rf"\b{name}\b", body)]
    for name in names:  # grows while it runs: the needs of needs
        names += [need for need in NEEDS.get(name, ()) if need not in names]
    texts: list[str] = []
    for name in OPTIONAL_CLASSES:
        if name in names and OPTIONAL_CLASSES[name] not in texts:
            texts.append(OPTIONAL_CLASSES[name])
    return texts


def count_nodes(program: Program) -> int:
    """Statements plus expressions: the size the shrinker drives down."""
    total = 0
    work: list[object] = list(program.module)
    while work:
        node = work.pop()
        total += 1
        if isinstance(node, Stmt):
            work.extend(node.exprs)
            for clause in node.clauses:
                work.extend(clause.exprs)
                work.extend(clause.body)
        elif isinstance(node, Expr):
            work.extend(node.args)
    return total
