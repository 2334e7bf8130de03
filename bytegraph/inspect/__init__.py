"""The inspection layer: what shows a person what bytegraph did. It depends on the core
and the core never imports it (tests/test_layers.py); it learns what happened from the
core's events (``bytegraph/events.py``).

- ``explain.py``: ``bytegraph.explain``: graphs, breaks, guards and recompiles of a run;
- ``recording.py``: the ``Recording`` explain and the command line watch a run with;
- ``report_html.py``: explain's report as one HTML page;
- ``summary.py``: the one-screen summary ``bytegraph run --summary`` prints;
- ``dump.py``: ``config.dump_dir``: every compiled frame as a Python file to read;
- ``structured_trace.py``: ``config.trace_dir``: the log ``tlparse`` renders;
- ``cli.py``, ``script.py``, ``run_command.py``: the command line (``bytegraph
  explain|dump|run``, ``python -m bytegraph``) and the runner of a user's script.

Importing this package subscribes the dump and the structured trace, which act only
while their setting is on.
"""

from bytegraph.inspect import dump, structured_trace  # noqa: F401  (they subscribe)
