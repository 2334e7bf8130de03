"""What ``compile()`` compiles for a callable: like torch.compile, it accepts any callable.

``see_through(value)`` first removes the wrappers that compiling leaves, as
many layers as there are, so compiling a compiled callable compiles the
original once with the new settings (no wrapper around a wrapper):

1. torch.compile's: it marks what it returns with ``_is_torch_compile``; an
   OptimizedModule keeps the module as ``_orig_mod``, a compiled function
   keeps the callable as ``_torchdynamo_orig_callable`` (followed only where
   ``_torchdynamo_wrapper_id`` is the wrapper's own id, as torch does, so a
   ``functools.wraps`` copy of those attributes is not mistaken for a wrapper).
   Wrappers torch.compiler.disable makes carry no ``_is_torch_compile`` and
   are left alone.
2. bytegraph's: a CompiledModule's ``_orig_mod``, a CompiledFunction's ``fn``.

A method bound to either kind of compiled function is the original bound to
the same object.

``compile_other(value, compile_)`` then handles what is neither a function,
a method nor an nn.Module:

* ``functools.partial``: the same partial over the compiled ``func``;
* an object whose class defines ``__call__`` in Python: that ``__call__``,
  compiled and bound to the object;
* a class: an nn.Module class has ``forward`` compiled in place, another
  class its Python ``__call__`` (what torch.compile does to a class);
* a builtin or any other callable with no Python code to trace (torch.sin,
  a C extension's function): returned as is, so it runs as it does eagerly.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch


def see_through(value: Any) -> Any:
    """``value`` without the compiled wrappers around it (torch.compile's and bytegraph's)."""
    while True:
        inner = _wrapped(value)
        if inner is None:
            return value
        value = inner


def _wrapped(value: Any) -> Any:
    """What one compiled wrapper wraps; None if ``value`` is not one."""
    from bytegraph.api import CompiledFunction
    from bytegraph.compiled_module import CompiledModule

    if isinstance(value, CompiledModule):
        return value._orig_mod
    if isinstance(value, CompiledFunction):
        return value.fn
    if isinstance(value, types.MethodType):  # a compiled function bound as a method
        inner = _wrapped(value.__func__)
        return None if inner is None else types.MethodType(inner, value.__self__)
    if getattr(value, "_is_torch_compile", False) is not True:
        return None
    if isinstance(value, torch.nn.Module):
        return value.__dict__.get("_modules", {}).get("_orig_mod")
    if getattr(value, "_torchdynamo_wrapper_id", None) == id(value):
        return getattr(value, "_torchdynamo_orig_callable", None)
    return None


def compile_other(value: Any, compile_: Callable[[Any], Any]) -> Any:
    """``value`` (not a function, method or nn.Module) compiled where it has Python code."""
    if not callable(value):
        raise TypeError(
            f"bytegraph.compile expects a function, method, nn.Module or other callable, "
            f"not {type(value).__name__}"
        )
    if isinstance(value, functools.partial):
        return functools.partial(compile_(value.func), *value.args, **value.keywords)
    if isinstance(value, type):
        return _compile_class(value, compile_)
    call = _python_call(type(value))
    if call is not None:
        return compile_(types.MethodType(call, value))
    return value


def _compile_class(cls: type, compile_: Callable[[Any], Any]) -> type:
    """torch.compile of a class: its instances' calls compiled, by changing the class."""
    name = "forward" if issubclass(cls, torch.nn.Module) else "__call__"
    method = _python_call(cls) if name == "__call__" else see_through(cls.forward)
    if not isinstance(method, types.FunctionType):
        raise TypeError(
            f"bytegraph.compile: {cls.__name__} is a type whose instances' {name} is not "
            "Python code; compile a function, an nn.Module or a callable object instead"
        )
    setattr(cls, name, compile_(method))
    return cls


def _python_call(cls: type) -> types.FunctionType | None:
    """The ``__call__`` that ``cls``'s instances run, if it is Python code (or compiled)."""
    for klass in cls.__mro__:
        if "__call__" in klass.__dict__:
            call = see_through(klass.__dict__["__call__"])
            return call if isinstance(call, types.FunctionType) else None
    return None
