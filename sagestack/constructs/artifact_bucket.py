"""ArtifactBucket: where a project's code, data, checkpoints, models and job outputs live, under
fixed prefixes that IAM grants and lifecycle rules are scoped to."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Annotations, Duration, FeatureFlags, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.compliance import acknowledge_compliance
from sagestack.constructs.nag import acknowledge
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.read_once import attribute
from sagestack.core import layout

ACCESS_LOGS_FLAG = "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"
# Fixed prefixes (core.layout): IAM grants and lifecycle rules are scoped to them.
PREFIXES = tuple(layout.PREFIXES)
# PutObject's encryption condition keys (IAM's service authorization reference for Amazon S3)
SSE = "s3:x-amz-server-side-encryption"
SSE_KEY = "s3:x-amz-server-side-encryption-aws-kms-key-id"
SSE_CUSTOMER = "s3:x-amz-server-side-encryption-customer-algorithm"


def checked_prefixes(prefixes: Sequence[str]) -> tuple[str, ...]:
    """`prefixes` if each is one of PREFIXES (ValueError naming the others)."""
    unknown = [p for p in prefixes if p not in PREFIXES]
    if unknown:
        raise ValueError(
            f"unknown prefix(es) {', '.join(map(repr, unknown))}; use some of {', '.join(PREFIXES)}"
        )
    return tuple(prefixes)


class ArtifactBucketBase(Construct):
    """What an artifact bucket offers, created here or imported (`ArtifactBucket.from_bucket_attributes`)."""

    bucket: s3.IBucket
    encryption_key: kms.IKey | None

    @property
    def bucket_name(self) -> str:
        return str(attribute(self.bucket, "bucket_name"))  # a token: read through jsii once

    @property
    def bucket_arn(self) -> str:
        return self.bucket.bucket_arn

    def s3_uri(self, prefix: str, *parts: str) -> str:
        """s3://<bucket>/<prefix>/<parts…> for one of PREFIXES."""
        checked_prefixes([prefix])
        return "/".join([f"s3://{self.bucket.bucket_name}", prefix, *parts])

    def grant_prefix_read(self, grantee: iam.IGrantable, prefixes: Sequence[str] = PREFIXES) -> iam.Grant:
        """Read objects under the given prefixes and list only those prefixes."""
        prefixes = checked_prefixes(prefixes)
        return self._grant_objects(grantee, actions.S3_OBJECTS_READ, prefixes).combine(
            self._grant_listing(grantee, prefixes)
        )

    def grant_prefix_read_write(
        self, grantee: iam.IGrantable, prefixes: Sequence[str] = PREFIXES
    ) -> iam.Grant:
        """Read, write and delete objects under the given prefixes only, and list only those prefixes
        (no bucket-wide wildcard actions, unlike Bucket.grant_read_write)."""
        prefixes = checked_prefixes(prefixes)
        return self._grant_objects(grantee, actions.S3_OBJECTS_READ_WRITE, prefixes).combine(
            self._grant_listing(grantee, prefixes)
        )

    def _grant_objects(
        self, grantee: iam.IGrantable, object_actions: Sequence[str], prefixes: Sequence[str]
    ) -> iam.Grant:
        # `${bucketArn}/<key pattern>`, which is what Bucket.arn_for_objects returns: written here
        # from the ARN read once, instead of a round trip through jsii for each of the 13 prefixes
        bucket_arn = attribute(self.bucket, "bucket_arn")
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(object_actions),
            resource_arns=[f"{bucket_arn}/{p}/*" for p in prefixes],
        )

    def _grant_listing(self, grantee: iam.IGrantable, prefixes: Sequence[str]) -> iam.Grant:
        listing = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(actions.S3_LIST),
            resource_arns=[attribute(self.bucket, "bucket_arn")],
            conditions={
                "StringLike": {"s3:prefix": [f"{p}/*" for p in prefixes] + [f"{p}/" for p in prefixes]}
            },
        )
        return listing.combine(
            iam.Grant.add_to_principal(
                grantee=grantee,
                actions=list(actions.S3_LOCATE),
                resource_arns=[attribute(self.bucket, "bucket_arn")],
            )
        )


def deny_other_encryption(bucket: s3.IBucket, key: kms.IKey) -> None:
    """The bucket refuses an upload (PutObject, which authorizes copies and multipart uploads too)
    that asks for any encryption but SSE-KMS under `key`: another key, the AWS managed key (aws:kms
    with no key id: S3 then uses aws/s3), SSE-S3, DSSE or a customer-provided key. An upload that
    names no encryption gets the bucket's default (this key) and must pass: a negated test (and an
    *IfExists one) holds when its key is absent, so each is paired with Null 'false' (the header is
    there). SageMaker writing with KmsKeyId = the key's ARN passes (the header is that ARN)."""
    present = {"Null": {SSE: "false"}}
    refusals = {
        "DenyEncryptionOtherThanKms": {**present, "StringNotEquals": {SSE: "aws:kms"}},
        "DenyOtherKmsKeys": {"Null": {SSE_KEY: "false"}, "StringNotEquals": {SSE_KEY: key.key_arn}},
        "DenyTheAwsManagedKey": {"StringEquals": {SSE: "aws:kms"}, "Null": {SSE_KEY: "true"}},
        "DenyCustomerProvidedKeys": {"Null": {SSE_CUSTOMER: "false"}},
    }
    anyone, objects = iam.AnyPrincipal(), bucket.arn_for_objects("*")  # one of each for the four
    for sid, conditions in refusals.items():
        bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid=sid,
                effect=iam.Effect.DENY,
                principals=[anyone],
                actions=list(actions.S3_OBJECT_PUT),
                resources=[objects],
                conditions=conditions,
            )
        )


def access_log_bucket(
    scope: Construct, id: str, *, removal_policy: RemovalPolicy, abort_after: Duration
) -> s3.Bucket:
    """A bucket for S3 server access logs: SSE-S3 (the only default encryption S3 log delivery writes
    to), SSL-only, private, versioned, logs kept a year."""
    logs = s3.Bucket(
        scope,
        id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
        versioned=True,
        removal_policy=removal_policy,
        lifecycle_rules=[
            s3.LifecycleRule(
                id="expire-access-logs",
                expiration=Duration.days(365),
                noncurrent_version_expiration=Duration.days(30),
                abort_incomplete_multipart_upload_after=abort_after,
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
    acknowledge_compliance(logs, ["S3DefaultEncryptionKMS"])
    return logs


def log_to(source: s3.IBucket, logs: s3.IBucket, prefix: str) -> None:
    """Server access logging for a bucket created elsewhere (e.g. by CDK Pipelines): the source's
    LoggingConfiguration, and the log bucket's policy letting S3 log delivery write there for that
    source only, as Bucket(server_access_logs_bucket=…) does."""
    cfn = source.node.default_child
    assert isinstance(cfn, s3.CfnBucket), "log_to needs a bucket defined in this app"
    cfn.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
        destination_bucket_name=logs.bucket_name, log_file_prefix=prefix
    )
    logs.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal("logging.s3.amazonaws.com")],
            actions=list(actions.S3_OBJECT_PUT),
            resources=[logs.arn_for_objects(f"{prefix}*")],
            conditions={
                "ArnLike": {"aws:SourceArn": source.bucket_arn},
                "StringEquals": {"aws:SourceAccount": Stack.of(source).account},
            },
        )
    )


class _ImportedArtifactBucket(ArtifactBucketBase):
    def __init__(
        self, scope: Construct, id: str, bucket: s3.IBucket, encryption_key: kms.IKey | None
    ) -> None:
        super().__init__(scope, id)
        self.bucket = bucket
        self.encryption_key = encryption_key


class ArtifactBucket(ArtifactBucketBase):
    """A KMS-encrypted, versioned, SSL-only bucket with public access blocked, replaced checkpoint
    versions expired, incomplete uploads aborted and server access logs kept.

    Stateful: keep its construct ID (the bucket's logical ID is derived from it).

    Props:
      encryption_key: the project key (required: SageMaker writes with it).
      removal_policy: default RETAIN (DESTROY only for throwaway environments).
      noncurrent_checkpoint_versions: how long a replaced checkpoint version is kept (default 30 days).
      abort_incomplete_uploads: default 7 days.
      access_logs_bucket: default: a log bucket is created (SSE-S3, as S3 log delivery requires).
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        encryption_key: kms.IKey,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        noncurrent_checkpoint_versions: Duration | None = None,
        abort_incomplete_uploads: Duration | None = None,
        access_logs_bucket: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, id)
        keep_versions = noncurrent_checkpoint_versions or Duration.days(30)
        abort_after = abort_incomplete_uploads or Duration.days(7)
        if access_logs_bucket is None:
            if not FeatureFlags.of(self).is_enabled(ACCESS_LOGS_FLAG):
                Annotations.of(self).add_warning_v2(
                    "sagestack:access-logs-acl",
                    f"Set the feature flag {ACCESS_LOGS_FLAG} (cdk.json context): without it S3 log delivery "
                    "is granted by a legacy ACL (cfn-lint W3045) instead of the log bucket's policy.",
                )
            logs = access_log_bucket(
                self, "AccessLogs", removal_policy=removal_policy, abort_after=abort_after
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
            removal_policy=removal_policy,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-replaced-checkpoints",
                    prefix="checkpoints/",
                    noncurrent_version_expiration=keep_versions,
                ),
                s3.LifecycleRule(
                    id="abort-incomplete-uploads",
                    abort_incomplete_multipart_upload_after=abort_after,
                ),
            ],
        )
        self.encryption_key = encryption_key
        deny_other_encryption(self.bucket, encryption_key)

    @staticmethod
    @typed_props
    def from_bucket_attributes(
        scope: Construct, id: str, *, bucket_name: str, encryption_key: kms.IKey | None = None
    ) -> ArtifactBucketBase:
        """An artifact bucket that already exists (another app's, or one kept from a deleted stack)."""
        return _ImportedArtifactBucket(
            scope,
            id,
            s3.Bucket.from_bucket_attributes(
                scope, f"{id}Bucket", bucket_name=bucket_name, encryption_key=encryption_key
            ),
            encryption_key,
        )
