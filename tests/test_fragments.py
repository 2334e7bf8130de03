"""Reuse of a traced repeated block (translate/fragments.py).

A stack of identical blocks is traced once per block kind: the later blocks are
copies of the first one's graph fragment. Each test compiles a twin of a model
and compares it with eager (outputs, gradients, the modules' state after the
call), counts the reused calls, and where reuse happens checks that the graph
is the one plain inlining builds (same ops in the same order). Where one block
differs (a parameter of another shape, a hook on a submodule, the training flag,
an attribute its forward branches on, a forward that changes state, a global
that changes between blocks), that block must be traced as usual.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from torch import nn

import bytegraph
from bytegraph import config
from bytegraph.translate import fragments

SCALE = 1.0  # a global read by GlobalBlock


class Block(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)
        self.drop = nn.Dropout(0.25)
        self.shift = nn.Parameter(torch.randn(dim))
        self.use_shift = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(torch.relu(self.fc(self.norm(x))))
        if self.use_shift:
            h = h + self.shift
        return x + h


class CountingBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls = self.calls + 1  # a state change: never a copy
        return x + self.fc(x)


class InPlaceBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.unsqueeze_(0)  # writes into the caller's tensor (its metadata, here)
        return self.fc(x).squeeze(0)


class GlobalBlock(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x) * SCALE


class ScaledBlock(Block):
    scale = 1.0  # a class attribute: ClassAttributeStack sets it before each block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(self.norm(x)) * self.scale


def checked(forward):
    """A decorator as Hugging Face writes them (``deprecate_kwarg``): a closure over the
    function it wraps, with ``functools.wraps``."""
    name = forward.__name__

    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        if "x" in kwargs and name != "forward":
            raise TypeError(f"{name} takes x positionally")
        return forward(self, *args, **kwargs)

    return wrapper


class DecoratedBlock(Block):
    @checked
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Block.forward(self, x)


def _cell_scale():
    scale = 1.0

    def set_scale(value: float) -> None:
        nonlocal scale
        scale = value

    def scale_now() -> float:
        return scale

    def scaled(forward):
        @functools.wraps(forward)
        def wrapper(self, x):
            return forward(self, x) * scale  # the cell set_scale writes

        return wrapper

    return set_scale, scale_now, scaled


SET_SCALE, SCALE_NOW, SCALED = _cell_scale()


class CellScaledBlock(Block):
    @SCALED
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Block.forward(self, x)


class Stack(nn.Module):
    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Made in the trace, as an embedding's output: the first block's argument is read
        # through no source (a frame input is part of the key, so it is a key of its own).
        x = torch.tanh(x)
        for block in self.blocks:
            x = block(x)
        return x


class PlainStack(Stack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class GlobalStack(Stack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global SCALE
        x = torch.tanh(x)
        for i, block in enumerate(self.blocks):
            SCALE = 1.0 + i  # the global each block reads changes between blocks
            x = block(x)
        return x


class ClassAttributeStack(Stack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        for i, block in enumerate(self.blocks):
            ScaledBlock.scale = 2.0 + i  # a class-level store the block's forward reads
            x = block(x * block.scale)  # its lookup of ``scale`` is then made a second time
        return x


class CellStack(Stack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        for i, block in enumerate(self.blocks):
            SET_SCALE(2.0 + i)  # a write to the cell the blocks' decorator reads
            x = block(x)
        return x


class SharedStack(nn.Module):
    """One block called three times (weights shared, as ALBERT's layers)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(x)
        for _ in range(3):
            x = self.block(x)
        return x


def _stack(n: int = 4, kind: type[Block] = Block) -> Stack:
    torch.manual_seed(0)
    return Stack([kind() for _ in range(n)]).eval()


def _ops(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def _run(
    model: nn.Module, x: torch.Tensor, counting_backend, reuse: bool = True, grads: bool = True
):
    """Eager on ``model``, compiled on its twin; equal outputs, gradients and state."""
    model.zero_grad(set_to_none=True)
    twin = copy.deepcopy(model)
    fragments.REUSED.clear()
    config.reuse_fragments = reuse
    try:
        compiled = bytegraph.compile(twin, backend=counting_backend)
        torch.manual_seed(1)
        got = compiled(x.clone().requires_grad_())
        torch.manual_seed(1)
        want = model(x.clone().requires_grad_())
    finally:
        config.reuse_fragments = True
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    if grads:
        got.sum().backward()
        want.sum().backward()
    for (name, p), q in zip(twin.named_parameters(), model.parameters(), strict=True):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0, msg=name)
    assert vars(twin).keys() == vars(model).keys()
    for a, b in zip(twin.modules(), model.modules(), strict=True):
        plain = {k: v for k, v in vars(a).items() if not k.startswith("_")}
        assert plain == {k: v for k, v in vars(b).items() if not k.startswith("_")}
    return dict(fragments.REUSED)


def _same_graph_as_plain(model: nn.Module, x: torch.Tensor, counting_backend) -> None:
    _run(model, x, counting_backend, reuse=False)
    plain = _ops(counting_backend.graphs[-1])
    _run(model, x, counting_backend)
    assert _ops(counting_backend.graphs[-1]) == plain


def test_identical_blocks_are_traced_once(counting_backend) -> None:
    model, x = _stack(), torch.randn(2, 8)
    assert _run(model, x, counting_backend) == {"Block.forward": 3}


def test_a_frame_input_is_part_of_the_key(counting_backend) -> None:
    """Block 0 gets the frame's input (read through a source), the others an op's result:
    block 1 is traced (its one-node parts inlined again: fragments.MIN_NODES), blocks 2
    and 3 copied whole."""
    torch.manual_seed(0)
    model, x = PlainStack([Block() for _ in range(4)]).eval(), torch.randn(2, 8)
    reused = _run(model, x, counting_backend)
    assert reused == {"Block.forward": 2}
    assert counting_backend.calls == 1
    _same_graph_as_plain(model, x, counting_backend)


def test_a_call_of_fewer_nodes_than_min_nodes_is_inlined_again(counting_backend) -> None:
    """Copying a one-node call (a Linear) costs more than tracing it: never recorded."""
    model, x = nn.Sequential(*(nn.Linear(8, 8) for _ in range(4))).eval(), torch.randn(2, 8)
    assert fragments.MIN_NODES > 1
    assert _run(model, x, counting_backend) == {}
    assert counting_backend.calls == 1
    _same_graph_as_plain(model, x, counting_backend)


def test_training_mode_with_dropout(counting_backend) -> None:
    model, x = _stack().train(), torch.randn(2, 8)
    assert _run(model, x, counting_backend) == {"Block.forward": 3}
    _same_graph_as_plain(model, x, counting_backend)


def test_one_block_called_three_times(counting_backend) -> None:
    torch.manual_seed(0)
    model, x = SharedStack().eval(), torch.randn(2, 8)
    # The second call is a copy of the first; the third, the loop's step that makes the
    # second call, copied whole (loop_fragments.py: ``for _ in range(3)``).
    assert _run(model, x, counting_backend) == {"Block.forward": 1, "SharedStack.forward": 1}
    _same_graph_as_plain(model, x, counting_backend)


def test_the_switch_turns_reuse_off(counting_backend) -> None:
    assert _run(_stack(), torch.randn(2, 8), counting_backend, reuse=False) == {}


def _changed(change) -> Stack:
    model = _stack()
    change(model.blocks[2])
    return model


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda b: setattr(b, "shift", nn.Parameter(torch.randn(1))), id="shape"),
        pytest.param(lambda b: b.fc.register_forward_hook(lambda m, i, o: o * 2), id="hook"),
        pytest.param(lambda b: b.train(), id="training"),
        pytest.param(lambda b: setattr(b, "use_shift", False), id="branch_attribute"),
        pytest.param(lambda b: setattr(b.norm, "eps", 0.5), id="constant_attribute"),
    ],
)
def test_a_block_that_differs_is_traced(counting_backend, change) -> None:
    model = _changed(change)
    # blocks 1 and 3 are copies of block 0; block 2 is traced (its parts may be copies)
    reused = _run(model, torch.randn(2, 8), counting_backend)
    assert reused.get("Block.forward") == 2


def test_a_block_of_another_dtype_is_traced(counting_backend) -> None:
    model = _stack()
    model.blocks[2].shift.data = model.blocks[2].shift.data.half()  # float32 + float16: float32
    assert _run(model, torch.randn(2, 8), counting_backend).get("Block.forward") == 2


def test_a_block_that_changes_state_is_never_copied(counting_backend) -> None:
    model = _stack(kind=CountingBlock)
    for block in model.blocks:
        block.calls = 0
    assert "CountingBlock.forward" not in _run(model, torch.randn(2, 8), counting_backend)


def test_a_block_that_writes_into_its_argument_is_never_copied(counting_backend) -> None:
    model = _stack(kind=InPlaceBlock)
    reused = _run(model, torch.randn(2, 8), counting_backend, grads=False)
    assert "InPlaceBlock.forward" not in reused


def test_a_global_that_changes_between_blocks(counting_backend) -> None:
    torch.manual_seed(0)
    model = GlobalStack([GlobalBlock() for _ in range(3)]).eval()
    assert "GlobalBlock.forward" not in _run(model, torch.randn(2, 8), counting_backend)
    assert SCALE == 3.0


def test_a_global_read_by_identical_blocks(counting_backend) -> None:
    global SCALE
    SCALE = 3.0
    model = Stack([GlobalBlock() for _ in range(3)]).eval()
    assert _run(model, torch.randn(2, 8), counting_backend) == {"GlobalBlock.forward": 2}
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend)
    x = torch.randn(2, 8)
    compiled(x)
    SCALE = 5.0  # the guard on the global sees it: a new trace, the right result
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    SCALE = 1.0


def test_a_class_attribute_that_changes_between_blocks(counting_backend) -> None:
    # The blocks' class-level ``scale`` changes before each block; each block's lookup of
    # it is a read of the trace's log (also when an earlier lookup is remembered,
    # variables/user_defined.py), so no block is a copy of the one before.
    torch.manual_seed(0)
    model = ClassAttributeStack([ScaledBlock() for _ in range(3)]).eval()
    x = torch.randn(2, 8)
    fragments.REUSED.clear()
    try:
        got = bytegraph.compile(copy.deepcopy(model), backend=counting_backend)(x)
        assert ScaledBlock.scale == 4.0
        ScaledBlock.scale = 1.0
        torch.testing.assert_close(got, model(x), rtol=0, atol=0)
        assert ScaledBlock.scale == 4.0
    finally:
        ScaledBlock.scale = 1.0
    assert "ScaledBlock.forward" not in fragments.REUSED
    assert len(counting_backend.graphs) == 1


def test_decorated_blocks_are_copied_whole(counting_backend) -> None:
    """The decorator's wrapper is a closure: one function object for every block, so
    one set of cells, and the copy is made at the wrapper (its steps not traced again)."""
    model, x = _stack(kind=DecoratedBlock), torch.randn(2, 8)
    assert _run(model, x, counting_backend) == {"checked.<locals>.wrapper": 3}
    assert counting_backend.calls == 1
    _same_graph_as_plain(model, x, counting_backend)


def test_a_closure_cell_that_changes_between_blocks(counting_backend) -> None:
    """The wrapper reads a cell the stack writes before each block: the wrapper is traced
    for every block (the inner forward, which does not read it, is still a copy)."""
    torch.manual_seed(0)
    model, x = CellStack([CellScaledBlock() for _ in range(3)]).eval(), torch.randn(2, 8)
    reused = _run(model, x, counting_backend)
    assert "_cell_scale.<locals>.scaled.<locals>.wrapper" not in reused
    assert reused == {"CellScaledBlock.forward": 2}
    # The cell as each leaves it: the compiled call's stores are replayed, as eager's run.
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend)
    SET_SCALE(0.0)
    got = compiled(x)
    after_compiled = SCALE_NOW()
    SET_SCALE(0.0)
    torch.testing.assert_close(got, model(x), rtol=0, atol=0)
    assert after_compiled == SCALE_NOW() == 4.0
    SET_SCALE(1.0)


def test_blocks_sharing_a_submodule(counting_backend) -> None:
    model = _stack()
    model.blocks[2].fc = model.blocks[0].fc
    reused = _run(model, torch.randn(2, 8), counting_backend)
    assert reused.get("Block.forward", 0) <= 2


def test_no_reuse_with_dynamic_shapes(counting_backend) -> None:
    twin = copy.deepcopy(_stack())
    fragments.REUSED.clear()
    compiled = bytegraph.compile(twin, backend=counting_backend, dynamic=True)
    x = torch.randn(3, 8)
    torch.testing.assert_close(compiled(x), twin(x))
    assert not fragments.REUSED


def test_the_compiled_code_checks_each_block(counting_backend) -> None:
    """The copied block's guards are installed: changing block 3 later recompiles."""
    model = _stack()
    twin = copy.deepcopy(model)
    compiled = bytegraph.compile(twin, backend=counting_backend)
    x = torch.randn(2, 8)
    compiled(x)
    for m in (model, twin):
        m.blocks[3].use_shift = False
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 2


def _guards(model: nn.Module, reuse: bool, monkeypatch) -> set[tuple[str, str, str]]:
    """The guards of the trace of a twin of ``model``: kind, source, expected value (an
    ID_MATCH's id aside: the twin's objects are new)."""
    from bytegraph.graph.output_graph import OutputGraph

    outputs: list[OutputGraph] = []
    init = OutputGraph.__init__

    def recording_init(self: OutputGraph, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        outputs.append(self)

    with monkeypatch.context() as patch:
        patch.setattr(OutputGraph, "__init__", recording_init)
        patch.setattr(config, "reuse_fragments", reuse)
        fragments.REUSED.clear()
        bytegraph.compile(copy.deepcopy(model), backend="eager")(torch.randn(2, 8))
    assert len(outputs) == 1 and bool(fragments.REUSED) == reuse
    return {
        (g.kind.value, g.source.expr(), "" if g.kind.value == "id_match" else repr(g.expected))
        for g in outputs[0].guards.values()
    }


@pytest.mark.parametrize("make", [_stack, lambda: SharedStack().eval()], ids=["stack", "shared"])
def test_the_copies_install_the_guards_plain_inlining_makes(make, monkeypatch) -> None:
    torch.manual_seed(0)
    model = make()
    assert _guards(model, True, monkeypatch) == _guards(model, False, monkeypatch)
