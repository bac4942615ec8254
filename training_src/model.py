"""Small models for the digits example: a CNN for image-shaped input, an MLP for flat features."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, in_channels: int, num_classes: int, size: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * (size // 2) ** 2, 128), nn.ReLU(), nn.Linear(128, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class MLP(nn.Module):
    def __init__(self, features: int, num_classes: int, hidden: int = 256) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_model(kind: str, sample: torch.Tensor, num_classes: int, width: int = 0) -> nn.Module:
    """kind: 'cnn' (needs (C, H, W) input), 'mlp', or 'auto' (cnn for images, else mlp);
    width: the MLP's hidden size (0: 256; bench/gpu.py makes it billions of FLOPs per sample)."""
    is_image = sample.dim() == 3 and sample.shape[1] == sample.shape[2]
    if kind == "auto":
        kind = "cnn" if is_image else "mlp"
    if kind == "cnn":
        if not is_image:
            raise ValueError(
                f"model 'cnn' needs square (C, H, W) inputs; the data has shape {tuple(sample.shape)}"
            )
        return SmallCNN(sample.shape[0], num_classes, sample.shape[1])
    if kind == "mlp":
        return MLP(int(sample.numel()), num_classes, hidden=width or 256)
    raise ValueError(f"unknown model '{kind}'; use cnn, mlp or auto")
