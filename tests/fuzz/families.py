"""Expression productions of the wider grammar, by family: builtins, functions, objects, tensors.

Tables in the form ``grammar.py`` uses, ``(weight, template, argument
kinds)``, merged into its own: ``EXTRA`` may appear anywhere (in ``f``,
helpers and closures, which see only ``x`` and ``y``), ``EXTRA_MAIN`` only
in ``f``, which also sees ``lst``, ``dct``, ``obj``, ``opt`` (a vector or
None), ``mod`` (a ``Net``) and ``w``. Names used here come from
``prelude.py`` (``Stats``, ``Child``, ``Key``, ``gen_rows``...).

Draws from the ``random`` module are deterministic: the runner seeds the module's
generator before every call on both sides, and compares its state afterwards.

Excluded on purpose, because eager itself is not deterministic or the two
namespaces could never agree: dropout in training mode, ``torch.empty``,
``id()``, sets of objects hashed by identity, and scatters with repeated
indices (every index tensor here is a permutation). Ints that size a loop
or a ``range`` are bounded (``min(k, 8)``, ``% 4``), since expressions can
grow large.
"""

from __future__ import annotations

Production = tuple[int, str, str]

TENSOR: list[Production] = [
    (2, "F.relu({0})", "T"), (1, "F.gelu({0})", "T"), (1, "F.softmax({0}, dim=-1)", "T"),
    (1, "F.layer_norm({0}, (x.shape[-1],))", "T"), (1, "F.dropout({0}, 0.5, training=False)", "T"),
    (1, "F.linear({0}, torch.eye(x.shape[-1]))", "T"), (1, "{0}.T.contiguous().T", "T"),
    (1, "{0}.permute(1, 0).permute(1, 0)", "T"), (1, "{0}.flatten().view(x.shape)", "T"),
    (1, "{0}.unsqueeze(-1).squeeze(-1)", "T"), (1, "{0}.sort(1).values", "T"),
    (1, "{0}.sort(dim=0, descending=True)[0]", "T"),
    (1, "torch.gather({0}, 1, {1}.argsort(1))", "TT"),
    (1, "{0}.scatter(1, {1}.argsort(1), {2})", "TTT"),
    (1, "{0}.index_add(0, torch.arange(x.shape[0]).flip(0), {1})", "TT"),
    (1, "{0}[torch.arange(x.shape[0]).flip(0)]", "T"),
    (1, "{0}[list(range(x.shape[0]))[::-1]]", "T"),
    (1, "{0}[:, [c for c in range(x.shape[1])]]", "T"),
    (1, "({0}.topk(1, dim=1).values * {1})", "TT"),
    (1, "torch.cat({0}.unbind(0)).view(x.shape)", "T"), (1, "torch.cat({0}.chunk(2, 1), 1)", "T"),
    (1, "torch.cat({0}.split(1, 0), 0)", "T"), (1, "({0} > 0).float()", "T"),
    (1, "({0}.round().long() % 3).to({1}.dtype)", "TT"), (1, "(torch.ones_like({0}) * {1})", "TF"),
    (1, "torch.full(x.shape, {0})", "F"), (1, "torch.arange(x.numel()).view(x.shape).float()", ""),
    (1, "torch.linspace(0, 1, x.numel()).view(x.shape)", ""),
    (1, "torch.eye(x.shape[0], x.shape[1])", ""), (1, "torch.where({0} > {1}, {0}, 0.0)", "TT"),
    (1, "({0} if isinstance({0}, torch.Tensor) else {1})", "TT"),
    (1, "torch.cat(tuple(r.unsqueeze(0) for r in {0}), 0)", "T"),
    (1, "(lambda z: sum(g(z) for g in [lambda u, i=i: u * i for i in range(3)]))({0})", "T"),
    (1, "affine({0})", "T"), (1, "affine({0}, {1}, shift={2})", "TFF"),
    (1, "star_sum({0}, {1})", "TT"), (1, "star_sum(*[{0}, {1}], scale={2})", "TTI"),
    (1, "star_sum({0}, **{{'scale': {1}, 'tag': 1}})", "TI"), (1, "rec({0}, min({1}, 3))", "TI"),
    (1, "Stats({0})({1})", "TT"), (1, "Stats.twice({0})", "T"),
    (1, "Child({1}, 2).apply({0})", "TI"),
    (1, "Base({1}).apply({0})", "TF"), (1, "torch.stack(list(gen_rows({0})))", "T"),
    (1, "(lambda *a, **kw: a[0] * len(kw))({0}, p=1, q=2)", "T"), (1, "{0}.clone().detach()", "T"),
    (1, "{0}.to(torch.float64).to(torch.float32)", "T"),
    (1, "({0} * random.random())", "T"), (1, "(random.uniform(-1.0, 1.0) - {0})", "T"),
    (1, "({0} / (random.random() + 0.5) + random.randint(1, 3))", "T"),
    (1, "({0} * random.Random(5).uniform(0, 2))", "T"),
    (1, "({0} + {0}.data)", "T"), (1, "{0}.data.clone()", "T"),
]
VECTOR: list[Production] = [
    (1, "F.softmax({0}, dim=0)", "V"), (1, "{0}.sort().values", "V"), (1, "{0}.cumsum(0)", "V"),
    (1, "{0}.flip(0)", "V"), (1, "{0}[-1]", "T"), (1, "{0}.unbind(0)[0]", "T"),
    (1, "{0}.chunk(2, 0)[-1].sum(0)", "T"), (1, "{0}.T.sum(1)", "T"),
    (1, "sum(gen_more({0}, {1}))", "TI"), (1, "Stats({0})[0]", "T"),
    (1, "(Stats.make({0}).total * {1})", "TV"), (1, "{0}.gather(0, {0}.argsort())", "V"),
    (1, "torch.stack(list({0})).sum(0)", "T"), (1, "({0}.topk(1).values * {1})", "VV"),
]
SCALAR: list[Production] = [
    (1, "{0}[{0} > 0].sum()", "T"), (1, "F.relu({0}).sum()", "T"), (1, "{0}.argmax().float()", "T"),
    (1, "sum({0}.unbind(0)).sum()", "T"), (1, "Stats({0}).total", "T"),
]
INT: list[Production] = [
    (1, "len(sorted(range({0} % 5), key=lambda v: -v))", "I"), (1, "divmod({0}, 3)[0]", "I"),
    (1, "round({0} / 3)", "I"), (1, "int(str({0}))", "I"), (1, "int(bool({0}))", "I"),
    (1, "len(str({0}))", "I"), (1, '(lambda v, s=x.shape: len(f"{{v}}-{{s}}"))({0})', "I"),
    (1, 'len("%d:%s" % ({0}, tuple(x.shape)))', "I"),
    (1, 'len("{{}}x{{}}".format({0}, x.size(-1)))', "I"),
    (1, 'len("-".join(str(v) for v in range({0} % 4)).split("-"))', "I"),
    (1, 'len("ab".upper() + str({0}))', "I"), (1, "len(list(range(0, min({0}, 9), 2)))", "I"),
    (1, "sum(range(min({0}, 8), -1, -2))", "I"), (1, "int({0}.argmax())", "T"),
    (1, "{0}.argmax().item()", "T"), (1, "len({0}.tolist())", "T"), (1, "len({0}[{0} > 0])", "T"),
    (1, "int(({0} > 0).sum())", "T"), (1, "x.size(-1)", ""), (1, "{0}.numel()", "T"),
    (1, "(lambda a, b=2: a * b)({0})", "I"),
    (1, "sum(i * j for i in range(3) for j in range(i) if (i + j) % 2)", ""),
    (1, "len([[i * j for j in range(3)] for i in range(2)])", ""),
    (1, "len(list(gen_rows({0})))", "T"),
    (1, "len(Stats({0}))", "T"), (1, "(Child({0}, 2).b + Base({1}).a)", "II"),
    (1, "Mode.ADD.value", ""), (1, "len(Config().tags)", ""), (1, "Point({0}, 2).b", "I"),
    (1, "sum(Point({0}, {1}))", "II"), (1, "random.randint(0, 9)", ""),
    (1, "random.randrange(1, 20, 3)", ""), (1, "random.Random({0} % 7).randint(0, 9)", "I"),
    (1, "(random.seed({0} % 5) or random.randint(0, 9))", "I"),
    (1, "random.Random(2).choice([{0}, {1}, 3])", "II"),
    (1, "len({{Key({0}), Key(1), Key({1})}})", "II"),
    (1, "{{Key(1): 5}}.get(Key({0}), 0)", "I"), (1, "Slotted({0}, 1).a", "I"),
    (1, "len(Child(1, 2).name())", ""), (1, "abs({0} - 3)", "I"),
]
# Protocol return types: CPython checks what __bool__, __len__, __iter__ return
# (``outcome`` turns its TypeError/ValueError/OverflowError into a string).
PROTOCOL_INT: list[Production] = [
    (1, "len(str(outcome(bool, OddBool({0}))))", "I"),
    (1, "len(str(outcome(bool, OddBool({0} % 2 == 0))))", "I"),
    (1, "len(str(outcome(lambda: 1 if OddBool({0} > 2) else 2)))", "I"),
    (1, "len(str(outcome(lambda: 3 if OddBool({0} - 1) else 4)))", "I"),
    (1, "len(str(outcome(lambda: not OddBool(None if {0} % 2 else True))))", "I"),
    (1, "len(str(outcome(len, OddLen({0} - 2))))", "I"),
    (1, "len(str(outcome(len, OddLen({0} * 2 ** 62))))", "I"),
    (1, "len(str(outcome(len, OddLen({0} / 2))))", "I"),
    (1, "len(str(outcome(lambda: 5 if OddLen({0} % 3 - 1) else 6)))", "I"),
    (1, "len(str(outcome(list, OddIter([{0}]))))", "I"),
    (1, "len(str(outcome(list, OddIter(iter([{0}, 1])))))", "I"),
    (1, "int(({0} in OddIn({1} % 2)) + 2 * (0 in OddIn([{0}])))", "II"),
    # __index__ must return an int (a bool is deprecated: a DeprecationWarning, compared)
    (1, "len(str(outcome(lambda: [1, 2, 3][OddIndex({0} - 2)])))", "I"),
    (1, "len(str(outcome(lambda: [1, 2, 3][OddIndex({0} / 2)])))", "I"),
    (1, "len(str(outcome(lambda: len(range(OddIndex({0} % 4 > 1))))))", "I"),
    (1, "len(str(outcome(lambda: 'ab' * OddIndex(None if {0} % 2 else {0} % 3))))", "I"),
    (1, "len(str(outcome(lambda: [5, 6][OddIndex({0} * 2 ** 64)])))", "I"),
    (1, "len(str(outcome(lambda: list(range(5))[OddIndex({0} % 3):OddIndex({1} % 5)])))", "II"),
    # __hash__ must return an int; -1 becomes -2, a huge int is reduced
    (1, "len(str(outcome(hash, OddHash({0} - 2))))", "I"),
    (1, "len(str(outcome(hash, OddHash({0} / 2))))", "I"),
    (1, "len(str(outcome(hash, OddHash({0} * 2 ** 64 - 1))))", "I"),
    (1, "len(outcome(lambda: {{OddHash({0} % 3 - 1): 1}}))", "I"),
    (1, "len(str(outcome(lambda: OddHash(None if {0} % 2 else 1) in {{1, 2}})))", "I"),
    (1, "len(str(outcome(lambda: len({{OddHash({0} % 2 == 0), 1}}))))", "I"),
]
# Hashing side effects: ``Hashed.__hash__`` logs each call to GL, which is compared.
HASHING_INT: list[Production] = [
    (1, "len({{Hashed({0}): 1, Hashed({1}): 2}})", "II"),
    (1, "len({{Hashed({0}), Hashed({1}), Hashed({0})}})", "II"),
    (1, "{{Hashed(1): 5}}.get(Hashed({0}), 0)", "I"),
    (1, "int(Hashed({0}) in {{Hashed(1), Hashed(2)}})", "I"),
    (1, "len(dict.fromkeys([Hashed({0}), Hashed(2)]))", "I"),
    (1, "len(frozenset(Hashed(v) for v in range({0} % 4)))", "I"),
    (1, "len({{Hashed(v % 2): v for v in range({0} % 5)}})", "I"),
    (1, "(lambda d, v: d.setdefault(Hashed(v), 3) + d.pop(Hashed(v)))({{}}, {0})", "I"),
    (1, "(lambda s: (s.add(Hashed({0})), s.discard(Hashed({1})), len(s))[2])(set())", "II"),
    (1, "len(set({{Hashed({0}), Hashed(2)}}))", "I"),
]
INT.extend(PROTOCOL_INT + HASHING_INT)

FLOAT: list[Production] = [
    (1, "float({0}.sum())", "T"), (1, "float({0})", "S"), (1, "round({0}, 2)", "F"),
    (1, "abs({0})", "F"), (1, "float(str({0}))", "I"), (1, "max({0}, 0.25)", "F"),
    (1, "sum([0.5, {0}])", "F"), (1, "random.random()", ""),
    (1, "(random.gauss(0.0, 1.0) * {0})", "F"),
]
BOOL: list[Production] = [
    (1, "(0 <= {0} < {1})", "II"), (1, "({0} in {{1, 2, 3}})", "I"),
    (1, "(str({0}) in '0123')", "I"),
    (1, "isinstance({0}, torch.Tensor)", "T"), (1, "({0}.dtype == torch.float32)", "T"),
    (1, "{0}.is_contiguous()", "T"), (1, "(x.shape[-1] in (2, 3))", ""),
    (1, "any(v > 0 for v in {0}.tolist())", "V"), (1, "all(d > 1 for d in x.shape)", ""),
    (1, "(Key({0}) == Key({1}))", "II"), (1, "({0} in Stats(x))", "I"),
    (1, "(Mode({0} % 2 + 1) is Mode.ADD)", "I"), (1, "bool({0} > 0.5)", "F"),
]
TENSOR_MAIN: list[Production] = [
    (2, "mod({0})", "T"), (1, "mod.lin({0})", "T"), (1, "mod.seq[0]({0})", "T"),
    (1, "F.linear({0}, mod.lin.weight, mod.lin.bias)", "T"),
    (2, "({0} + opt if opt is not None else {0})", "T"), (1, "({0} * mod.steps)", "T"),
    (1, "({0} * w.grad if w.grad is not None else {0})", "T"),
    (1, "(x.grad if x.grad is not None else {0})", "T"),
    (1, "({0} * torch.tensor(lst[:1] or [1]))", "T"), (1, "({0} * getattr(obj, 'a', 1))", "T"),
    (1, "({0} * dct.get('c', 2))", "T"), (1, "({0} + x.data)", "T"),
    (1, "(x.grad.sum() + {0} if x.grad is not None else {0})", "T"),
]
VECTOR_MAIN: list[Production] = [
    (2, "(opt if opt is not None else {0})", "V"),
    (1, "(w.grad if w.grad is not None else {0})", "V"),
    (1, "mod.lin({0})", "V"), (1, "(mod.steps * {0})", "V"), (1, "(w.data * 2 + {0})", "V"),
]
INT_MAIN: list[Production] = [
    (1, "len(sorted(lst, key=lambda v: -v)[:2])", ""),
    (1, "sum(i * v for i, v in enumerate(lst))", ""),
    (1, "sum(a * b for a, b in zip(lst, reversed(lst)))", ""), (1, "max(lst, default={0})", "I"),
    (1, "min(lst + [{0}])", "I"), (1, "(lst[::-1] + [{0}])[0]", "I"), (1, "len(lst[-2:])", ""),
    (1, "len(tuple(lst)[1::2])", ""), (1, "len(dict(zip('abcde', lst)))", ""),
    (1, "len(set(lst) | {{{0}}})", "I"), (1, "len(list(reversed(lst)))", ""),
    (1, "sum(a * b for a in lst for b in range(min(a, 3)) if b % 2 == 0)", ""),
    (1, "getattr(obj, 'a', 0)", ""), (1, "getattr(obj, 'missing', {0})", "I"),
    (1, "len(obj.__dict__)", ""), (1, "len(mod.seq)", ""),
    (1, "sum(p.numel() for p in mod.parameters())", ""), (1, "len(list(mod.buffers()))", ""),
    (1, "len(list(mod.named_modules()))", ""), (1, "Stats.count", ""),
    (1, "len(dct.keys() - {{'a'}})", ""), (1, "(len(dct) if 'c' in dct else {0})", "I"),
    (1, "(random.Random(4).shuffle(lst) or len(lst))", ""),
    (1, "(random.shuffle(lst) or lst[0] if lst else {0})", "I"),
]
BOOL_MAIN: list[Production] = [
    (1, "(opt is None)", ""), (1, "(opt is not None and opt.sum() > 0)", ""),
    (1, "any(v > 2 for v in lst)", ""), (1, "all(v >= 1 for v in lst)", ""),
    (1, "('b' in dct and isinstance(dct['b'], torch.Tensor))", ""),
    (1, "hasattr(mod, 'extra')", ""),
    (1, "mod.training", ""), (1, "w.requires_grad", ""), (1, "(w.grad is None)", ""),
    (1, "isinstance(obj.a, int)", ""), (1, "(y is x)", ""), (1, "(len(lst) > 2)", ""),
    (1, "isinstance(mod, torch.nn.Module)", ""),
]

# numpy on tensors (traced through torch._numpy): operations whose results numpy and torch
# round alike (no transcendental functions, no float reductions, whose last bits differ;
# no sqrt either: torch's vectorised float32 sqrt is 1 ulp off now and then, seed 2612).
NUMPY_TENSOR: list[Production] = [
    (1, "torch.from_numpy(np.maximum({0}.detach().numpy(), 0.5))", "T"),
    (1, "torch.from_numpy(np.clip({0}.detach().numpy() * 2, -1, 1))", "T"),
    (1, "torch.from_numpy(np.where({0}.detach().numpy() > 0, {1}.detach().numpy(), 0.0))", "TT"),
    (1, "torch.as_tensor(np.abs({0}.detach().numpy()) + {1})", "TF"),
    (1, "torch.tensor(np.negative({0}.detach().numpy()).T).T", "T"),
    (1, "torch.from_numpy({0}.detach().numpy().astype(np.float64) / 4).float()", "T"),
    (1, "torch.from_numpy(np.minimum(np.abs({0}.detach().numpy()), 1.5))", "T"),
    (1, "torch.from_numpy(np.square({0}.detach().numpy()) - {1}.detach().numpy())", "TT"),
    (1, "torch.from_numpy(np.float32({1}) * {0}.detach().numpy())", "TF"),
    (1, "torch.from_numpy(np.floor({0}.detach().numpy() * 4) / 4)", "T"),
    (1, "torch.from_numpy(np.concatenate([{0}.detach().numpy(), {1}.numpy()])[:x.shape[0]])", "TT"),
    (1, "torch.from_numpy({0}.numpy()[::-1].copy() + {0}.numpy()[0])", "T"),
    (1, "np.maximum({0}.detach(), {1})", "TF"), (1, "({0} * np.float64({1}))", "TF"),
]
NUMPY_OTHER: dict[str, list[Production]] = {
    "I": [(1, "{0}.detach().numpy().ndim", "T"), (1, "int(np.iinfo(np.int8).max) % ({0} + 5)", "I"),
          (1, "int(np.prod({0}.detach().numpy().shape))", "T")],
    "F": [(1, "float(np.max({0}.detach().numpy()))", "T"),
          (1, "float(np.finfo(np.float32).eps * {0})", "F")],
    "B": [(1, "isinstance({0}.detach().numpy(), np.ndarray)", "T"),
          (1, "({0}.detach().numpy().dtype == np.float32)", "T"),
          (1, "bool(({0}.detach().numpy() > 0).any())", "T")],
}

# Objects made in the trace: nn.Modules built and called in place (torch's, and
# ``Scaler``, a user module with a submodule and a buffer), losses, containers.
MADE_TENSOR: list[Production] = [
    (1, "torch.nn.ReLU()({0})", "T"), (1, "torch.nn.GELU(approximate='tanh')({0})", "T"),
    (1, "torch.nn.Softmax(dim=-1)({0})", "T"), (1, "torch.nn.LeakyReLU({1})({0})", "TF"),
    (1, "torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Identity())({0})", "T"),
    (1, "torch.nn.Dropout(0.5).eval()({0})", "T"),
    (1, "torch.nn.Flatten(0)({0}).view(x.shape)", "T"), (1, "Scaler({1})({0})", "TF"),
    (1, "Scaler(2, torch.nn.Sigmoid())({0})", "T"),
]
MADE_SCALAR: list[Production] = [
    (1, "torch.nn.MSELoss()({0}, {1})", "TT"),
    (1, "torch.nn.CrossEntropyLoss()({0}, {1}.argmax(1))", "TT"),
    (1, "torch.nn.SmoothL1Loss(reduction='sum')({0}, {1})", "TT"),
]
MADE_INT: list[Production] = [
    (1, "len(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()))", ""),
    (1, "len(list(Scaler({0}).named_modules()))", "I"),
]
MADE_BOOL: list[Production] = [
    (1, "torch.nn.ReLU().training", ""), (1, "Scaler({0}).eval().training", "I"),
]
TENSOR.extend(MADE_TENSOR)
SCALAR.extend(MADE_SCALAR)
INT.extend(MADE_INT)
BOOL.extend(MADE_BOOL)

# itertools and collections: lazy iterators fed by a generator that logs each item it
# produces (``gen_log``, into GL), defaultdict factories, OrderedDict order, Counter.
ITERTOOLS_TENSOR: list[Production] = [
    (1, "sum(itertools.chain([{0}], ({1}, {0} * 2)))", "TT"),
    (1, "sum(itertools.islice(gen_log({0}, 5), 1, 4))", "T"),
    (1, "list(itertools.accumulate([{0}, {1}, {0}]))[-1]", "TT"),
    (1, "list(itertools.accumulate([{0}, {1}], torch.maximum, initial={1} - 1))[-1]", "TT"),
    (1, "sum(a * b for a, b in itertools.zip_longest(gen_log({0}, 2), [1, 2, 3], fillvalue=1))",
     "T"),
    (1, "sum(a * b for a, b in itertools.product([{0}, {1}], [1, 2]))", "TT"),
    (1, "sum(a - b for a, b in itertools.combinations([{0}, {1}, {0} * 2], 2))", "TT"),
    (1, "sum(a * b for a, b in itertools.pairwise(gen_log({0}, 4)))", "T"),
    (1, "sum(itertools.starmap(torch.mul, [({0}, {1}), ({1}, 2.0)]))", "TT"),
    (1, "sum(v * {0} for v in itertools.takewhile(lambda v: v < 3, itertools.count({1} % 4)))",
     "TI"),
    (1, "(next(itertools.cycle([{0}, {1}])) + next(itertools.islice(itertools.cycle([{1}, {0}]), "
        "3, None)))", "TT"),
    (1, "sum(itertools.compress([{0}, {1}, {0}], [1, 0, {2} % 2]))", "TTI"),
    (1, "sum(itertools.repeat({0}, 3))", "T"),
    (1, "sum(dd_tally({0}, [{1} % 3, 1, {1} % 2]).values())", "TI"),
    (1, "sum(collections.Counter([{1} % 3, 1, 1]).values()) * {0}", "TI"),
]
COLLECTIONS_OTHER: dict[str, list[Production]] = {
    "I": [(1, "collections.Counter([{0} % 3, 1, {1} % 3, 1])[1]", "II"),
          (1, "len((collections.Counter('abca') + collections.Counter(a={0} % 4)).most_common(2))",
           "I"),
          (1, "len(list(collections.Counter(a={0} % 5, b=2).elements()))", "I"),
          (1, "collections.Counter(gen_log({0} % 3, 4))[0]", "I"),
          (1, "(collections.Counter(a={0} % 3) - collections.Counter(a=1))['a']", "I"),
          (1, "collections.OrderedDict.fromkeys('abc', {0}).popitem(last=False)[1]", "I"),
          (1, "(lambda d: (d.move_to_end('a'), list(d).index('a'))[1])"
              "(collections.OrderedDict(a={0}, b=2))", "I"),
          (1, "next(itertools.islice(itertools.count({0}, 2), 3, None))", "I"),
          (1, "len(list(itertools.permutations(range({0} % 4))))", "I"),
          (1, "len(list(itertools.combinations_with_replacement('ab', {0} % 3)))", "I"),
          (1, "sum(k * len(list(g)) for k, g in itertools.groupby([{0} % 2, 1, 1, {1} % 2]))",
           "II"),
          (1, "len(list(itertools.chain.from_iterable([[{0}], range({1} % 3)])))", "II"),
          (1, "sum(sum(t) for t in itertools.tee(range({0} % 5), 3))", "I"),
          (1, "len(list(itertools.dropwhile(lambda v: v < {0} % 4, range(6))))", "I"),
          (1, "len(list(itertools.filterfalse(None, [0, {0}, 1, {1}])))", "II"),
          (1, "len(collections.defaultdict(list, {{'a': [{0}]}})['b'])", "I")],
    "B": [(1, "(collections.OrderedDict(a=1, b={0}) == collections.OrderedDict(b={0}, a=1))", "I"),
          (1, "(collections.Counter('ab') == collections.Counter(b=1, a={0} % 2 + 1))", "I"),
          (1, "isinstance(itertools.count({0}), itertools.count)", "I"),
          (1, "(type({{'a': {0}}} | collections.OrderedDict(b=1)) is dict)", "I")],
}
TENSOR.extend(ITERTOOLS_TENSOR)
INT.extend(COLLECTIONS_OTHER["I"])
BOOL.extend(COLLECTIONS_OTHER["B"])

# torch.utils._pytree over dicts, lists, tuples and None leaves (modelled, variables/pytree.py).
_PT = "torch.utils._pytree"
PYTREE_TENSOR: list[Production] = [
    (1, _PT + ".tree_map(lambda t: t * 2, {{'a': {0}, 'b': [{1}, 3]}})['b'][0]", "TT"),
    (1, "sum(" + _PT + ".tree_leaves([{0}, ({1}, 2), {{'k': {0}}}]))", "TT"),
    (1, _PT + ".tree_map_only(torch.Tensor, lambda t: t.relu(), ({0}, 3, [{1}]))[2][0]", "TT"),
    (1, _PT + ".tree_map(lambda a, b: a - b, [{0}, {{'z': {1}}}], [{1}, {{'z': {0}}}])[1]['z']",
     "TT"),
    (1, "(lambda f: " + _PT + ".tree_unflatten([v + 1 for v in f[0]], f[1]))("
     + _PT + ".tree_flatten(({0}, {{'k': {1}}})))[1]['k']", "TT"),
]
PYTREE_INT: list[Production] = [
    (1, _PT + ".tree_structure([{0}, ({0}, 1, None)]).num_leaves", "T"),
    (1, "len(" + _PT + ".tree_flatten_with_path({{'a': [{0}, {1}]}})[0])", "TT"),
]
TENSOR.extend(PYTREE_TENSOR)
INT.extend(PYTREE_INT)

EXTRA = {"T": TENSOR + NUMPY_TENSOR, "V": VECTOR, "S": SCALAR, "I": INT + NUMPY_OTHER["I"],
         "F": FLOAT + NUMPY_OTHER["F"], "B": BOOL + NUMPY_OTHER["B"]}
EXTRA_MAIN = {"T": TENSOR_MAIN, "V": VECTOR_MAIN, "I": INT_MAIN, "B": BOOL_MAIN}
