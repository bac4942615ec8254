"""training_src is self-contained (it is uploaded as the job's source directory): load its modules
by path, under names that cannot clash with installed packages."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO, Project

SRC = REPO / "training_src"


def load(name: str) -> ModuleType:
    key = f"training_src_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, SRC / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def digits_project(tmp_path: Path) -> Project:
    """The example project with the real training_src, to train locally."""
    project = Project(tmp_path / "digits")
    shutil.rmtree(project.root / "config")
    shutil.rmtree(project.root / "training_src")
    shutil.copytree(REPO / "config", project.root / "config")
    shutil.copytree(REPO / "containers", project.root / "containers")
    shutil.copytree(SRC, project.root / "training_src", ignore=shutil.ignore_patterns("__pycache__"))
    return project
