"""``bytegraph run script.py [args]``: an unmodified script, its torch.compile calls on bytegraph.

The mechanism, in order:

1. a ``Recording`` (recording.py) starts, the same one ``bytegraph explain``
   uses: it keeps every graph, compiled root and recompile;
2. the switch (switch.py) routes ``torch.compile`` and ``nn.Module.compile``
   to ``bytegraph.compile`` with the same arguments (``--backend`` overrides
   the backend of every call);
3. the script runs as ``python script.py args...`` runs it
   (``script.run_as_python``);
4. the switch is undone, the recording stops, and the summary (summary.py)
   of ``explain.report_of(recording)`` goes to stderr (or ``--summary-file``);
5. the script's ending is python's: ``sys.exit(n)`` exits with ``n``, an
   uncaught exception prints its traceback from the script's first frame
   (through ``sys.excepthook``) and exits with status 1, KeyboardInterrupt
   propagates. The traceback comes before the summary, so the summary is last
   on the screen.
"""

from __future__ import annotations

import argparse
import sys
import types

from bytegraph.inspect.script import ScriptError, check_script, run_as_python


def run_command(args: argparse.Namespace) -> int:
    """Run ``args.script`` with the switch on; the exit status ``python`` would give."""
    from bytegraph.graph.backends import lookup_backend
    from bytegraph.inspect.recording import Recording
    from bytegraph.switch import use_for_torch_compile

    check_script(args.script)
    if args.backend is not None:
        try:
            lookup_backend(args.backend)
        except (TypeError, ValueError) as e:
            raise ScriptError(str(e)) from None
    status: int | BaseException = 0
    with Recording() as recording, use_for_torch_compile(backend=args.backend) as switch:
        try:
            run_as_python(args.script, args.script_args)
        except Exception as error:  # noqa: BLE001  (the script's own: reported as python does)
            error = error.with_traceback(_from_script(error.__traceback__))
            sys.excepthook(type(error), error, error.__traceback__)
            status = 1
        except BaseException as ending:  # SystemExit, KeyboardInterrupt: re-raised below
            status = ending
    _report(args, recording, switch.calls)
    if isinstance(status, BaseException):
        raise status
    return status


def _from_script(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback without bytegraph's and runpy's frames above the script's."""
    first = tb
    while first is not None and _is_launcher(first.tb_frame.f_code.co_filename):
        first = first.tb_next
    return first if first is not None else tb


def _is_launcher(filename: str) -> bool:
    return filename in (__file__, run_as_python.__code__.co_filename) or \
        filename.endswith(("runpy.py", "<frozen runpy>"))


def _report(args: argparse.Namespace, recording: object, routed_calls: int) -> None:
    from bytegraph.inspect.explain import report_of
    from bytegraph.inspect.summary import run_summary

    if args.quiet:
        return
    text = run_summary(report_of(recording), args.script, routed_calls)  # type: ignore[arg-type]
    if args.summary_file is None:
        print(f"\n{text}", file=sys.stderr)
        return
    try:
        with open(args.summary_file, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as e:
        raise ScriptError(f"cannot write {args.summary_file}: {e.strerror}") from None
