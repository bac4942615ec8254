"""FoundationStack: the stateful base of one environment (key, buckets, registry, images, role)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sagestack.constructs import (
    CheckpointBucket,
    ExecutionRole,
    ModelPackageGroup,
    TrainingImage,
    project_repository,
)
from sagestack.plan import EnvironmentPlan


class FoundationStack(Stack):
    """Logical IDs of the stateful resources here (Key, Artifacts, Repository, ModelRegistry) are
    API: renaming them would replace the resource and lose its data."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: EnvironmentPlan,
        project_root: Path,
        model_readers: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        """model_readers: accounts of the environments this one promotes models to; they may read
        the registry's packages and the models under the bucket's models/ prefix."""
        super().__init__(scope, id, **kwargs)
        spec = plan.spec
        retain = plan.retain_data
        removal = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY

        self.key = kms.Key(
            self,
            "Key",
            alias=f"alias/sagestack/{plan.resource_prefix}",
            description=f"sagestack {plan.resource_prefix}: checkpoints, models, images, volumes",
            enable_key_rotation=True,
            removal_policy=removal,
            pending_window=Duration.days(30 if retain else 7),
        )
        self.artifacts = CheckpointBucket(
            self,
            "Artifacts",
            encryption_key=self.key,
            retain=retain,
            noncurrent_checkpoint_days=spec.bucket.noncurrent_checkpoint_days,
            abort_incomplete_upload_days=spec.bucket.abort_incomplete_upload_days,
        )
        self.repository = project_repository(
            self, "Repository", repository_name=plan.repository_name, retain=retain, encryption_key=self.key
        )
        self.execution_role = ExecutionRole(
            self,
            "ExecutionRole",
            artifacts=self.artifacts,
            encryption_key=self.key,
            vpc_access=any(job.vpc is not None for job in spec.jobs.values()),
        )
        self.repository.grant_pull(self.execution_role.role)

        self.images: dict[str, list[TrainingImage]] = {}
        for name, resolved in plan.images.items():
            image = resolved.spec
            build = image.dockerfile_spec
            if build is not None:
                built = TrainingImage.from_asset(
                    self,
                    f"Image-{name}",
                    directory=str(project_root / build.directory),
                    build_args=build.build_args,
                    target=build.target,
                )
                self.images[name] = [built]
            elif image.uri is not None:
                self.images[name] = [TrainingImage.from_dlc(image.uri)]
            else:
                self.images[name] = [
                    TrainingImage.from_dlc(uri) for uri in sorted(set(resolved.dlc_uris.values()))
                ]
            for img in self.images[name]:
                img.grant_pull(self.execution_role.role)

        self.model_registry = ModelPackageGroup(
            self,
            "ModelRegistry",
            group_name=plan.model_package_group_name,
            description=f"Models trained by sagestack for {plan.resource_prefix}",
            retain=retain,
            reader_accounts=model_readers,
        )
        for account in model_readers:
            reader = iam.AccountPrincipal(account)
            self.artifacts.bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    principals=[reader],
                    resources=[self.artifacts.bucket.arn_for_objects("models/*")],
                )
            )
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt"],
                    principals=[reader],
                    resources=["*"],
                    conditions={"StringEquals": {"kms:ViaService": f"s3.{plan.region}.amazonaws.com"}},
                )
            )

        CfnOutput(self, "ArtifactsBucketName", value=self.artifacts.bucket_name)
        CfnOutput(self, "ExecutionRoleArn", value=self.execution_role.role_arn)
        CfnOutput(self, "KeyArn", value=self.key.key_arn)
        CfnOutput(self, "RepositoryUri", value=self.repository.repository_uri)
        CfnOutput(self, "ModelPackageGroupName", value=self.model_registry.group_name)
