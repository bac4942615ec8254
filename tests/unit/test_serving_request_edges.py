"""The edges of the compile and register requests that the golden requests do not reach: a batch
transform's registration, and compile settings whose meaning, not their writing order, names the
compilation job (issue 26, item 19)."""

from __future__ import annotations

import json

from sagestack.core.catalog import validate_request
from sagestack.endpoints.request import compilation_request, compile_digest, model_package_request
from sagestack.endpoints.resolved import resolve_endpoint, resolve_transform_registration
from sagestack.project import resolve_environment
from tests.conftest import MINIMAL
from tests.unit.test_serving_requests import CTX

TRANSFORM = """\
transforms:
  score:
    model: {from: classifier}
    instance_type: [ml.m5.xlarge, ml.c5.xlarge]
"""


def test_a_transforms_model_is_registered_for_batch_transform_instance_types(project):
    project.spec(MINIMAL + TRANSFORM).env("dev")
    ep = resolve_transform_registration(resolve_environment(project.load("dev")), "score")
    request = model_package_request(
        ep, CTX, image=ep.image_uri, model_data_url="s3://b/m.tar.gz", training_job="j"
    )
    spec = request["InferenceSpecification"]
    assert spec["SupportedTransformInstanceTypes"] == ["ml.m5.xlarge", "ml.c5.xlarge"]
    assert "SupportedRealtimeInferenceInstanceTypes" not in spec
    assert (
        request["ModelPackageDescription"] == "sagestack dev: model for batch transform 'score', not compiled"
    )
    assert request["CustomerMetadataProperties"]["sagestack:transform"] == "score"
    assert "sagestack:endpoint" not in request["CustomerMetadataProperties"]
    validate_request("CreateModelPackage", request)


COMPILE = "    compile: {target_device: ml_c5, framework_version: '2.0', input_shapes: {%s}, compiler_options: {%s}}\n"


def _compiled(project, shapes: str, options: str):
    body = (
        "    model: {from: classifier}\n" + COMPILE % (shapes, options) + "    instance_type: ml.c5.xlarge\n"
    )
    project.spec(MINIMAL + "endpoints:\n  digits:\n" + body).env("dev")
    return resolve_endpoint(resolve_environment(project.load("dev")), "digits")


def test_compile_settings_name_the_job_by_meaning_not_by_writing_order(project):
    a = _compiled(project, "a: [1, 3], b: [1, 8]", "dtype: float32, mcpu: skylake")
    b = _compiled(project, "b: [1, 8], a: [1, 3]", "mcpu: skylake, dtype: float32")
    assert compile_digest(a) == compile_digest(b)
    options = [
        compilation_request(e, CTX, name="n", model_artifacts="s3://b/m.tar.gz")["OutputConfig"][
            "CompilerOptions"
        ]
        for e in (a, b)
    ]
    assert options == ['{"dtype":"float32","mcpu":"skylake"}'] * 2
    assert json.loads(options[0]) == {"dtype": "float32", "mcpu": "skylake"}
