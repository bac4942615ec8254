"""`make test`'s order of work across xdist workers (tests/support/schedule.py): a file per unit,
the IAM tier as one unit, each bench smoke run a unit of its own, the slowest units first."""

from __future__ import annotations

from tests.conftest import REPO
from tests.support import schedule
from tests.support.schedule import COST, SHARED, SMOKE, SPREAD, scope, slowest_first


def test_a_file_is_a_unit_except_the_shared_folder_and_the_spread_file():
    assert scope("tests/unit/test_render.py::test_a[x-y]") == "tests/unit/test_render.py"
    assert scope("tests/unit/test_render.py::Class::test_b") == "tests/unit/test_render.py"
    # the IAM tier's files share the apps its conftest synthesizes once per worker
    assert (
        scope("tests/iam/test_iam.py::test_a") == scope("tests/iam/test_promotion.py::test_b") == "tests/iam/"
    )
    # each bench smoke run is a subprocess that shares nothing with the others
    assert scope(f"{SMOKE}[train]") == f"{SMOKE}[train]"
    assert scope(f"{SMOKE}[train]") != scope(f"{SMOKE}[serve]")


def test_the_slowest_units_go_first_and_a_units_tests_stay_together_in_order(monkeypatch):
    monkeypatch.setattr(schedule, "COST", {f"{SMOKE}[train]": 150, "tests/iam/": 140, f"{SMOKE}[cli]": 30})
    nodeids = [
        "tests/a/test_many.py::test_1",
        "tests/a/test_many.py::test_2",
        "tests/a/test_many.py::test_3",
        "tests/iam/test_iam.py::test_1",
        "tests/a/test_few.py::test_1",
        "tests/iam/test_promotion.py::test_1",
        f"{SMOKE}[cli]",
        f"{SMOKE}[train]",
        "tests/iam/test_iam.py::test_2",
    ]
    order = [nodeids[i] for i in slowest_first(nodeids)]
    assert sorted(order) == sorted(nodeids)
    assert order == [
        f"{SMOKE}[train]",  # 150 s
        "tests/iam/test_iam.py::test_1",  # 140 s, its files together, each test in its place
        "tests/iam/test_promotion.py::test_1",
        "tests/iam/test_iam.py::test_2",
        f"{SMOKE}[cli]",  # 30 s
        "tests/a/test_many.py::test_1",  # not named: more tests first, as xdist orders them
        "tests/a/test_many.py::test_2",
        "tests/a/test_many.py::test_3",
        "tests/a/test_few.py::test_1",
    ]


def test_every_unit_cost_names_is_there():
    """A renamed or moved slow file would silently lose its place at the front."""
    for unit in COST:
        if unit.startswith(SMOKE):
            bench = unit.removeprefix(f"{SMOKE}[").removesuffix("]")
            assert (REPO / "bench" / f"{bench}.py").is_file(), unit
        else:
            path, _, test = unit.partition("::")
            assert (REPO / path).exists(), unit
            assert not test or f"def {test}(" in (REPO / path).read_text(), unit
    assert all((REPO / folder).is_dir() for folder in SHARED)
    assert all((REPO / file).is_file() for file in SPREAD)


def test_a_test_process_runs_torch_on_one_thread():
    """tests/conftest.py sets OMP_NUM_THREADS before anything imports torch (a worker per CPU: a
    second intra-op thread per worker only spins); a plugin that imported torch first would undo it."""
    import os

    import torch

    assert os.environ["OMP_NUM_THREADS"] == "1"
    assert torch.get_num_threads() == 1
