"""Run a user's script as ``__main__`` for the command line, one function compiled by name.

``run_as_python(path, args)`` (``bytegraph run``) is ``python path args...``
itself: runpy runs the file, and the script's exceptions and exit propagate.

``run_script(path, args, target)`` does what ``python path args...`` does:
the script runs as module ``__main__``, with ``sys.argv`` set to the script
and its arguments and the script's folder first on ``sys.path``. With a
``target`` (``"f"``, ``"Net"`` or ``"Net.forward"``), the script's syntax
tree is changed before it runs: after every module-level statement that
binds the name (a ``def``, a ``class``, an assignment, an import, at the top
or inside a module-level ``if``/``try``/``with``/loop), one statement binds
it again to its compiled form::

    def f(x): ...
    f = __import__('bytegraph.inspect.script', fromlist=['_']).bind_target(f, 'f')

so every later call of ``f`` from the script (a module-level call, one in
``if __name__ == "__main__":``, a call from another function) runs compiled.
Line numbers are kept: tracebacks and reports point at the user's lines.

``bind_target`` compiles a function or an nn.Module instance with
``bytegraph.compile``, compiles an nn.Module class's ``forward`` in place,
and leaves a value the script compiled itself as it is. Errors a person can
fix (no such name, a script that raises or exits non-zero) are
``ScriptError`` with a one-line message.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import runpy
import sys
import traceback
import types
from typing import Any

import torch

from bytegraph.graph.backends import Backend


class ScriptError(Exception):
    """Something about the script that the command line reports in one line."""


@dataclasses.dataclass
class _Target:
    name: str  # "f" or "Net.forward"
    backend: Backend
    compiled: list[Any] = dataclasses.field(default_factory=list)  # what bind_target made


_active: _Target | None = None


def check_script(path: str) -> ast.Module:
    """The script's syntax tree; ScriptError if it is missing or not Python."""
    if not os.path.isfile(path):
        raise ScriptError(f"no such script: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        return ast.parse(source, path)
    except SyntaxError as e:
        raise ScriptError(f"{path}:{e.lineno}: SyntaxError: {e.msg}") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ScriptError(f"cannot read {path}: {e}") from None


def run_script(
    path: str, args: list[str], target: str | None = None, backend: Backend | None = None
) -> list[Any]:
    """Run the script; the compiled forms of ``target`` it bound (empty without one)."""
    global _active
    tree = check_script(path)
    if target is not None:
        _insert_binds(tree, path, target)
    path = os.path.abspath(path)  # as python itself names __main__'s file
    code = compile(tree, path, "exec")
    _active = _Target(target, backend) if target is not None else None
    try:
        _exec_as_main(code, path, args)
        return list(_active.compiled) if _active is not None else []
    finally:
        _active = None


def run_as_python(path: str, args: list[str]) -> None:
    """Run the script as ``python path args...`` does (``bytegraph run``): as ``__main__``
    through runpy, ``sys.argv`` its path and arguments, its folder first on ``sys.path``
    (in place of the launcher's). Its exceptions, SystemExit included, propagate unchanged."""
    path = os.path.abspath(path)
    saved = sys.argv, list(sys.path)
    sys.argv = [path, *args]
    sys.path[:1] = [os.path.dirname(path)]
    try:
        runpy.run_path(path, run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved


def bind_target(value: Any, name: str) -> Any:
    """What the script's ``name`` is bound to while it runs under the command line."""
    target = _active
    if target is None:
        return value
    from bytegraph.api import CompiledFunction, CompiledModule, compile

    if isinstance(value, (CompiledFunction, CompiledModule)):
        compiled = value
    elif isinstance(value, type) and issubclass(value, torch.nn.Module):
        bind_method(value, "forward", name)
        return value
    elif isinstance(value, (types.FunctionType, types.MethodType, torch.nn.Module)):
        compiled = compile(value, backend=target.backend)
    else:
        raise ScriptError(
            f"{name} is a {type(value).__name__}, not a function, nn.Module or nn.Module class"
        )
    target.compiled.append(compiled)
    return compiled


def bind_method(owner: Any, attribute: str, name: str) -> None:
    """Compile the function ``owner.attribute`` (a class's method) in place."""
    target = _active
    if target is None:
        return
    from bytegraph.api import CompiledFunction, compile

    if not isinstance(owner, type):
        raise ScriptError(f"{name}: {owner!r} is not a class")
    value = getattr(owner, attribute, None)
    if isinstance(value, CompiledFunction):
        target.compiled.append(value)
        return
    if not isinstance(value, types.FunctionType):
        raise ScriptError(f"{name} is not a function defined in class {owner.__name__}")
    compiled = compile(value, backend=target.backend)
    setattr(owner, attribute, compiled)
    target.compiled.append(compiled)


def _exec_as_main(code: types.CodeType, path: str, args: list[str]) -> None:
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    saved = sys.argv, list(sys.path), sys.modules.get("__main__")
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(path))
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise ScriptError(f"the script exited with status {e.code}") from None
    except ScriptError:
        raise
    except Exception as e:  # noqa: BLE001  (the script's own error: reported in one line)
        raise ScriptError(_error_line(e, path)) from None
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        if saved[2] is not None:
            sys.modules["__main__"] = saved[2]


def _error_line(error: BaseException, path: str) -> str:
    """``the script raised ValueError: bad (s.py:12)``: the innermost frame in the script."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == path]
    where = f" ({path}:{frames[-1].lineno})" if frames else ""
    message = "".join(traceback.format_exception_only(error)).strip().replace("\n", " ")
    return f"the script raised {message}{where}"


# --- the rewrite -----------------------------------------------------------------------


def _insert_binds(tree: ast.Module, path: str, target: str) -> None:
    owner, _, attribute = target.partition(".")
    if not owner.isidentifier() or (attribute and not attribute.isidentifier()):
        raise ScriptError(f"not a function name: {target!r} (use NAME or Class.method)")
    if attribute:
        bind = f"__import__('bytegraph.inspect.script', fromlist=['_']).bind_method({owner}, " \
               f"{attribute!r}, {target!r})"
    else:
        bind = f"{owner} = __import__('bytegraph.inspect.script', fromlist=['_']).bind_target(" \
               f"{owner}, {owner!r})"
    if not _rewrite_body(tree.body, owner, ast.parse(bind).body[0]):
        raise ScriptError(f"{path} defines no {target!r} at module level")


def _rewrite_body(body: list[ast.stmt], name: str, bind: ast.stmt) -> bool:
    """Insert ``bind`` after each statement of ``body`` (and of its nested module-level
    blocks) that binds ``name``; whether any did."""
    found = False
    index = 0
    while index < len(body):
        statement = body[index]
        for block in _blocks(statement):
            found |= _rewrite_body(block, name, bind)
        if name in _bound_names(statement):
            copy = _clone(bind)
            for node in ast.walk(copy):  # errors in it point at the binding statement
                ast.copy_location(node, statement)
            body.insert(index + 1, ast.fix_missing_locations(copy))
            found = True
            index += 1
        index += 1
    return found


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists inside a module-level compound statement (not function bodies)."""
    if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While)):
        return [statement.body, statement.orelse]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [statement.body]
    if isinstance(statement, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        handlers = [h.body for h in statement.handlers]
        return [statement.body, *handlers, statement.orelse, statement.finalbody]
    return []


def _bound_names(statement: ast.stmt) -> set[str]:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in statement.names}
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)) and statement.value is not None:
        targets = [statement.target]
    return {
        node.id for t in targets for node in ast.walk(t)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }


def _clone(node: ast.stmt) -> ast.stmt:
    return ast.parse(ast.unparse(node)).body[0]
