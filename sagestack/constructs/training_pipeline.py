"""TrainingPipeline: a training job run by a Step Functions state machine — quota check, create,
poll, the next instance candidate on capacity errors — then, for each ModelRegistration, compile
(SageMaker Neo) and register the model. Its requests are validated against botocore's model at synth."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from os import PathLike
from pathlib import Path
from typing import Any, Unpack

from aws_cdk import Annotations, ArnFormat, Duration, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3_deployment
from aws_cdk import aws_sns as sns
from aws_cdk import custom_resources as cr
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.compliance import PROVIDER_FUNCTION, acknowledge_compliance
from sagestack.constructs.execution_role import ExecutionRoleBase
from sagestack.constructs.grants import first_time
from sagestack.constructs.job_code import launch_files, source_asset
from sagestack.constructs.job_pipeline import JobPipeline, PipelineDeployment
from sagestack.constructs.mlflow_server import grant_mlflow_logging
from sagestack.constructs.model_registration import (
    ModelRegistration,
    append_registrations,
    grant_registration_steps,
)
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.read_once import attribute, path_of
from sagestack.constructs.regional_images import image_in_deploy_region
from sagestack.constructs.retraining_schedule import RetrainingSchedule
from sagestack.constructs.training_image import TrainingImage
from sagestack.constructs.training_job_props import TrainingJobProps, check_job_props, job_spec_from_props
from sagestack.constructs.validation import stand_in_deployment, token_deployment
from sagestack.core.catalog.images import debugger_rules_image_uri
from sagestack.core.deployment import Deployment
from sagestack.core.names import Names
from sagestack.core.states import PipelineSettings
from sagestack.endpoints.request import lineage_of
from sagestack.endpoints.resolved import ResolvedEndpoint
from sagestack.training.context import MlflowTarget, RequestContext, is_mlflow_app, stand_in_contexts
from sagestack.training.debugger import rules_image_for
from sagestack.training.models import JobSpec
from sagestack.training.rendered import RenderedJob, resolve_training_job
from sagestack.training.retrain import retrainable
from sagestack.training.states import training_pipeline
from sagestack.training.states_queue import queued_pipeline


def _pipeline_definition(
    plan: RenderedJob, settings: PipelineSettings, names: Names, job: JobSpec
) -> dict[str, Any]:
    """The candidate loop (or InstancePreferences), or for a queued job its submission to the queue."""
    if job.queue is not None:
        return queued_pipeline(plan, settings, ref=job.queue, queue=names.queue(job.queue.name))
    return training_pipeline(plan, settings)


def _warn_default_max_wait(scope: Construct, job: JobSpec, *, typed: bool) -> None:
    """Spot without max_wait, from typed props: the wait sagestack chose, and the prop that chooses
    another (the spec path says so by its rule, spot-default-max-wait)."""
    wait = job.spot_max_wait
    if not typed or wait is None or job.max_wait is not None:
        return
    Annotations.of(scope).add_warning_v2(
        "sagestack:spot-default-max-wait",
        f"spot without max_wait: MaxWaitTimeInSeconds is {wait} (max_runtime doubled, at most 28 "
        f"days), so the job may wait {wait - job.max_run} s for spot capacity; pass "
        f"max_wait=Duration.seconds({wait}) (or the time you choose, >= max_runtime) to say so.",
    )


def _job_of(
    key: str, code: str | PathLike[str], job_spec: JobSpec | None, job_props: TrainingJobProps
) -> JobSpec:
    """The spec's own job (the spec path's door), or the one the typed props describe."""
    if job_spec is None:
        check_job_props(key, job_props)
        return job_spec_from_props(code, job_props)
    if job_props:
        raise ValueError(f"TrainingPipeline '{key}': job_spec is the whole job; drop {', '.join(job_props)}")
    return job_spec


class TrainingPipeline(JobPipeline):
    """One training job and the state machine that runs it.

    Props (CDK types):
      names: project and environment (Names) — every physical name, and the IAM scope.
      job: the job's key (default: the construct id): '<project>-<env>-<job>-<hash>-<candidate>'.
      image: a TrainingImage (DLC, registry URI, ECR repository or Dockerfile asset).
      code: the source folder, packed deterministically as the job's sourcedir.tar.gz.
      execution_role: the role the job runs as (ExecutionRole, or ExecutionRole.from_role_arn).
      artifacts: the ArtifactBucket (outputs, checkpoints, Debugger/Profiler/TensorBoard data).
      encryption_key: encrypts volumes and outputs.
      region: default: the stack's; a token (an environment-agnostic stack) is fine: the Debugger and
        Profiler rules' evaluator image is then read at deploy from a mapping of the regions.
      the job: its typed props (TrainingJobProps: instance_types, entry_point, instance_count,
        hyperparameters, max_runtime, volume_size, spot, max_wait, max_pending_time, metric_definitions,
        distribution, run_on_deploy, and `options` for any other key of a `jobs:` entry, validated by
        the same schema);
      or job_spec: the spec's own validated `jobs:` entry (the spec path's door; no job prop with it).
      validated: the job already rendered with stand-ins and validated against botocore's model
        (the spec path's project.requests.render_training); default: rendered and validated here.
      tags: request tags; sagestack:project and sagestack:environment are always added (IAM grants
        are scoped by them).
      role, log_group, topic, state_machine_name: as JobPipeline (default name: Names.training_state_machine).
      poll_interval / backoff: Describe polling and the wait before the next candidate (60 s / 120 s).
      quota_codes: quota name -> code for the run-time quota check (default none: skipped, noted).
      registry / registrations: register the model (compiled first where asked) in this group;
        each package carries its lineage (job, content hash, source archive hash, training image,
        training job) and `lineage` (more metadata, e.g. {"sagestack:lock-sha256": …}).
      mlflow_server_arn: log every run to this SageMaker MLflow tracking server (MlflowConfig, an
        experiment per job, a run per training job; the execution role may log to it).
      A job's `schedule` ({expression, timezone, window, enabled}): retrain on a schedule — the
        definition gains a retrain path (fresh job names, checkpoint and TensorBoard prefixes when
        started with {"retrain": …}) and a RetrainingSchedule (`self.retraining`) starts it.
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        names: Names,
        image: TrainingImage,
        code: str | PathLike[str],
        execution_role: ExecutionRoleBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        job: str | None = None,
        region: str | None = None,
        job_spec: JobSpec | None = None,
        validated: RenderedJob | None = None,
        tags: Mapping[str, str] | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        backoff: Duration | None = None,
        quota_codes: Mapping[str, str] | None = None,
        registry: ModelPackageGroupBase | None = None,
        registrations: Sequence[ModelRegistration] = (),
        lineage: Mapping[str, str] | None = None,
        mlflow_server_arn: str | None = None,
        **job_props: Unpack[TrainingJobProps],
    ) -> None:
        key = job or id
        region = region or Stack.of(scope).region
        job_spec = _job_of(key, code, job_spec, job_props)
        source, source_sha256 = source_asset(scope, key, Path(code))
        if first_time(execution_role, "source archive", source_sha256):
            execution_role.grant_object_read(source.bucket.arn_for_objects(source.s3_object_key))
        launch = launch_files(scope, key, names, job_spec, Path(code), artifacts, execution_role)
        if mlflow_server_arn is not None and first_time(execution_role, "mlflow", mlflow_server_arn):
            grant_mlflow_logging(execution_role, mlflow_server_arn)
        deployment, stand_ins = deployments = _deployments(
            scope, region, names.request_tags(tags), execution_role, artifacts, encryption_key
        )
        job_plan, validated = _job_plans(
            names,
            key,
            job_spec,
            deployments,
            image,
            (source, source_sha256, None if launch is None else deployment.s3.launch_files(launch[0])),
            mlflow_server_arn,
            validated,
        )
        lineage_values = (*lineage_of(key, job_plan.digest, source_sha256), *sorted((lineage or {}).items()))
        pipeline = PipelineDeployment(
            role=role,
            log_group=log_group,
            topic=topic,
            encryption_key=encryption_key,
            state_machine_name=state_machine_name or names.training_state_machine(key),
            poll_interval=poll_interval,
            backoff=backoff,
            quota_codes=quota_codes,
        )
        settings = pipeline.settings()
        definition, endpoint_plans = append_registrations(
            _pipeline_definition(job_plan, settings, names, job_spec),
            settings,
            registrations,
            source=key,
            names=names,
            registry=registry,
            deployment=deployment,
            stand_ins=stand_ins,
            lineage=lineage_values,
        )
        if job_spec.schedule is not None:
            # Started by its schedule (or `sagestack run --retrain`), the pipeline trains under fresh names.
            definition = retrainable(definition)
        super().__init__(
            scope,
            id,
            definition=definition,
            names=names,
            entry=key,
            description=f"the '{key}' training pipeline",
            **pipeline.construct_props(),
        )
        self.key, self.source = key, source
        self.launch_files = self._wait_for_launch_files(launch)
        self.job_spec = job_spec
        _warn_default_max_wait(self, job_spec, typed=bool(job_props))
        self.region, self.execution_role = region, execution_role
        self.validation_plan: RenderedJob = validated
        self.job_plan: RenderedJob = job_plan
        self.endpoint_plans = endpoint_plans
        self.deployment, self.stand_ins = deployment, stand_ins
        self.lineage: tuple[tuple[str, str], ...] = lineage_values
        self._grant_running(registry, endpoint_plans)
        if job_spec.run_on_deploy:
            self._start_on_deploy()
        self.retraining = self._retraining(names)

    def _wait_for_launch_files(
        self, launch: tuple[str, s3_deployment.BucketDeployment] | None
    ) -> s3_deployment.BucketDeployment | None:
        """launcher: drivers — the upload of the job's launch files (code/jobs/<digest>/), which the
        state machine waits for: CreateTrainingJob reads its code and sm_drivers channels there."""
        if launch is None:
            return None
        self.wait_for(launch[1].node.find_child("CustomResource").node.default_child)  # type: ignore[arg-type]
        return launch[1]

    def _grant_running(
        self, registry: ModelPackageGroupBase | None, endpoint_plans: list[ResolvedEndpoint]
    ) -> None:
        """The pipeline's role may run this environment's training jobs as the execution role, check
        quotas, and run the model steps it has."""
        self.grant_sagemaker(
            actions.TRAINING_JOBS_RUN,
            "training-job",
            self.names.training_job_pattern,
            "Training jobs whose names start with this environment's prefix: the pipelines create, "
            "follow and stop only their own jobs.",
        )
        if first_time(self.role, "pass", path_of(self.execution_role)):
            self.execution_role.grant_pass_role(self.role)
        self._grant_quota_reads(self.region)
        if self.job_spec.queue is not None:
            self._grant_queue(self.names.queue(self.job_spec.queue.name))
        if endpoint_plans:
            grant_registration_steps(self, registry, endpoint_plans)

    def _grant_queue(self, queue: str) -> None:
        """A queued job: submit to its job queue and tag the service job it creates, both only with
        this environment's tags in the request (every payload carries them), and read service jobs'
        states (DescribeServiceJob takes no resource in IAM's data)."""
        arn = partial(Stack.of(self).format_arn, service="batch", arn_format=ArnFormat.SLASH_RESOURCE_NAME)
        requested = {f"aws:RequestTag/{k}": v for k, v in sorted(self.names.tags.items())}
        service_jobs = arn(resource="service-job", resource_name="*")
        for what, resource in (
            (actions.QUEUE_SUBMIT, arn(resource="job-queue", resource_name=queue)),
            (actions.QUEUE_TAG, service_jobs),
        ):
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=list(what), resources=[resource], conditions={"StringEquals": requested}
                )
            )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions.QUEUE_READ), resources=["*"])
        )
        acknowledge(
            self.role,
            {
                f"AwsSolutions-IAM5[Resource::{nag_text(self, service_jobs)}]": "A service job's ID is "
                "Batch's, known only once SubmitServiceJob creates it: tagging is held to the jobs "
                "created with this environment's tags.",
            },
        )

    def _retraining(self, names: Names) -> RetrainingSchedule | None:
        """The schedule that starts the pipeline when the job has one."""
        sched = self.job_spec.schedule
        if sched is None:
            return None
        return RetrainingSchedule(
            self,
            "Retraining",
            pipeline=self,
            expression=sched.expression,
            timezone=sched.timezone,
            flexible_window=Duration.seconds(sched.window) if sched.window else None,
            enabled=sched.enabled,
            schedule_name=names.retrain_schedule(self.key),
            description=f"Retrains '{self.key}' of sagestack {names.prefix}",
        )

    def _start_on_deploy(self) -> None:
        """An execution named after the content hash: an unchanged job is never started twice
        (ExecutionAlreadyExists is ignored), a changed one starts once per deploy."""
        plan = self.job_plan
        call = cr.AwsSdkCall(
            service="SFN",
            action="startExecution",
            parameters={
                "stateMachineArn": self.state_machine.state_machine_arn,
                "name": f"deploy-{plan.digest}",
                "input": "{}",
            },
            physical_resource_id=cr.PhysicalResourceId.of(f"{plan.key}-{plan.digest}"),
            ignore_error_codes_matching="ExecutionAlreadyExists",
        )
        self.starter = cr.AwsCustomResource(
            self,
            "StartOnDeploy",
            on_create=call,
            on_update=call,
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        actions=list(actions.EXECUTIONS_START),
                        resources=[self.state_machine.state_machine_arn],
                    )
                ]
            ),
            install_latest_aws_sdk=False,
        )
        provider = Stack.of(self).node.try_find_child("AWS679f53fac002430cb0da5b7982bd2287")
        if provider is not None:
            # The function references its role by GetAtt already; CDK's DependsOn on it is what
            # cfn-lint calls redundant (W3005).
            function = provider.node.default_child
            if function is not None:
                function.add_deletion_override("DependsOn")  # type: ignore[attr-defined]
            acknowledge(
                provider,
                {
                    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AWSLambdaBasicExecutionRole]": "CDK's AwsCustomResource provider writes only its own "
                    "CloudWatch logs with the AWS-managed basic execution policy.",
                    "AwsSolutions-L1": "The runtime is chosen by aws-cdk-lib's AwsCustomResource and moves "
                    "with it; the function only calls states:StartExecution.",
                },
            )
            acknowledge_compliance(provider, PROVIDER_FUNCTION)


def _deployments(
    scope: Construct,
    region: str,
    tags: tuple[tuple[str, str], ...],
    execution_role: ExecutionRoleBase,
    artifacts: ArtifactBucketBase,
    encryption_key: kms.IKey,
) -> tuple[Deployment, Deployment]:
    """What the requests (here, and in a TuningPipeline over this job) take from the deployment: its
    tokens, which the template holds, and the stand-ins synth validates with."""
    deployment = token_deployment(
        scope,
        role_arn=execution_role.role_arn,
        bucket=artifacts.bucket_name,
        kms_key_id=attribute(encryption_key, "key_arn"),  # shared by the jobs: read through jsii once
        region=region,
        tags=tags,
    )
    return deployment, stand_in_deployment(scope, region=region, tags=tags)


def _job_plans(
    names: Names,
    key: str,
    job: JobSpec,
    deployments: tuple[Deployment, Deployment],  # the deployment's tokens, and its stand-ins
    image: TrainingImage,
    code: tuple[s3_assets.Asset, str, str | None],  # the source asset, its sha256, the launch files' URI
    mlflow_server_arn: str | None,
    validated: RenderedJob | None,
) -> tuple[RenderedJob, RenderedJob]:
    """The job rendered with the deployment's tokens (what the template holds), and as validated with
    stand-ins: `validated` when the environment already did it, else here (the library door), with
    the stand-ins `sagestack plan` and `sagestack lock` use (CloudFormation tokens are not ARNs)."""
    deployment, stand_ins = deployments
    source, source_sha256, launch_files = code
    validation_rules_image = rules_image_for(job, stand_ins.region)
    if validation_rules_image is None or not Token.is_unresolved(deployment.region):
        rules_image = rules_image_for(job, deployment.region)
    else:  # an environment-agnostic stack: the deploy region's evaluator image, from a mapping
        rules_image = image_in_deploy_region(Stack.of(source), "debugger", debugger_rules_image_uri)
    mlflow = None if mlflow_server_arn is None else MlflowTarget(mlflow_server_arn, names.prefix)
    resolve = partial(
        resolve_training_job,
        names=names,
        key=key,
        job=job,
        source_sha256=source_sha256,
        image_uris={t: image.identity_for(t) for t in job.instance_type},
    )

    source_url = attribute(source, "s3_object_url")  # one read per asset (jobs of a folder share it)

    def token_context(instance_type: str) -> RequestContext:
        return RequestContext(
            deployment,
            source_url,
            image.uri_for(instance_type),
            rules_image,
            mlflow,
            image.framework,
            launch_files,
        )

    job_plan = resolve(context=token_context, validate=False)
    if validated is None:
        if mlflow is not None and Token.is_unresolved(mlflow.arn):
            mlflow = MlflowTarget.stand_in(stand_ins, names, app=is_mlflow_app(mlflow.arn))
        images = {
            t: image.validation_uri_for(t, account=stand_ins.account, region=stand_ins.region)
            for t in job.instance_type
        }
        validated = resolve(
            context=stand_in_contexts(
                stand_ins,
                images=images,
                rules_image=validation_rules_image,
                mlflow=mlflow,
                framework=image.framework,
            ),
            validate=True,
        )
    if validated.digest != job_plan.digest:
        raise ValueError(
            f"TrainingPipeline '{key}': the validated job ({validated.digest}) is not this one "
            f"({job_plan.digest}): its spec, code or images differ"
        )
    return job_plan, validated
