"""Breaks to look at: bytegraph explain examples/see_inside.py --function step --html r.html"""

import torch


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x).relu()


def step(model: Block, x: torch.Tensor) -> torch.Tensor:
    y = model(x)
    print("batch of", len(x))  # print: a graph break
    if y.mean() > 0.1:  # a Python branch on a tensor's value: a graph break
        y = y * 2
    return y.softmax(-1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Block()
    with torch.no_grad():
        for batch in (4, 4, 6):  # a new batch size compiles again, size-generic
            step(model, torch.randn(batch, 8))
