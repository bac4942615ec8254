"""Concrete stand-ins for what only a deployment knows (the role, bucket, key, code location,
account): requests rendered with them validate against botocore's model, and `sagestack render`
names each one (project.requests.STAND_INS)."""

from __future__ import annotations

from sagestack.core.layout import S3Layout

SAMPLE_ACCOUNT = "123456789012"
STAND_IN_BUCKET = "sagestack-validation-bucket"
STAND_IN_SOURCE = S3Layout(STAND_IN_BUCKET).source_archive()


def stand_in_role_arn(account: str) -> str:
    return f"arn:aws:iam::{account}:role/sagestack-validation"


def stand_in_key_arn(account: str, region: str) -> str:
    return f"arn:aws:kms:{region}:{account}:key/00000000-0000-0000-0000-000000000000"
