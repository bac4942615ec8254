"""Entry point SageMaker runs (sagemaker_program). Self-contained: imports nothing from sagestack.

Single-process digits classifier for now; the distributed program (DDP, checkpoints, resume)
is the training_src issue's work.
"""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch_size_per_device", type=int, default=64)
    args, _ = parser.parse_known_args()

    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.manual_seed(0)
    x, y = load_digits(return_X_y=True)
    x_tr, x_va, y_tr, y_va = train_test_split(x / 16.0, y, test_size=0.2, random_state=0)
    x_tr, x_va = torch.tensor(x_tr, dtype=torch.float32), torch.tensor(x_va, dtype=torch.float32)
    y_tr, y_va = torch.tensor(y_tr), torch.tensor(y_va)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        perm = torch.randperm(len(x_tr))
        for i in range(0, len(perm), args.batch_size_per_device):
            idx = perm[i : i + args.batch_size_per_device]
            loss = torch.nn.functional.cross_entropy(model(x_tr[idx]), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            acc = (model(x_va).argmax(1) == y_va).float().mean().item()
        print(f"epoch={epoch} train_loss={loss.item():.4f} val_accuracy={acc:.4f}", flush=True)
    model_dir = os.environ.get("SM_MODEL_DIR", "model")
    os.makedirs(model_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(model_dir, "model.pth"))
    with open(os.path.join(model_dir, "metrics.json"), "w") as f:
        json.dump({"val_accuracy": acc}, f)


if __name__ == "__main__":
    main()
