"""TuningPipeline: a hyperparameter search over a TrainingPipeline's job — quota check for the
parallel trials, create, poll, record the best training job and its model in SSM — then, for each
ModelRegistration, compile and register the best model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.job_pipeline import JobPipeline, PipelineDeployment
from sagestack.constructs.model_registration import (
    ModelRegistration,
    append_registrations,
    grant_registration_steps,
)
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.training_pipeline import TrainingPipeline
from sagestack.core.catalog.quotas import quota_name, training_usage
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.model import spec_of
from sagestack.core.names import Names
from sagestack.training.models import JobSpec
from sagestack.tuning.models import TuningSpec
from sagestack.tuning.request import render_tuning_request
from sagestack.tuning.states import TuningPipelineInputs, tuning_pipeline


class TuningPipeline(JobPipeline):
    """A hyperparameter tuning job over `training`'s job (its image, code, instance type, data).

    Props:
      training: the TrainingPipeline whose job the trials run (its first instance candidate; all of
        them when the job lists several, as a tuning job's instance configs).
      search: the search's key (default: the construct id): names the tuning job and its parameter.
      The search, as typed props (each default: the spec's):
        objective_metric / objective_type: one of the job's metric_definitions; 'Maximize' | 'Minimize'
          (required).
        ranges: {hyperparameter: {"continuous": [lo, hi]} | {"integer": [lo, hi]} |
          {"categorical": [...]}, optional "scaling"} as in the spec's `ranges:` (required).
        strategy ('Bayesian'), max_jobs (required unless 'Grid'), max_parallel_jobs (1),
        early_stopping ('Off').
        options: any other key of a `tuning:` entry (hyperband, completion, random_seed, warm_start,
          static_hyperparameters), validated by the same schema (core.model.spec_of).
      tuning_spec: or the search as the spec's own validated `tuning:` entry, in place of the typed
        props (the spec path's door).
      validated: its request already rendered with stand-ins and validated against botocore's model
        (project.requests.render_training); default: rendered and validated here.
      encryption_key: encrypts a log group this construct creates (default: `training`'s key).
      role, log_group, topic, state_machine_name (default Names.tuning_state_machine), poll_interval,
      quota_codes, registry / registrations: as TrainingPipeline.
      backoff: taken as every pipeline takes it, unused (see settings_unused).
    """

    settings_unused = {"backoff": "the tuning states fail a refused search at once: nothing backs off"}

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        training: TrainingPipeline,
        objective_metric: str | None = None,
        objective_type: str | None = None,
        ranges: Mapping[str, Mapping[str, Any]] | None = None,
        search: str | None = None,
        strategy: str | None = None,
        max_jobs: int | None = None,
        max_parallel_jobs: int | None = None,
        early_stopping: str | None = None,
        options: Mapping[str, Any] | None = None,
        tuning_spec: TuningSpec | None = None,
        validated: Mapping[str, Any] | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        encryption_key: kms.IKey | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        backoff: Duration | None = None,
        quota_codes: Mapping[str, str] | None = None,
        registry: ModelPackageGroupBase | None = None,
        registrations: Sequence[ModelRegistration] = (),
    ) -> None:
        key = search or id
        names = training.names
        search_props = {  # prop -> (spec key, `outer.inner` when nested; value)
            "objective_metric": ("objective.metric", objective_metric),
            "objective_type": ("objective.type", objective_type),
            "ranges": ("ranges", None if ranges is None else {k: dict(v) for k, v in ranges.items()}),
            "strategy": ("strategy", strategy),
            "max_jobs": ("max_jobs", max_jobs),
            "max_parallel_jobs": ("max_parallel_jobs", max_parallel_jobs),
            "early_stopping": ("early_stopping", early_stopping),
        }
        tuning = _search_of(key, training.key, search_props, options, tuning_spec)
        request = render_tuning_request(tuning, key=key, names=names, job_plan=training.job_plan)
        _validate(key, tuning, names, training, request, validated)
        pipeline = PipelineDeployment(
            role=role,
            log_group=log_group,
            topic=topic,
            encryption_key=encryption_key or training.encryption_key,
            state_machine_name=state_machine_name or names.tuning_state_machine(key),
            poll_interval=poll_interval,
            backoff=backoff,
            quota_codes=quota_codes,
        )
        settings = pipeline.settings()
        definition, endpoint_plans = append_registrations(
            tuning_pipeline(_inputs(key, names, tuning, training.job_spec, request), settings),
            settings,
            registrations,
            source=key,
            names=names,
            registry=registry,
            deployment=training.deployment,
            stand_ins=training.stand_ins,
            lineage=(*training.lineage, ("sagestack:tuning", key)),
        )
        super().__init__(
            scope,
            id,
            definition=definition,
            names=names,
            entry=key,
            description=f"the '{key}' tuning pipeline",
            **pipeline.construct_props(),
        )
        self.key = key
        self.tuning_spec = tuning
        self.request = request
        self.endpoint_plans = endpoint_plans
        self.grant_sagemaker(
            actions.TUNING_JOBS_RUN,
            "hyper-parameter-tuning-job",
            names.tuning_job_pattern,
            "Tuning jobs whose names start with the project's name (SageMaker allows them 32 characters: "
            "no room for the environment, so each action is also held to the environment's tags).",
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


def _search_of(
    key: str,
    job: str,
    search_props: Mapping[str, tuple[str, Any]],
    options: Mapping[str, Any] | None,
    tuning_spec: TuningSpec | None,
) -> TuningSpec:
    """The search: the spec's own (`tuning_spec`), or the one the typed props and options describe."""
    if tuning_spec is not None:
        given = [prop for prop, (_, value) in search_props.items() if value is not None]
        given += ["options"] if options else []
        if given:
            raise ValueError(
                f"TuningPipeline '{key}': tuning_spec is the whole search; drop {', '.join(given)}"
            )
        if tuning_spec.job != job:
            raise ValueError(f"TuningPipeline '{key}': tuning_spec searches '{tuning_spec.job}', not '{job}'")
        return tuning_spec
    spec: dict[str, Any] = {"job": job}
    for spec_key, value in search_props.values():
        outer, _, inner = spec_key.partition(".")
        if value is not None and inner:
            spec.setdefault(outer, {})[inner] = value
        elif value is not None:
            spec[outer] = value
    return spec_of(TuningSpec, spec, options)


def _validate(
    key: str,
    tuning: TuningSpec,
    names: Names,
    training: TrainingPipeline,
    request: Mapping[str, Any],
    validated: Mapping[str, Any] | None,
) -> None:
    """The library door validates the search's request rendered with its job's stand-ins; the spec
    path's was validated with its environment's (it must name the same tuning job)."""

    if validated is None:
        validated = render_tuning_request(tuning, key=key, names=names, job_plan=training.validation_plan)
        validate_request("CreateHyperParameterTuningJob", dict(validated))
    name = request["HyperParameterTuningJobName"]
    if validated["HyperParameterTuningJobName"] != name:
        raise ValueError(
            f"TuningPipeline '{key}': the validated search ({validated['HyperParameterTuningJobName']}) "
            f"is not this one ({name})"
        )


def _inputs(
    key: str, names: Names, tuning: TuningSpec, job: JobSpec, request: dict[str, Any]
) -> TuningPipelineInputs:
    """What the search's states need: the request, and the quota its parallel trials take."""

    return TuningPipelineInputs(
        key=key,
        request=request,
        quota_name=quota_name(job.instance_type[0], training_usage(job.use_spot_instances)),
        quota_needed=tuning.max_parallel_jobs * job.instance_count,
        parameter_name=names.best_model_parameter(key),
    )
