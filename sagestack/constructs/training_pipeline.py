"""TrainingPipeline: a training job run by a Step Functions state machine — quota check, create,
poll, the next instance candidate on capacity errors — then, for each ModelRegistration, compile
(SageMaker Neo) and register the model. Its requests are validated against botocore's model at synth."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import Duration, Size, Stack, Stage, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sns as sns
from aws_cdk import custom_resources as cr
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.execution_role import ExecutionRoleBase
from sagestack.constructs.job_pipeline import JobPipeline
from sagestack.constructs.mlflow_server import grant_mlflow_logging
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.nag import acknowledge
from sagestack.constructs.retraining_schedule import RetrainingSchedule
from sagestack.constructs.training_image import TrainingImage
from sagestack.core.names import Names
from sagestack.core.states import PipelineSettings
from sagestack.endpoints.model_steps import EndpointPlan, ModelStepContext
from sagestack.training.request import MlflowTarget, RequestContext, TrainingJobPlan


@dataclass(frozen=True)
class ModelRegistration:
    """Compile (optionally) and register the trained model for one endpoint, after training.

    endpoint: the endpoint's key (names the compilation jobs and the package's metadata).
    compile: SageMaker Neo settings as in the spec's `compile:` (target_device, framework,
      framework_version, input_shapes, compiler_options …); None registers the model as trained.
    instance_type: the endpoint's instance type (the package lists its family as supported).
    inference_image: the image that serves an uncompiled model (a compiled one's comes from Neo).
    """

    endpoint: str
    compile: Mapping[str, Any] | None = None
    instance_type: str | None = None
    serverless: bool = False
    inference_image: str = ""
    _plan: EndpointPlan | None = field(default=None, compare=False)

    def plan(self, names: Names, region: str, source: str) -> EndpointPlan:
        from sagestack.endpoints.model_steps import endpoint_plan
        from sagestack.endpoints.models import EndpointSpec

        if self._plan is not None:
            return self._plan
        spec: dict[str, Any] = {"model": {"from": source}}
        if self.compile is not None:
            spec["compile"] = dict(self.compile)
        if self.instance_type:
            spec["instance_type"] = self.instance_type
        elif self.serverless:
            spec["serverless"] = {}
        return endpoint_plan(
            names=names,
            key=self.endpoint,
            spec=EndpointSpec.model_validate(spec),
            region=region,
            inference_image=self.inference_image,
        )

    @staticmethod
    def from_endpoint_plan(plan: EndpointPlan) -> ModelRegistration:
        """The spec path's resolved endpoint (sagestack.endpoints.model_steps.resolve_endpoint)."""
        return ModelRegistration(endpoint=plan.key, _plan=plan)


def _seconds(d: Duration | None) -> int | None:
    return None if d is None else int(d.to_seconds())


class TrainingPipeline(JobPipeline):
    """One training job and the state machine that runs it.

    Props (CDK types; defaults as the SageMaker SDK's Estimator):
      names: project and environment (Names) — every physical name, and the IAM scope.
      job: the job's key (default: the construct id): '<project>-<env>-<job>-<hash>-<candidate>'.
      image: a TrainingImage (DLC, registry URI, ECR repository or Dockerfile asset).
      code: the source folder, packed deterministically as the job's sourcedir.tar.gz.
      instance_types: candidates in order of preference (at least one).
      execution_role: the role the job runs as (ExecutionRole, or ExecutionRole.from_role_arn).
      artifacts: the ArtifactBucket (outputs, checkpoints, Debugger/Profiler/TensorBoard data).
      encryption_key: encrypts volumes and outputs.
      region: default: the stack's (must be concrete: DLC URIs and validation depend on it).
      entry_point ('train.py'), instance_count (1), hyperparameters, max_runtime (24 h),
      volume_size (30 GiB), spot (False), max_wait (max_runtime), metric_definitions {name: regex},
      distribution (the spec's `distribution:`, e.g. {"torch_distributed": {}}).
      options: any other key of a `jobs:` entry of the YAML spec (checkpoint, debugger, profiler,
        channels, vpc, environment, tensorboard, efa, network_isolation, keep_alive, tags …),
        validated by the same schema.
      tags: request tags (default: sagestack:project / sagestack:environment).
      role, log_group, topic, state_machine_name: as JobPipeline (default name: Names.training_state_machine).
      poll_interval / backoff: Describe polling and the wait before the next candidate (60 s / 120 s).
      quota_codes: quota name -> code for the run-time quota check (default none: skipped, noted).
      run_on_deploy: start an execution from `cdk deploy` when the job's hash changed (default False).
      registry / registrations: register the model (compiled first where asked) in this group;
        each package carries its lineage (job, content hash, source archive hash, training image,
        training job) and `lineage` (more metadata, e.g. {"sagestack:lock-sha256": …}).
      mlflow_server_arn: log every run to this SageMaker MLflow tracking server (MlflowConfig, an
        experiment per job, a run per training job; the execution role may log to it).
      options["schedule"] ({expression, timezone, window, enabled}): retrain on a schedule — the
        definition gains a retrain path (fresh job names, checkpoint and TensorBoard prefixes when
        started with {"retrain": …}) and a RetrainingSchedule (`self.retraining`) starts it.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        names: Names,
        image: TrainingImage,
        code: str,
        instance_types: Sequence[str],
        execution_role: ExecutionRoleBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        job: str | None = None,
        region: str | None = None,
        entry_point: str = "train.py",
        instance_count: int = 1,
        hyperparameters: Mapping[str, Any] | None = None,
        max_runtime: Duration | None = None,
        volume_size: Size | None = None,
        spot: bool = False,
        max_wait: Duration | None = None,
        metric_definitions: Mapping[str, str] | None = None,
        distribution: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        backoff: Duration | None = None,
        quota_codes: Mapping[str, str] | None = None,
        run_on_deploy: bool = False,
        registry: ModelPackageGroupBase | None = None,
        registrations: Sequence[ModelRegistration] = (),
        lineage: Mapping[str, str] | None = None,
        mlflow_server_arn: str | None = None,
    ) -> None:
        from sagestack.core.sourcedir import pack_source_dir
        from sagestack.core.standins import SAMPLE_ACCOUNT
        from sagestack.endpoints.model_steps import lineage_of
        from sagestack.training.models import JobSpec
        from sagestack.training.request import resolve_training_job, rules_image_for, stand_in_context
        from sagestack.training.states import training_pipeline

        key = job or id
        stack = Stack.of(scope)
        region = region or stack.region
        if Token.is_unresolved(region):
            raise ValueError(f"TrainingPipeline '{key}': give region= (the stack's region is not concrete)")
        spec: dict[str, Any] = {
            "image": "image",
            "source_dir": Path(code).name,
            "instance_type": list(instance_types),
            "instance_count": instance_count,
            "entry_point": entry_point,
            "hyperparameters": dict(hyperparameters or {}),
            "use_spot_instances": spot,
            "metric_definitions": dict(metric_definitions or {}),
            "run_on_deploy": run_on_deploy,
        }
        if max_runtime is not None:
            spec["max_run"] = _seconds(max_runtime)
        if volume_size is not None:
            spec["volume_size_gb"] = int(volume_size.to_gibibytes())
        if max_wait is not None:
            spec["max_wait"] = _seconds(max_wait)
        if distribution is not None:
            spec["distribution"] = dict(distribution)
        spec.update(options or {})
        job_spec = JobSpec.model_validate(spec)
        tags = (
            dict(tags)
            if tags is not None
            else {"sagestack:project": names.project, "sagestack:environment": names.env}
        )
        request_tags = tuple(sorted(tags.items()))

        # The code: one deterministic archive per folder, written once per synth.
        archive = pack_source_dir(Path(code))
        stage = Stage.of(scope)
        outdir = Path(stage.outdir if stage is not None else ".") / ".sagestack-sources"
        outdir.mkdir(parents=True, exist_ok=True)
        tarball = outdir / f"sourcedir-{archive.sha256[:16]}.tar.gz"
        if not tarball.exists():
            tarball.write_bytes(archive.data)
        # In the parent scope, as the stacks always created it (keeps asset IDs stable).
        source = s3_assets.Asset(scope, f"Source-{key}", path=str(tarball))
        execution_role.grant_object_read(source.bucket.arn_for_objects(source.s3_object_key))

        account = stack.account if not Token.is_unresolved(stack.account) else SAMPLE_ACCOUNT
        rules_image = rules_image_for(job_spec, region)
        identities = {t: image.identity_for(t) for t in job_spec.instance_type}

        mlflow: MlflowTarget | None = None
        mlflow_stand_in: MlflowTarget | None = None
        if mlflow_server_arn is not None:
            mlflow = MlflowTarget(mlflow_server_arn, names.prefix)
            mlflow_stand_in = (
                MlflowTarget(
                    f"arn:aws:sagemaker:{region}:{account}:mlflow-tracking-server/{names.tracking_server}",
                    names.prefix,
                )
                if Token.is_unresolved(mlflow_server_arn)
                else mlflow
            )
            grant_mlflow_logging(execution_role, mlflow_server_arn)

        def validation_ctx(t: str) -> RequestContext:
            return dataclasses.replace(
                stand_in_context(
                    region=region,
                    account=account,
                    image_uri=image.validation_uri_for(t, account=account, region=region),
                    rules_image=rules_image,
                    tags=request_tags,
                ),
                mlflow=mlflow_stand_in,
            )

        def token_ctx(t: str) -> RequestContext:
            return RequestContext(
                region=region,
                role_arn=execution_role.role_arn,
                bucket=artifacts.bucket_name,
                kms_key_id=encryption_key.key_arn,
                source_s3_uri=source.s3_object_url,
                image_uri=image.uri_for(t),
                rules_image_uri=rules_image,
                tags=request_tags,
                mlflow=mlflow,
            )

        common: dict[str, Any] = dict(
            names=names, key=key, job=job_spec, source_sha256=archive.sha256, image_uris=identities
        )
        # Validated with the stand-ins `sagestack plan` and `sagestack lock` use; emitted with tokens.
        validation_plan = resolve_training_job(**common, context=validation_ctx, validate=True)
        job_plan = resolve_training_job(**common, context=token_ctx, validate=False)

        # What the compile and register steps (here, or in a TuningPipeline over this job) send.
        deployment_values: dict[str, Any] = dict(
            region=region,
            account=account,
            role_arn=execution_role.role_arn,
            bucket=artifacts.bucket_name,
            kms_key_id=encryption_key.key_arn,
            tags=request_tags,
            lineage=lineage_of(key, job_plan.digest, archive.sha256) + tuple(sorted((lineage or {}).items())),
        )
        settings = self._settings(poll_interval, backoff, topic, quota_codes)
        definition = training_pipeline(job_plan, settings)
        definition, endpoint_plans = append_registrations(
            definition,
            settings,
            registrations,
            source=key,
            names=names,
            registry=registry,
            **deployment_values,
        )
        if job_spec.schedule is not None:
            from sagestack.training.retrain import retrainable

            # Started by its schedule (or `sagestack run --retrain`), the pipeline trains under fresh names.
            definition = retrainable(definition)
        super().__init__(
            scope,
            id,
            definition=definition,
            names=names,
            entry=key,
            description=f"the '{key}' training pipeline",
            role=role,
            log_group=log_group,
            topic=topic,
            encryption_key=encryption_key,
            state_machine_name=state_machine_name or names.training_state_machine(key),
        )
        self.key = key
        self.source = source
        self.job_spec = job_spec
        self.region = region
        self.validation_plan: TrainingJobPlan = validation_plan
        self.job_plan: TrainingJobPlan = job_plan
        self.endpoint_plans = endpoint_plans
        self.execution_role = execution_role
        self.deployment_values = deployment_values
        self._grant_sagemaker(
            actions.TRAINING_JOBS_RUN,
            "training-job",
            names.training_job_pattern,
            "Training jobs whose names start with this environment's prefix: the pipelines create, "
            "follow and stop only their own jobs.",
        )
        execution_role.grant_pass_role(self.role)
        self._grant_quota_reads(region)
        if endpoint_plans:
            grant_registration_steps(self, registry, endpoint_plans)
        if run_on_deploy:
            self._start_on_deploy()
        self.retraining: RetrainingSchedule | None = None
        if job_spec.schedule is not None:
            sched = job_spec.schedule
            self.retraining = RetrainingSchedule(
                self,
                "Retraining",
                pipeline=self,
                expression=sched.expression,
                timezone=sched.timezone,
                flexible_window=Duration.seconds(sched.window) if sched.window else None,
                enabled=sched.enabled,
                schedule_name=names.retrain_schedule(key),
                description=f"Retrains '{key}' of sagestack {names.prefix}",
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


def append_registrations(
    definition: dict[str, Any],
    settings: PipelineSettings,
    registrations: Sequence[ModelRegistration],
    *,
    source: str,
    names: Names,
    region: str,
    account: str,
    registry: ModelPackageGroupBase | None,
    role_arn: str,
    bucket: str,
    kms_key_id: str,
    tags: tuple[tuple[str, str], ...],
    lineage: tuple[tuple[str, str], ...] = (),
) -> tuple[dict[str, Any], list[EndpointPlan]]:
    """Compile and register steps after a pipeline's 'Succeeded' state, for the model `source`
    (a job or search) trains; their requests validated with stand-ins, emitted with the
    deployment's values. Returns the definition and the endpoints it registers for."""
    from sagestack.core.standins import STAND_IN_BUCKET, stand_in_key_arn, stand_in_role_arn
    from sagestack.endpoints.model_steps import append_model_steps, validate_model_requests

    endpoints = [r.plan(names, region, source) for r in registrations]
    if not endpoints:
        return definition, endpoints
    if registry is None:
        raise ValueError("registrations need a registry (a ModelPackageGroup)")

    def context(role: str, bucket_name: str, key: str) -> ModelStepContext:
        return ModelStepContext(
            region=region,
            env=names.env,
            role_arn=role,
            bucket=bucket_name,
            kms_key_id=key,
            group_name=registry.group_name,
            tags=tags,
            lineage=lineage,
        )

    stand_ins = context(stand_in_role_arn(account), STAND_IN_BUCKET, stand_in_key_arn(account, region))
    for ep in endpoints:
        validate_model_requests(ep, stand_ins)
    return append_model_steps(
        definition, endpoints, context(role_arn, bucket, kms_key_id), settings
    ), endpoints


def grant_model_steps(pipeline: JobPipeline, registry: ModelPackageGroupBase | None) -> None:
    """The pipeline's role may run this environment's compilation jobs and register versions."""
    assert registry is not None
    pipeline._grant_sagemaker(
        actions.COMPILATION_JOBS_RUN,
        "compilation-job",
        pipeline.names.compilation_job_pattern,
        "Compilation jobs whose names start with this environment's prefix (names are content-addressed, "
        "so only the prefix is known at synth).",
    )
    registry.grant_register(pipeline.role)


def grant_registration_steps(
    pipeline: JobPipeline, registry: ModelPackageGroupBase | None, plans: Sequence[EndpointPlan]
) -> None:
    """Compile and register; and, when a batch transform follows a registration, run it."""
    from sagestack.constructs.transform_pipeline import grant_transform_steps

    grant_model_steps(pipeline, registry)
    if any(p.transform is not None for p in plans):
        grant_transform_steps(pipeline)
