"""Batch transforms resolved for one environment: the CreateModel and CreateTransformJob requests
of a transform (ResolvedTransform), rendered from its spec and a Deployment — tokens in the template,
stand-ins when validating."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core.catalog.service_model import validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.layout import S3Layout
from sagestack.core.names import Names
from sagestack.transforms.models import TransformSpec


@dataclass(frozen=True)
class ResolvedTransform:
    key: str
    spec: TransformSpec
    prefix: str  # Names.transform_prefix: models and jobs are '<prefix>-<md5>'

    @staticmethod
    def of(names: Names, key: str, spec: TransformSpec) -> ResolvedTransform:
        return ResolvedTransform(key=key, spec=spec, prefix=names.transform_prefix(key))

    def input_uri(self, bucket: str) -> str:
        return self.spec.input or S3Layout(bucket).transform_input(self.key)

    def output_uri(self, bucket: str, job_name: str) -> str:
        return S3Layout(bucket).transform_output(self.key, job_name)


def model_request(t: ResolvedTransform, deployment: Deployment, *, name: str, package: str) -> dict[str, Any]:
    request: dict[str, Any] = {
        "ModelName": name,
        "ExecutionRoleArn": deployment.role_arn,
        "PrimaryContainer": {"ModelPackageName": package},
        "EnableNetworkIsolation": True,
    }
    if deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in deployment.tags]
    return request


def transform_request(
    t: ResolvedTransform,
    deployment: Deployment,
    *,
    name: str,
    model: str,
    instance_type: str,
    input_uri: str,
) -> dict[str, Any]:
    s = t.spec
    data_processing: dict[str, Any] = {"JoinSource": s.join_source}
    if s.input_filter:
        data_processing["InputFilter"] = s.input_filter
    if s.output_filter:
        data_processing["OutputFilter"] = s.output_filter
    output: dict[str, Any] = {
        "S3OutputPath": t.output_uri(deployment.bucket, name),
        "AssembleWith": s.assemble_with,
        "KmsKeyId": deployment.kms_key_id,
    }
    if s.accept:
        output["Accept"] = s.accept
    request: dict[str, Any] = {
        "TransformJobName": name,
        "ModelName": model,
        "BatchStrategy": s.batch_strategy,
        "MaxPayloadInMB": s.max_payload_mb,
        "ModelClientConfig": {
            "InvocationsTimeoutInSeconds": s.invocation_timeout,
            "InvocationsMaxRetries": s.invocation_retries,
        },
        "TransformInput": {
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": input_uri}},
            "ContentType": s.content_type,
            "SplitType": s.split_type,
        },
        "TransformOutput": output,
        "TransformResources": {
            "InstanceType": instance_type,
            "InstanceCount": s.instance_count,
            "VolumeKmsKeyId": deployment.kms_key_id,
        },
        "DataProcessing": data_processing,
    }
    if s.max_concurrent_transforms:
        request["MaxConcurrentTransforms"] = s.max_concurrent_transforms
    if s.environment:
        request["Environment"] = dict(s.environment)
    if deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in deployment.tags]
    return request


STAND_IN_PACKAGE = "arn:aws:sagemaker:us-east-1:123456789012:model-package/sagestack-validation/1"


def stand_in_requests(t: ResolvedTransform, deployment: Deployment) -> dict[str, dict[str, Any]]:
    """CreateModel and one CreateTransformJob per candidate, with concrete stand-ins."""
    name = f"{t.prefix}-{'0' * 32}"
    out = {
        "CreateModel": model_request(
            t, deployment, name=name, package=t.spec.model_package or STAND_IN_PACKAGE
        )
    }
    for itype in t.spec.instance_type:
        out[f"CreateTransformJob {itype}"] = transform_request(
            t,
            deployment,
            name=name,
            model=name,
            instance_type=itype,
            input_uri=t.input_uri(deployment.bucket),
        )
    return out


def validate_transform(t: ResolvedTransform, deployment: Deployment) -> None:
    for operation, request in stand_in_requests(t, deployment).items():
        validate_request(operation.split(" ")[0], request)
