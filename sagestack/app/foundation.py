"""FoundationStack: the stateful base of one environment (key, buckets, registry, images, role)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import (
    ArtifactBucket,
    ExecutionRole,
    ModelPackageGroup,
    TrainingImage,
    project_repository,
)
from sagestack.constructs.log_encryption import allow_log_group_encryption
from sagestack.constructs.mlflow_server import MlflowApp, MlflowTrackingServer, grant_mlflow_logging
from sagestack.constructs.promotion import PromoterPolicy, PromotionReaderRole, reader_role_arn
from sagestack.core.names import Names
from sagestack.project import ResolvedEnvironment
from sagestack.training.models import JobSpec


@dataclass(frozen=True)
class PromotionPeers:
    """This environment's neighbours in `promotion:` across accounts (app.builder finds them): the
    accounts that promote from it (its reader role trusts exactly those), and the environment it
    promotes from (its promoter policy assumes that one's reader role) with that one's account
    (None: it names none)."""

    reader_accounts: tuple[str, ...] = ()
    source: str | None = None
    source_account: str | None = None


class FoundationStack(Stack):
    """Logical IDs of the stateful resources here (Key, Artifacts, Repository, ModelRegistry) are
    API: renaming them would replace the resource and lose its data."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: ResolvedEnvironment,
        project_root: Path,
        promotion: PromotionPeers | None = None,
        **kwargs: Any,
    ) -> None:
        """promotion: this environment's neighbours across accounts in `promotion:` (default none:
        no reader role, no promoter policy). No bucket, key or group policy names another account."""
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
        self.artifacts = ArtifactBucket(
            self,
            "Artifacts",
            encryption_key=self.key,
            removal_policy=removal,
            noncurrent_checkpoint_versions=Duration.days(spec.bucket.noncurrent_checkpoint_days),
            abort_incomplete_uploads=Duration.days(spec.bucket.abort_incomplete_upload_days),
        )
        self.repository = project_repository(
            self, "Repository", repository_name=plan.names.repository, retain=retain, encryption_key=self.key
        )
        self.execution_role = ExecutionRole(
            self,
            "ExecutionRole",
            artifacts=self.artifacts,
            encryption_key=self.key,
            vpc_access=any(job.vpc is not None for job in spec.jobs.values())
            or any(ep.vpc is not None for ep in spec.endpoints.values()),
        )
        # granted to the role itself: the same statements, without the CDK asking this Python
        # construct for its principal through jsii at each grant
        self.repository.grant_pull(self.execution_role.role)
        debuggers = [job.debugger for job in spec.jobs.values() if job.debugger]
        self.execution_role.grant_debugger_actions(
            plan.names,
            stop_training=any(d.stops_training(r) for d in debuggers for r in d.rules),
            notify=any(r.email or r.sms for d in debuggers for r in d.rules),
        )
        self.images: dict[str, TrainingImage] = {}
        self.smp_images: dict[str, TrainingImage] = {}
        self._add_images(plan, project_root)

        self.model_registry = ModelPackageGroup(
            self,
            "ModelRegistry",
            group_name=plan.names.model_package_group,
            description=f"Models trained by sagestack for {plan.names.prefix}",
            removal_policy=removal,
        )
        # CloudWatch Logs encrypts the pipelines' log group (TrainingStack) with this key.
        allow_log_group_encryption(self.key, plan.names.pipeline_log_group)
        self.promotion_reader: PromotionReaderRole | None = None
        self.promoter: PromoterPolicy | None = None
        self._add_promotion(plan, promotion or PromotionPeers())
        self.mlflow_server_arn: str | None = None
        self.mlflow_server: MlflowTrackingServer | None = None
        self.mlflow_app: MlflowApp | None = None
        self._add_tracking(plan)
        self._add_outputs()

    def _add_images(self, plan: ResolvedEnvironment, project_root: Path) -> None:
        """One TrainingImage per spec image (and its SMP v2 variant), each pulled by the role."""
        for name, resolved in plan.images.items():
            image = resolved.spec
            build = image.dockerfile_spec
            if build is not None:
                self.images[name] = TrainingImage.from_asset(
                    self,
                    f"Image-{name}",
                    directory=str(project_root / build.directory),
                    build_args=build.build_args,
                    target=build.target,
                )
            elif image.uri is not None:
                self.images[name] = TrainingImage.from_registry(image.uri)
            else:
                self.images[name] = TrainingImage.from_uris(resolved.dlc_uris)
                if resolved.smp_uris:
                    self.smp_images[name] = TrainingImage.from_uris(resolved.smp_uris)
        for img in [*self.images.values(), *self.smp_images.values()]:
            if img.all_uris or img.fingerprint:
                img.grant_pull(self.execution_role.role)

    def _add_promotion(self, plan: ResolvedEnvironment, peers: PromotionPeers) -> None:
        """Across accounts, each side of `promotion:` holds its own half: the source a role the
        target's accounts may assume (read only), the target a policy for whoever runs promote."""
        if peers.reader_accounts:
            self.promotion_reader = PromotionReaderRole(
                self,
                "PromotionReader",
                role_name=plan.names.promotion_reader_role,
                reader_accounts=peers.reader_accounts,
                model_registry=self.model_registry,
                artifacts=self.artifacts,
                encryption_key=self.key,
            )
            CfnOutput(self, "PromotionReaderRoleArn", value=self.promotion_reader.role_arn)
        if peers.source is not None:
            source = Names(plan.project, peers.source)
            self.promoter = PromoterPolicy(
                self,
                "Promoter",
                policy_name=plan.names.promoter_policy,
                source_reader_role_arn=reader_role_arn(source.promotion_reader_role, peers.source_account),
                model_registry=self.model_registry,
                artifacts=self.artifacts,
                encryption_key=self.key,
            )
            CfnOutput(self, "PromoterPolicyArn", value=self.promoter.policy_arn)

    def _add_tracking(self, plan: ResolvedEnvironment) -> None:
        """tracking.mlflow: the environment's MLflow tracking server or serverless MLflow App (or
        the one it names), which the execution role may log to."""
        mlflow = plan.spec.tracking.mlflow
        if mlflow is not None and mlflow.app:
            self.mlflow_app = MlflowApp(
                self,
                "MlflowApp",
                name=plan.names.mlflow_app,
                artifacts=self.artifacts,
                encryption_key=self.key,
                automatic_model_registration=mlflow.automatic_model_registration,
                maintenance_window=mlflow.maintenance_window,
            )
            self.mlflow_server_arn = self.mlflow_app.app_arn
            CfnOutput(self, "MlflowAppArn", value=self.mlflow_server_arn)
        elif mlflow is not None and mlflow.server is None:
            self.mlflow_server = MlflowTrackingServer(
                self,
                "Mlflow",
                name=plan.names.tracking_server,
                artifacts=self.artifacts,
                encryption_key=self.key,
                size=mlflow.size,
                mlflow_version=mlflow.version,
                automatic_model_registration=mlflow.automatic_model_registration,
                maintenance_window=mlflow.maintenance_window,
            )
            self.mlflow_server_arn = self.mlflow_server.tracking_server_arn
            CfnOutput(self, "MlflowTrackingServerArn", value=self.mlflow_server_arn)
        elif mlflow is not None:
            self.mlflow_server_arn = mlflow.server
        if self.mlflow_server_arn is not None:
            grant_mlflow_logging(self.execution_role, self.mlflow_server_arn)

    def _add_outputs(self) -> None:
        CfnOutput(self, "ArtifactsBucketName", value=self.artifacts.bucket_name)
        CfnOutput(self, "ExecutionRoleArn", value=self.execution_role.role_arn)
        CfnOutput(self, "KeyArn", value=self.key.key_arn)
        CfnOutput(self, "RepositoryUri", value=self.repository.repository_uri)
        CfnOutput(self, "ModelPackageGroupName", value=self.model_registry.group_name)

    def notifications(self, scope: Construct, display_name: str) -> sns.Topic:
        """A stack's notification topic (id "Notifications"), encrypted with the project key and
        refusing plain HTTP, as every topic of the environment is."""
        return sns.Topic(
            scope, "Notifications", display_name=display_name, master_key=self.key, enforce_ssl=True
        )

    def image_for(self, job: JobSpec) -> TrainingImage:
        """The image a job runs: its spec image, or that image's SMP v2 container."""
        if job.uses_smp_v2 and job.image in self.smp_images:
            return self.smp_images[job.image]
        return self.images[job.image]
