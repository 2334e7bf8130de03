"""``bytegraph.bytecode.assemble``: building code objects on a template's signature.

Covers ``assemble`` (signature, defaults, keyword-only and variadic arguments,
free variables through COPY_FREE_VARS and LOAD_DEREF/STORE_DEREF, names,
generator flags dropped, arbitrary constants) and the helpers whose
instructions differ between 3.11, 3.12 and 3.13 (``call``, ``push_null``,
``with_null``, ``discard_null``, ``load_attr``, ``load_method``,
``make_function``, ``load_cell``), by running the assembled functions and
comparing with the template or with plain Python.
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

import bytecode as bc
import pytest

from bytegraph.bytecode import compat
from bytegraph.bytecode.assemble import (
    assemble,
    call,
    discard_null,
    load_attr,
    load_cell,
    load_method,
    prologue,
    push_null,
    with_null,
)
from bytegraph.bytecode.assemble import (
    make_function as make_function_instrs,
)
from bytegraph.bytecode.instructions import decode


def make_function(
    template: Callable[..., Any], body: Sequence[bc.Instr | bc.Label], **kwargs: Any
) -> types.FunctionType:
    """A function running ``body`` with ``template``'s defaults, closure and globals."""
    code = assemble(template.__code__, body, **kwargs)
    fn = types.FunctionType(
        code, template.__globals__, code.co_name, template.__defaults__, template.__closure__
    )
    fn.__kwdefaults__ = template.__kwdefaults__
    return fn


def add_one_body() -> list[bc.Instr]:
    return [
        bc.Instr("LOAD_FAST", "x"),
        bc.Instr("LOAD_CONST", 1),
        bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value),
        bc.Instr("RETURN_VALUE"),
    ]


def template_plain(x: int, y: int = 10, *, z: int = 100) -> int:
    return x + 1


def test_tiny_body_against_template() -> None:
    fn = make_function(template_plain, add_one_body())
    for args, kwargs in [((5,), {}), ((5, 1), {}), ((5,), {"z": 2}), ((), {"x": -3})]:
        assert fn(*args, **kwargs) == template_plain(*args, **kwargs)
    assert parameters(fn) == parameters(template_plain)


def parameters(fn: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """Name, kind and default of each parameter (the assembled code has no annotations)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((), {}), ((1, 2, 3), {}), ((1,), {"w": 3}), ((1,), {"x": 1}), ((1,), {"y": 1, "zz": 0})],
)
def test_bad_calls_fail_like_the_template(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    fn = make_function(template_plain, add_one_body())
    with pytest.raises(TypeError) as expected:
        template_plain(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        fn(*args, **kwargs)
    assert str(got.value) == str(expected.value)


def template_all_kinds(a: int, b: int = 2, /, c: int = 3, *args: int, d: int, e: int = 5,
                       **kwargs: int) -> tuple[Any, ...]:
    return (a, b, c, args, d, e, kwargs)


def test_every_parameter_kind_binds_like_the_template() -> None:
    names = ["a", "b", "c", "args", "d", "e", "kwargs"]
    body = [bc.Instr("LOAD_FAST", name) for name in names]
    body += [bc.Instr("BUILD_TUPLE", len(names)), bc.Instr("RETURN_VALUE")]
    fn = make_function(template_all_kinds, body)
    assert fn.__code__.co_varnames[: len(names)] == template_all_kinds.__code__.co_varnames
    assert fn.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) == (
        inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
    )
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {"d": 4}),
        ((1, 20, 30, 40, 50), {"d": 4, "e": 6, "f": 7}),
        ((1,), {"c": 9, "d": 4, "g": 8}),
        ((1,), {"b": 2, "d": 4}),  # b is positional-only, so this b lands in **kwargs
    ]
    for args, kwargs in calls:
        assert fn(*args, **kwargs) == template_all_kinds(*args, **kwargs)
    assert parameters(fn) == parameters(template_all_kinds)
    bad_calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}),  # d missing
        ((), {"a": 1, "d": 4}),  # a is positional-only
        ((1, 2, 3), {"c": 4, "d": 4}),  # c twice
    ]
    for bad_args, bad_kwargs in bad_calls:
        with pytest.raises(TypeError) as expected:
            template_all_kinds(*bad_args, **bad_kwargs)
        with pytest.raises(TypeError) as got:
            fn(*bad_args, **bad_kwargs)
        assert str(got.value) == str(expected.value)


def make_closure_template() -> Callable[[int], int]:
    k = 7

    def template(x: int) -> int:
        return x + k

    return template


def test_free_variables_get_copy_free_vars() -> None:
    template = make_closure_template()
    body = [
        bc.Instr("LOAD_FAST", "x"),
        bc.Instr("LOAD_DEREF", bc.FreeVar("k")),
        bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value),
        bc.Instr("RETURN_VALUE"),
    ]
    fn = make_function(template, body)
    assert fn.__code__.co_freevars == template.__code__.co_freevars == ("k",)
    opnames = [inst.opname for inst in decode(fn.__code__).instructions]
    assert opnames[:2] == ["COPY_FREE_VARS", "RESUME"]
    assert fn(1) == template(1) == 8
    # The function reads the live cell, not a copy taken when it was made.
    assert template.__closure__ is not None
    template.__closure__[0].cell_contents = 9
    assert fn(1) == template(1) == 10


def test_store_deref_writes_the_shared_cell() -> None:
    template = make_closure_template()
    body = [
        bc.Instr("LOAD_FAST", "x"),
        bc.Instr("STORE_DEREF", bc.FreeVar("k")),
        bc.Instr("LOAD_CONST", None),
        bc.Instr("RETURN_VALUE"),
    ]
    fn = make_function(template, body)
    fn(40)
    assert template(2) == 42


def test_no_free_variables_no_copy_free_vars() -> None:
    assert [inst.name for inst in prologue(template_plain.__code__)] == ["RESUME"]
    fn = make_function(template_plain, add_one_body())
    assert decode(fn.__code__).instructions[0].opname == "RESUME"


def test_names_and_location_follow_the_template() -> None:
    code = assemble(template_plain.__code__, add_one_body())
    assert code.co_name == "template_plain"
    assert code.co_qualname == template_plain.__code__.co_qualname
    assert code.co_filename == template_plain.__code__.co_filename
    assert code.co_firstlineno == template_plain.__code__.co_firstlineno
    renamed = assemble(template_plain.__code__, add_one_body(), name="resume_at_12")
    assert (renamed.co_name, renamed.co_qualname) == ("resume_at_12", "resume_at_12")


def template_generator(x: int) -> Any:
    yield x


def test_generator_template_makes_a_plain_function() -> None:
    fn = make_function(template_generator, add_one_body())
    assert not inspect.isgeneratorfunction(fn)
    assert fn(1) == 2


def helper(a: int, b: int = 0) -> tuple[str, int, int]:
    return ("helper", a, b)


def const_call_body(fn: Callable[..., Any], args: Sequence[bc.Instr]) -> list[bc.Instr]:
    """``return fn(*args)`` with ``fn`` held in co_consts."""
    if compat.NULL_BEFORE_CALLABLE:
        load = [*push_null(), bc.Instr("LOAD_CONST", fn)]
    else:
        load = [bc.Instr("LOAD_CONST", fn), *push_null()]
    return [*load, *args, *call(len(args)), bc.Instr("RETURN_VALUE")]


@pytest.mark.parametrize("nargs", [0, 1, 2])
def test_call_a_constant_callable(nargs: int) -> None:
    def template(x: int, y: int) -> None:
        pass

    args = [bc.Instr("LOAD_FAST", name) for name in ("x", "y")[:nargs]]
    if nargs == 0:
        fn = make_function(template, const_call_body(lambda: "no args", []))
        assert fn(1, 2) == "no args"
        return
    fn = make_function(template, const_call_body(helper, args))
    assert fn(3, 4) == helper(*(3, 4)[:nargs])


def test_call_instruction_shape() -> None:
    names = [inst.name for inst in call(2)]
    assert names == (["PRECALL", "CALL"] if compat.HAS_PRECALL else ["CALL"])
    assert all(inst.arg == 2 for inst in call(2))
    assert [inst.name for inst in push_null()] == ["PUSH_NULL"]


def test_any_object_as_a_constant() -> None:
    # Generated code carries graphs and helpers in co_consts, hashable or not.
    payload = {"graph": [1, 2, 3]}
    fn = make_function(template_plain, [bc.Instr("LOAD_CONST", payload), bc.Instr("RETURN_VALUE")])
    assert fn(0) is payload
    assert decode(fn.__code__).instructions[-1].opname == "RETURN_VALUE"


def test_branches_with_labels() -> None:
    # abs(x) with a forward jump: the package resolves labels to offsets.
    negative = bc.Label()
    body: list[bc.Instr | bc.Label] = [
        bc.Instr("LOAD_FAST", "x"),
        bc.Instr("LOAD_CONST", 0),
        bc.Instr("COMPARE_OP", bc.Compare.LT),
        # 3.11's forward jumps have their own opcodes; 3.12+ has one per condition.
        bc.Instr("POP_JUMP_FORWARD_IF_TRUE" if "POP_JUMP_FORWARD_IF_TRUE" in dis.opmap
                 else "POP_JUMP_IF_TRUE", negative),
        bc.Instr("LOAD_FAST", "x"),
        bc.Instr("RETURN_VALUE"),
        negative,
        bc.Instr("LOAD_FAST", "x"),
        bc.Instr("UNARY_NEGATIVE"),
        bc.Instr("RETURN_VALUE"),
    ]
    fn = make_function(template_plain, body)
    assert [fn(v) for v in (-3, 0, 4)] == [abs(v) for v in (-3, 0, 4)]
    decoded = decode(fn.__code__)
    (jump,) = [inst for inst in decoded.instructions if inst.target is not None]
    assert decoded.instructions[jump.target - 1].opname == "RETURN_VALUE"


def test_with_null_puts_the_null_where_this_version_calls_from() -> None:
    load = [bc.Instr("LOAD_CONST", helper)]
    names = [inst.name for inst in with_null(load)]
    null_first = ["PUSH_NULL", "LOAD_CONST"]
    assert names == (null_first if compat.NULL_BEFORE_CALLABLE else null_first[::-1])
    body = [*with_null(load), bc.Instr("LOAD_FAST", "x"), *call(1), bc.Instr("RETURN_VALUE")]
    assert make_function(template_plain, body)(5) == helper(5)


def test_discard_null_leaves_the_stack_as_it_was() -> None:
    # x stays under the NULL; dropping the NULL must leave x on top.
    body = [
        bc.Instr("LOAD_FAST", "x"),
        *push_null(),
        *discard_null(),
        bc.Instr("RETURN_VALUE"),
    ]
    fn = make_function(template_plain, body)
    assert fn(7) == 7


def template_obj(x: Any) -> Any:
    return x


@pytest.mark.parametrize("value", ["abc", 3 + 4j])
def test_load_attr_and_load_method(value: Any) -> None:
    name = "upper" if isinstance(value, str) else "conjugate"
    # ``x.name`` (the bound method itself) and ``x.name()``.
    attr = make_function(
        template_obj, [bc.Instr("LOAD_FAST", "x"), load_attr(name), bc.Instr("RETURN_VALUE")]
    )
    assert attr(value) == getattr(value, name)
    called = make_function(
        template_obj,
        [bc.Instr("LOAD_FAST", "x"), load_method(name), *call(0), bc.Instr("RETURN_VALUE")],
    )
    assert called(value) == getattr(value, name)()
    # 3.12+ has no LOAD_METHOD: LOAD_ATTR's low bit asks for the method form.
    method_form = load_method(name)
    if compat.LOAD_ATTR_METHOD_BIT:
        assert (method_form.name, method_form.arg) == ("LOAD_ATTR", (True, name))
    else:
        assert method_form.name == "LOAD_METHOD"
        assert load_attr(name).name == "LOAD_ATTR"


def make_inner_code() -> types.CodeType:
    """A code object with one free variable ``k`` and a default for ``y``."""
    k = 0

    def inner(y: int = 0) -> tuple[int, int]:
        return (y, k)

    return inner.__code__


def test_make_function_with_defaults_and_closure() -> None:
    # The template's own free variable k becomes the new function's closure.
    template = make_closure_template()
    inner = make_inner_code()
    body = [
        bc.Instr("LOAD_CONST", (5,)),  # 0x01: defaults
        load_cell(bc.FreeVar("k")),
        bc.Instr("BUILD_TUPLE", 1),  # 0x08: closure
        bc.Instr("LOAD_CONST", inner),
        *make_function_instrs(0x01 | 0x08),
        bc.Instr("RETURN_VALUE"),
    ]
    made = make_function(template, body)(0)
    assert isinstance(made, types.FunctionType)
    assert made() == (5, 7) and made(1) == (1, 7)
    # The closure is the template's live cell, not a copy.
    assert template.__closure__ is not None
    template.__closure__[0].cell_contents = 9
    assert made() == (5, 9)
    names = [inst.name for inst in make_function_instrs(0x01 | 0x08)]
    if compat.MAKE_FUNCTION_HAS_FLAGS:
        assert names == ["MAKE_FUNCTION"]
    else:
        assert names == ["MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE", "SET_FUNCTION_ATTRIBUTE"]
