"""The program generator: a weighted grammar of what users write around tensors.

``generate(seed, index)`` is a pure function of its arguments (one
``random.Random`` seeded from both), so a failure is named by its seed and
index. A program is ``def f(x, y, w, n, lst, dct, obj, opt=None, mod=None)``
(two tensors of the same shape, possibly the same tensor, possibly float64 or
requiring grad; a vector that may require grad; an int, a list of ints, a
dict, an ``Obj``, an optional vector and a ``Net`` module) plus up to three
module-level helpers (some with defaults and keyword-only arguments, some
generators, some decorated), over ``tree.PRELUDE`` and the snippets of
``prelude.py`` it names. The third call changes shapes, ints, list length,
dict keys, dtype, requires_grad, aliasing, ``opt`` to None, attribute types
and ``mod.training``. The wider families of productions live in
``families.py`` (expressions), ``statements.py`` and ``errors.py``
(statements: the exception, generator and with-block families); this
module holds the core ones. Expression productions are tables of
``(weight, template, argument kinds)``; statements are small functions that
pick a production and may open a block. Scoping is kept simple: names bound
inside a block are visible only in it, so every generated name is bound
before it is read.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from tests.fuzz import families
from tests.fuzz.errors import ErrorStatements
from tests.fuzz.statements import FamilyStatements
from tests.fuzz.tree import CallInputs, Clause, Expr, Program, Stmt

Production = tuple[int, str, str]

TENSOR: list[Production] = [
    (6, "({0} + {1})", "TT"), (4, "({0} - {1})", "TT"), (5, "({0} * {1})", "TT"),
    (3, "({0} * {1})", "TV"), (2, "({0} + {1})", "TS"), (3, "({0} * {1})", "TF"),
    (3, "({0} + {1})", "TI"), (2, "({0} / ({1}.abs() + 1))", "TT"),
    (2, "torch.relu({0})", "T"), (2, "torch.sin({0})", "T"), (1, "torch.tanh({0})", "T"),
    (1, "torch.sigmoid({0})", "T"), (1, "{0}.abs()", "T"), (1, "(-{0})", "T"),
    (2, "{0}.clamp(-1.0, 1.0)", "T"), (2, "torch.where({0} > 0, {1}, {2})", "TTT"),
    (2, "({0} @ {1}.t() @ {2})", "TTT"), (1, "torch.mm({0}, {1}.t()).mm({2})", "TTT"),
    (2, "{0}.reshape(-1).view(x.shape)", "T"), (2, "{0}.t().contiguous().t()", "T"),
    (2, "torch.cat([{0}, {1}], 0)[:x.shape[0]]", "TT"),
    (1, "torch.cat([{0}, {1}], 1)[:, 1::2]", "TT"),
    (2, "torch.stack([{0}, {1}]).sum(0)", "TT"), (1, "torch.stack([{0}, {1}], 2)[:, :, 0]", "TT"),
    (1, "{0}.unsqueeze(0).squeeze(0)", "T"), (1, "{0}.flip(0)", "T"), (1, "{0}.cumsum(1)", "T"),
    (2, "torch.softmax({0}, -1)", "T"), (1, "{0}.mean(0, keepdim=True).expand_as(x)", "T"),
    (1, "{0}.detach()", "T"), (1, "{0}.double().float()", "T"), (1, "torch.zeros_like({0})", "T"),
    (1, "torch.ones(x.shape)", ""), (1, "torch.full_like({0}, {1})", "TF"),
    (2, "({0} if {1} else {2})", "TBT"),
    (1, "torch.stack([z * i for z in [{0}] for i in range(1, 3)]).sum(0)", "T"),
    (1, "sum([z * i for z in [{0}] for i in range(3)])", "T"), (1, "{0}.clone()", "T"),
    (1, "{0}[::1]", "T"),
    (1, "{0}.masked_fill({1} > 0, {2})", "TTF"), (1, "(lambda z, c={1}: z * c)({0})", "TI"),
]
TENSOR_MAIN: list[Production] = [
    (2, "obj.scale({0})", "T"), (1, "({0} * obj.t)", "T"), (1, "({0} + dct['b'])", "T"),
]
VECTOR: list[Production] = [
    (3, "{0}.sum(0)", "T"), (2, "{0}.mean(0)", "T"), (2, "({0} * {1})", "VV"),
    (2, "({0} + {1})", "VS"), (1, "torch.relu({0})", "V"), (1, "{0}[0]", "T"),
    (1, "{0}.amax(0)", "T"),
]
SCALAR: list[Production] = [
    (4, "{0}.sum()", "T"), (2, "{0}.mean()", "T"), (1, "{0}.max()", "T"),
    (1, "{0}.dot({1})", "VV"), (1, "({0} * {1})", "SS"), (1, "{0}.norm()", "V"),
]
INT: list[Production] = [
    (3, "({0} + {1})", "II"), (2, "({0} * {1})", "II"), (1, "({0} - {1})", "II"),
    (1, "({0} // max({1}, 1))", "II"), (1, "({0} % max({1}, 1))", "II"), (1, "max({0}, {1})", "II"),
    (1, "min({0}, {1})", "II"), (1, "abs({0})", "I"), (2, "x.shape[0]", ""),
    (1, "x.shape[-1]", ""), (1, "x.dim()", ""), (1, "{0}.size(1)", "T"), (1, "x.numel()", ""),
    (1, "int({0})", "S"), (1, "int({0})", "F"), (1, "len({0}.shape)", "T"),
    (1, "({0} if {1} else {2})", "IBI"),
]
INT_MAIN: list[Production] = [
    (2, "len(lst)", ""), (1, "sum(lst)", ""), (1, "len(dct)", ""), (2, "obj.a", ""),
    (1, "dct.get('a', 0)", ""), (1, "dct.get('c', {0})", "I"), (1, "G", ""), (1, "len(GL)", ""),
    (1, "sum([v * 2 for v in lst])", ""), (1, "sum(v for v in lst if v > 1)", ""),
    (1, "len({{v % 3 for v in lst}})", ""), (1, "(sorted(lst)[0] if lst else 0)", ""),
    (1, "(lst[-1] if lst else {0})", "I"), (1, "obj.bump()", ""), (1, "len(acc)", ""),
    (1, "len([v for v in dct.values() if isinstance(v, int)])", ""),
    (1, "sum(1 for key in dct.keys() if key in 'abc')", ""), (1, "len(tuple(lst) + (n,))", ""),
]
FLOAT: list[Production] = [
    (2, "float({0})", "I"), (1, "({0} * {1})", "FF"), (1, "({0} / max({1}, 1))", "II"),
    (1, "{0}.item()", "S"), (1, "({0} + 0.5)", "F"),
]
BOOL: list[Production] = [
    (3, "({0} < {1})", "II"), (2, "({0} == {1})", "II"), (1, "(not {0})", "B"),
    (1, "({0} and {1})", "BB"), (1, "({0} or {1})", "BB"), (2, "({0}.sum() > 0)", "T"),
    (1, "bool({0} > 0)", "S"), (1, "{0}.requires_grad", "T"), (1, "torch.is_grad_enabled()", ""),
    (1, "(x.shape[0] > 3)", ""), (1, "({0}.dim() == 2)", "T"),
    (1, "(({0} // {1}) > 0)", "II"),
]
BOOL_MAIN: list[Production] = [
    (1, "({0} in lst)", "I"), (1, "('a' in dct)", ""), (1, "hasattr(obj, 'extra')", ""),
    (1, "isinstance(obj, Obj)", ""), (1, "bool(lst)", ""), (1, "(obj.a > {0})", "I"),
]
PRODUCTIONS = {"T": TENSOR, "V": VECTOR, "S": SCALAR, "I": INT, "F": FLOAT, "B": BOOL}
MAIN_ONLY = {"T": TENSOR_MAIN, "I": INT_MAIN, "B": BOOL_MAIN}
LITERALS = {
    "I": ["0", "1", "2", "3", "4"], "F": ["0.5", "1.5", "2.0", "-1.0"], "B": ["True", "False"],
}
EXCEPTIONS = [
    "ValueError", "ZeroDivisionError", "IndexError", "KeyError", "RuntimeError", "Exception",
]
MAX_EXPR_DEPTH = 3
MAX_BLOCK_DEPTH = 2


@dataclasses.dataclass
class Scope:
    """What a statement may read: names by kind, callables, and where it sits."""

    names: dict[str, list[str]]
    main: bool
    depth: int = 0
    in_loop: bool = False
    in_try: bool = False
    calls: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # template, kinds
    pair: bool = False
    closure: bool = False
    in_except: bool = False
    caught: bool = False  # inside a try with except clauses (not only a with-block)

    def child(self, **changes: object) -> Scope:
        names = {kind: list(values) for kind, values in self.names.items()}
        new = dataclasses.replace(self, names=names, calls=list(self.calls), depth=self.depth + 1)
        return dataclasses.replace(new, **changes)


class Generator(FamilyStatements, ErrorStatements):
    """Draws one program from a seeded ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def weighted(self, table: list[Production]) -> Production:
        return self.rng.choices(table, weights=[w for w, _, _ in table])[0]

    # -- expressions -------------------------------------------------------

    def expr(self, kind: str, scope: Scope, depth: int = 0) -> Expr:
        if depth >= MAX_EXPR_DEPTH or self.rng.random() < 0.25 + 0.2 * depth:
            leaf = self.leaf(kind, scope)
            if leaf is not None:
                return leaf
        table = PRODUCTIONS[kind] + families.EXTRA.get(kind, [])
        if scope.main:
            table += MAIN_ONLY.get(kind, []) + families.EXTRA_MAIN.get(kind, [])
        if kind == "T":
            table += [(3, template, kinds) for template, kinds in scope.calls]
            if scope.pair:
                table.append((1, "(p.t * p.a)", ""))
        if kind == "I" and scope.pair:
            table.append((1, "p.a", ""))
        if kind == "S" and scope.pair:
            table.append((1, "p.total()", ""))
        if depth >= MAX_EXPR_DEPTH:
            table = [p for p in table if all(k in scope.names or k in LITERALS for k in p[2])]
        _, template, kinds = self.weighted(table)
        return Expr(kind, template, [self.expr(k, scope, depth + 1) for k in kinds])

    def leaf(self, kind: str, scope: Scope) -> Expr | None:
        options = list(scope.names.get(kind, [])) + LITERALS.get(kind, [])
        if not options:
            return None
        return Expr(kind, self.rng.choice(options).replace("{", "{{").replace("}", "}}"))

    # -- statements --------------------------------------------------------

    def block(self, scope: Scope, count: int) -> list[Stmt]:
        body = []
        for _ in range(count):
            body.append(self.statement(scope))
        return body

    def statement(self, scope: Scope) -> Stmt:
        makers = self.statement_makers(scope)
        maker = self.rng.choices([m for _, m in makers], weights=[w for w, _ in makers])[0]
        return maker(scope)

    def statement_makers(self, scope: Scope) -> list[tuple[int, Callable[[Scope], Stmt]]]:
        makers: list[tuple[int, Callable[[Scope], Stmt]]] = [
            (14, self.tensor_assign), (3, self.int_assign), (4, self.inplace), (1, self.unpack),
            (2, self.python_break),
        ]
        if scope.main:
            makers += [(4, self.list_op), (3, self.dict_op), (3, self.object_op),
                       (2, self.global_op), (2, self.pair_op), (1, self.set_op)]
        if scope.depth < MAX_BLOCK_DEPTH:
            makers += [(4, self.if_stmt), (3, self.for_stmt), (1, self.while_stmt),
                       (3, self.with_stmt), (2, self.try_stmt)]
            if scope.main and not scope.closure and scope.depth == 0:
                makers.append((1, self.closure_def))
        if scope.in_loop:
            makers.append((2, self.loop_exit))
        if scope.in_try:
            makers.append((2, self.raise_stmt))
        return makers + self.family_makers(scope) + self.error_makers(scope)

    def simple(self, scope: Scope, text: str, kinds: str) -> Stmt:
        return Stmt(text, [self.expr(k, scope) for k in kinds])

    def tensor_assign(self, scope: Scope) -> Stmt:
        roll = self.rng.random()
        if roll < 0.3 and "out" in scope.names["T"]:
            return self.simple(scope, "out = out + {0}", "T")
        if roll < 0.5 and "out" in scope.names["T"]:
            return self.simple(scope, "out = {0}", "T")
        name = self.fresh("t")
        stmt = self.simple(scope, name + " = {0}", "T")
        scope.names["T"].append(name)
        return stmt

    def unpack(self, scope: Scope) -> Stmt:
        first, second = self.fresh("t"), self.fresh("t")
        stmt = self.simple(scope, f"{first}, {second} = {{0}}, {{1}}", "TT")
        scope.names["T"] += [first, second]
        return stmt

    def int_assign(self, scope: Scope) -> Stmt:
        if "k" in scope.names["I"] and self.rng.random() < 0.6:
            return self.simple(scope, self.rng.choice(["k = {0}", "k += {0}"]), "I")
        name = self.fresh("k")
        stmt = self.simple(scope, name + " = {0}", "I")
        scope.names["I"].append(name)
        return stmt

    def inplace(self, scope: Scope) -> Stmt:
        target = self.rng.choice(scope.names["T"])
        text, kinds = self.rng.choice([
            ("{t}.add_({{0}})", "F"), ("{t}.add_({{0}})", "I"), ("{t}.mul_({{0}})", "F"),
            ("{t}.add_({{0}})", "T"), ("{t}.mul_({{0}})", "S"), ("{t}[0] = {{0}}", "V"),
            ("{t}[:, 0] = {{0}}", "I"), ("{t}.relu_()", ""), ("{t}.copy_({{0}})", "T"),
            ("{t}.clamp_(-2.0, 2.0)", ""),
        ])
        return self.simple(scope, text.format(t=target), kinds)

    def python_break(self, scope: Scope) -> Stmt:
        text, kinds = self.rng.choice([
            ("bytegraph.graph_break()", ""), ("print({0})", "I"),
            ("print('shape', {0}.shape)", "T"), ("print({0})", "T"),
        ] + ([("acc.append({0})", "T"), ("acc.append({0})", "I")] if scope.main else []))
        return self.simple(scope, text, kinds)

    def list_op(self, scope: Scope) -> Stmt:
        text, kinds = self.rng.choice([
            ("lst.append({0})", "I"), ("lst.extend([{0}, {1}])", "II"), ("lst.insert(0, {0})", "I"),
            ("if lst:\n    lst.pop()", ""), ("lst.sort()", ""), ("lst.reverse()", ""),
            ("if lst:\n    lst[0] = {0}", "I"), ("lst += [{0}]", "I"), ("acc.append(len(lst))", ""),
            ("if lst:\n    del lst[0]", ""), ("acc.append(tuple(lst))", ""),
        ])
        return self.simple(scope, text, kinds)

    def dict_op(self, scope: Scope) -> Stmt:
        text, kinds = self.rng.choice([
            ("dct['c'] = {0}", "I"), ("dct['b'] = {0}", "V"), ("dct.update({{'d': {0}}})", "I"),
            ("dct.setdefault('e', {0})", "V"), ("dct.pop('c', None)", ""),
            ("for key, val in dct.items():\n    acc.append(key)", ""),
            ("acc.extend(sorted(dct.keys()))", ""), ("out = out * dct.get('a', {0})", "I"),
        ])
        return self.simple(scope, text, kinds)

    def set_op(self, scope: Scope) -> Stmt:
        return self.simple(scope, "s = set(lst)\ns.add({0})\nk += len(s)", "I")

    def object_op(self, scope: Scope) -> Stmt:
        text, kinds = self.rng.choice([
            ("obj.a = {0}", "I"), ("obj.a += 1", ""), ("obj.t = {0}", "V"),
            ("obj.extra = {0}", "T"), ("if hasattr(obj, 'extra'):\n    del obj.extra", ""),
            ("obj.bump()", ""), ("out = out * obj.a", ""), ("out = out + obj.t", ""),
        ])
        return self.simple(scope, text, kinds)

    def global_op(self, scope: Scope) -> Stmt:
        text, kinds = self.rng.choice([
            ("G += {0}", "I"), ("GL.append({0})", "I"), ("GD['k'] = {0}", "V"),
            ("G = len(lst)", ""), ("out = out + G", ""),
        ])
        return self.simple(scope, text, kinds)

    def pair_op(self, scope: Scope) -> Stmt:
        if not scope.pair:
            scope.pair = True
            return self.simple(scope, "p = Pair({0}, {1})", "IT")
        text, kinds = self.rng.choice([
            ("p.a += 1", ""), ("p.t = p.t + {0}", "T"), ("out = out + p.t * p.a", ""),
            ("acc.append(p.total())", ""),
        ])
        return self.simple(scope, text, kinds)

    def loop_exit(self, scope: Scope) -> Stmt:
        word = self.rng.choice(["break", "continue"])
        return self.simple(scope, "if {0}:\n    " + word, "B")

    def raise_stmt(self, scope: Scope) -> Stmt:
        kind = self.rng.choice(["ValueError", "KeyError", "RuntimeError"])
        return self.simple(scope, f"raise {kind}({{0}})", "I")

    # -- compound statements -------------------------------------------------

    def nested(self, scope: Scope, **changes: object) -> list[Stmt]:
        return self.block(scope.child(**changes), self.rng.randint(1, 3))

    def if_stmt(self, scope: Scope) -> Stmt:
        clauses = [Clause("if {0}:", [self.expr("B", scope)], self.nested(scope))]
        while self.rng.random() < 0.3:
            clauses.append(Clause("elif {0}:", [self.expr("B", scope)], self.nested(scope),
                                  removable=True))
        if self.rng.random() < 0.5:
            clauses.append(Clause("else:", [], self.nested(scope), removable=True))
        return Stmt(clauses=clauses)

    def for_stmt(self, scope: Scope) -> Stmt:
        var = self.fresh("i")
        if scope.main and self.rng.random() < 0.3:
            header = f"for {var} in list(lst):"
        else:
            header = f"for {var} in range({self.rng.randint(0, 4)}):"
        inner = scope.child(in_loop=True)
        inner.names["I"].append(var)
        return Stmt(clauses=[Clause(header, [], self.block(inner, self.rng.randint(1, 3)))])

    def while_stmt(self, scope: Scope) -> Stmt:
        var = self.fresh("w")
        bound = self.rng.randint(1, 4)
        body = self.nested(scope, in_loop=True)
        condition = [self.expr("B", scope)] if self.rng.random() < 0.3 else []
        header = f"while {var} < {bound}" + (" and {0}:" if condition else ":")
        loop = Clause(header, condition, body, [f"{var} += 1"])
        return Stmt(f"{var} = 0", [], [loop])

    def with_stmt(self, scope: Scope) -> Stmt:
        managers = ["torch.no_grad()", "torch.enable_grad()", "torch.set_grad_enabled(False)",
                    "Suppress()"] + (["Ctx(acc)"] * 2 if scope.main else [])
        header = f"with {self.rng.choice(managers)}:"
        return Stmt(clauses=[Clause(header, [], self.nested(scope))])

    def try_stmt(self, scope: Scope) -> Stmt:
        body = self.nested(scope, in_try=True)
        kind = self.rng.choice(EXCEPTIONS)
        handler = ["acc.append(str(e))"] if scope.main else []
        clauses = [Clause("try:", [], body),
                   Clause(f"except {kind} as e:", [], self.nested(scope), handler)]
        if self.rng.random() < 0.4:
            clauses.append(Clause("finally:", [], self.nested(scope), removable=True))
        return Stmt(clauses=clauses)

    def closure_def(self, scope: Scope) -> Stmt:
        scope.closure = True
        name = self.fresh("inner")
        inner = scope.child(main=False, in_loop=False, in_try=False)
        inner.names["T"] = ["z"] + [n for n in inner.names["T"] if n != "out"]
        body = self.block(inner, self.rng.randint(0, 2))
        body.append(self.simple(inner, "return {0}", "T"))
        scope.calls.append((f"{name}({{0}})", "T"))
        fixed = ["nonlocal k", "k += 1"] if self.rng.random() < 0.6 else ["nonlocal k"]
        return Stmt(clauses=[Clause(f"def {name}(z):", [], body, fixed)])

    # -- functions -----------------------------------------------------------

    def helper(self, name: str, calls: list[tuple[str, str]]) -> Stmt:
        """A module-level helper of two tensors; appends how to call it to ``calls``."""
        scope = Scope({"T": ["x", "y"], "I": []}, main=False, calls=list(calls))
        signature, call = f"def {name}(x, y):", f"{name}({{0}}, {{1}})"
        if self.rng.random() < 0.3:
            signature = f"def {name}(x, y, scale=2, *, shift=0.5):"
            scope.names.update(I=["scale"], F=["shift"])
            call = self.rng.choice([
                call, f"{name}({{0}}, {{1}}, 3)", f"{name}({{0}}, {{1}}, shift=1.5)",
                f"{name}(*[{{0}}, {{1}}])", f"{name}(**{{{{'x': {{0}}, 'y': {{1}}}}}})",
            ])
        body = self.block(scope, self.rng.randint(1, 4))
        if self.rng.random() < 0.15:
            body += [self.simple(scope, "yield {0}", "T"), self.simple(scope, "yield {0}", "T")]
            call = f"sum({call})"
        else:
            body.append(self.simple(scope, "return {0}", "T"))
        decorator = self.rng.choices(
            ["", "@torch.no_grad()", "@traced", "@scaled(2)"], weights=[12, 3, 3, 2])[0]
        calls.append((call, "TT"))
        return Stmt(decorator, [], [Clause(signature, [], body)])

    def main(self, calls: list[tuple[str, str]]) -> Stmt:
        names = {"T": ["x", "y", "out"], "V": ["w", "obj.t"], "I": ["n", "k"]}
        scope = Scope(names, main=True, calls=list(calls))
        body = self.block(scope, self.rng.randint(4, 14))
        body.append(self.return_stmt(scope))
        fixed = ["global G, GL, GD", "k = n", "acc = []", "out = x + y"]
        header = "def f(x, y, w, n, lst, dct, obj, opt=None, mod=None):"
        return Stmt(clauses=[Clause(header, [], body, fixed)])

    def return_stmt(self, scope: Scope) -> Stmt:
        options = [("return out, k, acc", ""), ("return {0}, k", "T"), ("return out", ""),
                   ("return {{'out': out, 'k': k, 'acc': acc}}", ""), ("return out, x, lst", ""),
                   ("return out, obj", ""), ("return {0}, out, acc", "T"),
                   ("return out, out, k", ""), ("return x", ""), ("return x[0], x.t(), out", ""),
                   ("return [out, x], {{'k': k, 'acc': acc}}", ""), ("return out, w.grad, acc", ""),
                   ("return y, x, k", ""), ("return out, mod, acc", ""), ("return opt, out", "")]
        weights = [5, 2, 2, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1]
        if scope.pair:
            options.append(("return out, p", ""))
            weights.append(1)
        text, kinds = self.rng.choices(options, weights=weights)[0]
        return self.simple(scope, text, kinds)

    def program(self, seed: int, index: int) -> Program:
        module, calls = [], []
        for _ in range(self.rng.choices([0, 1, 2, 3], weights=[3, 4, 2, 1])[0]):
            module.append(self.helper(self.fresh("h"), calls))
        module.append(self.main(calls))
        return Program(seed, index, module, self.call_inputs())

    def call_inputs(self) -> tuple[CallInputs, ...]:
        rng = self.rng
        first = CallInputs(
            torch_seed=rng.randrange(2**31), rows=rng.randint(2, 4), cols=rng.randint(2, 4),
            n=rng.randint(0, 4), lst=tuple(rng.randint(0, 5) for _ in range(rng.randint(0, 4))),
            dct_a=rng.randint(0, 3), obj_a=rng.randint(0, 3), transposed=rng.random() < 0.2,
            w_grad=rng.random() < 0.5, x_double=rng.random() < 0.05, x_grad=rng.random() < 0.05,
            alias=rng.random() < 0.1, opt=rng.random() < 0.8, training=rng.random() < 0.8,
        )
        second = dataclasses.replace(first, torch_seed=rng.randrange(2**31))
        third = dataclasses.replace(
            first, torch_seed=rng.randrange(2**31), rows=rng.randint(2, 5),
            cols=rng.choice([first.cols, rng.randint(2, 5)]), n=rng.randint(0, 5),
            lst=tuple(rng.randint(0, 5) for _ in range(rng.randint(0, 5))),
            obj_a=rng.randint(0, 4), transposed=rng.random() < 0.2,
            w_grad=rng.choice([first.w_grad, not first.w_grad]),
            x_double=first.x_double != (rng.random() < 0.1),
            x_grad=first.x_grad != (rng.random() < 0.1),
            alias=first.alias != (rng.random() < 0.15),
            opt=first.opt != (rng.random() < 0.25), dct_c=rng.random() < 0.2,
            obj_float=rng.random() < 0.1, training=first.training != (rng.random() < 0.2),
        )
        return (first, second, third)


def generate(seed: int, index: int) -> Program:
    """The program named by ``(seed, index)``: the same on every machine and every run."""
    rng = random.Random(f"bytegraph-fuzz:{seed}:{index}")
    return Generator(rng).program(seed, index)
