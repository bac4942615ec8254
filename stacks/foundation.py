"""FoundationStack: the stateful base of one environment (key, buckets, registry, images, role)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Aws, CfnOutput, Duration, RemovalPolicy, Stack
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
from sagestack.constructs.nag import acknowledge, nag_text
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
            alias=plan.names.key_alias,
            description=f"sagestack {plan.names.prefix}: checkpoints, models, images, volumes",
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
            self, "Repository", repository_name=plan.names.repository, retain=retain, encryption_key=self.key
        )
        self.execution_role = ExecutionRole(
            self,
            "ExecutionRole",
            artifacts=self.artifacts,
            encryption_key=self.key,
            vpc_access=any(job.vpc is not None for job in spec.jobs.values()),
        )
        self.repository.grant_pull(self.execution_role.role)
        self._grant_debugger_actions(plan)

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
                self.images[name] = [TrainingImage.from_dlc(uri) for uri in resolved.all_uris]
            for img in self.images[name]:
                img.grant_pull(self.execution_role.role)

        self.model_registry = ModelPackageGroup(
            self,
            "ModelRegistry",
            group_name=plan.names.model_package_group,
            description=f"Models trained by sagestack for {plan.names.prefix}",
            retain=retain,
            reader_accounts=model_readers,
        )
        # CloudWatch Logs encrypts the pipelines' log group (TrainingStack) with this key.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:"
                        f"{Aws.ACCOUNT_ID}:log-group:{plan.names.pipeline_log_group}"
                    }
                },
            )
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

    def _grant_debugger_actions(self, plan: EnvironmentPlan) -> None:
        """Debugger rule actions run as the execution role: StopTraining stops the job it watches,
        Email/SMS publish through the SNS topic smdebug creates (SMDebugRules)."""
        rules = [r for job in plan.spec.jobs.values() if job.debugger for r in job.debugger.rules]
        specs = [job.debugger for job in plan.spec.jobs.values() if job.debugger]
        stops = any(d.stops_training(r) for d in specs for r in d.rules)
        role = self.execution_role.role
        if stops:
            jobs = self.format_arn(
                service="sagemaker", resource="training-job", resource_name=plan.names.training_job_pattern
            )
            role.add_to_policy(iam.PolicyStatement(actions=["sagemaker:StopTrainingJob"], resources=[jobs]))
            acknowledge(
                role,
                {
                    f"AwsSolutions-IAM5[Resource::{nag_text(self, jobs)}]": "A Debugger rule's StopTraining "
                    "action stops the training job it watches; job names are content-addressed under the "
                    "environment's prefix, so the prefix is the narrowest resource."
                },
            )
        if any(r.email or r.sms for r in rules):
            topic = self.format_arn(service="sns", resource="SMDebugRules")
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sns:CreateTopic", "sns:Subscribe", "sns:Publish"], resources=[topic]
                )
            )
