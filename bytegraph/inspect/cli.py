"""The command line: ``bytegraph explain`` and ``bytegraph dump`` (also ``python -m bytegraph``).

::

    bytegraph run train.py [script args]
    bytegraph explain train.py [--function NAME] [--html report.html] [-- script args]
    bytegraph dump train.py --out DIR [--function NAME] [-- script args]

``run`` runs the script as ``python train.py args...`` would, with
``torch.compile`` routed to bytegraph (switch.py), and prints a one-screen
summary to stderr at the end (summary.py). Its own options come before the
script; everything after the script is the script's, as with ``python``.

Both run the script as ``__main__`` (script.py) while a ``Recording``
(recording.py) watches every ``bytegraph.compile`` call. ``--function NAME``
compiles the script's ``NAME`` (a function, an nn.Module instance or class,
or ``Class.method``) without editing the script; without it, what the script
compiles itself is reported. ``explain`` then prints explain()'s report of the
whole run (graphs as code, breaks with file:line, source line, inlined
frames and hint, guards per entry, recompiles, time) and with ``--html``
writes it as one page (report_html.py); ``dump`` sets ``config.dump_dir`` and
writes one Python file per compiled frame and resume function (dump.py).

A mistake a person can fix (no such script, no such function, a script
that raises or exits non-zero, nothing compiled) is one line on stderr and
exit status 1; a usage error is argparse's, status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from bytegraph.inspect.script import ScriptError, check_script, run_script


class _Usage(argparse.ArgumentParser):
    """argparse, with its errors kept to one line on stderr."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Usage(
        prog="bytegraph",
        description="See what bytegraph does with a program: its graphs, breaks and guards.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Usage)
    run = commands.add_parser(
        "run", usage="bytegraph run [--backend NAME] [--summary-file PATH] [--quiet] "
        "SCRIPT [ARGS...]",
        help="run a script with torch.compile routed to bytegraph, and summarize",
        description="Run SCRIPT as `python SCRIPT ARGS...` would, with torch.compile and "
        "nn.Module.compile routed to bytegraph.compile with the same arguments; at the end, "
        "print a summary to stderr: frames compiled, graphs, graph breaks with file:line, "
        "recompiles and the time spent.",
    )
    run.add_argument("script", help="the Python script to run; what follows it is its own")
    run.add_argument("--backend", help="compile every torch.compile call with this backend "
                     "instead of the one it names")
    run.add_argument("--summary-file", metavar="PATH",
                     help="write the summary to PATH instead of stderr")
    run.add_argument("--quiet", action="store_true", help="print no summary")
    explain = commands.add_parser(
        "explain", usage="bytegraph explain SCRIPT [--function NAME] [--html PATH] "
        "[--backend NAME] [-- ARGS...]",
        help="run a script and report graphs, breaks, guards and recompiles",
        description="Run SCRIPT as __main__ and print what bytegraph compiled: each graph as "
        "code, each graph break with its reason, file:line and hint, the guards of every "
        "cache entry, recompiles and the time spent.",
    )
    _add_common(explain)
    explain.add_argument("--html", metavar="PATH",
                         help="also write the report as one self-contained HTML page")
    dump = commands.add_parser(
        "dump", usage="bytegraph dump SCRIPT --out DIR [--function NAME] [--backend NAME] "
        "[-- ARGS...]",
        help="run a script and write each compiled frame as a Python file",
        description="Run SCRIPT as __main__ with bytegraph.config.dump_dir set: one Python "
        "file per compiled frame and resume function, holding its guards, FX graph, "
        "transformed code and the source lines it came from.",
    )
    _add_common(dump)
    dump.add_argument("--out", metavar="DIR", required=True, help="the folder to write into")
    return parser


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="the Python script to run; its own arguments "
                        "(its sys.argv[1:]) follow a --")
    parser.add_argument(
        "--function", metavar="NAME",
        help="compile the script's NAME (a function, nn.Module, nn.Module class or "
        "Class.method); default: report what the script passes to bytegraph.compile",
    )
    parser.add_argument(
        "--backend", default="eager",
        help="the backend --function compiles with (default: eager)",
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if argv[:1] == ["run"]:  # everything after the script is the script's, -- included
        split = _script_position(argv)
        argv, script_args = argv[:split + 1], argv[split + 1:]
    elif "--" in argv:  # everything after the first -- is the script's
        split = argv.index("--")
        argv, script_args = argv[:split], argv[split + 1:]
    args = build_parser().parse_args(argv)
    args.script_args = script_args
    try:
        if args.command == "run":
            from bytegraph.inspect.run_command import run_command

            return run_command(args)
        if args.command == "explain":
            return _explain(args)
        return _dump(args)
    except ScriptError as error:
        print(f"bytegraph: error: {error}", file=sys.stderr)
        return 1


def _script_position(argv: list[str]) -> int:
    """The index of ``bytegraph run``'s script in ``argv`` (past run's own options)."""
    index = 1
    while index < len(argv) and argv[index].startswith("-"):
        index += 2 if argv[index] in ("--backend", "--summary-file") else 1
    return min(index, len(argv))


def _run(args: argparse.Namespace) -> Any:
    """Run the script under a Recording; the recording."""
    from bytegraph.graph.backends import lookup_backend
    from bytegraph.inspect.recording import Recording

    check_script(args.script)
    try:
        backend = lookup_backend(args.backend)
    except (TypeError, ValueError, KeyError) as e:
        raise ScriptError(str(e).strip("'\"")) from None
    with Recording() as recording:
        targets = run_script(args.script, args.script_args, args.function, backend)
    if args.function is not None:
        if not targets:
            raise ScriptError(f"{args.function} was never defined while the script ran")
        # The script may compile the target again itself (bytegraph.compile(f) of its f).
        originals = {id(_compiled_of(t).fn) for t in targets}
        again = [r for r in recording.roots if id(_compiled_of(r).fn) in originals]
        if not any(_compiled_of(t).entries for t in (*targets, *again)):
            raise ScriptError(f"{args.function} was never called while the script ran")
    elif not recording.roots:
        raise ScriptError(
            "the script compiled nothing: it never called bytegraph.compile "
            "(name a function to compile with --function NAME)"
        )
    return recording


def _compiled_of(compiled: Any) -> Any:
    from bytegraph.inspect.explain import compiled_function

    return compiled_function(compiled)


def _explain(args: argparse.Namespace) -> int:
    from bytegraph.inspect.explain import report_of

    report = report_of(_run(args))
    print(f"\n=== bytegraph explain: {args.script} ===")
    print(report)
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(report.to_html())
        except OSError as e:
            raise ScriptError(f"cannot write {args.html}: {e.strerror}") from None
        print(f"HTML report: {args.html}")
    return 0


def _dump(args: argparse.Namespace) -> int:
    from bytegraph import config

    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise ScriptError(f"cannot create {args.out}: {e.strerror}") from None
    saved, config.dump_dir = config.dump_dir, args.out
    try:
        _run(args)
    finally:
        config.dump_dir = saved
    written = sorted(name for name in os.listdir(args.out) if name.endswith(".py"))
    print(f"bytegraph: wrote {len(written)} files to {args.out}")
    return 0
