"""Training data: the SageMaker training channel (.npz / .csv / .pt), or scikit-learn's bundled
digits dataset (no download) when no channel is given."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


class DataError(ValueError):
    """Input data that cannot be used; the message says which file and what to do."""


@dataclass(frozen=True)
class Dataset:
    x: torch.Tensor  # float32, (N, C, H, W) or (N, F)
    y: torch.Tensor  # int64, (N,)
    source: str

    @property
    def num_classes(self) -> int:
        return int(self.y.max().item()) + 1


def load_digits_dataset() -> Dataset:
    x, y = _digits()
    images = torch.tensor(x / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    return Dataset(images, torch.tensor(y, dtype=torch.int64), "scikit-learn digits (bundled)")


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits table, read the way load_digits reads it (np.loadtxt of
    datasets/data/digits.csv.gz) without importing scikit-learn, which costs every training process
    seconds at start; load_digits itself where the file is not where it has always been."""
    import importlib.util

    found = importlib.util.find_spec("sklearn")
    table = (
        Path(found.origin).parent / "datasets" / "data" / "digits.csv.gz" if found and found.origin else None
    )
    if table is not None and table.is_file():
        data = np.loadtxt(table, delimiter=",")
        return data[:, :-1], data[:, -1].astype(int)
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


def _load_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path) as data:
                if "x" not in data or "y" not in data:
                    raise DataError(
                        f"{path}: an .npz file needs arrays 'x' and 'y' (found {', '.join(data.files)})"
                    )
                return data["x"], data["y"]
        if suffix == ".csv":
            table = np.loadtxt(path, delimiter=",", ndmin=2)
            return table[:, :-1], table[:, -1]
        if suffix == ".pt":
            data = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(data, dict) or "x" not in data or "y" not in data:
                raise DataError(f"{path}: a .pt file needs a dict with tensors 'x' and 'y'")
            return data["x"].numpy(), data["y"].numpy()
    except DataError:
        raise
    except Exception as e:
        raise DataError(f"{path}: cannot read it as {suffix[1:]} ({type(e).__name__}: {e})") from None
    raise DataError(f"{path}: unsupported file type '{suffix}'; use .npz (x, y), .csv (label last) or .pt")


def load_channel(folder: Path) -> Dataset:
    if not folder.is_dir():
        raise DataError(f"training channel {folder} does not exist; check the job's channels: in the spec")
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in (".npz", ".csv", ".pt")
    )
    if not files:
        raise DataError(f"training channel {folder} has no .npz, .csv or .pt file")
    xs, ys = zip(*(_load_file(p) for p in files), strict=True)
    x, y = np.concatenate(xs), np.concatenate(ys)
    if len(x) != len(y):
        raise DataError(f"{folder}: {len(x)} samples but {len(y)} labels")
    if not np.all(np.equal(np.mod(y, 1), 0)) or y.min() < 0:
        raise DataError(f"{folder}: labels must be non-negative integers (class indices)")
    return Dataset(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64), str(folder))


def load_training_data() -> Dataset:
    channel = os.environ.get("SM_CHANNEL_TRAIN")
    return load_channel(Path(channel)) if channel else load_digits_dataset()


def split(data: Dataset, val_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """A fixed, seeded train/validation split (identical on every rank and every restart)."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(data.y), generator=generator)
    n_val = max(1, int(len(order) * val_fraction))
    val, train = order[:n_val], order[n_val:]
    return (
        Dataset(data.x[train], data.y[train], data.source),
        Dataset(data.x[val], data.y[val], data.source),
    )
