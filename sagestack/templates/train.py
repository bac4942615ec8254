"""A training script in the SageMaker container contract, written by `sagestack init`.

The container (and `sagestack local train`) runs `python train.py --epochs 5 --lr 0.01`: the job's
hyperparameters become arguments; SM_MODEL_DIR is where the model must be saved (SageMaker uploads
it as model.tar.gz); SM_CHANNEL_<NAME> holds each input channel's data. Lines such as
`val_accuracy=0.93` are what the job's metric_definitions read.

Replace the data and the model with yours; keep the contract.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
from torch import nn


def load_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled digits (no download); a channel's files would be read from
    os.environ['SM_CHANNEL_TRAIN'] instead."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32) / 16.0
    y = torch.tensor(y, dtype=torch.long)
    split = int(len(x) * 0.8)
    return x[:split], y[:split], x[split:], y[split:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    args, _ = parser.parse_known_args()

    torch.manual_seed(0)
    x_train, y_train, x_val, y_val = load_data()
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        for i in range(0, len(x_train), 64):
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[i : i + 64]), y_train[i : i + 64])
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(x_val).argmax(1) == y_val).float().mean().item()
        print(f"epoch={epoch} train_loss={loss.item():.4f} val_accuracy={accuracy:.4f}", flush=True)

    out = Path(args.model_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out / "model.pth")
    (out / "model.json").write_text(json.dumps({"inputs": 64, "classes": 10}))


if __name__ == "__main__":
    main()
