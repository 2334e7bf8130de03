"""BYTEGRAPH_LOGS and set_logs(): each artifact is a standard ``logging`` logger.

Artifacts: ``bytecode`` (the instructions traced, with the stack at debug
level), ``graph_code`` (each captured graph as Python), ``guards`` (each
cache entry's guards), ``graph_breaks`` (why and where each break happened),
``recompiles`` (which guard failed, with the value that failed it),
``output_code`` (the transformed and resume functions' bytecode),
``internal`` (the traceback of a bytegraph bug met while compiling, after
which the function ran as plain Python), ``fragments`` (each repeated call
answered by a copy of an earlier call's graph fragment: translate/fragments.py).

``BYTEGRAPH_LOGS="graph_breaks,+guards"`` enables ``graph_breaks`` at INFO and
``guards`` at DEBUG; ``bytegraph.set_logs("graph_breaks,+guards")`` or
``set_logs(graph_breaks=True, guards=logging.DEBUG)`` does the same from
code. Loggers are named ``bytegraph.<artifact>``. Every log site is on the
tracing path or the cache-miss path, never on the cached call path, and
checks ``isEnabledFor`` before formatting anything.

For a report of a whole run rather than log lines, ``BYTEGRAPH_TRACE=folder``
writes a structured trace that ``tlparse`` renders (inspect/structured_trace.py).
"""

from __future__ import annotations

import logging
import os

ARTIFACTS = (
    "bytecode", "graph_code", "guards", "graph_breaks", "recompiles", "output_code", "internal",
    "ddp", "fragments",
)
_ROOT = logging.getLogger("bytegraph")
_handler: logging.Handler | None = None


def get_logger(artifact: str) -> logging.Logger:
    if artifact not in ARTIFACTS:
        raise ValueError(f"unknown log artifact {artifact!r}: use one of {', '.join(ARTIFACTS)}")
    return logging.getLogger(f"bytegraph.{artifact}")


def set_logs(spec: str | None = None, **levels: bool | int) -> None:
    """Enable artifacts: ``set_logs("graph_breaks,+guards")`` or keyword flags.

    A keyword's value is True (INFO), False (off) or a logging level.
    ``set_logs()`` with no arguments turns every artifact off.
    """
    wanted: dict[str, int] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if item:
            name = item.lstrip("+")
            wanted[name] = logging.DEBUG if item.startswith("+") else logging.INFO
    for name, level in levels.items():
        if level is True:
            wanted[name] = logging.INFO
        elif level is not False:
            wanted[name] = int(level)
    for name in ARTIFACTS:
        get_logger(name).setLevel(wanted.pop(name, logging.WARNING))
    if wanted:
        raise ValueError(
            f"unknown log artifact {sorted(wanted)[0]!r}: use one of {', '.join(ARTIFACTS)}"
        )
    _ensure_handler()


def _ensure_handler() -> None:
    global _handler
    if _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        _ROOT.addHandler(_handler)
        _ROOT.propagate = True


def enabled(artifact: str, level: int = logging.INFO) -> bool:
    return logging.getLogger(f"bytegraph.{artifact}").isEnabledFor(level)


def configure_from_environment() -> None:
    """At import: BYTEGRAPH_LOGS if set; otherwise every artifact off.

    Off means an explicit WARNING level, so an application that sets the root
    logger to INFO does not turn on every artifact by inheritance.
    """
    spec = os.environ.get("BYTEGRAPH_LOGS")
    if spec:
        set_logs(spec)
    else:
        for name in ARTIFACTS:
            get_logger(name).setLevel(logging.WARNING)
