"""Generated check code compiled once per text.

Guard functions, a copied fragment's checks and its reads are Python source that
bytegraph writes and compiles on every trace, and ``compile()`` is about half of
the guard stage. The texts name their constants (``___c0``, ``___root0``) rather
than hold their values, so a recompile for new sizes, another instance of a
model, or the same blocks after ``bytegraph.reset()`` write the same text again.
The code object is a pure function of the text, so it is kept; the cache is
emptied when full, so that a long run over many programs keeps it bounded.
"""

from __future__ import annotations

import types

_compiled: dict[tuple[str, str, str], types.CodeType] = {}
_LIMIT = 1024  # texts


def compiled(source: str, filename: str, mode: str) -> types.CodeType:
    """``compile(source, filename, mode)``, made once per text."""
    key = (source, filename, mode)
    code = _compiled.get(key)
    if code is None:
        if len(_compiled) >= _LIMIT:
            _compiled.clear()
        code = _compiled[key] = compile(source, filename, mode)
    return code
