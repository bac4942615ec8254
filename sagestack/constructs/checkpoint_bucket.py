"""CheckpointBucket: the project's artifact/checkpoint bucket and its access-log bucket."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sagestack.constructs.nag import acknowledge

# Fixed prefixes: IAM grants and lifecycle rules are scoped to them.
PREFIXES = (
    "code",
    "data",
    "checkpoints",
    "models",
    "output",
    "profiler",
    "debugger",
    "tensorboard",
    "capture",
)


class CheckpointBucket(Construct):
    """A KMS-encrypted, versioned, SSL-only bucket with public access blocked, non-current
    checkpoint versions expired, incomplete uploads aborted and server access logs kept.

    Props:
      encryption_key: the project key (required: SageMaker writes with it).
      retain: keep the buckets when the stack is deleted (default: True).
      noncurrent_checkpoint_days: days a replaced checkpoint version is kept (default: 30).
      abort_incomplete_upload_days: default 7.
      access_logs_bucket: default: a log bucket is created (SSE-S3, as S3 log delivery requires).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        encryption_key: kms.IKey,
        retain: bool = True,
        noncurrent_checkpoint_days: int = 30,
        abort_incomplete_upload_days: int = 7,
        access_logs_bucket: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, id)
        removal = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
        if access_logs_bucket is None:
            logs = s3.Bucket(
                self,
                "AccessLogs",
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
                versioned=True,
                removal_policy=removal,
                lifecycle_rules=[
                    s3.LifecycleRule(
                        id="expire-access-logs",
                        expiration=Duration.days(365),
                        noncurrent_version_expiration=Duration.days(30),
                        abort_incomplete_multipart_upload_after=Duration.days(abort_incomplete_upload_days),
                    )
                ],
            )
            acknowledge(
                logs,
                {
                    "AwsSolutions-S1": "This is the access-log bucket itself; logging it into "
                    "another bucket would only move the question one bucket further.",
                },
            )
            access_logs_bucket = logs
        self.access_logs_bucket = access_logs_bucket
        self.bucket = s3.Bucket(
            self,
            "Resource",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=encryption_key,
            bucket_key_enabled=True,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            versioned=True,
            server_access_logs_bucket=access_logs_bucket,
            server_access_logs_prefix="artifacts/",
            removal_policy=removal,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-replaced-checkpoints",
                    prefix="checkpoints/",
                    noncurrent_version_expiration=Duration.days(noncurrent_checkpoint_days),
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(abort_incomplete_upload_days),
                ),
            ],
        )
        self.encryption_key = encryption_key

    @property
    def bucket_name(self) -> str:
        return self.bucket.bucket_name

    def s3_uri(self, prefix: str, *parts: str) -> str:
        """s3://<bucket>/<prefix>/<parts…> for one of PREFIXES."""
        if prefix not in PREFIXES:
            raise ValueError(f"unknown prefix {prefix!r}; one of {', '.join(PREFIXES)}")
        return "/".join([f"s3://{self.bucket.bucket_name}", prefix, *parts])

    def grant_prefix_read_write(self, grantee: iam.IGrantable, prefixes: tuple[str, ...] = PREFIXES) -> None:
        """Read, write and delete objects under the given prefixes only, and list only those prefixes
        (no bucket-wide wildcard actions, unlike Bucket.grant_read_write)."""
        principal = grantee.grant_principal
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "s3:GetObject",
                    "s3:GetObjectVersion",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[self.bucket.arn_for_objects(f"{p}/*") for p in prefixes],
            )
        )
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={
                    "StringLike": {"s3:prefix": [f"{p}/*" for p in prefixes] + [f"{p}/" for p in prefixes]}
                },
            )
        )
        principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[self.bucket.bucket_arn])
        )
