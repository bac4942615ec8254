"""The recipe's proof for an endpoint field: `endpoints.<name>.metrics:` (the endpoint config's
MetricsConfig, per-GPU and enhanced metrics — Terraform #48469) end to end: the spec, the template,
`sagestack render`, botocore's model. It took the field on EndpointSpec (endpoints/models.py) and its
rendering in the config request (endpoints/config_request.py); the construct builds its config from
that request, so it needed no change. Also the spec path's door refusing typed props beside it."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from typer.testing import CliRunner

from sagestack.cli import app as cli
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.errors import SpecError
from tests.conftest import MINIMAL, Project
from tests.support.cdk_app import BuiltApp
from tests.support.rendered_meaning import resource_differences

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
ENDPOINTS = f"""\
endpoints:
  chat:
    instance_type: ml.g5.12xlarge
    llm: {{container: djl-lmi, weights: {{s3: models/chat/}}, parameters: 8.0e9, dtype: bf16}}
    metrics: {{enhanced: true, detailed_observability: true, publish_frequency: 10}}
  digits:
    model_package: "{PIN}"
    instance_type: ml.m5.large
    metrics: {{enhanced: true}}
  plain:
    model_package: "{PIN}"
    instance_type: ml.m5.large
"""


def _configs(template: Template) -> dict[str, dict]:
    return {
        lid.split("Config")[0]: r["Properties"]
        for lid, r in template.find_resources("AWS::SageMaker::EndpointConfig").items()
    }


@pytest.mark.synth
def test_metrics_reach_the_template_and_render_shows_the_same_request(tmp_path):
    project = Project(tmp_path / "proj")
    project.spec(MINIMAL + ENDPOINTS).env("prod", 'account: "111111111111"\n')
    built = BuiltApp(project.root, tmp_path / "out", ["prod"])
    configs = _configs(Template.from_stack(built.stages["prod"].serving))
    chat, digits, plain = (
        next(p for lid, p in configs.items() if lid.startswith(f"Endpoint{k}"))
        for k in ("chat", "digits", "plain")
    )
    assert chat["MetricsConfig"] == {
        "EnableEnhancedMetrics": True,
        "EnableDetailedObservability": True,
        "MetricPublishFrequencyInSeconds": 10,
    }
    assert digits["MetricsConfig"] == {"EnableEnhancedMetrics": True, "EnableDetailedObservability": False}
    assert "MetricsConfig" not in plain  # unset: the config is as it was

    result = CliRunner().invoke(
        cli, ["render", "chat", "--env", "prod", "--json", "--root", str(project.root)]
    )
    assert result.exit_code == 0, result.output
    (shown,) = [r for r in json.loads(result.output)["requests"] if r["operation"] == "CreateEndpointConfig"]
    assert shown["request"]["MetricsConfig"] == chat["MetricsConfig"]
    validate_request("CreateEndpointConfig", shown["request"])  # botocore's model takes it
    assert resource_differences(chat, shown, names=("digits-prod-chat",)) == []


def test_a_publish_frequency_sagemaker_does_not_take_is_a_located_error(tmp_path):
    project = Project(tmp_path / "proj")
    project.spec(MINIMAL + ENDPOINTS.replace("publish_frequency: 10", "publish_frequency: 15")).env("dev")
    with pytest.raises(SpecError) as e:
        project.load("dev")
    assert "endpoints.chat.metrics.publish_frequency" in str(e.value)


def test_the_spec_door_refuses_typed_props_beside_it(tmp_path):
    from sagestack.constructs import ArtifactBucket, InferenceEndpoint
    from sagestack.core.names import Names
    from sagestack.endpoints.models import EndpointSpec
    from sagestack.endpoints.resolved import resolved_endpoint

    stack = Stack(App(), "S")
    spec = EndpointSpec.model_validate({"model_package": PIN, "instance_type": "ml.m5.large"})
    resolved = resolved_endpoint(names=Names("digits", "dev"), key="digits", spec=spec, region="us-east-1")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    with pytest.raises(
        ValueError, match="resolved is the whole endpoint; drop instance_type, initial_instance_count"
    ):
        InferenceEndpoint(
            stack,
            "E",
            endpoint_name="digits-dev-digits",
            execution_role=role,
            resolved=resolved,
            region="us-east-1",
            artifacts=ArtifactBucket(stack, "B", encryption_key=kms.Key(stack, "K")),
            instance_type="ml.m5.large",
            initial_instance_count=2,
        )
    with pytest.raises(ValueError, match="resolved needs region and artifacts"):
        InferenceEndpoint(
            stack, "F", endpoint_name="digits-dev-digits", execution_role=role, resolved=resolved
        )
