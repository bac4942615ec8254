"""How `make test` hands the suite to its xdist workers (`-n auto --dist loadfile` on CI's 2 CPUs):
a file per unit of work, as loadfile does (a module's synthesized app and moto server are built
once), with two exceptions, and the slowest units first.

- A folder whose files share a session fixture is one unit: tests/iam's files all judge the apps
  its conftest synthesizes once per worker (six apps, every environment); split across two workers
  they were synthesized twice.
- A file whose tests share nothing is one unit per test: each bench smoke run is a subprocess of
  its own, and together they were minutes of one worker's time at the end of the run; a new
  user's first steps in tmux and the deploy init prints are two terminals of their own.
- Units start slowest first (the longest-processing-time rule: the last unit to start is a short
  one, so the workers finish together). xdist's own order is by the number of tests in a unit,
  which put the few-but-slow units (the bench smoke runs, the IAM scanners, mutmut, the wheel
  build) last. COST names the slow units with rough seconds on CI; only their order matters, and
  a unit not named costs nothing here and keeps xdist's order (more tests first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

SHARED = ("tests/iam/",)
SPREAD = ("tests/synth/test_bench_smoke.py", "tests/synth/test_first_ten_minutes.py")
SMOKE = "tests/synth/test_bench_smoke.py::test_bench_smoke"

# Rough wall seconds on CI's machine (2 CPUs, both workers busy), from `make test`'s --durations and
# single runs of the unit here, after WP8 (one torch thread per test process, the 5-launch train
# smoke); a unit's figure is its tests' and fixtures' together. Only the order matters.
COST: dict[str, float] = {
    "tests/iam/": 200,
    f"{SMOKE}[train]": 110,
    f"{SMOKE}[synth]": 90,
    "tests/unit/test_mutation_smoke.py": 90,
    "tests/synth/test_init_and_wheel.py": 90,
    "tests/docs/test_site.py": 80,
    "tests/conformance/test_tensorflow_toolkit.py": 70,
    f"{SMOKE}[serve]": 60,
    "tests/conformance/test_torchserve_stack.py": 60,
    "tests/training_src/test_local_tf_serve.py": 60,
    "tests/e2e/test_deploy_and_run.py": 60,
    "tests/constructs/test_nag.py": 60,
    "tests/synth/test_first_ten_minutes.py::test_init_validate_plan_synth_and_train_as_a_new_user_sees_them": 250,
    "tests/synth/test_first_ten_minutes.py::test_the_deploy_command_init_prints_works_as_printed_up_to_the_missing_account": 120,
    "tests/synth/test_cdk_cli.py": 50,
    "tests/training_src/test_local_llm_serve.py": 45,
    "tests/training_src/test_llm_batching.py": 35,
    "tests/training_src/test_keras_local_resume.py": 40,
    "tests/training_src/test_keras_skeleton.py": 40,
    "tests/conformance/test_tf_toolkit_judge.py": 40,
    f"{SMOKE}[llm_serve]": 30,
    f"{SMOKE}[transform]": 15,
    f"{SMOKE}[cli]": 15,
}


def scope(nodeid: str) -> str:
    """The unit of work a test belongs to."""
    if nodeid.startswith(SPREAD):
        return nodeid
    shared = next((folder for folder in SHARED if nodeid.startswith(folder)), None)
    return shared or nodeid.split("::", 1)[0]


def slowest_first(nodeids: Sequence[str]) -> list[int]:
    """The positions of `nodeids` reordered unit by unit: the units in COST first, slowest first,
    then the rest by their number of tests (xdist's order); a unit's own tests keep their order."""
    units: dict[str, list[int]] = {}
    for i, nodeid in enumerate(nodeids):
        units.setdefault(scope(nodeid), []).append(i)
    ranked = sorted(units.items(), key=lambda unit: (-COST.get(unit[0], 0.0), -len(unit[1])))
    return [i for _, positions in ranked for i in positions]


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler for `--dist loadfile` (None for any other mode: xdist's own then).

    Units are queued in the order the workers collected their tests (the reorder by test count is
    switched off): `reorder` puts them slowest first on every worker alike."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SlowestFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    config.option.loadscopereorder = False
    return SlowestFirst(config, log)


def reorder(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the collection slowest unit first (every worker collects the same items
    and sorts them alike, as xdist requires; a worker's own --dist reads "no", so this holds for
    every mode, where slow work first does no harm either). A run without xdist keeps pytest's
    order."""
    if not hasattr(config, "workerinput"):
        return
    order = slowest_first([item.nodeid for item in items])
    items[:] = [items[i] for i in order]
