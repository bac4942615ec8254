"""The templates of the example project and of a broad one mean what they meant before the construct
library was split out of the stacks: same stacks, same logical IDs (the stateful ones above all),
same types and properties, up to statement order and asset hashes (tests/support/template_meaning).

Refresh the baseline only for a deliberate change: `python -m tests.constructs.test_template_meaning`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.cfn import cfn_lint
from tests.support.template_meaning import STATEFUL_TYPES, dangling_transitions, differences, meaning

pytestmark = pytest.mark.synth

BASELINE = Path(__file__).parent / "baseline"
PROJECTS = {"example": REPO, "broad": BASELINE / "broad"}


def _synth(root: Path, outdir: Path) -> dict:
    from tests.support.cdk_app import BuiltApp

    BuiltApp(root, outdir)
    return meaning(outdir)


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_templates_mean_what_the_baseline_says(name, tmp_path):
    before = json.loads((BASELINE / f"{name}.json").read_text())
    after = _synth(PROJECTS[name], tmp_path / "out")
    stateful = {
        (stack, lid)
        for stack, resources in before.items()
        for lid, res in resources.items()
        if res["Type"] in STATEFUL_TYPES
    }
    assert stateful, "the baseline must hold stateful resources"
    missing = [f"{s}/{lid}" for s, lid in sorted(stateful) if lid not in after.get(s, {})]
    assert not missing, f"stateful logical IDs changed (the resource would be replaced): {missing}"
    machines = [
        (f"{stack}/{lid}", res["Properties"]["DefinitionString"])
        for stack, resources in after.items()
        for lid, res in resources.items()
        if res["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    assert machines
    broken = [f"{where}: {d}" for where, definition in machines for d in dangling_transitions(definition)]
    assert not broken, broken
    diff = differences(before, after)
    assert not diff, "templates changed in meaning:\n" + "\n".join(diff)
    templates = sorted(str(p) for p in (tmp_path / "out").glob("assembly-*/*.template.json"))
    code, output = cfn_lint([*templates])
    assert code == 0, output


if __name__ == "__main__":  # write the baseline
    import tempfile

    for project, root in PROJECTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            data = _synth(root, Path(tmp) / "out")
        (BASELINE / f"{project}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(
            f"{project}: {sum(len(r) for r in data.values())} resources in {len(data)} stacks",
            file=sys.stderr,
        )


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_the_spec_path_gives_the_constructs_the_spec_s_own_jobs_and_searches(name, tmp_path):
    """stacks/ turns each spec entry into construct props; the job and search the constructs rebuild
    from them must be the spec's (same model, so the same content hash and job names)."""
    from tests.support.cdk_app import BuiltApp

    built = BuiltApp(PROJECTS[name], tmp_path / "out")
    checked = 0
    for stage in built.stages.values():
        spec = stage.plan.spec
        assert stage.training is not None
        for key, pipeline in stage.training.pipelines.items():
            assert pipeline.job_spec == spec.jobs[key], key
            checked += 1
        for key, tuning in stage.training.tuning_pipelines.items():
            assert tuning.tuning_spec == spec.tuning[key], key
    assert checked >= 3
