"""Shared fixtures: a scratch project to write specs into, and the repository root; and how
`make test` hands the suite to its xdist workers (tests/support/schedule.py)."""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import schedule

REPO = Path(__file__).resolve().parent.parent
# The Node.js the project pins (package.json's `node`: node_modules/.bin/node) runs jsii and the CDK CLI
# in every test, first on the PATH as `make test` puts it (tests/unit/test_supported_node.py).
NODE_BIN = REPO / "node_modules" / ".bin"
if str(NODE_BIN) not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join([str(NODE_BIN), os.environ.get("PATH", "")])
# One torch (OpenMP/BLAS) thread per test process, set before anything imports torch: make test runs
# a worker per CPU, and a second intra-op thread per worker only spins waiting for a CPU the other
# worker holds — a 30-step build of the local LLM's weights took 10.8 s of CPU with torch's default
# 2 threads under load, 0.3 s with one. Subprocesses inherit it; the runs that pick their own
# threads (local train's hosts, the servers, the bench's torchrun) still set theirs.
os.environ["OMP_NUM_THREADS"] = "1"

MINIMAL = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  classifier:
    image: train
    instance_type: ml.m5.xlarge
"""


class Project:
    """A throwaway project folder: write(path, yaml) then load(env)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "training_src").mkdir(parents=True)
        (root / "training_src" / "train.py").write_text("print('train')\n")
        (root / "config" / "envs").mkdir(parents=True)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def spec(self, text: str = MINIMAL) -> Project:
        self.write("config/sagestack.yaml", text)
        return self

    def env(self, name: str, text: str = "{}\n") -> Project:
        self.write(f"config/envs/{name}.yaml", text)
        return self

    def load(self, env: str | None = None, **kw):  # type: ignore[no-untyped-def]
        from sagestack.project import load_project

        return load_project(self.root, env, **kw)

    def errors(self, env: str | None = None) -> list[str]:
        """The formatted issues of a spec that must fail."""
        from sagestack.core.errors import SpecError

        with pytest.raises(SpecError) as info:
            self.load(env)
        return [i.format() for i in info.value.issues]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


@pytest.fixture
def example_project(tmp_path: Path) -> Project:
    """A copy of the repository's own example config, to modify safely."""
    p = Project(tmp_path / "example")
    shutil.rmtree(p.root / "config")
    shutil.copytree(REPO / "config", p.root / "config")
    shutil.copytree(REPO / "containers", p.root / "containers")
    return p


MakeProject = Callable[[str], Project]


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own, which answers for every --dist mode
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    return schedule.make_scheduler(config, log)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture scope
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    schedule.reorder(config, items)
