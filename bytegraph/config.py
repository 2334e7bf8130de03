"""User-tunable settings, read at trace time (never on the call fast path)."""

from __future__ import annotations

import os

recompile_limit: int = 8
"""Cache entries per code object before it runs as plain Python."""

inline_depth_limit: int = 32
"""How deep user-function calls are inlined before the trace gives up."""

memoize_metadata: bool = True
"""Answer repeated ops on tensors of the same metadata from a memo."""

shape_rules: bool = True
"""Answer the simplest forms of frequent ops (linear, conv2d, relu...) by bytegraph's own
shape rules (``graph/shape_rules.py``) instead of torch's Python meta kernels."""

reuse_fragments: bool = True
"""Trace a repeated call (the N identical blocks of a model) once and copy its graph
fragment for the later calls whose arguments, module attributes and guards match
(``translate/fragments.py``), instead of interpreting the same bytecode again."""

strict: bool = False
"""Raise a bytegraph bug met while compiling (as ``InternalError``) instead of
warning once and running the function as plain Python. The test suite sets it."""

reorderable_logging: bool = False
"""Let ``print(...)`` and ``logging.Logger`` calls (``debug``/``info``/``warning``/
``error``/``critical``/``log``, and log-once helpers such as Hugging Face's
``logger.warning_once``) whose arguments are constants (strings, numbers, shapes,
dtypes: no tensor values) run after the graph, in program order, instead of
breaking it. Output then comes after the graph's work, and a log record's caller
is the compiled code. Off: each such call is a graph break, as in eager order."""

capture_scalar_outputs: bool = False
"""Keep ``Tensor.item()`` inside the graph: its result is a symbolic value the
data decides (an unbacked symbol of the trace's ShapeEnv) that flows on into
tensor ops and arithmetic; only what needs its Python value (a branch on it,
``range`` of it) breaks the graph there. On, every trace runs on fake tensors
(``graph/shapes.py``), which costs trace time. Off: ``.item()`` is a graph break."""

capture_dynamic_output_shape_ops: bool = False
"""Keep ops whose output size depends on the data inside the graph (``nonzero``,
``x[mask]`` with a boolean mask, ``unique``, ``masked_select``): the size is an
unbacked symbol of the trace's ShapeEnv. On, every trace runs on fake tensors
(``graph/shapes.py``), which costs trace time. Off: each such op is a graph break."""

trace_numpy: bool = True
"""Trace numpy code on tensors (``x.numpy()``, ``np.*`` calls, ndarray methods and
operators, ndarray arguments and results) into the graph as torch ops, through
``torch._numpy`` (``variables/numpy.py``), as torch.compile does. Off: every numpy
call and ``Tensor.numpy()`` is a graph break."""

optimize_ddp: bool = True
"""A graph compiled while a DistributedDataParallel forward runs is cut at DDP's gradient
bucket boundaries (``bucket_cap_mb``), one backend compile per piece, so each bucket's
all-reduce starts while the rest of the backward runs, as torch.compile's DDP optimizer
does (``graph/ddp.py``). Off: one graph, whose gradients all become ready at its end."""

dump_dir: str | None = os.environ.get("BYTEGRAPH_DUMP") or None
"""A folder: every compiled frame and resume function is written there as one readable
Python file (inspect/dump.py): its guards with the user's lines, FX graph, transformed code and
resume functions decompiled, and the source lines they came from. The environment
variable ``BYTEGRAPH_DUMP=folder`` sets it at import. None: nothing is written, and
nothing is checked on the call path."""

trace_dir: str | None = os.environ.get("BYTEGRAPH_TRACE") or None
"""A folder for structured traces (``BYTEGRAPH_TRACE``): each process writes one log
there, in the format ``tlparse`` renders (``inspect/structured_trace.py``): every compile
with its stack, graphs, guards, breaks, recompiles and times. None: off."""
