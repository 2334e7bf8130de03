"""Statement productions of the exception, generator and context-manager families.

A mixin of ``grammar.Generator``, like ``statements.FamilyStatements``, with
the same template language (``$`` a fresh number, ``<T>`` a tensor in scope,
``{0}``... generated expressions of the listed kinds) plus ``<E>``, the name
of the exception bound by the innermost ``except ... as`` around the
statement. The families:

- ``try``/``except``/``else``/``finally`` with one to three handlers
  (classes, tuples of classes, the prelude's ``FuzzError`` tree, a bare
  ``except``), handlers that read the exception, re-raise it, raise another
  ``from`` it or ``from None``, or raise while handling (an implicit
  ``__context__``);
- raises: user classes with and without attributes, builtin ones, and what
  builtins raise on values that are only sometimes bad (``a // b`` with
  ``b`` maybe 0, ``int()`` of a maybe-bad string, absent dict keys, list
  indexes out of range, missing attributes, unpacking of the wrong length,
  ``lst.index`` of an absent value, a bad ``view``), and helpers of the
  prelude that raise through two or three inlined frames;
- generators of the prelude: for-loops, ``next`` with and without a
  default, ``send``, ``throw``, ``close``, ``yield from``, ``try/finally``
  around ``yield``, PEP 479 and a generator whose body breaks the graph;
- ``with``: ``contextlib.contextmanager`` managers (``try/finally`` around
  ``yield``, one converting a ``KeyError``, one swallowing), ``suppress``,
  ``nullcontext``, and ``Guard``, whose ``__exit__`` swallows some types;
- ``bytegraph.graph_break()`` placed first in try bodies, handlers,
  ``finally`` blocks and with-blocks, and asserts on tensor metadata.

Most raises are drawn inside a try or with-block, so most programs go on
running after them; the rest escape ``f``, where the runner compares the
exception (type, args, attributes, cause and context) and all state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fuzz.tree import Clause, Stmt

if TYPE_CHECKING:
    from tests.fuzz.grammar import Scope

Template = tuple[str, str]

BUILTIN_RAISES: list[Template] = [
    ("k$ = {0} // {1}", "II"), ("k$ = int(['3', 'x', '12', ''][{0} % 4])", "I"),
    ("k$ = int(str({0}) + 'x' * ({1} % 2))", "II"), ("k$ = [1, 2, 3][{0}]", "I"),
    ("k$ = {{'a': 1, 'b': 2}}[['a', 'b', 'q'][{0} % 3]]", "I"), ("r$, s$ = {0}", "T"),
    ("a$, b$, c$ = {0}.shape", "T"), ("v$ = {0}.view(-1, {1} + 2)", "TI"),
    ("v$ = {0}[{1}]", "TI"), ("k$ = (4, 5)[{0} - 2]", "I"), ("v$ = next(iter([]), {0})", "T"),
]
"""Raise on some values only; in helpers too (they bind names nothing reads)."""
DATA_RAISES: list[Template] = [
    ("t$ = {0}.index_select(0, torch.tensor([{1} % 6]))", "TI"),
    ("t$ = {0}[torch.tensor([{1} % 7])] * 2", "TI"),
]
"""An index tensor out of range: the graph fails when it runs, and reruns as Python where
an except clause may catch it. Drawn only inside a try with except clauses: a graph that
cannot rerun (it wrote into an input) and fails outside one loses the side effects it
recorded before the failing op (a known gap, tests/programs/test_fuzz_regressions.py,
``test_a_failing_graph_that_wrote_in_place_is_not_rerun``)."""

BUILTIN_RAISES_MAIN: list[Template] = [
    ("k += {0} // {1}", "II"), ("k += lst[{0}]", "I"), ("k += dct[['a', 'c', 'z'][{0} % 3]]", "I"),
    ("k += getattr(obj, ['a', 'zz'][{0} % 2])", "I"), ("out = out * obj.missing", ""),
    ("a$, b$ = lst\nk += a$ - b$", ""), ("a$, b$ = lst[:{0}]\nk += a$ * b$", "I"),
    ("r$, s$ = {0}\nout = out + r$ - s$", "T"), ("k += lst.index({0})", "I"),
    ("lst.remove({0})", "I"), ("k += dct.pop(['c', 'z'][{0} % 2])", "I"),
    ("k += next(iter(lst))", ""), ("k += int(str({0}) + 'x' * (len(lst) % 2))", "I"),
    ("out = out + {0}[len(lst)]", "T"), ("k += {0}.view(-1, k % 3 + 2).shape[0]", "T"),
    ("acc.append(list(gen_raise(x, {0})))", "I"),
]
USER_RAISES: list[Template] = [
    ("raise CodedError({0})", "I"), ("raise CodedError({0}, 'note')", "I"),
    ("raise SubError({0}, {1})", "II"), ("raise TypeError('t', {0})", "I"),
    ("raise ZeroDivisionError({0})", "I"), ("raise StopIteration({0})", "I"),
    ("raise CodedError({0}) from ValueError({1})", "II"), ("raise KeyError({0}) from None", "I"),
    ("if {0}:\n    raise AttributeError('attr')", "B"),
    ("if {0} > 2:\n    raise CodedError({0}, 'cond')", "I"),
]
HANDLER_RAISES: list[Template] = [
    ("raise", ""), ("raise <E>", ""), ("raise CodedError({0}) from <E>", "I"),
    ("raise RuntimeError('wrapped') from <E>", ""), ("raise ValueError({0}) from None", "I"),
    ("raise KeyError({0})", "I"), ("if {0}:\n    raise", "B"),
    ("if isinstance(<E>, LookupError):\n    raise IndexError({0}) from <E>", "I"),
    ("<E>.add_note('note$')\nraise", ""), ("<E>.extra = {0}\nraise <E>", "I"),
]
HANDLER_READS = [
    "acc.append(repr(<E>))", "acc.append((type(<E>).__name__, <E>.args))",
    "acc.append(repr(<E>.__cause__))", "acc.append(getattr(<E>, 'code', None))",
    "k += len(<E>.args)", "acc.append(str(<E>))",
    "acc.append(type(<E>.__context__).__name__)", "acc.append(isinstance(<E>, FuzzError))",
    "acc.append(<E>)", "acc.append(sys.exc_info()[0].__name__)",
    "acc.append(<E>.__traceback__ is None)",
]
HELPER_RAISES: list[Template] = [
    ("k += via_two({0})", "I"), ("out = via_three(out, {0})", "I"),
    ("k += must_small({0}, {1})", "II"), ("k += lookup(dct, ['a', 'c', 'z'][{0} % 3])", "I"),
    ("k += lookup({{'p': 1}}, {0})", "I"), ("t$ = via_three({0}, {1})", "TI"),
]
GENERATORS: list[Template] = [
    ("for g$ in gen_guard({0}, {1} % 4):\n    out = out + g$", "TI"),
    ("g$ = gen_acc({0}, {1})\nout = out + next(g$)\nout = out + g$.send({2})\ng$.close()", "TII"),
    ("g$ = gen_acc({0}, {1})\nout = out + next(g$)\nfor _ in range({2} % 5):\n"
     "    out = out + g$.send({3} % 3)", "TIII"),
    ("g$ = gen_acc({0}, 1)\nout = out + g$.send({1})", "TI"),
    ("g$ = gen_guard({0}, 3)\nout = out + next(g$)\nout = out + g$.throw(ValueError({1}))\n"
     "out = out + next(g$, x)", "TI"),
    ("g$ = gen_guard({0}, {1} % 3)\nnext(g$)\ng$.throw(KeyError({1}))", "TI"),
    ("g$ = gen_guard({0}, 2)\nout = out + next(g$)\ng$.close()\nacc.append(next(g$, 'done'))",
     "T"),
    ("acc.append(next(gen_raise(x, {0}), None) is None)", "I"),
    ("for g$ in gen_raise({0}, {1}):\n    out = out + g$", "TI"),
    ("acc.append(len(list(gen_stop({0}, {1}))))", "TI"),
    ("for g$ in gen_delegate({0}, {1} % 3):\n    out = out + g$", "TI"),
    ("g$ = gen_delegate({0}, {1})\nout = out + next(g$)\nout = out + g$.send(2)\n"
     "out = out + next(g$, out)", "TI"),
    ("g$ = gen_delegate({0}, 1)\nnext(g$)\ng$.throw(ValueError('in'))", "T"),
    ("out = out + sum(gen_break({0}))", "T"),
    ("out = out + next(gen_guard({0}, {1} % 3), x)", "TI"),
    ("g$ = gen_acc({0}, {1})\nnext(g$)\ng$.close()\nacc.append(next(g$, 'done'))", "TI"),
    # started in the trace, then live across a break, returned or kept for the next call
    ("g$ = gen_rows({0})\nout = out + next(g$)\nbytegraph.graph_break()\nout = out + next(g$, x)",
     "T"),
    ("g$ = gen_log({0}, 4)\nout = out + next(g$)\nprint('paused')\nout = out + g$.send(None)\n"
     "acc.append(len(list(g$)))", "T"),
    ("g$ = gen_more({0}, {1})\nout = out + next(g$)\nbytegraph.graph_break()\nout = out + sum(g$)",
     "TI"),
    ("g$ = gen_log({0}, 3)\nnext(g$)\nacc.append(g$)", "T"),
    ("if 'gen' in GD:\n    out = out + next(GD['gen'], x)\nGD['gen'] = gen_log({0}, 5)\n"
     "out = out + next(GD['gen'])", "T"),
    ("g$ = gen_acc({0}, {1})\nout = out + next(g$)\nGD['acc'] = g$", "TI"),
    ("g$ = gen_more({0}, 2)\nout = out + next(g$)\nacc.append(g$)", "T"),
]
GENERATORS_ANY: list[Template] = [
    ("t$ = sum(gen_guard({0}, 3))", "T"), ("t$ = sum(gen_delegate({0}, {1} % 3))", "TI"),
    ("t$ = next(gen_raise({0}, {1}))", "TI"), ("t$ = sum(gen_break({0}))", "T"),
]
MANAGERS: list[Template] = [
    ("with logged({0}) as tag$:", "I"), ("with converted():", ""),
    ("with swallowing(KeyError, FuzzError) as m$:", ""), ("with swallowing(ArithmeticError):", ""),
    ("with contextlib.suppress(ZeroDivisionError, IndexError):", ""),
    ("with contextlib.suppress(FuzzError):", ""), ("with contextlib.nullcontext({0}) as c$:", "T"),
    ("with Guard(ValueError, LookupError):", ""), ("with Guard(CodedError):", ""),
    ("with logged('a'), Guard(KeyError):", ""), ("with Suppress(), converted():", ""),
]
HANDLED = [
    "CodedError", "(CodedError, ZeroDivisionError)", "ValueError", "KeyError", "IndexError",
    "AttributeError", "TypeError", "StopIteration", "ZeroDivisionError", "RuntimeError",
    "(IndexError, KeyError, AttributeError)", "LookupError", "ArithmeticError", "FuzzError",
    "SubError", "Exception", "AssertionError",
]
ASSERTS: list[Template] = [
    ("assert {0}.shape == x.shape, 'shape'", "T"),
    ("assert {0}.dtype == torch.float32, {0}.dtype", "T"),
    ("assert x.shape[0] <= {0}, (x.shape, {0})", "I"),
    ("assert not {0}.requires_grad, 'grad'", "T"),
    ("assert {0}.is_contiguous()", "T"),
    ("assert {0}.dim() == 2 and {0}.shape[-1] == y.shape[-1]", "T"),
]
BREAK_FIRST = 0.25
"""How often a new try body, handler, finally or with-block starts with a graph break."""


class ErrorStatements:
    """Statement makers of the exception families; ``grammar.Generator`` mixes them in."""

    rng: Any

    def fresh(self, prefix: str) -> str: ...
    def simple(self, scope: Scope, text: str, kinds: str) -> Stmt: ...
    def nested(self, scope: Scope, **changes: object) -> list[Stmt]: ...
    def block(self, scope: Scope, count: int) -> list[Stmt]: ...

    def error_makers(self, scope: Scope) -> list[tuple[int, Any]]:
        caught = 3 if scope.in_try else 1  # raises that escape ``f`` end the program early
        makers: list[tuple[int, Any]] = [
            (caught, self.builtin_raise), (1, self.metadata_assert), (1, self.generator_any),
            (caught, self.helper_raise),
        ]
        if scope.main:
            makers += [(2, self.generator_op)]
        if scope.depth < 2:
            makers += [(3, self.try_rich), (2, self.with_manager)]
        if scope.in_try:
            makers.append((2, self.user_raise))
        if scope.names.get("E"):
            makers.append((3, self.handler_raise))
        return makers

    def fill(self, scope: Scope, table: list[Template], binds: str = "") -> Stmt:
        text, kinds = self.rng.choice(table)
        number = self.fresh("")
        if "<T>" in text:
            text = text.replace("<T>", self.rng.choice(scope.names["T"]))
        if "<E>" in text:
            text = text.replace("<E>", scope.names["E"][-1])
        stmt = self.simple(scope, text.replace("$", number), kinds)
        if binds and f"{binds}$ =" in text:
            scope.names["T"].append(binds + number)
        return stmt

    def builtin_raise(self, scope: Scope) -> Stmt:
        table = BUILTIN_RAISES + (BUILTIN_RAISES_MAIN * 2 if scope.main else [])
        return self.fill(scope, table + (DATA_RAISES * 2 if scope.caught else []), binds="t")

    def user_raise(self, scope: Scope) -> Stmt:
        return self.fill(scope, USER_RAISES)

    def handler_raise(self, scope: Scope) -> Stmt:
        return self.fill(scope, HANDLER_RAISES)

    def helper_raise(self, scope: Scope) -> Stmt:
        table = HELPER_RAISES if scope.main else HELPER_RAISES[-1:]
        return self.fill(scope, table, binds="t")

    def generator_op(self, scope: Scope) -> Stmt:
        return self.fill(scope, GENERATORS)

    def generator_any(self, scope: Scope) -> Stmt:
        return self.fill(scope, GENERATORS_ANY, binds="t")

    def metadata_assert(self, scope: Scope) -> Stmt:
        return self.fill(scope, ASSERTS)

    def with_break(self, body: list[Stmt]) -> list[Stmt]:
        """``body``, sometimes after a graph break (which the shrinker may delete)."""
        if self.rng.random() < BREAK_FIRST:
            return [Stmt("bytegraph.graph_break()"), *body]
        return body

    # -- compound ------------------------------------------------------------

    def try_rich(self, scope: Scope) -> Stmt:
        body = self.nested(scope, in_try=True, caught=True)
        clauses = [Clause("try:", [], self.with_break(body))]
        for _ in range(self.rng.choice([1, 1, 2, 3])):
            kinds = self.rng.choice(HANDLED)
            clauses.append(self.handler(scope, kinds, removable=len(clauses) > 1))
        if self.rng.random() < 0.15:
            fixed = ["acc.append('bare')"] if scope.main else []
            clauses.append(Clause("except:", [], self.nested(scope, in_except=True), fixed, True))
        if self.rng.random() < 0.3:
            clauses.append(Clause("else:", [], self.nested(scope), removable=True))
        if self.rng.random() < 0.4:
            clauses.append(Clause("finally:", [], self.with_break(self.nested(scope)),
                                  removable=True))
        if len(clauses) == 1:
            clauses.append(Clause("finally:", [], self.nested(scope)))
        return Stmt(clauses=clauses)

    def handler(self, scope: Scope, kinds: str, removable: bool) -> Clause:
        if self.rng.random() < 0.25:
            return Clause(f"except {kinds}:", [], self.nested(scope, in_except=True),
                          removable=removable)
        name = self.fresh("e")
        inner = scope.child(in_except=True)
        inner.names["E"] = [*inner.names.get("E", []), name]
        fixed = [self.rng.choice(HANDLER_READS).replace("<E>", name)] if scope.main else []
        body = self.with_break(self.block(inner, self.rng.randint(1, 3)))
        return Clause(f"except {kinds} as {name}:", [], body, fixed, removable)

    def with_manager(self, scope: Scope) -> Stmt:
        header, kinds = self.rng.choice(MANAGERS)
        number = self.fresh("")
        header = header.replace("$", number)
        inner = scope.child(in_try=True)
        if f"c{number}" in header:
            inner.names["T"].append(f"c{number}")
        if f"tag{number}" in header or f"m{number}" in header:
            inner.names["I"].append(f"tag{number}" if "tag" in header else f"m{number}")
        exprs = [self.expr(k, scope) for k in kinds]
        body = self.with_break(self.block(inner, self.rng.randint(1, 3)))
        return Stmt(clauses=[Clause(header, exprs, body)])

    def expr(self, kind: str, scope: Scope, depth: int = 0) -> Any: ...
