"""The model and the data of the torch example: a sibling module of ``train.py``, so it travels
with the function to every rank (distcomp ships the whole folder)."""

from __future__ import annotations

import torch
from torch import nn


def make_data(samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """y = x . w + noise: the same data on every rank (same seed); each rank trains on its share."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 8, generator=g)
    w = torch.randn(8, 1, generator=g)
    return x, x @ w + 0.01 * torch.randn(samples, 1, generator=g)


def build_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)  # DDP broadcasts rank 0's weights anyway; this keeps runs repeatable
    return nn.Linear(8, 1)
