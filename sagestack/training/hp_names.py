"""Hyperparameters read by name: one spelling for the many that scripts, the SageMaker examples and
the book use.

A rule that reads a hyperparameter by its meaning (data-loader workers, learning rate, batch size,
epochs) finds it whatever its spelling: `num-data-workers` (the SageMaker profiler examples and the
book), `num_workers` (PyTorch's DataLoader), `dataloader_num_workers` (Hugging Face's Trainer),
`--learning-rate` … are compared in one normal form: lower case, `_` for `-`, no leading dashes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

V = TypeVar("V")


def normalized(key: str) -> str:
    """The one spelling a name is compared in: `--Num-Data-Workers` -> `num_data_workers`."""
    return key.strip().lstrip("-").lower().replace("-", "_")


# Each group in its normal form, the most specific name first.
DATALOADER_WORKERS = (
    "dataloader_num_workers",  # Hugging Face's TrainingArguments
    "num_data_workers",  # the SageMaker profiler examples' num-data-workers, the book's
    "num_workers",  # torch.utils.data.DataLoader's argument
    "dataloader_workers",
    "data_loader_workers",
    "num_dataloader_workers",
    "data_workers",
    "workers",  # PyTorch's ImageNet example (--workers)
    "workers_per_gpu",  # MMCV / MMDetection configs: per process, one process per GPU
    "num_workers_per_gpu",
)
LEARNING_RATE = ("learning_rate", "lr", "base_lr")
BATCH_SIZE = ("batch_size_per_device", "per_device_train_batch_size", "batch_size", "train_batch_size")
EPOCHS = ("epochs", "num_train_epochs", "num_epochs", "max_epochs", "n_epochs")
LEARNING_RATE_SCALING = (
    "lr_scaling",
    "reference_batch",
    "warmup_steps",
    "warmup_epochs",
    "warmup_ratio",
    "lr_warmup_steps",
    "lr_warmup_epochs",
    "global_batch_size",
)
TRAINING_COMPILER = ("compiler_config", "training_compiler", "sagemaker_training_compiler_enabled")


def keys_named(hyperparameters: Mapping[str, V], names: tuple[str, ...]) -> Iterator[str]:
    """The keys of `hyperparameters` (as the spec spells them) that are one of `names`, in the
    order of `names`."""
    by_name: dict[str, list[str]] = {}
    for key in hyperparameters:
        by_name.setdefault(normalized(key), []).append(key)
    for name in names:
        yield from by_name.get(name, [])


def key_named(hyperparameters: Mapping[str, V], names: tuple[str, ...]) -> str | None:
    """The first key of `hyperparameters` that is one of `names` (None when none is)."""
    return next(keys_named(hyperparameters, names), None)


def as_int(value: object) -> int | None:
    """An integer hyperparameter: 8, or "8" (SageMaker passes every value as a string, and a spec may
    quote it); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def as_number(value: object) -> float | None:
    """A numeric hyperparameter: 0.1, 8 or "1e-3"; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None
