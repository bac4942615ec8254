"""Every request sagestack renders for the example project and the broad one, byte for byte as it
was before the redesign that put each feature in one place (tests/unit/baseline/requests-*.json):
the same CreateTrainingJob / CreateHyperParameterTuningJob / compile / register / transform requests,
so the same job names and content hashes. A deliberate change refreshes the record:
`python -m tests.unit.test_request_baseline`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

BASELINE = Path(__file__).parent / "baseline"
PROJECTS = {"example": REPO, "broad": REPO / "tests" / "constructs" / "baseline" / "broad"}


def rendered(root: Path) -> dict[str, Any]:
    """Each environment's rendered requests, as `sagestack render` / `plan` / `lock` see them."""
    from sagestack.project import load_project, resolve_environment
    from sagestack.project.loader import list_environments
    from sagestack.project.requests import render_environment

    out: dict[str, Any] = {}
    for env in list_environments(root):
        plan = resolve_environment(load_project(root, env))
        requests = render_environment(plan, root)
        out[env] = {
            "jobs": {
                key: {
                    "digest": job.digest,
                    "names": [c.name for c in job.candidates],
                    "candidates": [c.request for c in job.candidates],
                    "preferred": job.preferred.request if job.preferred is not None else None,
                    "capacity": job.launch_path,
                }
                for key, job in requests.jobs.items()
            },
            "tuning": requests.tuning,
            "endpoints": requests.endpoints,
            "transforms": requests.transforms,
            **({"optimizations": requests.optimizations} if requests.optimizations else {}),
            **({"llm_endpoints": requests.llm_endpoints} if requests.llm_endpoints else {}),
            "images": requests.images,
            "sources": requests.sources,
        }
    return out


def _text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_every_rendered_request_is_byte_identical_to_the_record(name):
    recorded = (BASELINE / f"requests-{name}.json").read_text()
    now = _text(rendered(PROJECTS[name]))
    assert json.loads(recorded), "the record must hold requests"
    if now != recorded:
        before, after = json.loads(recorded), json.loads(now)
        changed = [
            f"{env}/{kind}/{key}"
            for env in sorted(set(before) | set(after))
            for kind in sorted(set(before.get(env, {})) | set(after.get(env, {})))
            for key in sorted(set(before.get(env, {}).get(kind, {})) | set(after.get(env, {}).get(kind, {})))
            if before.get(env, {}).get(kind, {}).get(key) != after.get(env, {}).get(kind, {}).get(key)
        ]
        pytest.fail(f"rendered requests of '{name}' changed: {changed}")


if __name__ == "__main__":  # write the record
    for project, root in PROJECTS.items():
        data = rendered(root)
        (BASELINE / f"requests-{project}.json").write_text(_text(data))
        jobs = sum(len(e["jobs"]) for e in data.values())
        print(f"{project}: {len(data)} environments, {jobs} jobs", file=sys.stderr)
