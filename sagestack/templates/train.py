"""A training script in the SageMaker container contract, written by `sagestack init`.

The container (and `sagestack local train`) runs `python train.py --epochs 5 --lr 0.01`: the job's
hyperparameters become arguments; SM_MODEL_DIR is where the model must be saved (SageMaker uploads
it as model.tar.gz); SM_CHANNEL_<NAME> holds each input channel's data. The job's
metric_definitions (regexes such as `val_accuracy=([0-9.]+)`) read the values from the lines it
prints, in the cloud and in `sagestack local train` alike. What it saves is what SageMaker's
PyTorch inference container loads, and `sagestack local serve` as it does: model.pt (TorchScript),
model_info.json (the input shape) and code/inference.py (the serving contract, beside this file).

Replace the data and the model with yours; keep the contract.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import torch
from torch import nn


def load_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled digits (no download); a channel's files would be read from
    os.environ['SM_CHANNEL_TRAIN'] instead."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16.0  # 8x8 images, one channel
    y = torch.tensor(y, dtype=torch.long)
    split = int(len(x) * 0.8)
    return x[:split], y[:split], x[split:], y[split:]


def report(**values: float | int) -> None:
    """One progress line. SageMaker applies the job's metric_definitions to every line of the log,
    so `train_loss=0.41` here becomes a CloudWatch datapoint in the cloud as it does locally. The
    `metrics:` prefix and step / total_steps are for `sagestack local train` alone (its progress
    bar: step of total and an ETA): they are not metric_definitions, so SageMaker publishes no
    'step' metric (it allows 40 definitions per job) and the container sees an ordinary line."""
    pairs = (f"{k}={v}" if isinstance(v, int) else f"{k}={v:.4f}" for k, v in values.items())
    print("metrics: " + " ".join(pairs), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    args, _ = parser.parse_known_args()

    torch.manual_seed(0)
    x_train, y_train, x_val, y_val = load_data()
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    batches = range(0, len(x_train), 64)
    total_steps, step = args.epochs * len(batches), 0
    for epoch in range(args.epochs):
        model.train()
        for i in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[i : i + 64]), y_train[i : i + 64])
            loss.backward()
            optimizer.step()
            step += 1
            if step % 5 == 0 and i + 64 < len(x_train):  # the epoch's last step reports below
                report(epoch=epoch, step=step, total_steps=total_steps, train_loss=loss.item())
        model.eval()
        with torch.no_grad():
            val_loss = loss_fn(model(x_val), y_val).item()
            accuracy = (model(x_val).argmax(1) == y_val).float().mean().item()
        report(
            epoch=epoch,
            step=step,
            total_steps=total_steps,
            train_loss=loss.item(),
            val_loss=val_loss,
            val_accuracy=accuracy,
        )

    save(model, x_val[:1], Path(args.model_dir))


def save(model: nn.Module, example: torch.Tensor, out: Path) -> None:
    """What the PyTorch inference container loads from model.tar.gz (and `sagestack local serve`
    from this folder): the model as TorchScript, its input shape, and the serving contract."""
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    torch.jit.trace(model, example).save(str(out / "model.pt"))
    info = {"input_shape": list(example.shape), "num_classes": 10}
    (out / "model_info.json").write_text(json.dumps(info, indent=2))
    (out / "code").mkdir(exist_ok=True)  # model_fn / input_fn / predict_fn / output_fn
    shutil.copyfile(Path(__file__).resolve().parent / "inference.py", out / "code" / "inference.py")


if __name__ == "__main__":
    main()
