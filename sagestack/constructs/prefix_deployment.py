"""Files unpacked under one prefix of the artifact bucket at deploy (CDK's BucketDeployment), copied
by a role that may write that prefix only: a HyperPod cluster's lifecycle scripts (HyperPod reads a
folder, not an archive), a drivers-contract job's launch files (SageMaker reads each channel as an S3
prefix).

CDK's deployment function would be granted the whole bucket; it gets a role of its own, handed to
BucketDeployment immutable (so CDK's own grants are dropped), with each deployment's prefix granted
beside it. CDK makes ONE deployment function per stack (a singleton, whatever role a later
deployment names), so the role is one per stack too: the first deployment of a stack creates it, each
deployment adds its own prefix to it.
"""

from __future__ import annotations

import weakref
from typing import Any

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.compliance import PROVIDER_FUNCTION, acknowledge_compliance
from sagestack.constructs.grants import first_time
from sagestack.constructs.nag import acknowledge, acknowledge_at_synth, nag_text

# CDK's singleton deployment function, one per stack (aws-s3-deployment's renderSingletonUuid)
HANDLER_ID = "Custom::CDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756C"
DEPLOY_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject")

_ROLES: weakref.WeakKeyDictionary[Any, iam.Role] = weakref.WeakKeyDictionary()


def deploy_to_prefix(
    scope: Construct,
    id: str,
    *,
    source: str,
    artifacts: ArtifactBucketBase,
    prefix: str,
    what: str,
    role_description: str,
    role_id: str | None = None,
    retain_on_delete: bool = False,
) -> s3_deployment.BucketDeployment:
    """The files of the folder `source`, unpacked under `prefix` (a key ending in '/') of the
    artifact bucket, replacing what lay there (prune). `what` says what they are (the deployment's
    acknowledgements read it); the stack's deploy role, created the first time in `scope` as `role_id`
    (default `<id>DeployRole`) with `role_description`, is granted `prefix`. retain_on_delete: keep the files when the
    deployment is deleted or moves to another prefix (a content-addressed one: an old prefix may still
    be read by a job started before)."""
    role = _deploy_role(scope, role_id or f"{id}DeployRole", role_description)
    objects = grant_prefix(role, artifacts, prefix, DEPLOY_ACTIONS, actions.KMS_USE)
    deployment = s3_deployment.BucketDeployment(
        scope,
        id,
        sources=[s3_deployment.Source.asset(source)],
        destination_bucket=artifacts.bucket,
        destination_key_prefix=prefix,
        prune=True,
        retain_on_delete=retain_on_delete,
        # By name, so the imported role's account is the stack's: were it parsed from a token ARN,
        # the bucket key's grant to it would go to the key policy in the foundation stack, which
        # would then depend on this one (a cycle wherever the environment names its account).
        role=iam.Role.from_role_name(scope, f"{id}DeployRoleRef", role.role_name, mutable=False),
    )
    deployment.node.add_dependency(role)
    acknowledge_at_synth(
        role,
        {
            lambda c: f"AwsSolutions-IAM5[Resource::{nag_text(c, objects)}]": f"{what} under their own "
            f"{prefix} prefix, which the deployment replaces as a whole.",
        },
    )
    handler = Stack.of(scope).node.try_find_child(HANDLER_ID)
    if handler is not None and first_time(handler, "deploy handler"):
        acknowledge(
            handler,
            {
                "AwsSolutions-L1": "The runtime is chosen by aws-cdk-lib's BucketDeployment and moves with "
                "it; the function only copies files to the artifact bucket's own prefixes.",
            },
        )
        acknowledge_compliance(handler, PROVIDER_FUNCTION)
    return deployment


def _deploy_role(scope: Construct, id: str, description: str) -> iam.Role:
    """The stack's deploy role: what CDK's one deployment function of the stack runs as."""
    stack = Stack.of(scope)
    role = _ROLES.get(stack)
    if role is not None:
        return role
    role = _ROLES[stack] = iam.Role(
        scope, id, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description
    )
    staging = f"arn:{stack.partition}:s3:::cdk-*-assets-{stack.account}-{stack.region}/*"
    log_groups = stack.format_arn(
        service="logs",
        resource="log-group",
        resource_name="/aws/lambda/*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )
    role.add_to_policy(iam.PolicyStatement(actions=list(actions.S3_OBJECT_GET), resources=[staging]))
    role.add_to_policy(iam.PolicyStatement(actions=list(actions.LOGS_WRITE), resources=[log_groups]))
    acknowledge(
        role,
        {
            f"AwsSolutions-IAM5[Resource::{nag_text(scope, staging)}]": "The CDK bootstrap bucket's staged "
            "asset archives (the files' zip), read only; its name carries the bootstrap qualifier.",
            f"AwsSolutions-IAM5[Resource::{nag_text(scope, log_groups)}]": "The deployment function's own "
            "log streams, in the Lambda log group named after it.",
        },
    )
    return role


def grant_prefix(
    role: iam.Role,
    artifacts: ArtifactBucketBase,
    prefix: str,
    object_actions: tuple[str, ...],
    key_actions: tuple[str, ...],
) -> str:
    """Objects under `prefix` (and listing that prefix only), with the bucket's key; returns the
    objects' ARN pattern (for the acknowledgement beside the grant)."""
    objects = artifacts.bucket.arn_for_objects(f"{prefix}*")
    role.add_to_policy(iam.PolicyStatement(actions=list(object_actions), resources=[objects]))
    role.add_to_policy(
        iam.PolicyStatement(
            actions=list(actions.S3_LIST),
            resources=[artifacts.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        )
    )
    if artifacts.encryption_key is not None:
        role.add_to_policy(
            iam.PolicyStatement(actions=list(key_actions), resources=[artifacts.encryption_key.key_arn])
        )
    return objects
