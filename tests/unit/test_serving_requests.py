"""CreateCompilationJob and CreateModelPackage requests: golden files, validated against botocore's
SageMaker model, and the compile/register states chained after a pipeline."""

from __future__ import annotations

import json

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from sagestack.core.catalog import validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.states import PipelineSettings
from sagestack.endpoints.request import (
    ModelStepContext,
    compilation_request,
    model_package_request,
    validate_model_requests,
    validation_stand_ins,
)
from sagestack.endpoints.resolved import resolve_endpoint
from sagestack.endpoints.states import append_model_steps
from sagestack.project import resolve_environment
from tests.conftest import MINIMAL

CTX = ModelStepContext(
    deployment=Deployment(
        region="us-east-1",
        account="123456789012",
        role_arn="arn:aws:iam::123456789012:role/digits-dev-execution",
        bucket="digits-dev-artifacts",
        kms_key_id="arn:aws:kms:us-east-1:123456789012:key/11111111-2222-3333-4444-555555555555",
        tags=(("team", "ml"),),
    ),
    env="dev",
    group_name="digits-dev",
)
CASES = {
    "neo-c5": "    compile: {target_device: ml_c5, framework_version: '2.0', input_shapes: {input0: [1, 1, 8, 8]},"
    " compiler_options: {dtype: float32}}\n    instance_type: ml.c5.xlarge\n",
    "neo-inf1": "    compile: {target_device: ml_inf1, framework_version: '1.9', input_shapes: {input0: [4, 1, 8, 8]}}\n"
    "    instance_type: ml.inf1.xlarge\n",
    "platform": "    compile: {target_platform: {Os: LINUX, Arch: X86_64}, framework_version: '2.0',"
    " input_shapes: {input0: [1, 1, 8, 8]}}\n    instance_type: ml.m5.large\n",
    "uncompiled": "    instance_type: ml.g5.xlarge\n",
}


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def _endpoint(project, body: str):
    project.spec(MINIMAL + "endpoints:\n  digits:\n    model: {from: classifier}\n" + body).env("dev")
    plan = resolve_environment(project.load("dev"))
    return resolve_endpoint(plan, "digits")


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_requests_are_valid(project, snapshot_json, case):
    ep = _endpoint(project, CASES[case])
    s = validation_stand_ins(ep)
    requests = {}
    if ep.spec.compile is not None:
        requests["CreateCompilationJob"] = compilation_request(
            ep, CTX, name=s["name"], model_artifacts=s["model_artifacts"]
        )
    requests["CreateModelPackage"] = model_package_request(
        ep, CTX, image=ep.image_uri, model_data_url=s["compiled"], training_job=s["training_job"]
    )
    for operation, request in requests.items():
        validate_request(operation, request)
    assert requests == snapshot_json


def test_uncompiled_model_is_registered_with_the_dlc_inference_image(project):
    ep = _endpoint(project, CASES["uncompiled"])
    assert ep.image_uri == "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.5-gpu-py311"
    assert ep.supported_instance_types[0].startswith("ml.g5.")


def test_a_request_the_service_would_refuse_is_caught_at_synth(project):
    ep = _endpoint(project, CASES["neo-c5"])
    bad = ModelStepContext(**{**CTX.__dict__, "group_name": "not a valid group name!"})
    with pytest.raises(ValueError, match="ModelPackageGroupName"):
        validate_model_requests(ep, bad)


def test_compile_and_register_states_follow_the_pipeline(project):
    ep = _endpoint(project, CASES["neo-c5"])
    definition = {
        "StartAt": "Succeeded",
        "States": {
            "Succeeded": {
                "Type": "Pass",
                "Parameters": {"TrainingJobName.$": "$.job.Name", "ModelArtifacts.$": "$.job.Artifacts"},
                "End": True,
            }
        },
    }
    states = append_model_steps(definition, [ep], CTX, PipelineSettings(poll_seconds=5))["States"]
    assert states["Succeeded"]["Next"] == "Name compilation digits" and "End" not in states["Succeeded"]
    name = states["Name compilation digits"]["Parameters"]["name.$"]
    assert name.startswith("States.Format('digits-dev-digits-{}', States.Hash(States.Format('{}|")
    create = states["Compile digits"]["Parameters"]
    assert create["CompilationJobName.$"] == "$.compilation_1.name"
    assert create["InputConfig"]["S3Uri.$"] == "$.ModelArtifacts"
    assert states["Wait compilation digits"]["Seconds"] == 5
    register = states["Register digits"]["Parameters"]["InferenceSpecification"]["Containers"][0]
    assert register["Image.$"] == "$.compiled_1.Detail.InferenceImage"
    assert register["ModelDataUrl.$"] == "$.compiled_1.Detail.ModelArtifacts.S3ModelArtifacts"
    fallback = states["Register digits (catalog image)"]["Parameters"]["InferenceSpecification"][
        "Containers"
    ][0]
    assert fallback["Image"] == ep.image_uri
    assert states["Model registered"] == {
        "Type": "Pass",
        "Parameters": {
            "TrainingJobName.$": "$.TrainingJobName",
            "ModelArtifacts.$": "$.ModelArtifacts",
            "ModelPackages": {"digits.$": "$.package_1.ModelPackageArn"},
        },
        "End": True,
    }
    # every Next names a state that exists
    for state in states.values():
        for target in [state.get("Next"), state.get("Default")] + [
            c["Next"] for c in state.get("Choices", [])
        ]:
            assert target is None or target in states, target


def test_compile_name_changes_with_the_compile_settings(project):
    from sagestack.endpoints.request import compile_digest

    a = compile_digest(_endpoint(project, CASES["neo-c5"]))
    b = compile_digest(_endpoint(project, CASES["neo-c5"].replace("float32", "float16")))
    assert a != b and len(a) == 12
    assert json.dumps(a)  # a plain string, safe inside States.Format


def test_without_a_catalog_image_the_pipeline_relies_on_the_reported_one(project):
    body = (
        "    compile: {target_device: ml_c5, framework: TENSORFLOW, framework_version: '2.9',"
        " input_shapes: {input0: [1, 8, 8, 1]}}\n    instance_type: ml.c5.xlarge\n"
    )
    ep = _endpoint(project, body)
    assert ep.image_uri == ""
    definition = {
        "StartAt": "Succeeded",
        "States": {"Succeeded": {"Type": "Pass", "Parameters": {"ModelArtifacts.$": "$.a"}, "End": True}},
    }
    states = append_model_steps(definition, [ep], CTX, PipelineSettings())["States"]
    assert "Register digits (catalog image)" not in states
    assert states["Image reported digits?"]["Default"] == "No inference image digits"
    assert states["No inference image digits"]["Error"] == "NoInferenceImage"
    validate_model_requests(ep, CTX)  # still valid requests (a stand-in where the image is reported)


def test_two_endpoints_from_one_search_chain_after_its_best_model(project):
    from sagestack.tuning.states import TuningPipelineInputs, tuning_pipeline

    spec = (
        MINIMAL.replace(
            "instance_type: ml.m5.xlarge",
            "instance_type: ml.m5.xlarge\n    metric_definitions: {acc: 'acc=([0-9.]+)'}",
        )
        + "tuning:\n  search:\n    job: classifier\n    objective: {metric: acc, type: Maximize}\n"
        "    ranges: {lr: {continuous: [0.001, 0.1]}}\n    max_jobs: 4\n"
        "endpoints:\n"
        "  cpu:\n    model: {from: search}\n"
        "    compile: {target_device: ml_c5, framework_version: '2.0', input_shapes: {input0: [1, 1, 8, 8]}}\n"
        "    instance_type: ml.c5.large\n"
        "  gpu:\n    model: {from: search}\n    instance_type: ml.g5.xlarge\n"
    )
    project.spec(spec).env("dev")
    plan = resolve_environment(project.load("dev"))
    from sagestack.endpoints.resolved import endpoints_fed_by

    endpoints = endpoints_fed_by(plan, "search")
    assert [e.key for e in endpoints] == ["cpu", "gpu"]
    inputs = TuningPipelineInputs(
        key="search",
        request={
            "HyperParameterTuningJobName": "digits-search-x",
            "TrainingJobDefinition": {"OutputDataConfig": {"S3OutputPath": "s3://b/o/"}},
        },
        quota_name="q",
        quota_needed=1,
        parameter_name="/p",
    )
    states = append_model_steps(
        tuning_pipeline(inputs, PipelineSettings()), endpoints, CTX, PipelineSettings()
    )["States"]
    assert (
        states["Succeeded"]["InputPath"] == "$.best" and states["Succeeded"]["Next"] == "Name compilation cpu"
    )
    # cpu is compiled, then registered; gpu is registered as trained, with the DLC inference image
    assert states["Register cpu"]["Next"] == "Register gpu"
    gpu = states["Register gpu"]["Parameters"]["InferenceSpecification"]["Containers"][0]
    assert gpu["ModelDataUrl.$"] == "$.ModelArtifacts" and gpu["Image"].endswith(
        "pytorch-inference:2.5-gpu-py311"
    )
    assert states["Register gpu"]["Next"] == "Notify registered"
    final = states["Model registered"]["Parameters"]
    assert final["ModelPackages"] == {
        "cpu.$": "$.package_1.ModelPackageArn",
        "gpu.$": "$.package_2.ModelPackageArn",
    }
    assert {"TuningJobName.$", "TrainingJobName.$", "Objective.$", "ModelArtifacts.$"} <= set(final)


def test_local_compile_finds_the_best_trial_of_a_search(project, tmp_path):
    from sagestack.local.serving.compile import LocalCompileError, trained_model_dir

    spec = MINIMAL.replace(
        "instance_type: ml.m5.xlarge",
        "instance_type: ml.m5.xlarge\n    metric_definitions: {acc: 'acc=([0-9.]+)'}",
    )
    spec += "tuning:\n  search:\n    job: classifier\n    objective: {metric: acc, type: Maximize}\n    ranges: {lr: {continuous: [0.001, 0.1]}}\n    max_jobs: 4\n"
    loaded = project.spec(spec).env("dev").load("dev")
    with pytest.raises(LocalCompileError, match="run `sagestack local tune search` first"):
        trained_model_dir(loaded, "search")
    best = project.root / ".sagestack/local/dev/tune-search/best.json"
    best.parent.mkdir(parents=True)
    best.write_text(json.dumps({"model_dir": str(tmp_path / "trial-003/model")}))
    assert trained_model_dir(loaded, "search") == tmp_path / "trial-003/model"
    assert trained_model_dir(loaded, "classifier") == project.root / ".sagestack/local/dev/classifier/model"


@pytest.mark.parametrize(
    ("case", "artifact"),
    [
        ("neo-c5", "models/compiled/digits/model-ml_c5.tar.gz"),
        ("neo-inf1", "models/compiled/digits/model-ml_inf1.tar.gz"),
        ("platform", "models/compiled/digits/model-linux_x86_64.tar.gz"),
        ("uncompiled", "output/classifier/sagestack-validation-job/output/model.tar.gz"),
    ],
)
def test_the_registered_artifact_is_the_one_written_for_the_target_and_a_named_stand_in(
    project, case, artifact
):
    """Neo writes <S3OutputLocation><model>-<target>.tar.gz, one name per target (the pipeline
    reads the real key from DescribeCompilationJob); an uncompiled model registers the trained
    artifact. `render` names the URI as a stand-in, with what it stands for (the state machine
    registers the reported key: test_compile_and_register_states_follow_the_pipeline)."""
    from sagestack.project.requests import render_environment, requests_named

    ep = _endpoint(project, CASES[case])
    plan = resolve_environment(project.load("dev"))
    shown = {s.operation: s for s in requests_named(plan, render_environment(plan, project.root), "digits")}
    register = shown["CreateModelPackage"]
    url = register.request["InferenceSpecification"]["Containers"][0]["ModelDataUrl"]
    assert url == f"s3://sagestack-validation-bucket/{artifact}"
    what = register.stand_ins[url]
    assert ("DescribeCompilationJob" if ep.spec.compile else "DescribeTrainingJob") in what
    if ep.spec.compile is not None:  # the compilation reads the trained artifact, named likewise
        source = shown["CreateCompilationJob"].request["InputConfig"]["S3Uri"]
        assert source.endswith("/output/model.tar.gz") and source in shown["CreateCompilationJob"].stand_ins
