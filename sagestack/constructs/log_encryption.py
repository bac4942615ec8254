"""The project key's policy lets CloudWatch Logs encrypt one log group with it (the pipelines'
shared group and each pipeline's own)."""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from sagestack.constructs import actions


def allow_log_group_encryption(key: kms.IKey, log_group_name: str) -> None:
    """Let CloudWatch Logs encrypt one log group with `key` (its key policy; a no-op on an imported key)."""
    key.add_to_resource_policy(
        iam.PolicyStatement(
            actions=list(actions.KMS_FOR_LOGS),
            principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:"
                    f"{Aws.ACCOUNT_ID}:log-group:{log_group_name}"
                }
            },
        )
    )
