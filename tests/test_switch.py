"""The switch: torch.compile routed to bytegraph (switch.py) and ``bytegraph run`` (run_command.py).

In-process: every call form of torch.compile and nn.Module.compile returns
bytegraph's compiled object and computes what eager computes; the arguments
reach bytegraph.compile unchanged; the patch is undone exactly, nested or
not; Hugging Face ``generate()`` with a compiled forward gives eager's
tokens. In a subprocess (hard timeout): ``bytegraph run`` runs a script as
python does (argv, ``__main__``, exit status, traceback) and prints the
summary; a Hugging Face ``Trainer`` with ``torch_compile=True`` under it
gives the losses of the uncompiled run and goes through bytegraph.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

import bytegraph
from bytegraph.api import CompiledFunction, CompiledModule
from bytegraph.inspect import cli

TIMEOUT = 120  # seconds, per subprocess: a hang fails the test instead of the CI job
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(bytegraph.__file__)))


def f(x):
    return torch.sin(x) * 2 + 1


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x)) + 1


def compiled_function(compiled):
    """The CompiledFunction behind what the switch returned."""
    if isinstance(compiled, types.MethodType):
        compiled = compiled.__func__
    if isinstance(compiled, CompiledModule):
        compiled = compiled._compiled_forward
    assert isinstance(compiled, CompiledFunction), type(compiled)
    return compiled


# --- every call form ---------------------------------------------------------------------


def form_call(backend):
    return torch.compile(f, backend=backend), f


def form_call_with_keywords(backend):
    return torch.compile(f, backend=backend, fullgraph=True, dynamic=False), f


def form_bare_decorator(backend):
    @torch.compile
    def g(x):
        return f(x)

    return g, f


def form_decorator_with_arguments(backend):
    @torch.compile(fullgraph=True, backend=backend)
    def g(x):
        return f(x)

    return g, f


def form_module(backend):
    net = Net()
    return torch.compile(net, backend=backend), net


def form_module_compile(backend):
    net = Net()
    net.compile(backend=backend)  # torch: self._compiled_call_impl = torch.compile(self._call_impl)
    return net, Net.forward.__get__(net)


def form_torch_compiler_compile(backend):
    return torch.compiler.compile(f, backend=backend), f


FORMS = [form_call, form_call_with_keywords, form_bare_decorator, form_decorator_with_arguments,
         form_module, form_module_compile, form_torch_compiler_compile]


@pytest.mark.parametrize("form", FORMS, ids=lambda form: form.__name__[5:])
def test_every_call_form_is_routed(form, differential, counting_backend) -> None:
    original = torch.compile
    # The bare forms name no backend: the switch's override keeps them off Inductor here.
    override = counting_backend if form is form_bare_decorator else None
    with bytegraph.use_for_torch_compile(backend=override) as switch:
        compiled, eager = form(counting_backend)
    assert torch.compile is original
    assert switch.calls == 1
    target = compiled._compiled_call_impl if form is form_module_compile else compiled
    routed = compiled_function(target)
    x = torch.randn(2, 4)
    differential.check(eager, compiled, (x,))
    assert counting_backend.calls == 1
    assert len(routed.entries) == 1 and len(routed.entries[0].graphs) == 1
    differential.check(eager, compiled, (torch.randn(2, 4),))  # a cache hit
    assert counting_backend.calls == 1


def test_arguments_reach_bytegraph_compile_unchanged(monkeypatch) -> None:
    seen: list[tuple[object, dict]] = []

    def spy(model=None, **kwargs):
        seen.append((model, kwargs))
        return model

    # The signature the issue asks of bytegraph.compile (torch.compile's, less name,
    # recompile_limit, isolate_recompiles and shapes_spec).
    spy.__signature__ = inspect.Signature([
        inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
        *(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
          for name, default in [("fullgraph", False), ("dynamic", None), ("backend", "inductor"),
                                ("mode", None), ("options", None), ("disable", False)]),
    ])
    monkeypatch.setattr("bytegraph.api.compile", spy)
    backend = object()
    options = {"max_autotune": True}
    with bytegraph.use_for_torch_compile():
        torch.compile(f)
        torch.compile(f, backend="eager", fullgraph=True, dynamic=False)
        torch.compile(f, mode="max-autotune", name="region", isolate_recompiles=True)
        torch.compile(f, options=options, disable=True, backend=backend)
        torch.compile(fullgraph=True, dynamic=True)(f)
    assert seen == [
        (f, {}),  # torch's default backend is Inductor, bytegraph's too
        (f, {"backend": "eager", "fullgraph": True, "dynamic": False}),
        (f, {"mode": "max-autotune"}),  # name and isolate_recompiles change no result
        (f, {"options": options, "disable": True, "backend": backend}),
        (f, {"fullgraph": True, "dynamic": True}),
    ]
    assert seen[3][1]["options"] is options


def test_mode_options_and_disable_mean_what_they_mean_to_torch_compile(counting_backend) -> None:
    with bytegraph.use_for_torch_compile():
        assert torch.compile(f, disable=True) is f  # torch.compile returns it unchanged too
        with pytest.raises(RuntimeError, match="Either mode or options"):  # torch's error
            torch.compile(f, mode="max-autotune", options={"max_autotune": True})
        with pytest.raises(ValueError, match="mode='max-autotune' is for Inductor"):
            torch.compile(f, backend=counting_backend, mode="max-autotune")
        assert torch.compile(torch.sin) is torch.sin  # nothing to trace: called as is
    assert counting_backend.calls == 0


def test_mode_with_eager_is_dropped_as_torch_compile_drops_it() -> None:
    x = torch.randn(3)
    torchs = torch.compile(f, backend="eager", mode="max-autotune")(x)  # runs, mode ignored
    with bytegraph.use_for_torch_compile():
        with pytest.warns(UserWarning, match="'eager' ignores it"):
            routed = torch.compile(f, backend="eager", mode="max-autotune")
        assert compiled_function(routed) is not None  # bytegraph's, not torch's
        torch.testing.assert_close(routed(x), torchs)
    with pytest.raises(ValueError, match="is for Inductor"):  # bytegraph.compile itself refuses
        bytegraph.compile(f, backend="eager", mode="max-autotune")


def test_an_override_replaces_the_backend_and_inductors_settings(monkeypatch) -> None:
    seen: list[dict] = []
    monkeypatch.setattr("bytegraph.api.compile", lambda model, **kwargs: seen.append(kwargs))
    with bytegraph.use_for_torch_compile(backend="eager"):
        torch.compile(f, backend="inductor", mode="max-autotune", fullgraph=True)
    assert seen == [{"backend": "eager", "fullgraph": True}]


def test_an_argument_bytegraph_cannot_honour_is_a_one_line_error() -> None:
    with bytegraph.use_for_torch_compile():
        with pytest.raises(TypeError, match="recompile_limit") as error:
            torch.compile(f, recompile_limit=3)
        assert "\n" not in str(error.value)
        with pytest.raises(TypeError, match="recompile_limit"):
            torch.compile(recompile_limit=3)  # refused when the decorator is made
        with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
            torch.compile(f, bogus=1)  # as torch.compile itself refuses it
        with pytest.raises((ValueError, RuntimeError), match="no-such-backend"):
            torch.compile(f, backend="no-such-backend")  # at once, as torch.compile does


# --- the patch and its undoing ----------------------------------------------------------


def test_the_switch_is_undone_exactly() -> None:
    original = torch.compile
    module_compile = torch.nn.Module.compile
    switch = bytegraph.use_for_torch_compile()  # a plain call
    assert torch.compile is not original and switch.active
    switch.undo()
    switch.undo()  # a second undo does nothing
    assert torch.compile is original and not switch.active
    with pytest.raises(ValueError, match="inside"):
        with bytegraph.use_for_torch_compile():
            raise ValueError("inside")
    assert torch.compile is original
    assert torch.nn.Module.compile is module_compile  # nn.Module.compile is reached, not patched


def test_nested_switches_undo_in_any_order(monkeypatch) -> None:
    original = torch.compile
    seen: list[object] = []
    monkeypatch.setattr("bytegraph.api.compile", lambda model, **kwargs: seen.append(kwargs))
    with bytegraph.use_for_torch_compile() as outer:
        routed = torch.compile
        with bytegraph.use_for_torch_compile(backend="eager") as inner:
            assert torch.compile is routed
            torch.compile(f)
        torch.compile(f)  # the inner override ended with the inner switch
        assert torch.compile is routed
    assert torch.compile is original
    assert seen == [{"backend": "eager"}, {}] and (outer.calls, inner.calls) == (1, 1)
    first, second = bytegraph.use_for_torch_compile(), bytegraph.use_for_torch_compile()
    first.undo()  # out of order: still switched while the second one is on
    assert torch.compile is routed
    second.undo()
    assert torch.compile is original


# --- Hugging Face generate() ------------------------------------------------------------


def tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2,
                                     n_head=2)
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("how", ["forward", "module_compile"])
def test_generate_with_a_compiled_forward_gives_eagers_tokens(how, quiet_transformers) -> None:
    model = tiny_gpt2()
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(1))
    settings = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": 0}
    expected = model.generate(ids, **settings)
    with bytegraph.use_for_torch_compile() as switch:
        if how == "forward":
            model.forward = torch.compile(model.forward, backend="eager")
            routed = compiled_function(model.forward)
        else:
            model.compile(backend="eager")
            routed = compiled_function(model._compiled_call_impl)
    assert switch.calls == 1
    tokens = model.generate(ids, **settings)
    assert torch.equal(tokens, expected)
    assert tokens.shape == (2, 5 + 8)
    assert routed.entries and all(e.graphs for e in routed.entries)


# --- bytegraph run ----------------------------------------------------------------------


def bytegraph_run(*args: str, cwd) -> subprocess.CompletedProcess:
    """``python -m bytegraph run ...`` with this checkout's bytegraph, a hard timeout."""
    env = {**os.environ, "PYTHONPATH": ROOT, "PYTHONHASHSEED": "0"}
    return subprocess.run([sys.executable, "-m", "bytegraph", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)


SCRIPT = textwrap.dedent('''\
    import sys
    import torch

    print("argv", sys.argv[1:], __name__, __file__ == sys.argv[0])

    @torch.compile(backend="eager")
    def step(x):
        y = x.sin()
        print("middle")
        return y + 1

    torch.manual_seed(0)
    x = torch.randn(3)
    torch.testing.assert_close(step(x), x.sin() + 1, rtol=0, atol=0)
    print("routed", type(step).__name__)
    if sys.argv[1] == "exit":
        sys.exit(3)
    if sys.argv[1] == "raise":
        def fails():
            raise ValueError("from the script")
        fails()
''')


def test_run_is_python_with_the_switch_on(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = bytegraph_run("train.py", "ok", "--flag", "--", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "argv ['ok', '--flag', '--'] __main__ True" in done.stdout
    assert "routed CompiledFunction" in done.stdout
    summary = done.stderr[done.stderr.index("bytegraph run: train.py"):]
    assert "torch.compile calls routed to bytegraph: 1" in summary
    assert "frames compiled: 2 (1 compiled, 1 resume functions)" in summary
    assert "graphs: 2" in summary
    assert "graph breaks: 1 at 1 place" in summary
    assert "1x train.py:9  call of builtins.print" in summary  # file:line and reason
    assert "recompiles: 0" in summary and "time tracing and compiling:" in summary


def test_run_ends_as_python_ends(tmp_path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    summary_file = tmp_path / "summary.txt"
    done = bytegraph_run("--summary-file", str(summary_file), "train.py", "exit", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "graphs: 2" in summary_file.read_text() and "bytegraph run" not in done.stderr
    done = bytegraph_run("--quiet", "train.py", "raise", cwd=tmp_path)
    assert done.returncode == 1
    traceback = done.stderr.splitlines()
    assert traceback[0] == "Traceback (most recent call last):"
    assert traceback[1].startswith(f'  File "{tmp_path / "train.py"}", line 21, in <module>')
    assert traceback[-1] == "ValueError: from the script"
    assert "bytegraph" not in done.stderr  # no frame of the launcher, no summary


TRAINER = textwrap.dedent('''\
    """A Hugging Face Trainer, uncompiled then with torch_compile=True; prints both losses."""
    import json
    import sys

    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    transformers.logging.set_verbosity_error()


    def losses(compiled):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32,
                                           n_layer=2, n_head=2))
        ids = torch.randint(0, 64, (8, 12), generator=torch.Generator().manual_seed(1))
        rows = [{"input_ids": row, "labels": row} for row in ids]
        args = TrainingArguments(
            output_dir=sys.argv[1], torch_compile=compiled,
            torch_compile_backend="eager" if compiled else None, max_steps=3,
            per_device_train_batch_size=2, learning_rate=1e-3, report_to=[], use_cpu=True,
            save_strategy="no", logging_steps=1, seed=0, data_seed=0, disable_tqdm=True,
        )
        trainer = Trainer(model=model, args=args, train_dataset=rows)
        trainer.train()
        print("wrapped", type(trainer.model_wrapped).__name__)
        return [h["loss"] for h in trainer.state.log_history if "loss" in h]


    print("LOSSES", json.dumps({"eager": losses(False), "compiled": losses(True)}))
''')


def test_hugging_face_trainer_with_torch_compile_under_run(tmp_path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")  # the Trainer needs it
    (tmp_path / "train.py").write_text(TRAINER)
    summary_file = tmp_path / "summary.txt"
    done = bytegraph_run("--summary-file", str(summary_file), "train.py", str(tmp_path / "out"),
                         cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("LOSSES ")]
    losses = json.loads(line.removeprefix("LOSSES "))
    assert len(losses["eager"]) == 3
    assert losses["compiled"] == pytest.approx(losses["eager"], rel=1e-6, abs=1e-6)
    # The uncompiled run's model stays as it is; the compiled run's is bytegraph's.
    assert "wrapped GPT2LMHeadModel" in done.stdout and "wrapped CompiledModule" in done.stdout
    summary = summary_file.read_text()
    assert "torch.compile calls routed to bytegraph: 1" in summary
    frames = int(summary.split("frames compiled: ")[1].split()[0])
    graphs = int(summary.split("graphs: ")[1].split()[0])
    assert frames >= 1 and graphs >= 1, summary


def test_run_help_missing_script_and_console_script(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["run", "--help"])
    assert ended.value.code == 0 and "usage: bytegraph run" in capsys.readouterr().out
    assert cli.main(["run", str(tmp_path / "missing.py")]) == 1
    assert "no such script" in capsys.readouterr().err
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert 'bytegraph = "bytegraph.inspect.cli:main"' in f.read()  # [project.scripts]
