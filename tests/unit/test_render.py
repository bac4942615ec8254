"""`sagestack render`: the exact requests a pipeline sends, stand-ins named, errors exit 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.core.catalog.service_model import validate_request
from tests.conftest import REPO
from tests.support.rendered_meaning import TEMPLATE_TYPES, resource_differences

runner = CliRunner()


def test_render_a_job_candidate_as_json():
    result = runner.invoke(
        app, ["render", "classifier", "--env", "prod", "--candidate", "1", "--json", "--root", str(REPO)]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    (shown,) = document["requests"]
    assert shown["operation"] == "CreateTrainingJob" and shown["label"].startswith("candidate 1: ")
    request = shown["request"]
    assert request["ResourceConfig"]["InstanceType"] == shown["label"].split(": ")[1]
    validate_request("CreateTrainingJob", request)  # the rendered request is a valid one
    # prod names its account, so the account is no stand-in; the deploy-time resources are
    assert "123456789012" not in shown["stand_ins"]
    assert "sagestack-validation-bucket" in shown["stand_ins"]


def test_render_every_candidate_a_search_and_an_endpoint():
    text = runner.invoke(app, ["render", "classifier", "--env", "dev", "--root", str(REPO)]).output
    assert text.count("# CreateTrainingJob (candidate ") == 2
    assert "#   stand-in '123456789012': the deploying account" in text
    search = json.loads(runner.invoke(app, ["render", "lr-search", "--json", "--root", str(REPO)]).output)
    assert [r["operation"] for r in search["requests"]] == ["CreateHyperParameterTuningJob"]
    endpoint = json.loads(runner.invoke(app, ["render", "digits", "--json", "--root", str(REPO)]).output)
    assert [r["operation"] for r in endpoint["requests"]] == [  # its model steps, then its fleet
        "CreateCompilationJob",
        "CreateModelPackage",
        "CreateEndpointConfig",
        "RegisterScalableTarget",
        "PutScalingPolicy",
    ]


def test_render_errors_exit_2_with_a_suggestion():
    unknown = runner.invoke(app, ["render", "clasifier", "--root", str(REPO)])
    assert unknown.exit_code == 2 and "did you mean 'classifier'?" in unknown.output
    out_of_range = runner.invoke(app, ["render", "classifier", "--candidate", "5", "--root", str(REPO)])
    assert (
        out_of_range.exit_code == 2 and "job 'classifier' has candidates 0..1; got 5" in out_of_range.output
    )


def test_an_llm_endpoint_renders_what_its_template_creates():
    """`render chat` (the example's LLM endpoint, deployed in staging): the model with the family's
    image and environment, the endpoint config and the component — property by property what the
    recorded template creates — then the optimization job and its registration."""
    result = runner.invoke(app, ["render", "chat", "--env", "staging", "--json", "--root", str(REPO)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["requests"]
    assert [(r["operation"], r["label"]) for r in shown] == [
        ("CreateModel", "chat/chat"),
        ("CreateEndpointConfig", "chat"),
        ("CreateInferenceComponent", "chat/chat"),
        ("CreateOptimizationJob", "optimize chat/chat"),
        ("CreateModelPackage", "optimize chat/chat"),
    ]
    baseline = json.loads((REPO / "tests" / "constructs" / "baseline" / "example.json").read_text())
    resources = baseline["digits-staging-serving"]
    for r in shown[:3]:
        validate_request(r["operation"], r["request"])
        (template,) = [
            res["Properties"]
            for lid, res in resources.items()
            if lid.startswith("Endpointchat") and res["Type"] == TEMPLATE_TYPES[r["operation"]]
        ]
        assert resource_differences(template, r, names=("digits-staging-chat",)) == []
    model = shown[0]["request"]["PrimaryContainer"]
    assert model["Image"].startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:")
    assert model["Environment"]["OPTION_ROLLING_BATCH"] == "vllm"


def test_an_endpoint_named_llm_and_its_components_are_addressable(tmp_path):
    """The issue's spec: `endpoints.llm.llm:` renders (it said "no job, search or endpoint 'llm'
    (defined: none)"), and the list of names names every one `render` takes."""
    from tests.conftest import MINIMAL, Project

    project = Project(tmp_path)
    project.spec(
        MINIMAL
        + "endpoints:\n  llm:\n    instance_type: ml.g5.12xlarge\n    llm:\n      container: djl-lmi\n"
        "      weights: {s3: models/llm/}\n      parameters: 8.0e9\n      dtype: bf16\n"
        "  shared:\n    instance_type: ml.g5.12xlarge\n    components:\n      small:\n"
        "        llm: {container: djl-lmi, weights: {s3: models/small/}, parameters: 1.0e9}\n"
        "        memory_mb: 4096\n"
    ).env("dev")
    result = runner.invoke(app, ["render", "llm", "--json", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["requests"]
    assert [r["operation"] for r in shown] == ["CreateModel", "CreateEndpointConfig"]
    model, config = (r["request"] for r in shown)
    assert model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"].endswith("/models/llm/")
    assert model["PrimaryContainer"]["Environment"]["OPTION_TENSOR_PARALLEL_DEGREE"] == "4"
    (variant,) = config["ProductionVariants"]
    assert variant["InstanceType"] == "ml.g5.12xlarge" and variant["ModelName"] == model["ModelName"]
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 60
    component = runner.invoke(app, ["render", "shared/small", "--json", "--root", str(tmp_path)])
    assert [r["operation"] for r in json.loads(component.output)["requests"]] == [
        "CreateModel",
        "CreateInferenceComponent",
    ]
    unknown = runner.invoke(app, ["render", "lm", "--root", str(tmp_path)])
    assert unknown.exit_code == 2
    assert "(defined: classifier, llm, shared, shared/small)" in unknown.output
