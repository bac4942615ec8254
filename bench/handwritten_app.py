"""The baseline for bench/synth.py: the same foundation resources for three environments (key, log
and artifact buckets, repository, execution role, the example's two Dockerfile image assets, model
registry, MLflow tracking server with its role), written by hand with aws-cdk-lib (no spec, no
validation, no catalog), with the same cdk-nag pack. `-c sagestack:environments=dev` builds some of them, as sagestack's app does."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import (
    Acknowledgment,
    App,
    ArnFormat,
    CfnOutput,
    Duration,
    Environment,
    RemovalPolicy,
    Stack,
    Stage,
    Tags,
    Validations,
)
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from cdk_nag import AwsSolutionsChecks

ROOT = Path(__file__).resolve().parent.parent
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
    "async",
    "transform",
    "monitoring",
    "mlflow",
)
ENVS = {"dev": (None, False), "staging": ("222222222222", True), "prod": ("111111111111", True)}


def foundation(stack: Stack, env: str, retain: bool) -> None:
    removal = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
    key = kms.Key(stack, "Key", enable_key_rotation=True, removal_policy=removal, alias=f"alias/digits-{env}")
    logs = s3.Bucket(
        stack,
        "Logs",
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        versioned=True,
        removal_policy=removal,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
    )
    Validations.of(logs).acknowledge(Acknowledgment(id="AwsSolutions-S1", reason="the log bucket"))
    bucket = s3.Bucket(
        stack,
        "Artifacts",
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=True,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        versioned=True,
        server_access_logs_bucket=logs,
        server_access_logs_prefix="artifacts/",
        removal_policy=removal,
        lifecycle_rules=[
            s3.LifecycleRule(prefix="checkpoints/", noncurrent_version_expiration=Duration.days(30)),
            s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(7)),
        ],
    )
    repo = ecr.Repository(
        stack,
        "Repository",
        repository_name=f"digits-{env}-training",
        image_scan_on_push=True,
        image_tag_mutability=ecr.TagMutability.IMMUTABLE,
        encryption=ecr.RepositoryEncryption.KMS,
        encryption_key=key,
        removal_policy=removal,
        lifecycle_rules=[
            ecr.LifecycleRule(tag_status=ecr.TagStatus.UNTAGGED, max_image_age=Duration.days(7))
        ],
    )
    role = iam.Role(stack, "ExecutionRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resources=[bucket.arn_for_objects(f"{p}/*") for p in PREFIXES],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]
        )
    )
    log_arns = [
        stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"/aws/sagemaker/{g}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        for g in ("TrainingJobs", "Endpoints", "CompilationJobs", "ProcessingJobs")
    ]
    role.add_to_policy(
        iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=log_arns)
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            resources=["arn:aws:ecr:us-east-1:763104351884:repository/pytorch-training"],
        )
    )
    role.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{p}/*" for p in PREFIXES]}},
        )
    )
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetBucketLocation"], resources=[bucket.bucket_arn]))
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["kms:CreateGrant"],
            resources=[key.key_arn],
            conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*"]}},
        )
    )
    repo.grant_pull(role)
    for name, folder in (("Image", "containers/training"), ("NgcImage", "containers/ngc")):
        image = assets.DockerImageAsset(
            stack, name, directory=str(ROOT / folder), platform=assets.Platform.LINUX_AMD64
        )
        image.repository.grant_pull(role)
    group = sagemaker.CfnModelPackageGroup(stack, "ModelRegistry", model_package_group_name=f"digits-{env}")
    group.apply_removal_policy(removal)
    tracking = mlflow_server(stack, env, bucket, key)
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["sagemaker-mlflow:LogMetric", "sagemaker-mlflow:CreateRun"],
            resources=[tracking.attr_tracking_server_arn],
        )
    )
    for name, value in {
        "ArtifactsBucketName": bucket.bucket_name,
        "ExecutionRoleArn": role.role_arn,
        "KeyArn": key.key_arn,
        "RepositoryUri": repo.repository_uri,
        "ModelPackageGroupName": f"digits-{env}",
    }.items():
        CfnOutput(stack, name, value=value)
    acks = [Acknowledgment(id="AwsSolutions-IAM5[Resource::*]", reason="no resource-level permissions")]
    for p in PREFIXES:
        acks.append(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{stack.resolve(bucket.node.default_child.logical_id)}.Arn>/{p}/*]",
                reason="prefix",
            )
        )
    for arn in log_arns:
        resolved = stack.resolve(arn)
        if not isinstance(resolved, str):
            resolved = "".join(x if isinstance(x, str) else f"<{x['Ref']}>" for x in resolved["Fn::Join"][1])
        acks.append(Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{resolved}]", reason="log group"))
    Validations.of(role).acknowledge(*acks)


def mlflow_server(
    stack: Stack, env: str, bucket: s3.Bucket, key: kms.Key
) -> sagemaker.CfnMlflowTrackingServer:
    """The environment's MLflow tracking server: artifacts under the bucket's mlflow/ prefix, its own role."""
    role = iam.Role(stack, "MlflowRole", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resources=[bucket.arn_for_objects("mlflow/*")],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": ["mlflow/*"]}},
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"], resources=[key.key_arn]
        )
    )
    server = sagemaker.CfnMlflowTrackingServer(
        stack,
        "Mlflow",
        tracking_server_name=f"digits-{env}-mlflow",
        artifact_store_uri=f"s3://{bucket.bucket_name}/mlflow",
        role_arn=role.role_arn,
        tracking_server_size="Small",
    )
    server.node.add_dependency(role)
    bucket_arn = stack.resolve(bucket.node.default_child.logical_id)  # type: ignore[union-attr]
    Validations.of(role).acknowledge(
        Acknowledgment(id=f"AwsSolutions-IAM5[Resource::<{bucket_arn}.Arn>/mlflow/*]", reason="prefix")
    )
    return server


def cdk_json_context() -> dict[str, object]:
    """cdk.json's feature flags, as sagestack's app reads them (imported from nothing of sagestack's,
    so that the baseline pays for none of its imports)."""
    context: dict[str, object] = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    return context


def main() -> None:
    app = App(context=cdk_json_context())
    selected = app.node.try_get_context("sagestack:environments")
    envs = {e: v for e, v in ENVS.items() if not selected or e in str(selected).split(",")}
    for env, (account, retain) in envs.items():
        stage = Stage(app, env, env=Environment(account=account, region="us-east-1"))
        foundation(Stack(stage, "Foundation", stack_name=f"digits-{env}-foundation"), env, retain)
        for k, v in {
            "team": "ml-platform",
            "sagestack:project": "digits",
            "sagestack:environment": env,
        }.items():
            Tags.of(stage).add(k, v)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()


if __name__ == "__main__":
    main()
