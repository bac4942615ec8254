"""Local outputs that hold request data or models are the user's alone: files 0600, folders 0700,
whatever the umask (the usual 022 would make them world-readable)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sagestack.local.serving.capture import CaptureWriter


@pytest.fixture
def usual_umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _modes(top: Path) -> dict[str, int]:
    """Every path from `top` down (top included) -> its permission bits."""
    return {str(p.relative_to(top.parent)): stat.S_IMODE(p.stat().st_mode) for p in [top, *top.rglob("*")]}


def _private(modes: dict[str, int], top: Path) -> dict[str, int]:
    """The entries that are not private: folders other than 0700, files other than 0600."""
    return {
        name: mode
        for name, mode in modes.items()
        if mode != (0o700 if (top.parent / name).is_dir() else 0o600)
    }


def test_capture_files_and_their_folders_are_private(tmp_path, usual_umask):
    root = tmp_path / "s3" / "bucket" / "capture" / "digits-dev"
    writer = CaptureWriter(root, 100, seed=1)
    writer.capture(b'{"instances": [[0.5]]}', "application/json", b'{"predictions": [3]}', "application/json")
    writer.capture(b"\x00\x01", "application/x-npy", b"[1]", "application/json")
    modes = _modes(tmp_path / "s3")
    assert any(name.endswith(".jsonl") for name in modes)
    assert _private(modes, tmp_path / "s3") == {}


def test_a_capture_file_made_world_readable_earlier_is_made_private(tmp_path, usual_umask):
    writer = CaptureWriter(tmp_path / "c", 100, seed=1)
    writer.capture(b"{}", "application/json", b"{}", "application/json")
    (existing,) = (tmp_path / "c").rglob("*.jsonl")
    existing.chmod(0o644)
    writer.capture(b"{}", "application/json", b"{}", "application/json")
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600


@pytest.mark.train
def test_the_mlflow_store_is_private(tmp_path, usual_umask):
    pytest.importorskip("mlflow")
    from sagestack.local.training.tracking import LocalStore, prepare

    store = LocalStore(tmp_path / ".sagestack" / "local" / "dev", "digits-dev-classifier")
    prepare(store)
    assert stat.S_IMODE((store.folder / "mlflow.db").stat().st_mode) == 0o600
    assert stat.S_IMODE(store.folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(store.artifacts.stat().st_mode) == 0o700
    (store.folder / "mlflow.db").chmod(0o644)  # a store made before: made private on the next use
    prepare(store)
    assert stat.S_IMODE((store.folder / "mlflow.db").stat().st_mode) == 0o600


@pytest.mark.train
def test_the_compiled_model_archive_is_private(digits_project, tmp_path, usual_umask):
    from sagestack.local.serving.compile import compile_locally
    from sagestack.local.training.job import LocalTrainOptions
    from sagestack.local.training.train import run_local_training

    loaded = digits_project.load("dev")
    options = LocalTrainOptions(
        workdir=tmp_path / "run", overrides={"max_steps": 2, "epochs": 1}, tracking=False
    )
    trained = run_local_training(loaded, "classifier", options)
    assert trained.succeeded, trained.failure
    out = tmp_path / "compiled" / "digits" / "model.tar.gz"
    result = compile_locally(loaded, "digits", model_dir=trained.model_dir, output=out)
    assert result.archive == out
    assert _private(_modes(tmp_path / "compiled"), tmp_path / "compiled") == {}


def test_async_results_and_failures_are_private(tmp_path, usual_umask):
    from sagestack.local.serving.async_inference import write_atomically

    root = tmp_path / "s3"
    write_atomically(root / "bucket" / "output" / "id-1.out", b'{"predictions": [3]}')
    write_atomically(root / "bucket" / "failures" / "id-2-error.out", b"bad input")
    modes = _modes(root)
    assert len(modes) == 6  # s3, bucket, two folders, two files
    assert _private(modes, root) == {}
