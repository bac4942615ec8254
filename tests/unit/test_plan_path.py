"""`sagestack plan`'s call path (bench/plan_path.py traces it): the environment's requests are
rendered once and handed on — the lock hashes that one rendering without going back to
project/requests for each request, capacity and the report read it as given — and the
environment's names are built once. Each figure here was larger before (project/requests entered
12 times for the example's dev, 11 of them by the lock hashing request after request; the
resolved environment's Names built 19 times), so a change that walks the path again fails here."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.conftest import REPO

REQUESTS = "project/requests.py"


def _tracer() -> ModuleType:
    path = REPO / "bench" / "plan_path.py"
    spec = importlib.util.spec_from_file_location("plan_path", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("plan_path", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def traced():
    return _tracer().trace_plan(REPO, "dev")


def test_plan_runs_to_its_report(traced):
    assert traced.exit_code == 0, traced.output[-2000:]
    assert "lock: matches config/envs/dev.lock.json" in traced.output


def test_plan_renders_the_environment_once_and_enters_requests_once(traced):
    assert traced.requests["render_environment"] == 1
    assert traced.requests["_render_training"] == 1
    assert traced.modules[REQUESTS] == 1, (
        f"project/requests.py entered {traced.modules[REQUESTS]} times: {dict(traced.requests)}"
    )


def test_plan_builds_the_environment_s_names_once(traced):
    built = traced.calls["project/environment.py:names"]
    assert built == 1, f"the resolved environment built its Names {built} times"
