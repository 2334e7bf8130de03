"""Statement productions of the wider grammar: a mixin of ``grammar.Generator``.

Each maker picks one small template. In templates ``$`` stands for a fresh
number (so ``st$`` is a new name), ``<T>`` for a tensor already in scope, and
``{0}``, ``{1}``... for generated expressions of the listed kinds, as in
``grammar.py``. Values a statement computes flow into ``out``, ``k`` or
``acc``, which ``f`` returns, so a wrong one is seen. Templates that use
``out``, ``k``, ``acc``, ``lst``, ``dct``, ``obj``, ``mod`` or ``w`` are
``f``-only (``scope.main``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.fuzz.tree import Clause, Stmt

if TYPE_CHECKING:
    from tests.fuzz.grammar import Scope

Template = tuple[str, str]

BUILTINS: list[Template] = [
    ("a$, *b$ = lst + [{0}]\nk += a$ + len(b$)", "I"),
    ("for i$, v$ in enumerate(sorted(lst, key=lambda v: (v % 3, v))):\n    k += i$ * v$", ""),
    ("for a$, b$ in zip(lst, range({0})):\n    acc.append(a$ - b$)", "I"),
    ("acc.append('%s-%d' % (tuple(x.shape), {0}))", "I"),
    ('acc.append(f"{{k}}:{{x.shape[0]}}")', ""),
    ('acc.append("{{}}/{{}}".format({0}, len(lst)))', "I"),
    ('acc.append(",".join(str(v) for v in lst).upper())', ""),
    ('acc.extend("a b c".split()[:{0} % 3])', "I"), ("acc.append(divmod({0}, 3))", "I"),
    ("acc.append(round({0}, 1))", "F"), ("acc.append(str({0}))", "I"),
    ("acc.append(list(reversed(lst)))", ""), ("acc.append(dict(a={0}, b=len(lst)))", "I"),
    ("acc.append(tuple(sorted(set(lst))))", ""),
    ("acc.append(sorted(dct.items(), key=lambda kv: kv[0])[0][0])", ""),
    ("setattr(obj, 'extra', {0})", "T"),
    ("if hasattr(obj, 'extra'):\n    delattr(obj, 'extra')", ""),
    ("acc.append(getattr(obj, 'extra', None) is None)", ""),
    ("acc.extend(sorted(obj.__dict__))", ""),
    ("if (kw$ := {0}) > 2:\n    k += kw$", "I"), ("acc.append(float({0}))", "S"),
    ("acc.append({0}.tolist())", "V"), ("acc.append(bool({0}))", "B"),
    ("acc.append(int({0}) if {1} else None)", "FB"), ("acc.append(1 < k <= 10)", ""),
    ("acc.append('a' in 'abc' and k in lst)", ""), ("acc.append(list(range(k % 7, -1, -2)))", ""),
    ("acc.append(lst[1:-1] + lst[::-2])", ""), ("acc.append({0}.item())", "S"),
    ("k += len(dct) if dct else 0", ""), ("if 'c' in dct:\n    del dct['c']", ""),
    ("if len(lst) > 1:\n    del lst[-1]", ""), ("del lst[::2]", ""),
]
OBJECTS: list[Template] = [
    ("st$ = Stats({0})\nout = out + st$(x)\nk += len(st$) + Stats.count", "T"),
    ("st$ = Stats.make({0})\nfor r$ in st$:\n    out = out + r$\nacc.append(1 in st$)", "T"),
    ("Stats.count += 1\nk += Stats.count", ""),
    ("c$ = Child({0}, 2)\nout = c$.apply(out)\nacc.append(c$.name())", "I"),
    ("c$ = Child(1, {0})\nc$.a = {1}\nout = c$.apply(out)", "IF"),
    ("sl$ = Slotted({0}, {1})\nsl$.a += 1\nk += sl$.a", "II"),
    ("cfg$ = Config({0})\ncfg$.tags.append({1})\ncfg$ = dataclasses.replace(cfg$, scale=2.0)\n"
     "out = out * cfg$.scale\nk += len(cfg$.tags)", "FI"),
    ("pt$ = Point({0}, {1})\npa$, pb$ = pt$\nout = out + pa$ * pb$\nacc.append(pt$._replace(a=0))",
     "TI"),
    ("mode$ = Mode.ADD if {0} else Mode.MUL\nif mode$ is Mode.ADD:\n    out = out + x\nelse:\n"
     "    out = out * x\nk += mode$.value", "B"),
    ("ks$ = {{Key(v % 3) for v in lst}}\nk += len(ks$) + (Key(1) in ks$)", ""),
    ("ctr$ = make_counter()\nfor _ in range({0} % 4):\n    ctr$()\nk += ctr$(0)", "I"),
    ("obj.__dict__['extra'] = {0}", "T"), ("acc.append(obj.__dict__.get('a'))", ""),
]
MODULES: list[Template] = [
    ("out = out + mod(out)", ""), ("mod.scale = {0}", "F"), ("mod.eval()", ""), ("mod.train()", ""),
    ("mod.train({0})", "B"),
    ("if mod.training:\n    out = out + mod(x)\nelse:\n    out = out - mod(x)", ""),
    ("mod.steps.add_(1)", ""), ("mod.extra = {0}", "T"),
    ("with torch.no_grad():\n    mod.lin.weight.mul_(0.5)", ""),
    ("k += sum(p.numel() for p in mod.parameters() if p.requires_grad)", ""),
    ("for name$, p$ in mod.named_parameters():\n    acc.append(name$)", ""),
    ("m$ = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Identity())\nout = m$(out)", ""),
    ("ln$ = torch.nn.LayerNorm(x.shape[-1])\nout = ln$(out)", ""),
    ("mod.register_buffer('extra_buf', {0})", "V"),
    ("mod(x).sum().backward()\nacc.append(mod.lin.weight.grad)", ""),
    ("sc$ = Scaler({0})\nout = out + sc$(out)\nacc.append(sc$)", "F"),
    ("sc$ = Scaler(2)\nsc$.k = {0}\nsc$.act = torch.nn.ReLU()\nout = sc$(out)\nacc.append(sc$)",
     "F"),
    ("with torch.profiler.record_function('r$'):\n    out = out + {0}", "T"),
    ("class Made$:\n    k = {0}\n\n    def __init__(self, v):\n        self.v = v\n\n"
     "    def run(self, t):\n        return t * self.v + self.k\nout = Made$(2).run(out)", "I"),
    ("class Sub$(Base):\n    def apply(self, z):\n        return super().apply(z) * 2\n"
     "out = Sub$({0}).apply(out)\nacc.append(Sub$(1).name())", "F"),
    ("class Keep$:\n    n = {0}\nKeep$.n += 1\nacc.append(Keep$.n)\nacc.append(Keep$())", "I"),
    ("with torch.autograd.profiler.profile():\n    out = out * {0}", "T"),
]
GRADS: list[Template] = [
    ("s$ = {0}\nif s$.requires_grad:\n    s$.backward()\n    acc.append(w.grad)", "S"),
    ("if w.grad is not None:\n    with torch.no_grad():\n        w -= 0.1 * w.grad\n"
     "    w.grad = None", ""),
    ("if w.requires_grad:\n    (w * {0}).sum().backward()\n    out = out + w.grad", "V"),
    ("with torch.no_grad():\n    w.mul_(0.5)", ""),
    ("if x.requires_grad:\n    (x * {0}).sum().backward()\n    acc.append(x.grad)", "T"),
    ("l$ = (mod(x) * {0}).sum()\nl$.backward()", "S"),
    ("if w.grad is None:\n    w.requires_grad_({0})", "B"),
]
VIEWS: list[Template] = [
    ("<T>[0].add_({0})", "F"), ("<T>.view(-1)[:2].zero_()", ""),
    ("<T>.reshape(-1)[:2].fill_({0})", "F"),
    ("<T>.T[0].mul_({0})", "F"), ("<T>.diagonal().fill_({0})", "F"),
    ("<T>.unsqueeze(0)[0, 0].sub_(1)", ""),
    ("<T>[<T> > 0] = {0}", "F"), ("<T>[:, 0].copy_(<T>[:, -1])", ""),
    ("<T>.scatter_(1, <T>.argsort(1), {0})", "T"),
    ("<T>.index_add_(0, torch.arange(x.shape[0]), {0})", "T"),
    ("<T>.masked_fill_({0} < 0, {1})", "TF"),
    ("<T>.clamp_(min={0})", "F"),
]
SHAPES: list[Template] = [
    ("r$, c$ = {0}.shape\nt$ = {1} * (r$ + c$)", "TT"),
    ("r$, *rest$ = {0}.unbind(0)\nt$ = {1} + r$ + sum(rest$)", "TT"),
    ("c$, d$ = {0}.chunk(2, 1)\nt$ = torch.cat([d$, c$], 1)", "T"),
    ("u$, v$ = {0}.split([1, x.shape[0] - 1])\nt$ = torch.cat([v$, u$])", "T"),
    ("t$ = {0}\nif t$.numel() > 4 and t$.size(-1) == x.size(-1):\n    t$ = t$ * 2", "T"),
    ("vals$, idx$ = {0}.topk(1, dim=1)\nt$ = {1} * vals$", "TT"),
    ("t$, idx$ = {0}.sort(1)\nt$ = t$.gather(1, idx$.argsort(1))", "T"),
]
FUNCTIONS: list[Template] = [
    ("def gbump$(v):\n    global G\n    G += v\nfor i$ in range(3):\n    gbump$(i$)", ""),
    ("fs$ = [lambda z, i=i: z + i for i in range(3)]\nfor g$ in fs$:\n    out = out + g$(out)", ""),
    ("for g$ in gen_more({0}, 2):\n    out = out + g$", "T"),
    ("acc.append(sum(1 for _ in gen_rows({0})))", "T"),
]
CELLS: list[Template] = [
    ("def add_out$(v):\n    nonlocal out\n    out = out + v\n"
     "for i$ in range({0} % 3):\n    add_out$({1})", "IT"),
    ("fs$ = []\nfor i$ in range(3):\n    fs$.append(lambda z: z * i$)\nout = out + fs$[0](out)",
     ""),
    ("sc$ = {0}\nfn$ = lambda z: z * sc$\nout = fn$(out)", "T"),
]
"""Templates that give ``f`` closure cells, which keep bytegraph from breaking the graph
anywhere in ``f`` (the whole frame then runs as Python): rare, so most programs still trace."""

# Infinite iterators consumed in part, their state read again after a graph break or
# in the next call (TICKS and LETTERS are module globals that persist across calls).
ITERATORS: list[Template] = [
    ("it$ = itertools.count({0})\nk += next(it$) + next(it$)\nbytegraph.graph_break()\n"
     "k += next(it$)", "I"),
    ("it$ = itertools.cycle([{0}, out])\nout = out + next(it$)\nprint('cycle')\n"
     "out = out * next(it$) + next(it$)", "T"),
    ("it$ = itertools.repeat({0}, 3)\nout = out + next(it$)\nacc.append(len(list(it$)))", "T"),
    ("it$ = itertools.islice(itertools.count(1, 2), {0} % 3, None)\nk += next(it$)\n"
     "acc.append(next(it$))", "I"),
    ("k += next(TICKS)\nacc.append(next(LETTERS))", ""),
    ("for i$, ch$ in zip(range({0} % 3), LETTERS):\n    acc.append(ch$)\nk += next(TICKS)", "I"),
    ("it$ = iter(lst)\nacc.append(next(it$, -1))\nacc.append(list(it$))", ""),
    ("it$ = gen_log({0}, 9)\nout = out + next(it$)\nbytegraph.graph_break()\n"
     "out = out + next(it$)", "T"),
    ("it$ = itertools.accumulate(itertools.count({0}))\nk += next(it$) + next(it$)\n"
     "acc.append(next(it$))", "I"),
    ("it$ = itertools.takewhile(lambda v: v < 5, itertools.count({0} % 4))\n"
     "acc.append(list(it$))", "I"),
]
COLLECTIONS: list[Template] = [
    ("dd$ = collections.defaultdict(int)\nfor v$ in lst:\n    dd$[v$ % 3] += 1\n"
     "acc.append(dict(dd$))\nk += dd$[{0}]", "I"),
    ("dd$ = collections.defaultdict(list)\ndd$[{0}].append(out)\ndd$['z'].append(1)\n"
     "acc.append(sorted(dd$, key=str))\nout = dd$[{0}][0]", "I"),
    ("dd$ = collections.defaultdict(functools.partial(torch.zeros_like, {0}))\n"
     "out = out + dd$['q']\nacc.append(len(dd$))", "T"),
    ("od$ = collections.OrderedDict(a={0}, b=1, c=2)\nod$.move_to_end('a')\n"
     "od$.move_to_end('c', last=False)\nacc.append(list(od$.items()))\n"
     "acc.append(od$.popitem())", "I"),
    ("od$ = collections.OrderedDict()\nod$['t'] = out\nod$['u'] = {0}\n"
     "out = sum(od$.values())\nacc.append(list(reversed(od$)))", "T"),
    ("ct$ = collections.Counter(lst)\nct$.update([{0}, {0}])\nct$.subtract({{1: 2}})\n"
     "acc.append(sorted(ct$.items()))\nk += ct$.total()", "I"),
    ("ct$ = collections.Counter(a={0}, b=2)\nct$['a'] += 1\nacc.append(ct$.most_common(1))\n"
     "acc.append(+ct$)", "I"),
    ("GD.setdefault('dd', collections.defaultdict(int))['n'] += {0}", "I"),
    ("dct.setdefault('ctr', collections.Counter())['x'] += {0}", "I"),
]
RAISES: list[Template] = [
    ("raise FuzzError({0})", "I"), ("raise SubError('bad') from None", ""),
    ("raise ValueError({0}) from KeyError('k')", "I"), ("raise IndexError({0})", "I"),
]
HANDLED = [
    "FuzzError", "SubError", "(ValueError, KeyError)", "Exception", "ArithmeticError",
    "LookupError", "RuntimeError", "AssertionError",
]


class FamilyStatements:
    """Statement makers of the wider grammar; ``grammar.Generator`` mixes them in."""

    rng: Any

    def fresh(self, prefix: str) -> str: ...
    def simple(self, scope: Scope, text: str, kinds: str) -> Stmt: ...
    def nested(self, scope: Scope, **changes: object) -> list[Stmt]: ...
    def expr(self, kind: str, scope: Scope, depth: int = 0) -> Any: ...

    def family_makers(self, scope: Scope) -> list[tuple[int, Any]]:
        makers = [(3, self.views_op), (2, self.shapes_op), (1, self.assert_stmt),
                  (1, self.lambda_def)]
        if scope.in_try or not scope.main:
            makers.append((1, self.cond_raise))
        if scope.main:
            makers += [(2, self.iterators_op), (2, self.collections_op)]
            makers += [(4, self.builtins_op), (3, self.objects_op), (2, self.modules_op),
                       (2, self.grads_op), (2, self.functions_op), (1, self.del_stmt)]
            if not scope.closure and scope.depth == 0:
                makers.append((1, self.cells_op))
        if scope.depth < 2:
            makers += [(1, self.while_true), (1, self.for_else), (1, self.match_stmt),
                       (1, self.try_full)]
        if scope.depth > 0:
            makers.append((1, self.early_return))
        if scope.in_try:
            makers.append((2, self.raise_family))
        if scope.in_except:
            makers.append((2, self.reraise))
        return makers

    def template(self, scope: Scope, table: list[Template], binds: str = "") -> Stmt:
        text, kinds = self.rng.choice(table)
        number = self.fresh("")
        if "<T>" in text:
            text = text.replace("<T>", self.rng.choice(scope.names["T"]))
        stmt = self.simple(scope, text.replace("$", number), kinds)
        if binds and f"{binds}$ =" in text:
            scope.names["T"].append(binds + number)
        return stmt

    def builtins_op(self, scope: Scope) -> Stmt:
        return self.template(scope, BUILTINS)

    def objects_op(self, scope: Scope) -> Stmt:
        return self.template(scope, OBJECTS)

    def modules_op(self, scope: Scope) -> Stmt:
        return self.template(scope, MODULES)

    def iterators_op(self, scope: Scope) -> Stmt:
        return self.template(scope, ITERATORS)

    def collections_op(self, scope: Scope) -> Stmt:
        return self.template(scope, COLLECTIONS)

    def grads_op(self, scope: Scope) -> Stmt:
        return self.template(scope, GRADS)

    def views_op(self, scope: Scope) -> Stmt:
        return self.template(scope, VIEWS)

    def shapes_op(self, scope: Scope) -> Stmt:
        return self.template(scope, SHAPES, binds="t")

    def functions_op(self, scope: Scope) -> Stmt:
        return self.template(scope, FUNCTIONS)

    def cells_op(self, scope: Scope) -> Stmt:
        scope.closure = True
        return self.template(scope, CELLS)

    def raise_family(self, scope: Scope) -> Stmt:
        return self.template(scope, RAISES)

    def cond_raise(self, scope: Scope) -> Stmt:
        return self.simple(scope, "if {0} and {1}:\n    raise FuzzError({2})", "BBI")

    def reraise(self, scope: Scope) -> Stmt:
        return self.simple(scope, "if {0}:\n    raise", "B")

    def assert_stmt(self, scope: Scope) -> Stmt:
        text, kinds = self.rng.choice([
            ("assert {0}, 'check'", "B"), ("assert {0} < 50", "I"),
            ("assert x.dim() == 2, x.shape", ""),
            ("assert isinstance({0}, torch.Tensor)", "T"),
        ])
        return self.simple(scope, text, kinds)

    def lambda_def(self, scope: Scope) -> Stmt:
        name = self.fresh("fn")
        stmt = self.simple(scope, name + " = lambda z, c={0}, t={1}: z * c + t", "IT")
        scope.calls.append((f"{name}({{0}})", "T"))
        return stmt

    def del_stmt(self, scope: Scope) -> Stmt:
        mine = [n for n in scope.names["T"] if n[0] == "t" and n[1:].isdigit()]
        if not mine:
            return self.simple(scope, "if lst:\n    del lst[0]", "")
        name = self.rng.choice(mine)
        scope.names["T"].remove(name)
        return Stmt(f"del {name}")

    def early_return(self, scope: Scope) -> Stmt:
        if scope.main:
            return self.simple(scope, "if {0}:\n    return out, k, acc", "B")
        return self.simple(scope, "if {0}:\n    return {1}", "BT")

    # -- compound ------------------------------------------------------------

    def while_true(self, scope: Scope) -> Stmt:
        var = self.fresh("w")
        fixed = [f"{var} += 1", f"if {var} > {self.rng.randint(1, 4)}:", "    break"]
        loop = Clause("while True:", [], self.nested(scope, in_loop=True), fixed)
        return Stmt(f"{var} = 0", [], [loop])

    def for_else(self, scope: Scope) -> Stmt:
        var = self.fresh("i")
        inner = scope.child(in_loop=True)
        inner.names["I"].append(var)
        body = self.nested(inner)
        step = self.rng.choice(["range(3)", "range(4, 0, -2)", "range(1, 6, 2)"])
        return Stmt(clauses=[Clause(f"for {var} in {step}:", [], body),
                             Clause("else:", [], self.nested(scope), removable=True)])

    def match_stmt(self, scope: Scope) -> Stmt:
        number = self.fresh("")
        options = [
            ("match {0}:", "I", ["case 0:", "case 1 | 2:", "case int(v$) if v$ > 3:"]),
            ("match ({0}, x.dim()):", "I",
             ["case (0, 2):", "case (a$, 2) if a$ < 3:", "case (a$, _):"]),
            ("match Mode.ADD if {0} else Mode.MUL:", "B", ["case Mode.ADD:", "case Mode.MUL:"]),
        ]
        if scope.main:
            options += [
                ("match obj:", "", ["case Obj(a=0):", "case Obj(a=int(a$)) if a$ > 1:"]),
                ("match lst:", "", ["case []:", "case [a$]:", "case [a$, *rest$]:"]),
            ]
        subject, kinds, patterns = self.rng.choice(options)
        inner = scope.child()
        cases = [Stmt(clauses=[Clause(p.replace("$", number), [], self.nested(inner))])
                 for p in patterns]
        cases.append(Stmt(clauses=[Clause("case _:", [], self.nested(inner))]))
        exprs = [self.expr(k, scope) for k in kinds]
        return Stmt(clauses=[Clause(subject, exprs, cases)])

    def try_full(self, scope: Scope) -> Stmt:
        body = self.nested(scope, in_try=True)
        kind = self.rng.choice(HANDLED)
        handler = ["acc.append(repr(e))"] if scope.main else []
        clauses = [Clause("try:", [], body),
                   Clause(f"except {kind} as e:", [], self.nested(scope, in_except=True), handler)]
        if self.rng.random() < 0.5:
            clauses.append(Clause("else:", [], self.nested(scope), removable=True))
        if self.rng.random() < 0.4:
            clauses.append(Clause("finally:", [], self.nested(scope), removable=True))
        return Stmt(clauses=clauses)
