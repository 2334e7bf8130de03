"""User-defined exception classes and sys.exc_info() in traced code: eager vs compiled.

PYTEST_DONT_REWRITE

Each program raises and catches (or returns what it learnt of) an instance of
a user exception class: plain subclasses, custom ``__init__`` (with or
without ``super().__init__``), class attributes read through the instance,
``__str__``/``__repr__`` overrides, methods, properties, multiple
inheritance, ``raise ... from``. ``args`` must follow CPython exactly
(``BaseException.__new__`` keeps the constructor's arguments, BaseException's
``__init__`` resets them). Every program does tensor work and must compile
to the graph count given. Exceptions that leave the frame, or are returned
or stored, are rebuilt and compared with eager's (type, args, attributes,
str, cause and context) without running ``__init__`` twice.
"""

from __future__ import annotations

import sys

import pytest
import torch
from _harness import Corpus, check_program, randn

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3),)


def t3_log() -> tuple:
    return (randn(3), [])


# -- the classes ---


class Plain(ValueError):
    pass


class PlainChild(Plain):
    pass


class Coded(Exception):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


class CodedExplicit(Exception):
    def __init__(self, msg, code=7):
        Exception.__init__(self, msg, "extra")
        self.code = code


class NoSuperInit(Exception):
    def __init__(self, a, b):
        self.total = a + b


class KeywordInit(KeyError):
    def __init__(self, key, *, hint="none"):
        super().__init__(key)
        self.hint = hint


class WithClassAttr(Exception):
    code = 404
    label = "not found"


class OverridesClassAttr(WithClassAttr):
    def __init__(self, msg):
        super().__init__(msg)
        self.code = 500


class WithStr(Exception):
    def __str__(self):
        return "WithStr: " + ",".join(str(a) for a in self.args)


class WithRepr(ValueError):
    def __repr__(self):
        return f"<WithRepr {len(self.args)}>"


class StrFromSuper(KeyError):
    def __str__(self):
        return "[" + super().__str__() + "]"


class WithMethods(Exception):
    scale = 2

    def __init__(self, value):
        super().__init__(value)
        self.value = value

    def doubled(self):
        return self.value * self.scale

    @property
    def describe(self):
        return f"value={self.value}"

    @classmethod
    def make(cls, v):
        return cls(v + 1)

    @staticmethod
    def kind():
        return "methods"


class Base(Exception):
    def __init__(self, msg):
        super().__init__(msg)
        self.base_msg = msg

    def where(self):
        return "base"


class Multi(Base, KeyError):
    pass


class MultiInit(Base, IndexError):
    def __init__(self, msg, n):
        super().__init__(msg)
        self.n = n

    def where(self):
        return "multi/" + super().where()


class Counter:
    made = 0


class SideEffectInit(Exception):
    def __init__(self, log, msg):
        log.append(msg)
        super().__init__(msg, len(log))


class ArgsSetter(Exception):
    def __init__(self, a, b):
        super().__init__(a)
        self.args = (a, b, "set")


class RaisingInit(Exception):
    def __init__(self, x):
        if x < 0:
            raise ValueError("negative")
        super().__init__(x)


# -- plain subclasses ---


@add(t3)
def plain_subclass_caught(x):
    try:
        raise Plain("bad", 3)
    except ValueError as e:
        return x + 1, e.args, str(e), repr(e)


@add(t3)
def plain_child_caught_by_parent(x):
    try:
        raise PlainChild("child")
    except Plain as e:
        return x * 2, type(e).__name__, isinstance(e, ValueError), isinstance(e, PlainChild)


@add(t3)
def plain_type_is(x):
    try:
        raise PlainChild()
    except Exception as e:
        return x - 1, type(e) is PlainChild, type(e) is Plain, e.args


@add(t3)
def plain_raise_class(x):
    try:
        raise Plain
    except Plain as e:
        return x.sin(), e.args, str(e)


@add(t3)
def plain_except_order(x):
    try:
        raise PlainChild("c")
    except KeyError:
        return x
    except Plain as e:
        return x + 5, e.args


# -- custom __init__ ---


@add(t3)
def custom_init_super(x):
    try:
        raise Coded("boom", 3)
    except Coded as e:
        return x + e.code, e.args, str(e), e.code


@add(t3)
def custom_init_explicit_base(x):
    try:
        raise CodedExplicit("boom")
    except Exception as e:
        return x * e.code, e.args, str(e)


@add(t3)
def custom_init_without_super(x):
    try:
        raise NoSuperInit(2, 5)
    except NoSuperInit as e:
        return x + e.total, e.args, str(e)


@add(t3)
def custom_init_keywords(x):
    try:
        raise KeywordInit("k", hint="look")
    except KeyError as e:
        return x + 1, e.args, e.hint, str(e)


@add(t3)
def custom_init_default_keyword(x):
    try:
        raise KeywordInit("missing")
    except KeywordInit as e:
        return x - 2, e.hint, repr(e)


@add(t3)
def custom_init_shape_arg(x):
    try:
        raise Coded("shape", x.shape[0])
    except Coded as e:
        return x.repeat(e.code), e.args


@add(t3_log)
def custom_init_side_effect_once(x, log):
    try:
        raise SideEffectInit(log, "first")
    except SideEffectInit as e:
        return x + len(log), e.args


@add(t3)
def custom_init_sets_args(x):
    try:
        raise ArgsSetter(1, 2)
    except ArgsSetter as e:
        return x + 1, e.args, str(e)


@add(t3)
def args_assigned_later(x):
    e = Coded("a", 1)
    e.args = ("b", 2)
    return x * 3, e.args, str(e)


@add(t3)
def raising_init_caught(x):
    try:
        raise RaisingInit(-1)
    except ValueError as e:
        return x + 1, type(e).__name__, e.args


@add(t3)
def raising_init_ok(x):
    try:
        raise RaisingInit(4)
    except RaisingInit as e:
        return x + e.args[0], e.args


# -- class attributes, methods, properties ---


@add(t3)
def class_attribute_through_instance(x):
    try:
        raise WithClassAttr("nf")
    except WithClassAttr as e:
        return x + e.code, e.label, e.args


@add(t3)
def instance_attribute_shadows_class(x):
    try:
        raise OverridesClassAttr("srv")
    except WithClassAttr as e:
        return x + e.code, e.label, type(e).code


@add(t3)
def getattr_default_on_exception(x):
    try:
        raise Plain("p")
    except Plain as e:
        return x + 1, getattr(e, "code", -1), hasattr(e, "args"), hasattr(e, "nothing")


@add(t3)
def getattr_default_on_user_attr(x):
    try:
        raise WithClassAttr()
    except Exception as e:
        return x + getattr(e, "code", 0), getattr(e, "missing", "dflt")


@add(t3)
def method_on_exception(x):
    try:
        raise WithMethods(3)
    except WithMethods as e:
        return x * e.doubled(), e.describe, e.kind()


@add(t3)
def classmethod_makes_exception(x):
    try:
        raise WithMethods.make(4)
    except WithMethods as e:
        return x + e.value, e.args


@add(t3)
def class_name_of_type(x):
    try:
        raise Multi("m")
    except Exception as e:
        return x + 1, type(e).__name__, e.__class__.__name__, type(e).__qualname__


# -- __str__ and __repr__ ---


@add(t3)
def str_override(x):
    try:
        raise WithStr("a", 2)
    except WithStr as e:
        return x + 1, str(e), repr(e)


@add(t3)
def repr_override(x):
    try:
        raise WithRepr("a", "b")
    except ValueError as e:
        return x + 1, repr(e), str(e)


@add(t3)
def str_calls_super(x):
    try:
        raise StrFromSuper("key")
    except KeyError as e:
        return x + 1, str(e), repr(e)


@add(t3)
def str_in_fstring(x):
    try:
        raise WithStr("f")
    except WithStr as e:
        return x + 1, f"caught {e}!", f"{e!r}"


@add(t3)
def plain_str_in_fstring(x):
    try:
        raise PlainChild("pc", 1)
    except Plain as e:
        return x * 2, f"{e}", f"{e!r}"


@add(t3)
def str_of_custom_init(x):
    try:
        raise Coded("msg", 9)
    except Coded as e:
        return x + 1, str(e), repr(e)


# -- multiple inheritance ---


@add(t3)
def multi_caught_as_keyerror(x):
    try:
        raise Multi("m")
    except KeyError as e:
        return x + 1, e.args, str(e), e.base_msg, e.where()


@add(t3)
def multi_caught_as_base(x):
    try:
        raise Multi("m2")
    except Base as e:
        return x - 1, isinstance(e, KeyError), isinstance(e, LookupError)


@add(t3)
def multi_init_super_chain(x):
    try:
        raise MultiInit("mi", 2)
    except IndexError as e:
        return x * e.n, e.args, e.base_msg, e.where(), str(e)


@add(t3)
def except_tuple_of_user_classes(x):
    out = []
    for cls in (Plain, Multi, Coded):
        try:
            if cls is Coded:
                raise cls("c", 1)
            raise cls("x")
        except (Plain, Multi) as e:
            out.append(type(e).__name__)
        except Coded as e:
            out.append(e.code)
    return x + len(out), out


# -- raise from, context, helpers ---


def fail_with(code):
    raise Coded("helper", code)


@add(t3)
def raise_from_user(x):
    try:
        try:
            {}["k"]
        except KeyError as inner:
            raise Coded("outer", 1) from inner
    except Coded as e:
        return x + 1, type(e.__cause__).__name__, e.__suppress_context__, e.args


@add(t3)
def user_cause_is_user(x):
    try:
        try:
            raise Plain("inner")
        except Plain as inner:
            raise Multi("outer") from inner
    except Multi as e:
        return x + 1, e.__cause__.args, type(e.__context__).__name__


@add(t3)
def implicit_context_user(x):
    try:
        try:
            raise WithClassAttr("first")
        except WithClassAttr:
            raise Coded("second", 2)  # noqa: B904
    except Coded as e:
        return x + 1, e.__context__.code, e.__context__.args


@add(t3)
def raised_in_helper(x):
    try:
        fail_with(x.shape[0])
    except Coded as e:
        return x + e.code, str(e)


@add(t3)
def reraise_user(x):
    try:
        try:
            raise Coded("r", 5)
        except Coded as e:
            e.code += 1
            raise
    except Exception as e:
        return x + e.code, e.args


@add(t3)
def exception_not_raised(x):
    e = Coded("unraised", 2)
    return x + e.code, e.args, str(e), isinstance(e, Exception)


# -- sys.exc_info() ---


@add(t3)
def exc_info_in_handler(x):
    try:
        raise Coded("ei", 3)
    except Coded:
        kind, value, tb = sys.exc_info()
        return x + value.code, kind.__name__, kind is Coded, tb is not None, value.args


@add(t3)
def exc_info_builtin(x):
    try:
        [][1]
    except IndexError:
        info = sys.exc_info()
        return x * 2, info[0] is IndexError, info[1].args, info[2] is None


@add(t3)
def exc_info_after_handler_is_the_callers(x):
    try:
        raise Plain("p")
    except Plain:
        pass
    y = x + 1
    info = sys.exc_info()  # the caller's: none (guarded: a caller's handler recompiles)
    return y * 2, info == (None, None, None)


@add(t3)
def exc_info_nested_handlers(x):
    seen = []
    try:
        raise KeyError("outer")
    except KeyError:
        try:
            raise Plain("inner")
        except Plain:
            seen.append(sys.exc_info()[0].__name__)
        seen.append(sys.exc_info()[1].args)
    return x + len(seen), seen


def handler_helper():
    return sys.exc_info()[1]


@add(t3)
def exc_info_in_callee(x):
    try:
        raise WithClassAttr("cal")
    except WithClassAttr:
        e = handler_helper()
        return x + e.code, e.args


@add(t3)
def exc_info_in_finally(x):
    out = []
    try:
        try:
            raise Coded("fin", 1)
        finally:
            out.append(sys.exc_info()[0].__name__)
    except Coded:
        pass
    return x + 1, out


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_user_exception_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_corpus_size() -> None:
    assert len(corpus) >= 40


# -- exceptions that leave the frame, or are returned ---


def escapes_coded(x, log):
    log.append(x * 2)
    raise Coded("escaped", x.shape[0])


def escapes_side_effect_init(x, log):
    y = x + 1
    log.append(y)
    raise SideEffectInit(log, "once")


def escapes_no_super(x, log):
    log.append(x.sum())
    raise NoSuperInit(1, 2)


def escapes_multi_from(x, log):
    try:
        raise Plain("inner", 1)
    except Plain as inner:
        log.append(x.cos())
        raise MultiInit("outer", 3) from inner


def escapes_args_setter(x, log):
    log.append(x - 1)
    raise ArgsSetter("a", "b")


def escapes_with_context_user(x, log):
    try:
        raise WithClassAttr("first")
    except WithClassAttr:
        log.append(x.abs())
        raise KeywordInit("second", hint="h")  # noqa: B904


def escapes_attribute_set_later(x, log):
    e = WithMethods(2)
    e.value = 10
    e.extra = "more"
    log.append(x + e.value)
    raise e


def escapes_str_override(x, log):
    log.append(x.exp())
    raise WithStr("s", 1)


ESCAPING = [
    escapes_coded, escapes_side_effect_init, escapes_no_super, escapes_multi_from,
    escapes_args_setter, escapes_with_context_user, escapes_attribute_set_later,
    escapes_str_override,
]


def _raise_of(fn, x, log):
    with pytest.raises(BaseException) as info:
        fn(x, log)
    return info.value


def _same_exception(got, want, depth=0):
    assert type(got) is type(want)
    assert got.args == want.args and str(got) == str(want) and repr(got) == repr(want)
    assert vars(got) == vars(want)
    assert got.__suppress_context__ == want.__suppress_context__
    for link in ("__cause__", "__context__"):
        g, w = getattr(got, link), getattr(want, link)
        assert (g is None) == (w is None), link
        if w is not None and depth < 3:
            _same_exception(g, w, depth + 1)


def _same_log(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert torch.equal(g, w) if isinstance(w, torch.Tensor) else g == w


@pytest.mark.parametrize("fn", ESCAPING, ids=lambda f: f.__name__)
def test_escaping_user_exception_matches_eager(fn, differential, counting_backend) -> None:
    eager_log, compiled_log = [], []
    want = _raise_of(fn, torch.ones(3), eager_log)
    compiled = differential.compile(fn)
    got = _raise_of(compiled, torch.ones(3), compiled_log)
    _same_exception(got, want)
    _same_log(compiled_log, eager_log)
    assert counting_backend.calls == 1, "the work before the raise is one graph, no break"
    full = differential.compile(fn, backend="eager", fullgraph=True)
    _same_exception(_raise_of(full, torch.ones(3), []), want)


def returns_caught(x, log):
    try:
        raise SideEffectInit(log, "ret")
    except SideEffectInit as e:
        return x + 1, e


def returns_unraised(x, log):
    e = Coded("plain", 4)
    e.note = "n"
    return x * 2, e


def stores_caught(x, log):
    try:
        raise MultiInit("stored", 2)
    except MultiInit as e:
        log.append(e)
    return x - 1, None


def returns_args_reset(x, log):
    e = CodedExplicit("explicit", 3)
    e.args = ("reset",)
    return x + 3, e


@pytest.mark.parametrize(
    "fn", [returns_caught, returns_unraised, stores_caught, returns_args_reset],
    ids=lambda f: f.__name__,
)
def test_rebuilt_user_exception_matches_eager(fn, differential, counting_backend) -> None:
    eager_log, compiled_log = [], []
    want_out, want = fn(torch.ones(3), eager_log)
    got_out, got = differential.compile(fn)(torch.ones(3), compiled_log)
    assert torch.equal(got_out, want_out)
    if want is None:
        want, got = eager_log.pop(), compiled_log.pop()
    _same_exception(got, want)
    _same_log(compiled_log, eager_log)
    assert counting_backend.calls == 1


def test_class_attribute_change_recompiles(differential, counting_backend) -> None:
    def reads_code(x):
        try:
            raise WithClassAttr("g")
        except WithClassAttr as e:
            return x + e.code

    compiled = differential.compile(reads_code)
    assert torch.equal(compiled(torch.ones(2)), reads_code(torch.ones(2)))
    WithClassAttr.code = 7
    try:
        assert torch.equal(compiled(torch.ones(2)), torch.ones(2) + 7)
    finally:
        WithClassAttr.code = 404
    assert counting_backend.calls == 2


def test_str_added_later_recompiles(differential) -> None:
    class Later(Exception):
        pass

    def text(x):
        try:
            raise Later("l")
        except Later as e:
            return x + 1, str(e)

    compiled = differential.compile(text)
    assert compiled(torch.ones(2))[1] == "l"
    Later.__str__ = lambda self: "added"
    assert compiled(torch.ones(2))[1] == "added"


def test_exc_info_of_the_callers_exception_is_a_break(differential, counting_backend) -> None:
    def reads(x):
        y = x + 1
        return y, sys.exc_info()[0]

    compiled = differential.compile(reads)
    try:
        raise KeyError("caller")
    except KeyError:
        out, kind = compiled(torch.ones(2))
    assert kind is KeyError and torch.equal(out, torch.ones(2) + 1)
    out, kind = compiled(torch.ones(2))
    assert kind is None
