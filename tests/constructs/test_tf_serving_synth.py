"""A project whose Keras model is served: a TensorFlow 2.21 job, its endpoint served by TensorFlow
Serving 2.20 (image:), synthesized for an environment without an account and one with, with the
compliance packs on (BuiltApp fails on an unanswered cdk-nag finding), linted by cfn-lint and
scanned by checkov; the registered package names the TF Serving image and no SAGEMAKER_PROGRAM."""

from __future__ import annotations

from collections import Counter

import pytest
from aws_cdk.assertions import Template

from tests.constructs.test_nag import COMPLIANCE, PIN
from tests.support.cdk_app import BuiltApp
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

SERVING = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference:2.20-cpu-py312"
SPEC = f"""\
project: keras
region: us-east-1
{COMPLIANCE}images:
  train: {{dlc: {{framework: tensorflow, version: "2.21", py_version: py312}}}}
  serve: {{dlc: {{framework: tensorflow, version: "2.20", py_version: py312}}}}
jobs:
  classifier:
    image: train
    instance_type: ml.m5.xlarge
    metric_definitions: {{loss: 'loss: ([0-9.]+)'}}
endpoints:
  digits:
    model: {{from: classifier}}
    image: serve
    instance_type: ml.m5.large
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from tests.conftest import Project

    project = Project(tmp_path_factory.mktemp("keras") / "p")
    project.spec(SPEC)
    project.env("dev")  # no account: an environment-agnostic stage
    project.env("prod", f'account: "111111111111"\nendpoints:\n  digits:\n    model_package: "{PIN}"\n')
    out = tmp_path_factory.mktemp("keras-out")
    return BuiltApp(project.root, out, ["dev", "prod"]), out


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_pipeline_registers_the_model_for_tensorflow_serving(built, env):
    app, _ = built
    states = app.stages[env].training.pipelines["classifier"].definition["States"]
    register = next(s for name, s in states.items() if name.startswith("Register digits"))
    spec = register["Parameters"]["InferenceSpecification"]
    (container,) = spec["Containers"]
    assert container["Image"] == SERVING
    assert "Environment" not in container  # TF Serving serves <version>/saved_model.pb itself
    assert spec["SupportedContentTypes"] == ["application/json", "application/jsonlines", "text/csv"]


def test_the_pinned_endpoint_synthesizes_and_passes_cfn_lint_and_checkov(built):
    from tests.iam.judge import checkov
    from tests.iam.reasons import CHECKOV

    app, out = built
    assert app.stages["dev"].serving is None and app.stages["prod"].serving is not None
    (model,) = (
        Template.from_stack(app.stages["prod"].serving).find_resources("AWS::SageMaker::Model").values()
    )
    container = model["Properties"]["PrimaryContainer"]
    assert container == {"ModelPackageName": PIN}  # the package's own container: no TorchServe settings
    templates = sorted(str(p) for p in out.glob("assembly-*/*.template.json"))
    code, output = cfn_lint(templates)
    assert code == 0, output
    found = Counter((f["check_id"], f["resource"]) for f in checkov(out))
    unexplained = sorted(k for k in found if k not in CHECKOV)
    assert unexplained == [], unexplained
