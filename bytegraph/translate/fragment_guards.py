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
from bytegraph.guards.guard import Guard, GuardKind
from bytegraph.guards.sources import KEPT_CONSTANTS, ChildSource, LocalSource, Source, local_name
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


def reroot_with(source: Any, table: dict[Source, Source]) -> Any:
    if isinstance(source, tuple):
        return tuple(reroot_with(s, table) for s in source)
    if not isinstance(source, Source):
        return source
    found = table.get(source)
    if found is not None:
        return found
    result = source
    if isinstance(source, ChildSource):
        base = reroot_with(source.base, table)
        if base is not source.base:
            result = _with_base(source, base)
    table[source] = result  # memo: the guards of one module share long prefixes
    return result


_INIT_FIELDS: dict[type, tuple[str, ...]] = {}


def _with_base(source: ChildSource, base: Source) -> Source:
    """``source`` read from ``base`` instead (``dataclasses.replace``, without its cost)."""
    cls = type(source)
    names = _INIT_FIELDS.get(cls)
    if names is None:
        names = _INIT_FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return cls(**{n: base if n == "base" else getattr(source, n) for n in names})


def _mentions(guard: Guard, roots: set[Source]) -> bool:
    sources = [guard.source]
    if guard.kind in (GuardKind.SAME_OBJECT, GuardKind.DISTINCT):
        expected = guard.expected
        sources.extend(expected if isinstance(expected, tuple) else (expected,))
    return any(under(source, roots) for source in sources)


@dataclasses.dataclass
class Checker:
    """What a later call must satisfy, built at the first replay from the trace so far.

    ``guards``: every guard naming a source under the first call's roots (DISTINCT
    ones aside), re-rooted onto ``___root<i>`` names and compiled into one expression.
    ``objects``: the objects under the roots that the trace tracks (submodules, user
    objects), re-read through ``builder.wrap`` at each replay, in the first call's order,
    so that the aliasing checks and DISTINCT guards a plain read makes are made again.
    """

    guards: list[Guard]
    code: Any
    constants: dict[str, Any]
    objects: list[tuple[Source, Any, bool]]  # (source, compiled read, was an alias)

    @staticmethod
    def build(output: OutputGraph, roots: tuple[NNModuleVariable, ...]) -> Checker:
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
        code = compile(text, "<bytegraph fragment check>", "eval")
        constants = {f"___c{i}": c for i, c in enumerate(builder.constants)}
        objects = []
        for source, vt in output.source_to_var.items():
            if under(source, sources) and source not in sources and isinstance(
                vt.mutation_type, (ValueMutationExisting, AttributeMutationExisting)
            ):
                expr = reroot_with(source, table).expr()
                read = compile(expr, "<bytegraph fragment read>", "eval")
                objects.append((source, read, vt.source != source))
        return Checker(guards, code, constants, objects)

    def holds(self, env: dict[str, Any], roots: list[Any]) -> bool:
        return bool(_evaluate_code(self.code, {**env, **self.constants}, roots))

    def reread(self, tx: Tx, table: dict[Source, Source], env: dict, roots: list) -> None:
        """Read the tracked objects under the new roots as a plain trace would."""
        from bytegraph.variables.builder import wrap

        for source, read, was_alias in self.objects:
            new_source = reroot_with(source, table)
            try:
                value = _evaluate_code(read, env, roots, raise_errors=True)
            except Exception as error:  # the read raised: no reuse
                raise Refused(f"reading {new_source.expr()} raised {error!r}") from None
            vt = wrap(tx, value, new_source)
            if isinstance(value, type):
                continue  # a class reached again: _tracked guards its identity
            if (vt.source != new_source) != was_alias:
                raise Refused("objects told apart in the first call are one here")

    def install(self, output: OutputGraph, table: dict[Source, Source]) -> None:
        for guard in self.guards:
            output.add_guard(guard.kind, reroot_with(guard.source, table),
                             reroot_with(guard.expected, table))


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
