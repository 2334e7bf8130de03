"""The markers code writes for torch.compile, read where torch itself leaves them.

Libraries and users mark code for torch.compile; bytegraph gives each mark the
same meaning by reading what torch's public functions leave behind, never by
importing ``torch._dynamo`` (where a registry lives only in a torch._dynamo
module, it is read through ``sys.modules``: present only if the program
imported it, which is also the only way it could have been filled):

1. Functions (``torch_marking``), consulted by ``markers.marking`` after
   bytegraph's own registries, so the builder and the router treat them
   like bytegraph's markers:

   ================================================  ===================  ===========
   torch's marker                                    left on the object   meaning
   ================================================  ===================  ===========
   ``torch.compiler.disable`` / ``torch._dynamo``    ``_torchdynamo_``    "disabled"
   ``.disable`` (recursive or not), ``.skip``        ``disable``          (a break)
   ``torch._dynamo.graph_break``                     the function itself  "graph_break"
   ``torch.compiler.allow_in_graph``                 trace_rules' allowed "allowed"
                                                     callable ids
   ``torch.compiler.assume_constant_result``         ``_dynamo_marked_``  "constant"
                                                     ``constant``
   ``torch._dynamo.is_compiling``                    the function itself  "compiling"
   ``torch.compiler.disable(module)``                an OptimizedModule   (a break)
   ================================================  ===================  ===========

   A call of a disabled function is one graph break and the function runs as
   Python. With ``recursive=False`` (and ``torch._dynamo.skip``) only its own
   frame is left alone: the router (``runtime.py``) runs its code as Python
   with its call sites routed (``nonrecursive_target``), so the functions it
   calls are compiled, as torch's frame hook compiles them.

2. Tensor dimensions (``marked_dynamic``, ``marked_static``): the attributes
   ``torch._dynamo.mark_dynamic``, ``maybe_mark_dynamic``, ``mark_unbacked``
   and ``mark_static`` set on a tensor join bytegraph's own marks
   (``graph/shapes.py``). An unbacked dimension is traced as a dynamic
   (backed) one: bytegraph may specialise where torch would refuse, never the
   other way round.

3. The stance (``current_stance``): ``torch.compiler.set_stance`` keeps it in
   ``torch._dynamo.eval_frame._stance``. ``StanceWatch`` lets the call fast
   path (``api.py``) notice a change with one identity check: it remembers
   the last stance object under which a cache hit runs as usual.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from typing import Any

_EVAL_FRAME = "torch._dynamo.eval_frame"
_DECORATORS = "torch._dynamo.decorators"
_TRACE_RULES = "torch._dynamo.trace_rules"
_EXTERNAL_UTILS = "torch._dynamo.external_utils"

# What each stance does to a call (torch.compiler.set_stance's documented meanings).
STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")


# -- functions -----------------------------------------------------------------------------


def torch_marking(value: Any) -> str | None:
    """"disabled", "graph_break", "allowed", "constant", "compiling", or None."""
    if type(value) is not types.FunctionType:
        return _registered(value)
    attrs = value.__dict__
    if attrs.get("_torchdynamo_disable"):
        return "disabled"
    if attrs.get("_dynamo_marked_constant"):
        return "constant"
    return _registered(value)


def is_disabled_module(value: Any) -> bool:
    """``torch.compiler.disable(module)``: torch's OptimizedModule whose forward is the
    module's call, disabled. Calling it is one break; it runs as Python."""
    kind = type(value)
    if kind.__name__ != "OptimizedModule" or kind.__module__ != _EVAL_FRAME:
        return False
    forward = getattr(value, "__dict__", {}).get("forward")
    return getattr(forward, "__dict__", {}).get("_torchdynamo_disable") is True


def _registered(value: Any) -> str | None:
    """The marks torch keeps in registries of its own, by identity."""
    decorators = sys.modules.get(_DECORATORS)
    if decorators is not None and value is getattr(decorators, "graph_break", None):
        return "graph_break"
    utils = sys.modules.get(_EXTERNAL_UTILS)
    if utils is not None and value is getattr(utils, "is_compiling", None):
        return "compiling"
    if _in_id_set("_allowed_callable_ids", value) and not (
        _in_id_set("_nonstrict_trace_callable_ids", value)
        or _in_id_set("_leaf_function_ids", value)
    ):
        return "allowed"
    return None


def _in_id_set(name: str, value: Any) -> bool:
    """``id(value)`` in one of trace_rules' FunctionIdSets, without filling it (its
    ``function_ids`` stays None until something is added)."""
    rules = sys.modules.get(_TRACE_RULES)
    ids = getattr(getattr(rules, name, None), "function_ids", None)
    return ids is not None and id(value) in ids


def disabled_reason(fn: Any) -> str:
    """The break's detail for a call of a function (or module) torch.compiler.disable
    marked."""
    if is_disabled_module(fn):
        inner = type(fn.__dict__.get("_modules", {}).get("_orig_mod")).__qualname__
        return f"a {inner} module is disabled by torch.compiler.disable"
    name = getattr(fn, "__qualname__", None) or repr(fn)
    recursive = getattr(fn, "_torchdynamo_disable_recursive", None) is not False and (
        "_torchdynamo_orig_callable" in getattr(fn, "__dict__", {})
    )
    how = "" if recursive else "(recursive=False) "
    text = f"{name} is disabled {how}by torch.compiler.disable"
    message = getattr(fn, "_torchdynamo_disable_msg", None)
    return f"{text}: {message}" if message else text


def nonrecursive_target(fn: Any) -> types.FunctionType | None:
    """The function whose own frame ``fn`` skips while what it calls is compiled:
    ``disable(f, recursive=False)``'s ``f``, or ``f`` itself for ``torch._dynamo.skip(f)``."""
    if type(fn) is not types.FunctionType or not fn.__dict__.get("_torchdynamo_disable"):
        return None
    if "_torchdynamo_orig_callable" not in fn.__dict__:  # skip(): the mark is on f itself
        return fn
    if fn.__dict__.get("_torchdynamo_disable_recursive") is not False:
        return None
    target = fn.__dict__["_torchdynamo_orig_callable"]
    return target if type(target) is types.FunctionType else None


def innermost(fn: Any) -> Any:
    """What torch.compile compiles when handed ``fn``: a function torch.compiler.disable
    wrapped is unwrapped (the outer marker wins, as with torch.compile)."""
    while type(fn) is types.FunctionType and fn.__dict__.get("_torchdynamo_disable"):
        inner = fn.__dict__.get("_torchdynamo_orig_callable")
        if inner is None:
            break
        fn = inner
    return fn


# -- tensor dimensions ---------------------------------------------------------------------

Bounds = tuple[int | None, int | None]


def marked_dynamic(t: Any, own: dict[int, Bounds]) -> dict[int, Bounds]:
    """``own`` (bytegraph's marks) with the dimensions torch's mark_dynamic,
    maybe_mark_dynamic and mark_unbacked set on ``t``, with their bounds."""
    attrs = getattr(t, "__dict__", None)
    if not attrs or not attrs.get("_has_dynamo_dim_marking"):
        return own
    marks: dict[int, Bounds] = {}
    for name in ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices",
                 "_dynamo_unbacked_indices"):
        marks.update((dim, (None, None)) for dim in attrs.get(name, ()))
    for dim_range in attrs.get("_dynamo_dynamic_range", ()):
        marks[dim_range.dim] = (dim_range.min, dim_range.max)
    for dim, (low, high) in attrs.get("_dynamo_unbacked_bounds", {}).items():
        marks[dim] = (low, high)
    ndim = t.dim()
    marks = {dim % ndim: bounds for dim, bounds in marks.items() if -ndim <= dim < ndim}
    return {**marks, **own}


def marked_static(t: Any, own: frozenset[int]) -> frozenset[int]:
    """``own`` with the dimensions torch's mark_static set on ``t`` (where torch's
    mark_dynamic, which wins over it, did not mark them too)."""
    attrs = getattr(t, "__dict__", None)
    if not attrs or not attrs.get("_has_dynamo_dim_marking"):
        return own
    static = set(attrs.get("_dynamo_static_indices", ()))
    static -= set(attrs.get("_dynamo_dynamic_indices", ()))
    ndim = t.dim()
    return own | {dim % ndim for dim in static if -ndim <= dim < ndim}


# -- the stance ----------------------------------------------------------------------------


@dataclasses.dataclass
class StanceWatch:
    """What the call fast path reads: torch's eval_frame module once imported, and the
    last stance object under which a cache hit runs as usual (any but force_eager)."""

    module: types.ModuleType | None = None
    usual: Any = None


WATCH = StanceWatch()


def current_stance() -> str:
    """torch.compiler.set_stance's current stance ("default" where torch._dynamo was
    never imported: nothing can have set one)."""
    module = WATCH.module or sys.modules.get(_EVAL_FRAME)
    if module is None:
        return "default"
    WATCH.module = module
    stance = getattr(module, "_stance", None)
    name = getattr(stance, "stance", "default")
    if name != "force_eager":
        WATCH.usual = stance
    return name


def recompile_error(fn: types.FunctionType, failed: str | None) -> RuntimeError:
    """What a compile raises under the stance "fail_on_recompile": torch's RuntimeError,
    naming the function and the guard that failed."""
    code = fn.__code__
    message = (
        f"Detected recompile when torch.compile stance is 'fail_on_recompile'. "
        f"filename: '{code.co_filename}', function name: '{code.co_name}', "
        f"line number: {code.co_firstlineno}"
    )
    if failed:
        message += f"\n    triggered by the guard failure: {failed}"
    return RuntimeError(message)


def frame_has_torch(fn: types.FunctionType, frame_values: dict[str, Any]) -> bool:
    """Whether torch's frame hook would compile this call: a tensor or module among its
    arguments (inside lists, tuples and dicts too), or a torch module among the globals
    its code names. Under "fail_on_recompile" only such a frame fails."""
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == "torch":
            return True
    return any(_holds_tensor(v, 0) for v in frame_values.values())


def _holds_tensor(value: Any, depth: int) -> bool:
    import torch

    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        return True
    if depth > 8:
        return False
    if type(value) in (list, tuple):
        return any(_holds_tensor(v, depth + 1) for v in value)
    if type(value) is dict:
        return any(_holds_tensor(v, depth + 1) for v in list(value.values()))
    return False
