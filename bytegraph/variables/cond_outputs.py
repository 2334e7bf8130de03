"""Whether torch.cond's two branches return the same thing, and what to say when not.

The op's outputs are one set of tensors whichever branch runs, so both
branches must return the same pytree with tensors of the same metadata.
``check_same_outputs`` compares the two traced bodies (``Body.structure``
and their output examples) and sorts a difference three ways:

1. **The user's mistake, which eager raises too**: a different pytree
   structure (a tensor against a tuple, a list against a tuple, other dict
   keys or another length), or tensors at the same place of another dtype
   or another number of dimensions. That is a ``UserError`` at compile time
   saying which outputs differ and how, as torch.compile raises one.
2. **Anything eager may accept or decide at run time**: ints of different
   values (torch 2.13 returns them as unbacked ints), sizes that differ in
   the same number of dimensions, other strides, another device, a tensor
   against an int. That is a break: eager's torch.cond runs in Python and
   answers for itself.
3. Case 1 inside a ``try`` or a with-block of the user's (in this frame or
   a caller that inlined it) is a break too, so the handler sees eager's own
   exception, as it would have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported, UserError

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.higher_order import Body

_NAMES = ("true_fn", "false_fn")


def check_same_outputs(tx: Tx, a: Body, b: Body) -> None:
    """Nothing if the branches' outputs agree; else a UserError or a break (above)."""
    if _skeleton(a.structure) != _skeleton(b.structure):
        _user_error(tx, "torch.cond's branches return different structures: true_fn "
                    f"returns {describe(a.structure)}, false_fn returns "
                    f"{describe(b.structure)}")
    mistakes, others = [], []
    pairs = list(zip(_leaves(a.structure), _leaves(b.structure)))
    first_tensors, second_tensors = iter(a.outputs), iter(b.outputs)
    for path, (x, y) in _paths(a.structure, pairs):
        first = next(first_tensors).example if x[0] == "tensor" else None
        second = next(second_tensors).example if y[0] == "tensor" else None
        if first is None or second is None:
            if x != y:
                others.append(f"{_place(path)}: {describe(x)} and {describe(y)}")
            continue
        if first.dtype != second.dtype or first.dim() != second.dim():
            mistakes.append(f"{_place(path)}: {_tensor_text(first)} and {_tensor_text(second)}")
        elif not _same_layout(first, second) or x != y:
            others.append(f"{_place(path)}: {_tensor_text(first)} and {_tensor_text(second)}")
    if mistakes:
        _user_error(tx, "torch.cond's branches return tensors of different dtypes or "
                    "numbers of dimensions (true_fn's and false_fn's): " + "; ".join(mistakes))
    if others:
        raise Unsupported("higher_order_call", "torch.cond's branches return different "
                          "shapes, strides, devices or constants (true_fn's and false_fn's: "
                          + "; ".join(others) + "): eager decides at run time")


def _skeleton(structure: tuple) -> Any:
    """The pytree shape: containers kept, every tensor or int one leaf, None apart."""
    kind = structure[0]
    if kind == "tensor":
        return "leaf"
    if kind == "constant":
        return "none" if structure[1] is None else "leaf"
    if kind == "dict":
        return ("dict", tuple((k, _skeleton(p)) for k, p in structure[1]))
    return (kind, tuple(_skeleton(p) for p in structure[1]))


def _leaves(structure: tuple) -> list[tuple]:
    kind = structure[0]
    if kind in ("tensor", "constant"):
        return [structure]
    parts = [p for _, p in structure[1]] if kind == "dict" else structure[1]
    return [leaf for p in parts for leaf in _leaves(p)]


def _paths(structure: tuple, pairs: list) -> list[tuple[str, Any]]:
    """Each leaf's place (``[1]['k']``) beside its pair, in the order of ``pairs``."""
    places: list[str] = []

    def walk(s: tuple, prefix: str) -> None:
        if s[0] in ("tensor", "constant"):
            places.append(prefix)
        elif s[0] == "dict":
            for k, p in s[1]:
                walk(p, f"{prefix}[{k!r}]")
        else:
            for i, p in enumerate(s[1]):
                walk(p, f"{prefix}[{i}]")

    walk(structure, "")
    return list(zip(places, pairs))


def _place(path: str) -> str:
    return f"output{path}" if path else "the output"


def _same_layout(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.shape != y.shape or x.device != y.device:
        return False
    static = all(type(n) is int for n in (*x.shape, *x.stride(), *y.stride()))
    return not static or x.stride() == y.stride()  # symbolic strides: as before, unchecked


def _tensor_text(t: torch.Tensor) -> str:
    return f"a {str(t.dtype).removeprefix('torch.')} tensor of shape {tuple(t.shape)}"


def describe(structure: tuple) -> str:
    """A branch's result in words: ``(a tensor, a tensor)``, ``[a tensor]``, ``None``."""
    kind = structure[0]
    if kind == "tensor":
        return f"a {str(structure[1]).removeprefix('torch.')} tensor"
    if kind == "constant":
        return repr(structure[1])
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {describe(p)}" for k, p in structure[1]) + "}"
    inner = ", ".join(describe(p) for p in structure[1])
    if kind == "list":
        return f"[{inner}]"
    if kind is tuple:
        return f"({inner}{',' if len(structure[1]) == 1 else ''})"
    return f"{getattr(kind, '__name__', kind)}({inner})"


def _user_error(tx: Tx, message: str) -> None:
    """Raise ``message`` as a UserError, or break where a handler could see eager's error."""
    if _under_a_handler(tx):
        raise Unsupported("higher_order_call", f"{message} (inside a try or with-block: "
                          "eager raises it there)")
    where = "\n  inlined from ".join(str(f) for f in tx.frames())
    raise UserError(f"{message}\n  at {where}")


def _under_a_handler(tx: Tx) -> bool:
    """Whether an exception here reaches a handler of this frame or an inlining caller."""
    frame: Any = tx
    while frame is not None:
        inst = frame.current_inst
        if inst is not None and frame.decoded.runs_code_on_error(inst.index):
            return True
        frame = getattr(frame, "parent", None)
    return False
