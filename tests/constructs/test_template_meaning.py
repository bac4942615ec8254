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
def test_the_spec_path_gives_the_constructs_the_spec_s_own_jobs_and_searches(name, tmp_path, monkeypatch):
    """The TrainingStack hands each pipeline the spec's own entry (the very object, never one rebuilt
    from construct props) and the requests project.requests rendered with stand-ins and validated,
    once per environment: the constructs render them only with tokens, and validate nothing again."""
    from sagestack.core.catalog import service_model
    from tests.support.cdk_app import BuiltApp

    validated: list[str] = []
    validate = service_model.validate_request

    def counted(operation: str, request: dict, service: str = "sagemaker") -> None:
        if service == "sagemaker":  # SageMaker's requests are the ones counted here
            validated.append(operation)
        validate(operation, request, service=service)

    monkeypatch.setattr(service_model, "validate_request", counted)
    # A module already loaded that imported the name at its top holds its own reference (the original,
    # or an earlier test's counter, since monkeypatch restores only what it set): count its calls too.
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("sagestack.") and hasattr(module, "validate_request"):
            monkeypatch.setattr(module, "validate_request", counted)
    built = BuiltApp(PROJECTS[name], tmp_path / "out")
    checked = expected = searches = 0
    for stage in built.stages.values():
        spec = stage.plan.spec
        assert stage.training is not None
        for key, pipeline in stage.training.pipelines.items():
            assert pipeline.job_spec is spec.jobs[key], key
            assert pipeline.validation_plan.job is spec.jobs[key], key
            assert pipeline.job_plan.digest == pipeline.validation_plan.digest, key
            expected += len(pipeline.validation_plan.candidates) + (
                pipeline.validation_plan.preferred is not None
            )
            checked += 1
        for key, tuning in stage.training.tuning_pipelines.items():
            assert tuning.tuning_spec is spec.tuning[key], key
            searches += 1
    assert checked >= 3
    assert validated.count("CreateTrainingJob") == expected
    assert validated.count("CreateHyperParameterTuningJob") == searches
