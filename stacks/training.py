"""TrainingStack: one Step Functions pipeline per training job of an environment, with the shared
role, log group and notification topic they use."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from aws_cdk import Aws, Duration, RemovalPolicy, Stack, Stage
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.catalog.quotas import quota_codes, quota_name, training_usage
from sagestack.catalog.service_model import validate_request
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.training_pipeline import TrainingPipeline
from sagestack.plan import EnvironmentPlan
from sagestack.plan.requests import job_images, job_rules_image, stand_in_model_context, validation_context
from sagestack.plan.serving import (
    EndpointPlan,
    ModelStepContext,
    append_model_steps,
    endpoints_fed_by,
    validate_model_requests,
)
from sagestack.plan.sourcedir import SourceArchive, pack_source_dir
from sagestack.plan.states import PipelineSettings
from sagestack.plan.training import RequestContext, TrainingJobPlan, resolve_training_job
from sagestack.plan.tuning import render_tuning_request
from sagestack.plan.tuning_pipeline import TuningPipelineInputs, tuning_pipeline
from stacks.foundation import FoundationStack


class TrainingStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: EnvironmentPlan,
        foundation: FoundationStack,
        project_root: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        spec = plan.spec
        self.topic = sns.Topic(
            self,
            "Notifications",
            display_name=f"sagestack {plan.names.prefix} training",
            master_key=foundation.key,
            enforce_ssl=True,
        )
        self.log_group = logs.LogGroup(
            self,
            "PipelineLogs",
            log_group_name=plan.names.pipeline_log_group,
            retention=_retention(spec.pipeline.log_retention_days),
            # execution data at level ALL holds hyperparameters and artifacts: the project key, like
            # everything else (its policy lets CloudWatch Logs use it for this group)
            encryption_key=foundation.key,
            removal_policy=RemovalPolicy.RETAIN if plan.retain_data else RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "PipelineRole",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description=f"Step Functions pipelines of sagestack {plan.names.prefix}",
        )
        self._foundation = foundation
        self.endpoints: dict[str, EndpointPlan] = {}
        self._grant(plan, foundation)

        codes = quota_codes(project_root, plan.env)
        self.pipelines: dict[str, TrainingPipeline] = {}
        self.job_plans: dict[str, TrainingJobPlan] = {}
        validation_plans: dict[str, TrainingJobPlan] = {}
        stage = Stage.of(self)
        assert stage is not None  # every stack lives in a stage (the App is one)
        outdir = Path(stage.outdir) / ".sagestack-sources"
        archives: dict[str, SourceArchive] = {}  # jobs sharing a source folder share one archive
        for key, job in spec.jobs.items():
            if job.source_dir not in archives:
                archives[job.source_dir] = pack_source_dir(project_root / job.source_dir)
            archive = archives[job.source_dir]
            outdir.mkdir(parents=True, exist_ok=True)
            tarball = outdir / f"sourcedir-{archive.sha256[:16]}.tar.gz"
            if not tarball.exists():
                tarball.write_bytes(archive.data)
            source = s3_assets.Asset(self, f"Source-{key}", path=str(tarball))
            # Exactly this archive, not the whole bootstrap bucket.
            foundation.execution_role.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"], resources=[source.bucket.arn_for_objects(source.s3_object_key)]
                )
            )

            images = job_images(plan, project_root, key)
            tokens = self._image_tokens(plan, foundation, key, images.concrete)
            rules_image = job_rules_image(plan, key)
            # Validated with the same stand-ins `sagestack plan` and `sagestack lock` use.
            validation_ctx = partial(
                validation_context, plan, images=images.concrete, rules_image=rules_image
            )
            token_ctx = partial(
                _context,
                plan,
                role_arn=foundation.execution_role.role_arn,
                bucket=foundation.artifacts.bucket_name,
                kms_key_id=foundation.key.key_arn,
                source_s3_uri=source.s3_object_url,
                images=tokens,
                rules_image_uri=rules_image,
            )
            common = dict(
                names=plan.names,
                key=key,
                job=job,
                source_sha256=archive.sha256,
                image_uris=images.identity,
            )
            validation_plans[key] = resolve_training_job(**common, context=validation_ctx, validate=True)  # type: ignore[arg-type]
            job_plan = resolve_training_job(**common, context=token_ctx, validate=False)  # type: ignore[arg-type]
            self.job_plans[key] = job_plan
            self.pipelines[key] = TrainingPipeline(
                self,
                f"Pipeline-{key}",
                plan=job_plan,
                role=self.role,
                log_group=self.log_group,
                topic=self.topic,
                state_machine_name=plan.names.training_state_machine(key),
                poll_interval=Duration.seconds(spec.pipeline.poll_interval),
                backoff=Duration.seconds(spec.pipeline.backoff),
                quota_codes=codes,
                run_on_deploy=job.run_on_deploy,
                extend=self._model_steps(plan, foundation, key),
            )
        self.tuning_pipelines: dict[str, TrainingPipeline] = {}
        self.tuning_requests: dict[str, dict[str, Any]] = {}
        for key, tuning in spec.tuning.items():
            self._tuning(plan, key, tuning, validation_plans[tuning.job], codes)
        self._acknowledge(plan)

    def _tuning(
        self,
        plan: EnvironmentPlan,
        key: str,
        tuning: Any,
        validation_plan: TrainingJobPlan,
        codes: dict[str, str],
    ) -> None:
        job_plan = self.job_plans[tuning.job]
        validate_request(
            "CreateHyperParameterTuningJob",
            render_tuning_request(tuning, key=key, names=plan.names, job_plan=validation_plan),
        )
        request = render_tuning_request(tuning, key=key, names=plan.names, job_plan=job_plan)
        self.tuning_requests[key] = request
        job = plan.spec.jobs[tuning.job]
        inputs = TuningPipelineInputs(
            key=key,
            request=request,
            quota_name=quota_name(job.instance_type[0], training_usage(job.use_spot_instances)),
            quota_needed=tuning.max_parallel_jobs * job.instance_count,
            parameter_name=plan.names.best_model_parameter(key),
        )
        settings = PipelineSettings(
            poll_seconds=plan.spec.pipeline.poll_interval,
            backoff_seconds=plan.spec.pipeline.backoff,
            topic_arn=self.topic.topic_arn,
            quota_codes=codes,
        )
        self.tuning_pipelines[key] = TrainingPipeline(
            self,
            f"Tuning-{key}",
            definition=tuning_pipeline(inputs, settings),
            description=f"the '{key}' tuning pipeline",
            role=self.role,
            log_group=self.log_group,
            topic=self.topic,
            state_machine_name=plan.names.tuning_state_machine(key),
            extend=self._model_steps(plan, self._foundation, key),
        )

    def _model_steps(
        self, plan: EnvironmentPlan, foundation: FoundationStack, source: str
    ) -> Callable[[dict[str, Any], PipelineSettings], dict[str, Any]] | None:
        """Compile and register steps for the endpoints that serve this job's (or search's) model;
        their requests validated with stand-ins, emitted with the foundation's tokens."""
        endpoints = endpoints_fed_by(plan, source)
        if not endpoints:
            return None
        tags = tuple(sorted(plan.tags.items()))
        stand_ins = stand_in_model_context(plan)
        for ep in endpoints:
            validate_model_requests(ep, stand_ins)
            self.endpoints[ep.key] = ep
        ctx = ModelStepContext(
            region=plan.region,
            env=plan.env,
            role_arn=foundation.execution_role.role_arn,
            bucket=foundation.artifacts.bucket_name,
            kms_key_id=foundation.key.key_arn,
            group_name=foundation.model_registry.group_name,
            tags=tags,
        )
        self._grant_model_steps(plan, foundation)
        return lambda definition, settings: append_model_steps(definition, endpoints, ctx, settings)

    def _grant_model_steps(self, plan: EnvironmentPlan, foundation: FoundationStack) -> None:
        if getattr(self, "_compilation_arn", None) is not None:
            return
        group = foundation.model_registry.group_name
        self._compilation_arn = self.format_arn(
            service="sagemaker", resource="compilation-job", resource_name=plan.names.compilation_job_pattern
        )
        self._packages_arn = self.format_arn(
            service="sagemaker", resource="model-package", resource_name=f"{group}/*"
        )
        group_arn = self.format_arn(service="sagemaker", resource="model-package-group", resource_name=group)
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "sagemaker:CreateCompilationJob",
                    "sagemaker:DescribeCompilationJob",
                    "sagemaker:StopCompilationJob",
                    "sagemaker:AddTags",
                ],
                resources=[self._compilation_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["sagemaker:CreateModelPackage", "sagemaker:AddTags"],
                resources=[group_arn, self._packages_arn],
            )
        )
        acknowledge(
            self.role,
            {
                f"AwsSolutions-IAM5[Resource::{nag_text(self, self._compilation_arn)}]": "Compilation jobs "
                "whose names start with this environment's prefix (names are content-addressed, so only the "
                "prefix is known at synth).",
                f"AwsSolutions-IAM5[Resource::{nag_text(self, self._packages_arn)}]": "Versions of this "
                "environment's model package group: each registration creates a new version number.",
            },
        )

    def _image_tokens(
        self, plan: EnvironmentPlan, foundation: FoundationStack, key: str, concrete: dict[str, str]
    ) -> dict[str, str]:
        """Per candidate, the image URI the template carries: a built image's asset URI (a token),
        else the concrete URI."""
        job = plan.spec.jobs[key]
        if plan.images[job.image].kind != "dockerfile":
            return dict(concrete)
        uri = foundation.images[job.image][0].image_uri
        return dict.fromkeys(job.instance_type, uri)

    def _grant(self, plan: EnvironmentPlan, foundation: FoundationStack) -> None:
        jobs_arn = self.format_arn(
            service="sagemaker", resource="training-job", resource_name=plan.names.training_job_pattern
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "sagemaker:CreateTrainingJob",
                    "sagemaker:DescribeTrainingJob",
                    "sagemaker:StopTrainingJob",
                    "sagemaker:AddTags",
                ],
                resources=[jobs_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[foundation.execution_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["servicequotas:GetServiceQuota"],
                resources=[f"arn:{Aws.PARTITION}:servicequotas:{plan.region}:{Aws.ACCOUNT_ID}:sagemaker/*"],
            )
        )
        self.topic.grant_publish(self.role)
        self._jobs_arn = jobs_arn
        if plan.spec.tuning:
            self._tuning_arn = self.format_arn(
                service="sagemaker",
                resource="hyper-parameter-tuning-job",
                resource_name=plan.names.tuning_job_pattern,
            )
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=[
                        "sagemaker:CreateHyperParameterTuningJob",
                        "sagemaker:DescribeHyperParameterTuningJob",
                        "sagemaker:StopHyperParameterTuningJob",
                        "sagemaker:AddTags",
                    ],
                    resources=[self._tuning_arn],
                )
            )
            self._parameters_arn = self.format_arn(
                service="ssm",
                resource="parameter",
                resource_name=plan.names.best_model_parameter_pattern,
            )
            self.role.add_to_policy(
                iam.PolicyStatement(actions=["ssm:PutParameter"], resources=[self._parameters_arn])
            )

    def _acknowledge(self, plan: EnvironmentPlan) -> None:
        quota_arn = f"arn:{Aws.PARTITION}:servicequotas:{plan.region}:{Aws.ACCOUNT_ID}:sagemaker/*"
        acknowledge(
            self.role,
            {
                f"AwsSolutions-IAM5[Resource::{nag_text(self, self._jobs_arn)}]": "Training jobs whose names "
                "start with this environment's prefix: the pipelines create, follow and stop only their own jobs.",
                f"AwsSolutions-IAM5[Resource::{nag_text(self, quota_arn)}]": "Reading SageMaker's service "
                "quotas (read-only); quota codes are opaque and chosen per candidate.",
                "AwsSolutions-IAM5[Resource::*]": "Step Functions log delivery and X-Ray tracing have no "
                "resource-level permissions (CDK adds them for LogOptions and tracing).",
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "CDK's publish grant for the topic's "
                "KMS key: data keys of the project key only.",
                "AwsSolutions-IAM5[Action::kms:ReEncrypt*]": "CDK's grant for the topic's KMS key: the project key only.",
            },
        )
        if plan.spec.tuning:
            acknowledge(
                self.role,
                {
                    f"AwsSolutions-IAM5[Resource::{nag_text(self, self._tuning_arn)}]": "Tuning jobs whose names "
                    "start with the project's name (SageMaker allows them 32 characters: no room for more).",
                    f"AwsSolutions-IAM5[Resource::{nag_text(self, self._parameters_arn)}]": "The best-model "
                    "parameters of this environment's tuning pipelines.",
                },
            )


def _context(
    plan: EnvironmentPlan,
    instance_type: str,
    *,
    role_arn: str,
    bucket: str,
    kms_key_id: str,
    source_s3_uri: str,
    images: dict[str, str],
    rules_image_uri: str | None,
) -> RequestContext:
    return RequestContext(
        region=plan.region,
        role_arn=role_arn,
        bucket=bucket,
        kms_key_id=kms_key_id,
        source_s3_uri=source_s3_uri,
        image_uri=images[instance_type],
        rules_image_uri=rules_image_uri,
        tags=tuple(sorted(plan.tags.items())),
    )


_RETENTION_NAMES = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1827: "FIVE_YEARS",
    3653: "TEN_YEARS",
}


def _retention(days: int) -> logs.RetentionDays:
    return getattr(logs.RetentionDays, _RETENTION_NAMES[days])  # type: ignore[no-any-return]
