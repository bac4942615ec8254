"""The requests a pipeline sends after training (or tuning) for each endpoint it feeds:
CreateCompilationJob (SageMaker Neo, when the endpoint compiles) and CreateModelPackage, rendered
from the ResolvedEndpoint and a Deployment.

Values only known when the pipeline runs (the trained artifact, the compiled artifact, the image
the compilation job reports) are JSONPath references in the state machine (endpoints.states); at
synth each request is rendered once more with concrete stand-ins and validated against the service
model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sagestack.core.catalog.service_model import validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.layout import S3Layout
from sagestack.core.standins import STAND_IN_BUCKET
from sagestack.endpoints.resolved import ResolvedEndpoint

CONTENT_TYPES = ["application/json", "application/jsonlines", "application/x-npy"]
RESPONSE_TYPES = ["application/json", "application/jsonlines", "application/x-npy"]
# The TensorFlow Serving container's front (tensorflowServing.js) takes JSON, JSON Lines and CSV and
# answers TF Serving's JSON, named application/json or, when the Accept asks, application/jsonlines.
TF_CONTENT_TYPES = ["application/json", "application/jsonlines", "text/csv"]
TF_RESPONSE_TYPES = ["application/json", "application/jsonlines"]
STAND_IN_REPORTED_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagestack-validation:reported-by-neo"


@dataclass(frozen=True)
class ModelStepContext:
    """What the compile and register steps need besides the endpoint: the deployment (tokens in the
    template, stand-ins when validating), the environment's name and its model package group."""

    deployment: Deployment
    env: str
    group_name: str
    # Where the model came from, stamped on each package (CustomerMetadataProperties): the job, its
    # content hash and source archive (`lineage_of`), and what the synth adds (the lock's hash).
    lineage: tuple[tuple[str, str], ...] = ()


def lineage_of(job: str, spec_hash: str, source_sha256: str) -> tuple[tuple[str, str], ...]:
    """The package metadata that ties a model to what trained it (`sagestack lineage` reads it)."""
    return (
        ("sagestack:job", job),
        ("sagestack:spec-hash", spec_hash),
        ("sagestack:source-sha256", source_sha256),
    )


# The training job's image as DescribeTrainingJob reports it (a stand-in where it is not yet known).
STAND_IN_TRAINING_IMAGE = "reported-by-the-training-job"


def compile_digest(ep: ResolvedEndpoint) -> str:
    """What the compilation depends on besides the trained artifact (part of the job's name)."""
    c = ep.spec.compile
    assert c is not None
    return hashlib.sha256(json.dumps(c.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:12]


def compilation_request(
    ep: ResolvedEndpoint, ctx: ModelStepContext, *, name: str, model_artifacts: str
) -> dict[str, Any]:
    c = ep.spec.compile
    assert c is not None
    input_config: dict[str, Any] = {
        "S3Uri": model_artifacts,
        "DataInputConfig": json.dumps(c.input_shapes, separators=(",", ":")),
        "Framework": c.framework,
    }
    if c.framework_version:
        input_config["FrameworkVersion"] = c.framework_version
    output: dict[str, Any] = {
        "S3OutputLocation": ctx.deployment.s3.compiled_models(ep.key),
        "KmsKeyId": ctx.deployment.kms_key_id,
    }
    if c.target_device:
        output["TargetDevice"] = c.target_device
    else:
        output["TargetPlatform"] = dict(c.target_platform or {})
    if c.compiler_options:
        output["CompilerOptions"] = json.dumps(c.compiler_options, separators=(",", ":"), sort_keys=True)
    request: dict[str, Any] = {
        "CompilationJobName": name,
        "RoleArn": ctx.deployment.role_arn,
        "InputConfig": input_config,
        "OutputConfig": output,
        "StoppingCondition": {"MaxRuntimeInSeconds": c.max_runtime},
    }
    if ctx.deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in ctx.deployment.tags]
    return request


def model_package_request(
    ep: ResolvedEndpoint,
    ctx: ModelStepContext,
    *,
    image: str,
    model_data_url: str,
    training_job: str,
    training_image: str = STAND_IN_TRAINING_IMAGE,
) -> dict[str, Any]:
    c = ep.spec.compile
    container: dict[str, Any] = {"Image": image, "ModelDataUrl": model_data_url}
    tf_serving = ep.framework == "tensorflow" and c is None
    if not tf_serving:  # the inference toolkit runs code/inference.py
        container["Environment"] = {
            "SAGEMAKER_PROGRAM": "inference.py",
            "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
            "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
            "SAGEMAKER_REGION": ctx.deployment.region,
        }
    # TensorFlow Serving serves model.tar.gz's <version>/saved_model.pb itself (and code/inference.py,
    # when there is one, in its python service): no environment, as the SDK's TensorFlowModel renders it.
    if c is not None:
        container["Framework"] = c.framework
        if c.framework_version:
            container["FrameworkVersion"] = c.framework_version
        container["ModelInput"] = {"DataInputConfig": json.dumps(c.input_shapes, separators=(",", ":"))}
    compiled = f"compiled for {c.target_device or 'a target platform'}" if c else "not compiled"
    what, types = (
        ("batch transform", "SupportedTransformInstanceTypes")
        if ep.transform
        else ("endpoint", "SupportedRealtimeInferenceInstanceTypes")
    )
    request: dict[str, Any] = {
        "ModelPackageGroupName": ctx.group_name,
        "ModelPackageDescription": f"sagestack {ctx.env}: model for {what} '{ep.key}', {compiled}",
        "ModelApprovalStatus": "PendingManualApproval",
        "InferenceSpecification": {
            "Containers": [container],
            "SupportedContentTypes": TF_CONTENT_TYPES if tf_serving else CONTENT_TYPES,
            "SupportedResponseMIMETypes": TF_RESPONSE_TYPES if tf_serving else RESPONSE_TYPES,
            types: list(ep.supported_instance_types),
        },
        "CustomerMetadataProperties": {
            f"sagestack:{what.replace('batch ', '')}": ep.key,
            "sagestack:environment": ctx.env,
            "sagestack:training-job": training_job,
            "sagestack:training-image": training_image,
            **dict(ctx.lineage),
        },
    }
    if ctx.deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in ctx.deployment.tags]
    return request


# The training job the pipeline ran, as the requests name it before it has run.
STAND_IN_TRAINING_JOB = "sagestack-validation-job"


def compiled_file_name(ep: ResolvedEndpoint) -> str:
    """What SageMaker Neo writes under the job's S3OutputLocation: the input archive's name
    (model.tar.gz, as training writes it) with the target appended, `model-<target>.tar.gz`. The
    pipeline reads the real key from DescribeCompilationJob's ModelArtifacts.S3ModelArtifacts, as the
    SageMaker SDK does; this name is what `render` shows in its place (a target platform's name
    is SageMaker's own, so the stand-in spells the platform)."""
    c = ep.spec.compile
    assert c is not None
    target = c.target_device or "_".join(v.lower() for v in (c.target_platform or {}).values())
    return f"model-{target}.tar.gz"


def validation_stand_ins(ep: ResolvedEndpoint) -> dict[str, str]:
    """The run-time values of the compile and register steps, as stand-ins of their real shape:
    the trained artifact (output/<job>/<training job>/output/model.tar.gz) and, when compiled, the
    compiled artifact under the endpoint's models/compiled/<endpoint>/ (one name per target)."""
    layout = S3Layout(STAND_IN_BUCKET)
    trained = f"{layout.output(ep.source or 'job')}{STAND_IN_TRAINING_JOB}/output/model.tar.gz"
    compiled = (
        layout.compiled_models(ep.key) + compiled_file_name(ep) if ep.spec.compile is not None else None
    )
    return {
        "name": f"{ep.compile_name_prefix}-{'0' * 32}",
        "model_artifacts": trained,
        "training_job": STAND_IN_TRAINING_JOB,
        # what the register step names: the compiled artifact, else the trained one
        "compiled": compiled or trained,
    }


def stand_in_model_requests(ep: ResolvedEndpoint, ctx: ModelStepContext) -> dict[str, dict[str, Any]]:
    """This endpoint's CreateCompilationJob (when compiled) and CreateModelPackage requests with
    concrete stand-ins for the run-time values: what validation and the lock look at."""
    stand_in = validation_stand_ins(ep)
    requests: dict[str, dict[str, Any]] = {}
    if ep.spec.compile is not None:
        requests["CreateCompilationJob"] = compilation_request(
            ep, ctx, name=stand_in["name"], model_artifacts=stand_in["model_artifacts"]
        )
    requests["CreateModelPackage"] = model_package_request(
        ep,
        ctx,
        image=ep.image_uri or STAND_IN_REPORTED_IMAGE,  # none in the catalog: the compilation job reports it
        model_data_url=stand_in["compiled"],
        training_job=stand_in["training_job"],
    )
    return requests


def validate_model_requests(ep: ResolvedEndpoint, ctx: ModelStepContext) -> None:
    """Validate this endpoint's requests against the service model (ValueError listing every problem)."""

    for operation, request in stand_in_model_requests(ep, ctx).items():
        validate_request(operation, request)
