"""Compile a cache entry's guards into one generated Python function.

The guard function has the compiled function's own signature, so calling it
with the user's ``*args, **kwargs`` binds them exactly as the real call will;
its body is one boolean expression. Values it compares against are bound as
closure constants. Why a guard failed is worked out only on demand
(``first_failure``), never on the fast path. The function that runs on every call
(the fast form) writes some checks in cheaper equivalent expressions
(``cheaper_forms.py``) and reads each source once (``shared_reads.py``); reports
print the plain form.

Building is part of every trace (a model's guard has thousands of conditions), so
a guard's conditions are written once per kind and expected value as templates
that the reads are put into, and the fast form's body is the conditions joined
by ``and`` without parentheses: compile() parses them a quarter faster.
"""

from __future__ import annotations

import ast
import builtins
import io
import math
import re
import tokenize
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from bytegraph.dropped_values import closes_quietly
from bytegraph.guards import cheaper_forms, subtrees
from bytegraph.guards.class_shapes import per_instance_class, shape_checks
from bytegraph.guards.compiled_text import compiled
from bytegraph.guards.guard import Guard, GuardKind, TensorSnapshot
from bytegraph.guards.shared_reads import READ, SharedReads, Templates, read_marker
from bytegraph.guards.sources import (
    KEPT_CONSTANTS,
    ClosureCellSource,
    ModuleGlobalSource,
    Source,
    local_name,
)

_SINGLETONS = (None, True, False, Ellipsis)
_TWO_SOURCES = (GuardKind.SAME_OBJECT, GuardKind.DISTINCT)
_BY_EXPECTED_OBJECT = (  # a tuple, tested by identity: an enum member hashes in Python
    GuardKind.TYPE_MATCH, GuardKind.ID_MATCH, GuardKind.EMPTY, GuardKind.KEY_ABSENT,
    GuardKind.CONSTANT_MATCH, GuardKind.CLOSES_QUIETLY, GuardKind.SUBTREE,
)


class GuardFunctionBuilder:
    """Turns guards into expression text, collecting the constants they use."""

    def __init__(self, share_reads: bool = False) -> None:
        self.constants: list[Any] = []
        self.literals: list[tuple[int, ...]] = []  # the fast form's ``___t<i>``: sizes
        self._literal_names: dict[tuple[int, ...], str] = {}
        self.parts: list[str] = []
        # With share_reads, each source is read once per call (shared_reads.py): reading
        # ``self.layers`` through nn.Module.__getattr__ costs ~0.3 us a time.
        self.share_reads = share_reads
        self._distinct: list[tuple[Source, ...]] = []
        self._subtrees: dict[Any, list[Source]] = {}  # a subtree helper -> its roots
        self._per_instance: list[Guard] = []  # on classes made per instance (class_shapes.py)
        self._const_names: dict[int, str] = {}
        self._seen: set[str] = set()  # plain text of every part emitted so far
        # The fast form (share_reads) also takes the cheaper equivalent expressions of
        # cheaper_forms.py; the plain form keeps the readable ones for reports.
        self.fast = share_reads
        self._types: dict[Source, Any] = {}  # sources whose exact type is checked by now
        self._cached_templates: dict[tuple[Any, ...], Templates] = {}
        self._reads = SharedReads(self._types, self.const)

    def ref(self, source: Source) -> str:
        """The text that reads ``source`` at this point of the guard expression."""
        return self._reads.ref(source) if self.share_reads else source.expr()

    def const(self, value: Any) -> str:
        name = self._const_names.get(id(value))
        if name is None:  # one name per object, so equal guards read as equal text
            self.constants.append(value)
            name = self._const_names[id(value)] = f"___c{len(self.constants) - 1}"
        return name

    def add(self, guard: Guard) -> None:
        kind = guard.kind
        if kind is GuardKind.TYPE_MATCH or kind is GuardKind.ID_MATCH:
            if per_instance_class(guard) is not None:
                self._per_instance.append(guard)
                return
            if kind is GuardKind.TYPE_MATCH:
                self._types.setdefault(guard.source, guard.expected)
            elif self.fast and cheaper_forms.implied_class_check(guard, self._types):
                return
        elif kind is GuardKind.DISTINCT and self.share_reads:
            # Pairwise ``is not`` checks grow with the square of the objects of one
            # type (every module of a model); one set of ids per group grows linearly.
            self._distinct.append((guard.source, *guard.expected))
            return
        elif kind is GuardKind.SUBTREE and self.share_reads:
            # One call of a helper checks all of its roots (a loop in the helper costs a
            # tenth of a call per root).
            self._subtrees.setdefault(guard.expected, []).append(guard.source)
            return
        if kind in _TWO_SOURCES:
            self._add_rendered(guard)
            return
        templates = self._templates(guard)
        plain = guard.source.expr()
        keys = [t.replace(READ, plain) for t in templates.texts]  # what makes two the same
        if self._seen.issuperset(keys):
            return  # every check of this guard is already made (e.g. type(x) twice)
        self._seen.update(keys)
        if not self.share_reads:
            self.parts.extend(keys)
        elif kind is GuardKind.SHAPE:  # the ShapeEnv's text may hold ``or``
            self.parts.extend(f"({key})" for key in keys)
        else:  # rendered only when kept: rendering is where a source's first read is placed
            self.parts.extend(self._reads.place(templates, guard.source, plain, keys))

    def _add_rendered(self, guard: Guard) -> None:
        """``add`` for a guard that reads a second source (``x is y``, ``x is not y``)."""
        share, self.share_reads = self.share_reads, False
        keys = self._expressions(guard, lambda: self.ref(guard.source))
        self.share_reads = share
        if self._seen.issuperset(keys):
            return
        self._seen.update(keys)
        if share:
            keys = self._expressions(guard, lambda: self.ref(guard.source))
        self.parts.extend(keys)

    def _templates(self, guard: Guard) -> Templates:
        """The guard's expressions with ``READ`` where they read its source, made once per
        kind and expected value: a model's modules share their few (``not m._forward_hooks``,
        ``type(m) is Linear``), its parameters their snapshots."""
        kind, expected = guard.kind, guard.expected
        if kind is GuardKind.TENSOR_MATCH:  # equal snapshots; classes compared by identity
            key: tuple[Any, ...] = (expected, id(expected.tensor_type), id(expected.dtype))
        elif kind in _BY_EXPECTED_OBJECT:  # the text depends on that object alone
            key = (id(kind), id(expected))
        else:
            return Templates.of(self._expressions(guard, read_marker))
        templates = self._cached_templates.get(key)
        if templates is None:
            templates = Templates.of(self._expressions(guard, read_marker))
            self._cached_templates[key] = templates
        return templates

    def body(self) -> str:
        """The parts joined with ``and``. Each part is a comparison, a ``not``, a call or an
        attribute (those that are not, the ShapeEnv's, come parenthesized), so joined as
        they are they mean what they mean alone: parentheses around ~1,500 parts cost
        compile() a quarter of its time."""
        return self.resolved(" and ".join(self.parts) or "True")

    def resolved(self, text: str) -> str:
        """``text`` (parts of the fast form) with its reads stored where read again."""
        return self._reads.resolved(text) if self.share_reads else text

    def finish(self) -> None:
        """Emit the grouped checks that ``add`` deferred."""
        for helper, roots in self._subtrees.items():
            self.parts.append(f"{self.const(helper)}({', '.join(map(self.ref, roots))})")
        for group in _connected(self._distinct):
            by_identity = cheaper_forms.hashed_by_identity(self._types.get(s) for s in group)
            reads = (self.ref(s) if by_identity else f"id({self.ref(s)})" for s in group)
            self.parts.append(f"len({{{', '.join(reads)}}}) == {len(group)}")
        self.parts.extend(shape_checks(self._per_instance, self.ref, self.const))

    def _expressions(self, guard: Guard, e: Callable[[], str]) -> list[str]:
        """The guard's expressions; ``e()`` is the text that reads its source, called once
        per use (only the first use may store the read). Each must join with ``and`` as it
        stands (``body``): a comparison, a ``not``, a call or an attribute; anything of
        lower precedence (``or``, ``if``, ``lambda``) goes in parentheses."""
        kind, expected = guard.kind, guard.expected
        if kind is GuardKind.TENSOR_MATCH:
            return self._tensor(e, expected)
        if kind is GuardKind.CONSTANT_MATCH:
            if any(expected is s for s in _SINGLETONS):
                return [f"{e()} is {expected!r}"]
            return [f"type({e()}) is {self.const(type(expected))}", self._equal(e(), expected)]
        if kind is GuardKind.ID_MATCH:
            return [f"{e()} is {self.const(expected)}"]
        if kind is GuardKind.TYPE_MATCH:
            return [f"type({e()}) is {self.const(expected)}"]
        if kind is GuardKind.LEN_MATCH:
            cls, length = expected
            return [f"type({e()}) is {self.const(cls)}", f"len({e()}) == {length}"]
        if kind is GuardKind.DICT_KEYS:
            cls, keys = expected
            return [f"type({e()}) is {self.const(cls)}", f"tuple({e()}) == {self.const(keys)}"]
        if kind is GuardKind.SAME_OBJECT:
            return [f"{e()} is {self.ref(expected)}"]
        if kind is GuardKind.DISTINCT:
            return [f"{e()} is not {self.ref(other)}" for other in expected]
        if kind is GuardKind.EMPTY:
            return [f"not {e() if expected is None else self.const(expected)}"]
        if kind is GuardKind.KEY_ABSENT:
            return [f"{self.const(expected)} not in {e()}"]
        if kind is GuardKind.SHAPE:
            return [_bind_modules(expected, self.const)]
        if kind is GuardKind.CLOSES_QUIETLY:
            return [f"{self.const(closes_quietly)}({e()})"]
        if kind is GuardKind.SUBTREE:
            return [f"{self.const(expected)}({e()})"]
        if kind is GuardKind.GLOBAL_ABSENT:
            source = guard.source
            module_dict = "___G"
            if isinstance(source, ModuleGlobalSource):
                module_dict = source.dict_expr(self.const if self.share_reads else None)
            return [f"{source.name!r} not in {module_dict}"]
        raise ValueError(f"unknown guard kind {kind}")

    def _equal(self, e: str, expected: Any) -> str:
        """``e == expected``, or by bits where == cannot tell values apart.

        ``nan == nan`` is False (a NaN argument would recompile on every call)
        and ``0.0 == -0.0`` is True (a graph traced with 0.0 would compute
        ``x * 0.0`` where the program now computes ``x * -0.0``).
        """
        if _float_bits(expected) is not None:
            return f"{self.const(_float_bits)}({e}) == {self.const(_float_bits(expected))}"
        return f"{e} == {self.const(expected)}"

    def _tensor(self, e: Callable[[], str], snap: TensorSnapshot) -> list[str]:
        # Built in evaluation order: the first use of ``e`` is the one that reads it.
        # Both forms name the same constants in the same order (first_failure evaluates
        # the plain parts with the fast form's): the device is named even where unused.
        tensor_type, dtype, device = map(self.const, (snap.tensor_type, snap.dtype, snap.device))
        layout_checked = _like_another_layout(snap.stride)
        parts = [
            f"type({e()}) is {tensor_type}",
            f"{e()}.dtype is {dtype}",
            self.fast and cheaper_forms.device_check(e(), snap) or f"{e()}.device == {device}",
            *self._sizes(e, snap, self.fast and layout_checked),
            self._flag(e(), "requires_grad", snap),
        ]
        # Leafness decides whether in-place ops are legal and what x.is_leaf folds to;
        # a tensor that does not require grad is always a leaf, so only then is it checked.
        if snap.requires_grad:
            parts.append(self._flag(e(), "is_leaf", snap))
        if layout_checked:
            parts.append(f"{e()}.layout is {self.const(torch.strided)}")
        return parts

    def _flag(self, read: str, flag: str, snap: TensorSnapshot) -> str:
        """``read.flag is <the snapshot's bool>``, in the fast form's cheaper way if any."""
        value = getattr(snap, flag)
        return self.fast and cheaper_forms.flag_check(read, flag, value, snap) or (
            f"{read}.{flag} is {value!r}"
        )

    def _sizes(self, e: Callable[[], str], snap: TensorSnapshot, cheap_strides: bool) -> list[str]:
        """Exact shape and strides; with symbolic sizes or strides, the static ones (the
        symbolic ones' relations are SHAPE guards: ``x.stride()[0] == x.size()[1]``)."""
        if not snap.dynamic and not snap.dynamic_strides:
            shape = f"{e()}.shape == {self._sizes_literal(snap.shape)}"
            strides = cheap_strides and cheaper_forms.contiguity_check(e(), snap)
            return [shape, strides or f"{e()}.stride() == {self._sizes_literal(snap.stride)}"]
        parts = [f"{e()}.dim() == {len(snap.shape)}"] if snap.dynamic else []
        parts += _known(lambda: f"{e()}.shape", snap.shape, snap.dynamic)
        parts += _known(lambda: f"{e()}.stride()", snap.stride, snap.dynamic_strides)
        return parts

    def _sizes_literal(self, sizes: tuple[int, ...]) -> str:
        """``(16, 16)``, or in the fast form a name bound to it: compile() parses a name
        faster than a tuple display (8 % of a model's guard), and reads it as fast."""
        if not self.fast:
            return repr(sizes)
        name = self._literal_names.get(sizes)
        if name is None:
            name = self._literal_names[sizes] = f"___t{len(self.literals)}"
            self.literals.append(sizes)
        return name

    def add_global_state(self, default_device: bool = False) -> None:
        """Grad mode and default dtype (and the default device, if a factory used it)."""
        self.parts.append(f"{self.const(torch.is_grad_enabled)}() is {torch.is_grad_enabled()!r}")
        self.parts.append(
            f"{self.const(torch.get_default_dtype)}() is {self.const(torch.get_default_dtype())}"
        )
        if default_device:
            device = torch.get_default_device()
            self.parts.append(f"{self.const(torch.get_default_device)}() == {self.const(device)}")
        # A graph traced without a TorchFunctionMode never runs under one (it would see
        # the ops twice, or under Inductor not at all); a frame entered under one runs as
        # Python (variables/function_modes.py).
        modes = self.const(user_modes_on_stack)
        if user_modes_on_stack():
            self.parts.append(f"{modes}()")
        else:
            length = self.const(torch._C._len_torch_function_stack)
            self.parts.append(f"({length}() == 0 or not {modes}())")


def user_modes_on_stack() -> bool:
    """Whether torch's mode stack holds a TorchFunctionMode other than a DeviceContext
    (``torch.set_default_device``, whose device has a guard of its own)."""
    if torch._C._len_torch_function_stack() == 0:
        return False
    from torch.utils._device import DeviceContext

    stack = torch.overrides._get_current_function_mode_stack()
    return any(not isinstance(mode, DeviceContext) for mode in stack)


class GuardFunction:
    """The compiled check of one cache entry, plus its readable form."""

    def __init__(
        self,
        check: Callable[..., bool],
        guards: Sequence[Guard],
        default_device: bool,
        fn: types.FunctionType,
    ) -> None:
        self.check = check
        self._guards = guards
        self._default_device = default_device
        self._fn = fn
        self._plain: GuardFunctionBuilder | None = None
        self._plain_maker: Callable[[str, str | None], Callable[..., Any]] | None = None
        self._first_failure: Callable[..., int] | None = None

    @property
    def parts(self) -> list[str]:
        """One self-contained expression per condition, in the order they are checked."""
        return self._plain_form().parts

    @property
    def constants(self) -> list[Any]:
        """The values ``___c<i>`` names in ``parts``."""
        return self._plain_form().constants

    def _make(self, body: str, on_error: str | None) -> Callable[..., Any]:
        """A function of the frame's signature running ``body``, over the plain form's
        constants."""
        if self._plain_maker is None:
            self._plain_maker = _maker(self._fn, self.constants)
        return self._plain_maker(body, on_error)

    def _plain_form(self) -> GuardFunctionBuilder:
        # Built on demand: only reports and the diagnosis of a failed guard read it.
        if self._plain is None:
            self._plain = _built(GuardFunctionBuilder(), self._guards, self._default_device)
        return self._plain

    def first_failure(self, args: tuple, kwargs: dict) -> str | None:
        """The text of the first guard that fails for this call, or None."""
        if self._first_failure is None:
            lines = [
                f"    ___i = {i}\n    if not ({p}): return ___i" for i, p in enumerate(self.parts)
            ]
            self._first_failure = self._make("\n".join(lines) + "\n    return -1", "___i")
        index = self._first_failure(*args, **kwargs)
        return None if index < 0 else self.describe(self.parts[index])

    def failing_value(self, part: str, args: tuple, kwargs: dict) -> str:
        """The value the left side of a failed guard had on this call, as text."""
        tree = ast.parse(part, mode="eval").body
        subject = tree.left if isinstance(tree, ast.Compare) else tree
        probe = self._make(f"    return {ast.unparse(subject)}", None)
        try:
            return repr(probe(*args, **kwargs))
        except Exception as e:  # the expression itself raised: say how
            return f"<{type(e).__name__}: {e}>"

    def explain_failure(self, args: tuple, kwargs: dict) -> str | None:
        """``guard  (value: v)`` for the first guard this call fails, or None."""
        if self._first_failure is None:
            self.first_failure(args, kwargs)
        index = self._first_failure(*args, **kwargs)
        if index < 0:
            return None
        part = self.parts[index]
        return f"{self.describe(part)}  (value: {self.failing_value(part, args, kwargs)})"

    def describe(self, part: str) -> str:
        """A guard expression with its constants and frame names written out."""
        text = re.sub(r"___c(\d+)", lambda m: _readable(self.constants[int(m.group(1))]), part)
        text = re.sub(r"___K\[(\d+)\]", lambda m: _readable(KEPT_CONSTANTS[int(m.group(1))]), text)
        text = text.replace("___G[", "globals()[").replace("___B[", "builtins[")
        return re.sub(r"___cell_(\w+)", r"<cell \1>", text)

    def __str__(self) -> str:
        return "\n".join(self.describe(p) for p in self.parts)


def _known(read: Callable[[], str], values: tuple[int, ...], symbolic: frozenset[int]) -> list[str]:
    """``read`` compared where it is not symbolic, one comparison per run of static items
    (``x.stride()[1:] == (8, 1)``): ``x.stride(1)`` costs a call each, a slice does not."""
    parts, start = [], 0
    while start < len(values):
        stop = start
        while stop < len(values) and stop not in symbolic:
            stop += 1
        if stop - start == len(values):
            parts.append(f"{read()} == {values!r}")
        elif stop - start == 1:
            parts.append(f"{read()}[{start}] == {values[start]}")
        elif stop > start:
            end = "" if stop == len(values) else stop
            parts.append(f"{read()}[{start}:{end}] == {values[start:stop]!r}")
        start = stop + 1
    return parts


_SHAPE_MODULES = {"torch": torch, "math": math}


def _printed_function(module: str, attr: str) -> Any:
    """What ``module.attr`` names in the ShapeEnv's printed code, or None: torch's
    ``sym_*`` helpers and the math module's names (a frame value called ``torch`` or
    ``math``, ``torch.size()[0]``, is left alone)."""
    if module == "torch" and not attr.lstrip("_").startswith("sym_"):
        return None
    return getattr(_SHAPE_MODULES[module], attr, None)


def _bind_modules(text: str, const: Callable[[Any], str]) -> str:
    """The ShapeEnv's guard code with ``torch.sym_float``, ``math.floor``... bound as
    constants: the guard function has no ``torch`` or ``math`` of its own, and a
    NameError there failed the guard on every call (an identical call recompiled)."""
    if "\n" in text:  # one line, so columns are offsets; else left as it is (it fails)
        return text
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    spans: list[tuple[int, int, str]] = []
    for i, tok in enumerate(tokens[:-2]):
        dot, attr = tokens[i + 1], tokens[i + 2]
        after_dot = i > 0 and tokens[i - 1].string == "."
        if tok.type == tokenize.NAME and tok.string in _SHAPE_MODULES and not after_dot and (
            dot.string == "." and attr.type == tokenize.NAME
        ):
            value = _printed_function(tok.string, attr.string)
            if value is not None:
                spans.append((tok.start[1], attr.end[1], const(value)))
    for start, end, name in reversed(spans):
        text = text[:start] + name + text[end:]
    return text


def _like_another_layout(stride: tuple[int, ...]) -> bool:
    """Whether a tensor of another layout reports these strides too: a sparse COO one
    reports all zeros, an mkldnn one ``(1, 0, 0...)``: the strides of an expanded strided
    tensor, or of any 1-d contiguous one. Then the layout is checked as well."""
    return stride[:1] in ((), (0,), (1,)) and not any(stride[1:])


def _float_bits(value: Any) -> tuple[str, ...] | None:
    """The exact bits of a float or complex that is NaN or a zero; None for other values."""
    if isinstance(value, float) and (value != value or value == 0.0):
        return (value.hex(),)
    if isinstance(value, complex):
        if _float_bits(value.real) is not None or _float_bits(value.imag) is not None:
            return (value.real.hex(), value.imag.hex())
    return None


def _readable(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__}>"
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}".removeprefix("builtins.")
    if callable(value) and hasattr(value, "__name__"):
        module = getattr(value, "__module__", None) or "torch"
        return f"{module}.{value.__name__}".removeprefix("torch._C.")
    if isinstance(value, (torch.dtype, torch.device)):
        return repr(value) if isinstance(value, torch.dtype) else f"torch.device({str(value)!r})"
    text = repr(value)
    return text if len(text) < 60 else f"<{type(value).__name__} at {id(value):#x}>"


def build_guard_function(
    guards: Sequence[Guard],
    fn: types.FunctionType,
    default_device: bool = False,
) -> GuardFunction:
    """One function ``guard(<fn's signature>) -> bool`` checking every guard.

    The fast form reads each source once and checks each kind of repeated module
    subtree with one helper (``subtrees.py``); the plain form (one self-contained
    expression per guard) is what reports and failure diagnosis use.
    """

    def compile_helper(helper_guards: list[Guard], several: bool) -> Callable[..., bool]:
        """``helper(root)``, or ``helper(*roots)``: the subtree's checks on each root."""
        helper = GuardFunctionBuilder(share_reads=True)
        for guard in helper_guards:
            helper.add(guard)
        helper.finish()
        root = subtrees.HELPER_ARGUMENT.expr()
        make = _maker(fn, [*helper.constants, *helper.literals], len(helper.constants),
                      signature="*___roots" if several else root)
        if not several:
            return make(f"    return {helper.body()}", "False")
        return make(
            f"    for {root} in ___roots:\n"
            f"      if not ({helper.body()}):\n        return False\n    return True",
            "False",
        )

    fast = _built(
        GuardFunctionBuilder(share_reads=True),
        subtrees.factored(guards, compile_helper),
        default_device,
    )
    make = _maker(fn, [*fast.constants, *fast.literals], len(fast.constants))
    return GuardFunction(make(f"    return {fast.body()}", "False"), guards, default_device, fn)


def _built(
    builder: GuardFunctionBuilder, guards: Sequence[Guard], default_device: bool
) -> GuardFunctionBuilder:
    builder.add_global_state(default_device)
    for guard in guards:
        builder.add(guard)
    builder.finish()
    return builder


def _connected(edges: list[tuple[Source, ...]]) -> list[list[Source]]:
    """Groups of sources linked by any DISTINCT guard, each in first-seen order. Sources
    are told apart by their text, as the guard function reads them.

    A model's modules of one class come as ``m1 vs (m0,)``, ``m2 vs (m0, m1)``...: a
    quadratic number of links (11,175 for 150 Linear layers). Where a link's others
    start with the previous link's sources, those are one group already: one of them
    stands for all (a tuple comparison, by identity first, in C)."""
    group_of: dict[str, int] = {}  # a source's text -> the number of its group
    members: dict[int, list[str]] = {}
    by_text: dict[str, Source] = {}  # in first-seen order
    previous: tuple[Source, ...] = ()
    for linked in edges:
        others = linked[1:]
        if previous and others[:len(previous)] == previous:
            linked = (linked[0], previous[0], *others[len(previous):])
        previous = (*others, linked[0])
        texts = list(map(Source.expr, linked))
        met = set(map(group_of.get, texts))
        met.discard(None)
        if met:
            target = max(met, key=lambda number: len(members[number]))
            for number in met - {target}:  # the smaller groups join the largest
                moved = members.pop(number)
                for text in moved:
                    group_of[text] = target
                members[target].extend(moved)
        else:
            target = len(by_text)  # a number no group has had: by_text only grows
            members[target] = []
        for text, source in zip(texts, linked):
            if text not in group_of:
                group_of[text] = target
                by_text[text] = source
                members[target].append(text)
    groups: dict[int, list[Source]] = {}
    for text, source in by_text.items():
        groups.setdefault(group_of[text], []).append(source)
    return list(groups.values())


def _maker(
    fn: types.FunctionType,
    constants: list[Any],
    named: int | None = None,
    signature: str | None = None,
) -> Callable[[str, str | None], Callable[..., Any]]:
    """``make(body, on_error)``: a guard function of ``body``, which reads ``constants``
    as ``___c<i>``, the ``named`` first ones, and the rest as ``___t<i>``. It takes
    ``fn``'s arguments, or those ``signature`` names (a helper's: ``fn``'s globals and
    builtins, no cells)."""
    code = fn.__code__
    frame_signature = signature is None
    signature = _signature_text(code) if signature is None else signature
    cells = {
        ClosureCellSource(name).expr(): cell
        for name, cell in zip(code.co_freevars, fn.__closure__ or ())
    } if frame_signature else {}
    named = len(constants) if named is None else named
    const_names = [f"___c{i}" for i in range(named)]
    const_names += [f"___t{i}" for i in range(len(constants) - named)]
    outer = ["___G", "___B", "___K", *const_names, *cells]
    f_builtins = fn.__globals__.get("__builtins__", builtins.__dict__)
    if isinstance(f_builtins, types.ModuleType):
        f_builtins = f_builtins.__dict__

    def make(body: str, on_error: str | None) -> Callable[..., Any]:
        # A guard whose expression raises (a missing attribute, say) has failed.
        indented = body.replace("\n", "\n  ")
        handle = "raise" if on_error is None else f"return {on_error}"
        source = (
            f"def ___make({', '.join(outer)}):\n"
            f"  def ___guard({signature}):\n"
            f"    try:\n  {indented}\n"
            f"    except Exception:\n      {handle}\n"
            f"  return ___guard\n"
        )
        namespace: dict[str, Any] = {}
        exec(compiled(source, f"<bytegraph guard for {code.co_name}>", "exec"), namespace)
        guard = namespace["___make"](
            fn.__globals__, f_builtins, KEPT_CONSTANTS, *constants, *cells.values()
        )
        if frame_signature:
            # A call the signature rejects raises here first, and CPython's TypeError
            # names the function by its __qualname__: it must read as the user's function.
            guard.__qualname__ = fn.__qualname__
            guard.__defaults__ = fn.__defaults__
            guard.__kwdefaults__ = fn.__kwdefaults__
        return guard

    return make


def _signature_text(code: types.CodeType) -> str:
    """The parameter list of ``code`` as source text (defaults are set afterwards)."""
    names = [local_name(name) for name in code.co_varnames]
    positional = list(names[: code.co_argcount])
    if code.co_posonlyargcount:
        positional.insert(code.co_posonlyargcount, "/")
    index = code.co_argcount
    kwonly = list(names[index : index + code.co_kwonlyargcount])
    index += code.co_kwonlyargcount
    params = positional
    if code.co_flags & 0x04:  # CO_VARARGS
        params.append("*" + names[index])
        index += 1
    elif kwonly:
        params.append("*")
    params.extend(kwonly)
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        params.append("**" + names[index])
    return ", ".join(params)
