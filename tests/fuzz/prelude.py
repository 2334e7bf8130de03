"""The optional part of the prelude: classes and helpers a program may name.

Each snippet is the kind of thing real model code keeps next to its
``forward``: a class with properties and dunders, a small inheritance tree,
``__slots__``, dataclasses, namedtuples, enums, user exceptions (one with
attributes), helpers that raise through several frames, decorators written
with ``functools.wraps``, generators (sent to, thrown into, closed, raising,
delegating, breaking the graph), ``contextlib`` managers and a user
``__exit__`` that swallows some errors, and a bounded recursion.
``tree.render_program`` keeps a snippet (and the snippets it needs, listed in
``NEEDS``) only when the program names it, so reproducers stay short.

Everything here is deterministic: no ``id()``, no sets of objects hashed by
identity, no random draws; ``Key`` hashes by value.
"""

from __future__ import annotations

STATS = '''
class Stats:
    count = 0

    def __init__(self, t):
        self.t = t
        Stats.count += 1

    @property
    def total(self):
        return self.t.sum()

    def __call__(self, z):
        return z * self.t.mean()

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, i):
        return self.t[i]

    def __iter__(self):
        return iter(self.t.unbind(0))

    def __contains__(self, v):
        return 0 <= v < len(self)

    @staticmethod
    def twice(z):
        return z * 2

    @classmethod
    def make(cls, t):
        return cls(t + 0)
'''

BASE = '''
class Base:
    def __init__(self, a):
        self.a = a

    def apply(self, z):
        return z + self.a

    def name(self):
        return 'base'
'''

CHILD = '''
class Child(Base):
    def __init__(self, a, b):
        super().__init__(a)
        self.b = b

    def apply(self, z):
        return super().apply(z) * self.b

    def name(self):
        return 'child:' + super().name()
'''

SLOTTED = '''
class Slotted:
    __slots__ = ('a', 'b')

    def __init__(self, a, b):
        self.a = a
        self.b = b
'''

KEY = '''
class Key:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Key) and self.v == other.v

    def __hash__(self):
        return hash(self.v)
'''

CONFIG = '''
@dataclasses.dataclass
class Config:
    scale: float = 1.0
    tags: list = dataclasses.field(default_factory=list)
'''

POINT = '''
Point = collections.namedtuple('Point', ['a', 'b'])
'''

MODE = '''
class Mode(enum.Enum):
    ADD = 1
    MUL = 2
'''

ERRORS = '''
class FuzzError(Exception):
    pass


class SubError(FuzzError):
    pass
'''

TRACED = '''
def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        GL.append(fn.__name__)
        return fn(*args, **kwargs)
    return wrapper
'''

SCALED = '''
def scaled(factor):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) * factor
        return wrapper
    return deco
'''

STAR_SUM = '''
def star_sum(*ts, scale=1, **extra):
    out = ts[0]
    for t in ts[1:]:
        out = out + t
    return out * scale + len(extra)
'''

AFFINE = '''
def affine(z, scale=2.0, *, shift=0.5):
    return z * scale + shift
'''

GEN_ROWS = '''
def gen_rows(t):
    for i in range(t.shape[0]):
        yield t[i]
'''

GEN_MORE = '''
def gen_more(t, k):
    yield from gen_rows(t)
    yield t.sum(0) * k
'''

GEN_LOG = '''
def gen_log(t, n):
    for i in range(n):
        GL.append(i)
        yield t * i
'''

DD_TALLY = '''
def dd_tally(t, keys):
    made = []

    def factory():
        made.append(len(made))
        return t * 0

    d = collections.defaultdict(factory)
    for k in keys:
        d[k] = d[k] + k
    GL.append(len(made))
    return d
'''

REC = '''
def rec(t, d):
    if d <= 0:
        return t
    return rec(t * 0.5, d - 1) + 1
'''

MAKE_COUNTER = '''
def make_counter():
    count = 0

    def bump(step=1):
        nonlocal count
        count += step
        return count
    return bump
'''

CODED = '''
class CodedError(FuzzError):
    def __init__(self, code, note='bad'):
        super().__init__(code, note)
        self.code = code
        self.note = note
'''

RAISERS = '''
def must_small(v, limit=3):
    if v > limit:
        raise CodedError(v, 'big')
    return v


def via_two(v, limit=3):
    return must_small(v, limit) + 1


def via_three(t, v):
    try:
        return t * via_two(v)
    finally:
        GL.append('via_three')


def lookup(table, key):
    try:
        return table[key]
    except KeyError as e:
        raise LookupError('no ' + str(key)) from e
'''

GENERATORS = '''
def gen_acc(t, k):
    total = 0
    try:
        while True:
            got = yield t * total
            total += 1 if got is None else got
            if total > k + 3:
                return total
    finally:
        GL.append(('gen_acc', total))


def gen_guard(t, n):
    for i in range(n):
        try:
            yield t * i
        except ValueError as e:
            GL.append(str(e))
            yield t - i


def gen_raise(t, k):
    yield t
    if k % 2:
        raise CodedError(k)
    yield t * 2


def gen_stop(t, k):
    yield t
    if k > 1:
        next(iter([]))
    yield t + k


def gen_delegate(t, k):
    got = yield from gen_acc(t, k)
    yield t * (got or 0)


def gen_break(t):
    yield t
    bytegraph.graph_break()
    yield t + 1
'''

MANAGERS = '''
@contextlib.contextmanager
def logged(tag):
    GL.append(('enter', tag))
    try:
        yield tag
    finally:
        GL.append(('exit', tag))


@contextlib.contextmanager
def converted():
    try:
        yield
    except KeyError as e:
        raise CodedError(1, 'converted') from e


@contextlib.contextmanager
def swallowing(*kinds):
    try:
        yield len(kinds)
    except kinds as e:
        GL.append(type(e).__name__)


class Guard:
    def __init__(self, *kinds):
        self.kinds = kinds

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            return False
        GL.append(kind.__name__)
        return issubclass(kind, self.kinds)
'''

SCALER = '''
class Scaler(torch.nn.Module):
    def __init__(self, k, act=None):
        super().__init__()
        self.k = k
        self.act = act if act is not None else torch.nn.Tanh()
        self.register_buffer('offset', torch.full((1,), 0.5))

    def forward(self, t):
        return self.act(t) * self.k + self.offset
'''

PROTOCOLS = '''
class OddBool:
    def __init__(self, r):
        self.r = r

    def __bool__(self):
        return self.r


class OddLen:
    def __init__(self, r):
        self.r = r

    def __len__(self):
        return self.r


class OddIter:
    def __init__(self, r):
        self.r = r

    def __iter__(self):
        return self.r


class OddIn:
    def __init__(self, r):
        self.r = r

    def __contains__(self, item):
        return self.r


class OddIndex:
    def __init__(self, r):
        self.r = r

    def __index__(self):
        return self.r


class OddHash:
    def __init__(self, r):
        self.r = r

    def __hash__(self):
        return self.r


def outcome(fn, *args):
    try:
        return fn(*args)
    except (TypeError, ValueError, OverflowError, IndexError) as e:
        return type(e).__name__ + ': ' + str(e)
'''

ITERATORS = '''
TICKS = itertools.count(0, 3)
LETTERS = itertools.cycle('abc')
'''

HASHED = '''
class Hashed:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Hashed) and self.v == other.v

    def __hash__(self):
        GL.append(('hash', self.v))
        return hash(self.v)

    def __repr__(self):  # a KeyError's message shows it: the same on both sides
        return 'Hashed(%r)' % (self.v,)
'''

SNIPPETS: dict[str, str] = {
    "Stats": STATS, "Base": BASE, "Child": CHILD, "Slotted": SLOTTED, "Key": KEY,
    "Config": CONFIG, "Point": POINT, "Mode": MODE, "FuzzError": ERRORS, "SubError": ERRORS,
    "traced": TRACED, "scaled": SCALED, "star_sum": STAR_SUM, "affine": AFFINE,
    "gen_rows": GEN_ROWS, "gen_more": GEN_MORE, "gen_log": GEN_LOG, "dd_tally": DD_TALLY,
    "rec": REC, "make_counter": MAKE_COUNTER,
    "CodedError": CODED, "must_small": RAISERS, "via_two": RAISERS, "via_three": RAISERS,
    "lookup": RAISERS, "gen_acc": GENERATORS, "gen_guard": GENERATORS, "gen_raise": GENERATORS,
    "gen_stop": GENERATORS, "gen_delegate": GENERATORS, "gen_break": GENERATORS,
    "logged": MANAGERS, "converted": MANAGERS, "swallowing": MANAGERS, "Guard": MANAGERS,
    "Scaler": SCALER,
    "OddBool": PROTOCOLS, "OddLen": PROTOCOLS, "OddIter": PROTOCOLS, "OddIn": PROTOCOLS,
    "outcome": PROTOCOLS, "OddIndex": PROTOCOLS, "OddHash": PROTOCOLS, "Hashed": HASHED,
    "TICKS": ITERATORS, "LETTERS": ITERATORS,
}
"""Name a program may use -> the snippet that defines it."""

NEEDS: dict[str, tuple[str, ...]] = {
    "Child": ("Base",), "gen_more": ("gen_rows",), "CodedError": ("FuzzError",),
    **{name: ("CodedError",) for name in ("must_small", "via_two", "via_three", "lookup")},
    **{name: ("CodedError",) for name in ("gen_raise", "converted")},
}
"""Snippets another snippet needs."""
