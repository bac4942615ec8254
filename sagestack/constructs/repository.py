"""The project's own ECR repository."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_kms as kms
from constructs import Construct


def project_repository(
    scope: Construct, id: str, *, repository_name: str, retain: bool, encryption_key: kms.IKey | None = None
) -> ecr.Repository:
    """Scan on push, immutable tags, KMS encryption, untagged images expire after 7 days, the
    newest 50 kept. The name is explicit and lowercase (CloudFormation emulators and ECR both need it)."""
    return ecr.Repository(
        scope,
        id,
        repository_name=repository_name.lower(),
        image_scan_on_push=True,
        image_tag_mutability=ecr.TagMutability.IMMUTABLE,
        encryption=ecr.RepositoryEncryption.KMS,
        encryption_key=encryption_key,
        removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        lifecycle_rules=[
            ecr.LifecycleRule(
                description="expire untagged images after 7 days",
                tag_status=ecr.TagStatus.UNTAGGED,
                max_image_age=Duration.days(7),
                rule_priority=1,
            ),
            ecr.LifecycleRule(
                description="keep the newest 50 images",
                tag_status=ecr.TagStatus.ANY,
                max_image_count=50,
                rule_priority=2,
            ),
        ],
    )
