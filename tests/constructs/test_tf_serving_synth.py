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
  mwms:
    image: train
    instance_type: ml.g5.12xlarge
    instance_count: 2
    distribution: {{multi_worker_mirrored_strategy: {{}}}}
    use_spot_instances: true
    max_run: 2h
    max_wait: 4h
    checkpoint: {{}}
  ps:
    image: train
    instance_type: ml.m5.xlarge
    instance_count: 2
    distribution: {{parameter_server: {{}}}}
  horovod:
    image: train
    instance_type: ml.g5.12xlarge
    distribution: {{mpi: {{}}}}
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


def _hyperparameters(definition: dict) -> dict:
    """The CreateTrainingJob request's hyperparameters in a pipeline's states (a JSONata or JSONPath
    Parameters/Arguments block), wherever the pipeline put the create call."""
    found = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "HyperParameters" in node and isinstance(node["HyperParameters"], dict):
                found.append(node["HyperParameters"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(definition)
    assert found, "no CreateTrainingJob in the pipeline"
    return found[0]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_tensorflow_distributions_synthesize_with_the_sdks_keys_and_model_dir(built, env):
    app, _ = built
    pipelines = app.stages[env].training.pipelines
    mwms = _hyperparameters(pipelines["mwms"].definition)
    assert mwms["sagemaker_multi_worker_mirrored_strategy_enabled"] == "true"
    assert "s3://" in str(mwms["model_dir"]) and "/model" in str(mwms["model_dir"])
    assert _hyperparameters(pipelines["ps"].definition)["sagemaker_parameter_server_enabled"] == "true"
    horovod = _hyperparameters(pipelines["horovod"].definition)
    assert horovod["model_dir"] == '"/opt/ml/model"' and horovod["sagemaker_mpi_enabled"] == "true"


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
