"""CloudFormation SageMaker resources checked against botocore's service model at synth.

A CloudFormation SageMaker resource's properties are the request CloudFormation sends
(AWS::SageMaker::EndpointConfig is CreateEndpointConfig's body, AWS::SageMaker::Endpoint's update is
UpdateEndpoint's, …). At synth each resource is resolved, its intrinsics (values only the deployment
knows: a model's name, a key's ARN) replaced by stand-ins of the right shape for the key that holds
them, and the result validated as that operation's request — so a property the API refuses, an
enum value it does not know or a number out of its range fails `cdk synth`, not the deployment.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import jsii
from aws_cdk import CfnResource, Stack, Token
from constructs import IConstruct, IValidation

from sagestack.constructs.read_once import attribute, stack_of
from sagestack.core.catalog.service_model import RequestValidationError, validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.standins import SAMPLE_ACCOUNT, stand_in_key_arn, stand_in_role_arn

ACCOUNT = SAMPLE_ACCOUNT
REGION = "us-east-1"

# The stand-in for an intrinsic, by the key that holds it (the last key on its path).
STAND_INS: dict[str, str] = {
    "ExecutionRoleArn": stand_in_role_arn(ACCOUNT),
    "RoleArn": stand_in_role_arn(ACCOUNT),
    "KmsKeyId": stand_in_key_arn(ACCOUNT, REGION),
    "VolumeKmsKeyId": stand_in_key_arn(ACCOUNT, REGION),
    "ModelName": "sagestack-validation-model",
    "ModelPackageName": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/sagestack-validation/1",
    "MlReservationArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/sagestack-validation",
    "EndpointConfigName": "sagestack-validation-config",
    "EndpointName": "sagestack-validation-endpoint",
    "InferenceComponentName": "sagestack-validation-component",
    "MonitoringJobDefinitionName": "sagestack-validation-definition",
    "JobDefinitionName": "sagestack-validation-definition",
    "MonitoringScheduleName": "sagestack-validation-schedule",
    "SuccessTopic": f"arn:aws:sns:{REGION}:{ACCOUNT}:sagestack-validation",
    "ErrorTopic": f"arn:aws:sns:{REGION}:{ACCOUNT}:sagestack-validation",
    "AlarmName": "sagestack-validation-alarm",
    "ImageUri": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/sagestack-validation:latest",
    "Image": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/sagestack-validation:latest",
    "Subnets": "subnet-0123456789abcdef0",
    "SecurityGroupIds": "sg-0123456789abcdef0",
}
S3_STAND_IN = "s3://sagestack-validation-bucket/stand-in/"


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Ref", "Fn::"))


def stand_in_request(properties: Any, key: str = "") -> Any:
    """Resolved CloudFormation properties with every intrinsic replaced by a stand-in."""
    if _is_intrinsic(properties):
        if key in STAND_INS:
            return STAND_INS[key]
        if "S3" in key or key.endswith(("Uri", "Path", "Url")):
            return S3_STAND_IN
        return "sagestack-validation"
    if isinstance(properties, dict):
        return {k: stand_in_request(v, k) for k, v in properties.items()}
    if isinstance(properties, list):
        return [stand_in_request(v, key) for v in properties]
    return properties


def request_of(resource: CfnResource) -> dict[str, Any]:
    """The resource's properties as they will be deployed, with stand-ins for the intrinsics."""
    stack = Stack.of(resource)
    rendered = stack.resolve(resource._render_properties(resource._cfn_properties))
    return stand_in_request(rendered or {})  # type: ignore[no-any-return]


@jsii.implements(IValidation)
class _AsRequest:
    def __init__(
        self, resource: CfnResource, operation: str, drop: Sequence[str], add: dict[str, Any]
    ) -> None:
        self._resource = resource
        self._operation = operation
        self._drop = tuple(drop)
        self._add = add

    def validate(self) -> list[str]:
        request = {k: v for k, v in request_of(self._resource).items() if k not in self._drop}
        request.update({k: v for k, v in self._add.items() if k not in request})
        try:
            validate_request(self._operation, request)
        except RequestValidationError as e:
            return [f"{self._resource.cfn_resource_type} is not a valid {self._operation} request: {e}"]
        return []


def validate_as_request(
    resource: CfnResource,
    operation: str,
    *,
    drop: Sequence[str] = (),
    add: dict[str, Any] | None = None,
) -> None:
    """At synth, validate `resource`'s properties as `operation`'s request (botocore's model).
    drop: CloudFormation-only properties; add: what the API requires and CloudFormation names itself
    (a generated name)."""
    resource.node.add_validation(_AsRequest(resource, operation, drop, add or {}))


def stand_in_deployment(
    scope: IConstruct, *, region: str | None = None, tags: tuple[tuple[str, str], ...] = ()
) -> Deployment:
    """Stand-ins for what only the deployment knows, to validate a construct's requests at synth:
    the stack's account and region where they are concrete (or `region`), else samples."""
    stack = stack_of(scope)
    known = _STAND_INS.setdefault(stack, {})
    if (region, tags) not in known:  # the stack's account and region are calls into jsii
        where = region or stack.region
        known[(region, tags)] = Deployment.stand_ins(
            region=REGION if Token.is_unresolved(where) else where,
            account=None if Token.is_unresolved(stack.account) else stack.account,
            tags=tags,
        )
    return known[(region, tags)]


def token_deployment(
    scope: IConstruct,
    *,
    role_arn: str,
    bucket: str,
    kms_key_id: str,
    region: str | None = None,
    tags: tuple[tuple[str, str], ...] = (),
) -> Deployment:
    """The deployment's own values as the template holds them: the stack's account and region (or
    `region`), the execution role, the artifact bucket and key — what a construct's requests are
    rendered with, beside the stand-ins they are validated with."""
    stack = stack_of(scope)
    return Deployment(
        region=region or attribute(stack, "region"),
        account=attribute(stack, "account"),
        role_arn=role_arn,
        bucket=bucket,
        kms_key_id=kms_key_id,
        tags=tags,
    )


_STAND_INS: weakref.WeakKeyDictionary[
    Stack, dict[tuple[str | None, tuple[tuple[str, str], ...]], Deployment]
] = weakref.WeakKeyDictionary()
