"""The plain torch models the benchmarks share: an MLP and a small CNN.

Kept apart from bench/models.py, which imports bytegraph, so that
bench/cold_start.py's fresh processes can build them before the clock starts
and then time bytegraph's import.
"""

from __future__ import annotations

import torch
from torch import nn


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 64),
                         nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(x.mean(dim=(2, 3)))
