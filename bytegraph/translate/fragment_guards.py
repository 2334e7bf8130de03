"""The guards a reused fragment carries (fragments.py): which, re-rooted, evaluated now.

A fragment recorded on one call's roots (the module, its submodules,
parameters...) holds for a later call only if every guard of the trace that
names a source under those roots holds for the later call's roots too.
``reroot`` rewrites a source onto other roots; ``Checker`` collects the guards
under the first call's roots once, re-rooted onto ``___root<i>`` names and
compiled into one expression the guard function's own way, and evaluates it on
the real objects of a later call; ``Refused`` says why a call is not reused.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from bytegraph import logs
from bytegraph.guards.build import GuardFunctionBuilder
from bytegraph.guards.compiled_text import compiled
from bytegraph.guards.guard import Guard, GuardKind
from bytegraph.guards.sources import (
    KEPT_CONSTANTS,
    ChildSource,
    LocalSource,
    Source,
    init_fields,
    local_name,
    reroot_with,
)
from bytegraph.variables.base import AttributeMutationExisting, ValueMutationExisting
from bytegraph.variables.nn_module import NNModuleVariable

if TYPE_CHECKING:
    from bytegraph.graph.output_graph import OutputGraph
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


class Refused(Exception):
    """Not reusable: the call is inlined as usual."""


def _root_names(count: int) -> list[LocalSource]:
    return [LocalSource(f"___root{i}") for i in range(count)]


def reroot(source: Any, old: tuple[Any, ...], new: list[Source]) -> Any:
    """``source`` with each old root's source replaced by the matching new one."""
    table = {r.source: n for r, n in zip(old, new, strict=True)}
    return reroot_with(source, table)


def reroot_local(source: Source, old: tuple[Any, ...]) -> Source:
    return reroot(source, old, _root_names(len(old)))


def _mentions(guard: Guard, roots: set[Source]) -> bool:
    sources = [guard.source]
    if guard.kind in (GuardKind.SAME_OBJECT, GuardKind.DISTINCT):
        expected = guard.expected
        sources.extend(expected if isinstance(expected, tuple) else (expected,))
    return any(under(source, roots) for source in sources)


class Rerooting:
    """The sources under one call's roots, and how to build each again on other roots.

    ``ref`` registers a value once (a source, a tuple of them, anything else) and
    answers a reference to it; ``instantiate`` builds, for one later call, every
    registered source re-rooted onto that call's roots, each prefix once, in one
    pass over a flat plan (the recursive ``reroot_with`` walk and its table
    lookups, made once per template instead of once per copy); ``resolve`` reads a
    reference in that build. What it builds equals ``reroot_with``'s result.
    """

    def __init__(self, roots: tuple[Source, ...]) -> None:
        self.roots = roots
        self._index: dict[Source, int] = {root: i for i, root in enumerate(roots)}
        # A rerooted source: (class, fields other than base, index of its base).
        self._steps: list[tuple[type, dict[str, Any], int]] = []
        self._refs: dict[Any, Any] = {}

    def ref(self, value: Any) -> Any:
        """(0, index) for a source under the roots, (1, value) for a value kept as it
        is, (2, refs) for a tuple."""
        if isinstance(value, tuple):
            return (2, tuple(self.ref(item) for item in value))
        if not isinstance(value, Source):
            return (1, value)
        found = self._refs.get(value)
        if found is None:
            index = self._source_index(value)
            found = self._refs[value] = (1, value) if index is None else (0, index)
        return found

    def _source_index(self, source: Source) -> int | None:
        index = self._index.get(source)
        if index is not None or not isinstance(source, ChildSource):
            return index
        base = self._source_index(source.base)
        if base is None:
            return None
        cls = type(source)
        fields = {n: getattr(source, n) for n in init_fields(cls) if n != "base"}
        self._steps.append((cls, fields, base))
        index = self._index[source] = len(self.roots) + len(self._steps) - 1
        return index

    def instantiate(self, roots: list[Source]) -> list[Source]:
        """Every registered source under the roots, rebuilt on ``roots``."""
        made = list(roots)
        append = made.append
        for cls, fields, base in self._steps:
            append(cls(base=made[base], **fields))
        return made


def resolve(ref: Any, made: list[Source]) -> Any:
    """The value ``ref`` (``Rerooting.ref``) stands for in the build ``made``."""
    tag, what = ref
    if tag == 0:
        return made[what]
    if tag == 1:
        return what
    return tuple(resolve(item, made) for item in what)


@dataclasses.dataclass
class Checker:
    """What a later call must satisfy, built at the first replay from the trace so far.

    ``guards``: every guard naming a source under the first call's roots (DISTINCT
    ones aside), re-rooted onto ``___root<i>`` names and compiled into one expression;
    ``installs``, the same guards as references of the template's ``Rerooting``
    (kind, source, expected).
    ``objects``: the objects under the roots that the trace tracks (submodules, user
    objects), re-read through ``builder.wrap`` at each replay, in the first call's order,
    so that the aliasing checks and DISTINCT guards a plain read makes are made again.
    """

    guards: list[Guard]
    code: Any
    constants: dict[str, Any]
    objects: list[tuple[Any, Any, bool]]  # (source's reference, compiled read, was an alias)
    installs: list[tuple[GuardKind, Any, Any]]

    @staticmethod
    def build(
        output: OutputGraph, roots: tuple[NNModuleVariable, ...], rerooting: Rerooting
    ) -> Checker:
        sources = {r.source for r in roots}
        table = dict(zip((r.source for r in roots), _root_names(len(roots)), strict=True))
        guards = []
        for guard in output.guards.values():
            if guard.kind is GuardKind.DISTINCT or not _mentions(guard, sources):
                continue
            if guard.kind in (GuardKind.SHAPE, GuardKind.GLOBAL_ABSENT):
                raise Refused(f"a {guard.kind.value} guard")
            guards.append(guard)
        builder = GuardFunctionBuilder()
        for guard in guards:
            builder.add(Guard(guard.kind, reroot_with(guard.source, table),
                              reroot_with(guard.expected, table)))
        builder.finish()
        text = " and ".join(f"({p})" for p in builder.parts) or "True"
        if "___cell_" in text:
            raise Refused("a guard on a closure cell")
        code = compiled(text, "<bytegraph fragment check>", "eval")
        constants = {f"___c{i}": c for i, c in enumerate(builder.constants)}
        objects = []
        for source, vt in output.source_to_var.items():
            if under(source, sources) and source not in sources and isinstance(
                vt.mutation_type, (ValueMutationExisting, AttributeMutationExisting)
            ):
                expr = reroot_with(source, table).expr()
                read = compiled(expr, "<bytegraph fragment read>", "eval")
                objects.append((rerooting.ref(source), read, vt.source != source))
        installs = [(g.kind, rerooting.ref(g.source), rerooting.ref(g.expected)) for g in guards]
        return Checker(guards, code, constants, objects, installs)

    def holds(self, env: dict[str, Any], roots: list[Any]) -> bool:
        return bool(_evaluate_code(self.code, {**env, **self.constants}, roots))

    def reread(self, tx: Tx, made: list[Source], env: dict, roots: list) -> None:
        """Read the tracked objects under the new roots as a plain trace would."""
        from bytegraph.variables.builder import wrap

        for ref, read, was_alias in self.objects:
            new_source = resolve(ref, made)
            try:
                value = _evaluate_code(read, env, roots, raise_errors=True)
            except Exception as error:  # the read raised: no reuse
                raise Refused(f"reading {new_source.expr()} raised {error!r}") from None
            vt = wrap(tx, value, new_source)
            if isinstance(value, type):
                continue  # a class reached again: _tracked guards its identity
            if (vt.source != new_source) != was_alias:
                raise Refused("objects told apart in the first call are one here")

    def install(self, output: OutputGraph, made: list[Source]) -> None:
        """``output.add_guard`` of each guard re-rooted, in the template's order (it keeps
        the guard already there under the same key, without building another)."""
        for kind, source_ref, expected_ref in self.installs:
            output.add_guard(kind, resolve(source_ref, made), resolve(expected_ref, made))


def under(source: Any, roots: set[Source]) -> bool:
    while source is not None:
        if source in roots:
            return True
        source = getattr(source, "base", None)
    return False


def frame_namespace(tx: Tx) -> dict[str, Any]:
    """What a guard expression reads: the frame's arguments, globals, builtins."""
    root = tx
    while getattr(root, "parent", None) is not None:
        root = root.parent
    env = {local_name(name): value for name, value in root.frame_values.items()}
    env.update(___G=root.f_globals, ___B=root.f_builtins or builtins.__dict__, ___K=KEPT_CONSTANTS)
    return env


def evaluate(code: Any, env: dict[str, Any], roots: list[Any]) -> Any:
    try:
        return _evaluate_code(code, env, roots, raise_errors=True)
    except Exception as error:  # the read raised: no reuse
        raise Refused(f"reading an input raised {type(error).__name__}") from None


def _evaluate_code(
    code: Any, env: dict[str, Any], roots: list[Any], raise_errors: bool = False
) -> Any:
    namespace = {**env, **{f"___root{i}": r for i, r in enumerate(roots)}}
    try:
        return eval(code, namespace)  # noqa: S307 (bytegraph's own guard text)
    except Exception:
        if raise_errors:
            raise
        if logs.enabled("fragments", logging.DEBUG):
            logs.get_logger("fragments").debug("a fragment check raised", exc_info=True)
        return False
