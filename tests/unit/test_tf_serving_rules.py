"""An endpoint serving a TensorFlow job's model: the TensorFlow Serving image sagemaker-core names
for the job's version (or the endpoint's image:), its CreateModelPackage as the SDK's
TensorFlowModel renders it (no SAGEMAKER_PROGRAM, the container's content types) valid against
botocore, and the rules on versions that have no inference container."""

from __future__ import annotations

import pytest

from sagestack.endpoints.request import model_package_request, validate_model_requests
from sagestack.endpoints.resolved import resolve_endpoint, resolve_transform_registration
from sagestack.project import resolve_environment
from tests.unit.test_serving_requests import CTX

INFERENCE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-inference"


def tf_spec(version: str, *, endpoint: str = "", images: str = "") -> str:
    return f"""\
project: digits
region: us-east-1
images:
  train: {{dlc: {{framework: tensorflow, version: "{version}", py_version: py312}}}}
{images}jobs:
  classifier:
    image: train
    instance_type: ml.m5.xlarge
endpoints:
  digits:
    model: {{from: classifier}}
    instance_type: ml.m5.xlarge
{endpoint}"""


def _resolved(project, text: str):
    project.spec(text).env("dev")
    return resolve_endpoint(resolve_environment(project.load("dev")), "digits")


def test_a_tensorflow_model_is_served_by_tensorflow_serving_of_its_version(project):
    ep = _resolved(project, tf_spec("2.19"))
    assert (ep.image_uri, ep.framework) == (f"{INFERENCE}:2.19-cpu", "tensorflow")
    request = model_package_request(
        ep, CTX, image=ep.image_uri, model_data_url="s3://b/model.tar.gz", training_job="j"
    )
    (container,) = request["InferenceSpecification"]["Containers"]
    assert "Environment" not in container  # TF Serving finds <version>/saved_model.pb itself
    assert request["InferenceSpecification"]["SupportedContentTypes"] == [
        "application/json",
        "application/jsonlines",
        "text/csv",
    ]
    validate_model_requests(ep, CTX)  # CreateModelPackage against botocore's model


@pytest.mark.parametrize(
    "target",
    ["target_platform: {Os: LINUX, Arch: X86_64}", "target_device: ml_c5"],
    ids=["platform", "device"],
)
def test_a_tensorflow_model_compiled_by_neo_is_not_packaged_for_tensorflow_serving(project, target):
    """Neo's output is no SavedModel for TF Serving to find: the compiled model runs under the
    inference toolkit (SAGEMAKER_PROGRAM, the toolkit's content types), with Neo's framework fields."""
    compile_ = (
        f"    compile: {{{target}, framework: TENSORFLOW, framework_version: '2.9', "
        "input_shapes: {input_1: [1, 8, 8, 1]}}\n"
    )
    text = tf_spec("2.19", endpoint=compile_).replace(
        "instance_type: ml.m5.xlarge\n    compile", "instance_type: ml.c5.xlarge\n    compile"
    )
    ep = _resolved(project, text)
    request = model_package_request(
        ep, CTX, image=ep.image_uri or "x", model_data_url="s3://b/model.tar.gz", training_job="j"
    )
    (container,) = request["InferenceSpecification"]["Containers"]
    assert container["Environment"]["SAGEMAKER_PROGRAM"] == "inference.py"
    assert (container["Framework"], container["FrameworkVersion"]) == ("TENSORFLOW", "2.9")
    assert "application/x-npy" in request["InferenceSpecification"]["SupportedContentTypes"]
    assert "text/csv" not in request["InferenceSpecification"]["SupportedContentTypes"]
    validate_model_requests(ep, CTX)


def test_a_pytorch_model_keeps_the_toolkits_environment(project):
    from tests.conftest import MINIMAL

    project.spec(
        MINIMAL + "endpoints:\n  digits:\n    model: {from: classifier}\n    instance_type: ml.m5.xlarge\n"
    )
    ep = resolve_endpoint(resolve_environment(project.env("dev").load("dev")), "digits")
    request = model_package_request(
        ep, CTX, image=ep.image_uri, model_data_url="s3://b/m.tar.gz", training_job="j"
    )
    assert (
        request["InferenceSpecification"]["Containers"][0]["Environment"]["SAGEMAKER_PROGRAM"]
        == "inference.py"
    )


def test_a_training_version_without_inference_container_is_an_error_naming_the_versions(project):
    project.spec(tf_spec("2.21")).env("dev")
    (error,) = [e for e in project.errors("dev") if "endpoint-inference-image" in e]
    assert "endpoints.digits.model" in error
    assert "tensorflow inference containers go up to 2.20" in error
    assert 'version: "2.20", py_version: py312' in error and "image: serve" in error


def test_the_endpoints_image_serves_an_older_version_with_a_warning(project):
    serve = '  serve: {dlc: {framework: tensorflow, version: "2.20", py_version: py312}}\n'
    project.spec(tf_spec("2.21", images=serve, endpoint="    image: serve\n")).env("dev")
    loaded = project.load("dev")
    (warning,) = [w for w in loaded.warnings if w.rule == "endpoint-serving-version"]
    assert warning.path == ("endpoints", "digits", "image") and "older than the 2.21" in warning.message
    ep = resolve_endpoint(resolve_environment(loaded), "digits")
    assert (ep.image_uri, ep.framework) == (f"{INFERENCE}:2.20-cpu-py312", "tensorflow")
    validate_model_requests(ep, CTX)


@pytest.mark.parametrize(
    ("images", "endpoint", "rule", "says"),
    [
        ("", "    image: servce\n", "endpoint-inference-image", "'servce' is not a key of images:"),
        (
            '  torch: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}\n',
            "    image: torch\n",
            "endpoint-inference-image",
            "is a pytorch container, but job 'classifier' trains with tensorflow",
        ),
        ("", "    batching: {max_batch_size: 8}\n", "endpoint-tf-batching", "takes no batching:"),
        (
            "",
            "    image: train\n    compile: {target_device: ml_c5, input_shapes: {input0: [1, 8, 8]}}\n",
            "endpoint-inference-image",
            "a compiled model is served in the image Neo reports",
        ),
    ],
)
def test_what_tensorflow_serving_cannot_take_is_refused(project, images, endpoint, rule, says):
    project.spec(tf_spec("2.19", images=images, endpoint=endpoint)).env("dev")
    errors = project.errors("dev")
    assert any(says in e and e.endswith(f"[{rule}]") for e in errors), errors
    assert not any("endpoint-batching-handler" in e for e in errors)  # TorchServe's handler: not here


def test_the_same_version_or_none_named_is_no_warning(project):
    """endpoint-serving-version warns only when the serving DLC is older than the training one."""
    serve = '  serve: {dlc: {framework: tensorflow, version: "2.19", py_version: py312}}\n'
    project.spec(tf_spec("2.19", images=serve, endpoint="    image: serve\n")).env("dev")
    assert not [w for w in project.load("dev").warnings if w.rule == "endpoint-serving-version"]


def test_a_batch_transform_of_a_tensorflow_model_registers_it_for_tf_serving(project):
    text = tf_spec("2.19") + (
        "transforms:\n  score:\n    model: {from: classifier}\n    instance_type: [ml.m5.xlarge]\n"
    )
    project.spec(text).env("dev")
    ep = resolve_transform_registration(resolve_environment(project.load("dev")), "score")
    assert (ep.image_uri, ep.framework) == (f"{INFERENCE}:2.19-cpu", "tensorflow")
    validate_model_requests(ep, CTX)


def test_an_image_beside_a_pinned_package_alone_is_refused(project):
    text = tf_spec("2.19").replace(
        "    model: {from: classifier}\n",
        '    model_package: "arn:aws:sagemaker:us-east-1:111111111111:model-package/keras/1"\n    image: train\n',
    )
    project.spec(text).env("dev")
    errors = project.errors("dev")
    assert any(
        "a model_package carries its own" in e and "[endpoint-inference-image]" in e for e in errors
    ), errors
