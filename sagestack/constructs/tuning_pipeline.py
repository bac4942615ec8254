"""TuningPipeline: a hyperparameter search over a TrainingPipeline's job — quota check for the
parallel trials, create, poll, record the best training job and its model in SSM — then, for each
ModelRegistration, compile and register the best model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.job_pipeline import JobPipeline
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.training_pipeline import (
    ModelRegistration,
    TrainingPipeline,
    append_registrations,
    grant_registration_steps,
)


class TuningPipeline(JobPipeline):
    """A hyperparameter tuning job over `training`'s job (its image, code, instance type, data).

    Props:
      training: the TrainingPipeline whose job the trials run (its first instance candidate; all of
        them when the job lists several, as a tuning job's instance configs).
      search: the search's key (default: the construct id): names the tuning job and its parameter.
      objective_metric / objective_type: one of the job's metric_definitions; 'Maximize' | 'Minimize'.
      ranges: {hyperparameter: {"continuous": [lo, hi]} | {"integer": [lo, hi]} | {"categorical": [...]},
        optional "scaling"} as in the spec's `ranges:`.
      strategy ('Bayesian'), max_jobs (required unless 'Grid'), max_parallel_jobs (1), early_stopping ('Off').
      options: any other key of a `tuning:` entry (hyperband, completion, random_seed, warm_start,
        static_hyperparameters), validated by the same schema.
      role, log_group, topic, state_machine_name (default Names.tuning_state_machine), poll_interval,
      backoff, quota_codes, registry / registrations: as TrainingPipeline.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        training: TrainingPipeline,
        objective_metric: str,
        objective_type: str,
        ranges: Mapping[str, Mapping[str, Any]],
        search: str | None = None,
        strategy: str = "Bayesian",
        max_jobs: int | None = None,
        max_parallel_jobs: int = 1,
        early_stopping: str = "Off",
        options: Mapping[str, Any] | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        backoff: Duration | None = None,
        quota_codes: Mapping[str, str] | None = None,
        registry: ModelPackageGroupBase | None = None,
        registrations: Sequence[ModelRegistration] = (),
    ) -> None:
        from sagestack.core.catalog.quotas import quota_name, training_usage
        from sagestack.core.catalog.service_model import validate_request
        from sagestack.tuning.models import TuningSpec
        from sagestack.tuning.request import render_tuning_request
        from sagestack.tuning.states import TuningPipelineInputs, tuning_pipeline

        key = search or id
        names = training.names
        spec: dict[str, Any] = {
            "job": training.key,
            "objective": {"metric": objective_metric, "type": objective_type},
            "strategy": strategy,
            "ranges": {k: dict(v) for k, v in ranges.items()},
            "max_parallel_jobs": max_parallel_jobs,
            "early_stopping": early_stopping,
        }
        if max_jobs is not None:
            spec["max_jobs"] = max_jobs
        spec.update(options or {})
        tuning = TuningSpec.model_validate(spec)
        validate_request(
            "CreateHyperParameterTuningJob",
            render_tuning_request(tuning, key=key, names=names, job_plan=training.validation_plan),
        )
        request = render_tuning_request(tuning, key=key, names=names, job_plan=training.job_plan)
        job = training.job_spec
        inputs = TuningPipelineInputs(
            key=key,
            request=request,
            quota_name=quota_name(job.instance_type[0], training_usage(job.use_spot_instances)),
            quota_needed=tuning.max_parallel_jobs * job.instance_count,
            parameter_name=names.best_model_parameter(key),
        )
        settings = self._settings(poll_interval, backoff, topic, quota_codes)
        definition = tuning_pipeline(inputs, settings)
        definition, endpoint_plans = append_registrations(
            definition,
            settings,
            registrations,
            source=key,
            names=names,
            registry=registry,
            **{
                **training.deployment_values,
                "lineage": (*training.deployment_values["lineage"], ("sagestack:tuning", key)),
            },
        )
        super().__init__(
            scope,
            id,
            definition=definition,
            names=names,
            entry=key,
            description=f"the '{key}' tuning pipeline",
            role=role,
            log_group=log_group,
            topic=topic,
            state_machine_name=state_machine_name or names.tuning_state_machine(key),
        )
        self.key = key
        self.tuning_spec = tuning
        self.request = request
        self.endpoint_plans = endpoint_plans
        self._grant_sagemaker(
            actions.TUNING_JOBS_RUN,
            "hyper-parameter-tuning-job",
            names.tuning_job_pattern,
            "Tuning jobs whose names start with the project's name (SageMaker allows them 32 characters: "
            "no room for more).",
        )
        self._grant(
            actions.PARAMETERS_WRITE,
            Stack.of(self).format_arn(
                service="ssm", resource="parameter", resource_name=names.best_model_parameter_pattern
            ),
            "The best-model parameters of this environment's tuning pipelines.",
        )
        training.execution_role.grant_pass_role(self.role)
        self._grant_quota_reads(training.region)
        if endpoint_plans:
            grant_registration_steps(self, registry, endpoint_plans)
