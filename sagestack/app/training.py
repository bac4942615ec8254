"""TrainingStack: one Step Functions pipeline per training job of an environment, with the shared
role, log group and notification topic they use, and the training queues (queues:) queued jobs wait in."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack, Stage
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from sagestack.app.foundation import FoundationStack
from sagestack.constructs import ModelRegistration, TrainingPipeline, TuningPipeline
from sagestack.constructs.training_queue import TrainingQueue
from sagestack.constructs.trust import states_principal
from sagestack.core.errors import SpecError, SpecIssue
from sagestack.endpoints.resolved import ResolvedEndpoint, endpoints_fed_by
from sagestack.project import ResolvedEnvironment
from sagestack.project.requests import render_training
from sagestack.training.launch_contract import launch_contract

# CloudFormation allows 500 resources in a stack; a pipeline is 2 or 3 (state machine, alarm, the
# deploy trigger), and a launcher: drivers job's one more (the upload of its launch files). Up to PIPELINES_IN_ONE_STACK jobs every pipeline lives in the training stack; beyond
# it, each job's pipeline lives in shard stack hash(job) % SHARDS ('<prefix>-training-07'), so adding a
# job never moves another (crossing the threshold moves them once, in one deploy).
PIPELINES_IN_ONE_STACK = 100
SHARDS = 16
SHARD_RESOURCE_BUDGET = 480  # leaves room for the custom-resource provider and CDK metadata


def pipeline_shard(job: str) -> int:
    """The shard stack a job's pipeline lives in once an environment has more than
    PIPELINES_IN_ONE_STACK jobs: a stable function of the job's key alone."""
    return int(hashlib.sha256(job.encode()).hexdigest(), 16) % SHARDS


def lock_lineage(plan: ResolvedEnvironment) -> dict[str, str]:
    """What each registered package records of the lock the synth saw: the sha256 of
    config/envs/<env>.lock.json (`sagestack lineage` compares it with the lock of the day)."""
    sha256 = plan.files.lock_sha256
    return {"sagestack:lock-sha256": sha256} if sha256 else {}


def check_shards(plan: ResolvedEnvironment) -> None:
    """Refuse an environment whose pipelines would not fit its stacks, before CloudFormation does."""
    jobs = plan.spec.jobs
    if len(jobs) <= PIPELINES_IN_ONE_STACK:
        return
    per_shard: dict[int, int] = {}
    for key, job in jobs.items():
        per_shard[pipeline_shard(key)] = per_shard.get(pipeline_shard(key), 0) + (
            2 + job.run_on_deploy + (3 if job.schedule else 0) + launch_contract(job).pipeline_resources
        )
    full = {s: n for s, n in per_shard.items() if n > SHARD_RESOURCE_BUDGET}
    if full:
        raise SpecError(
            [
                SpecIssue(
                    f"{len(jobs)} jobs in '{plan.env}': pipeline stack(s) "
                    + ", ".join(plan.names.stack(f"training-{s:02d}") for s in sorted(full))
                    + f" would hold more than {SHARD_RESOURCE_BUDGET} resources (CloudFormation allows 500); "
                    "split the jobs over two projects or environments",
                    path=("jobs",),
                )
            ]
        )


class TrainingStack(Stack):
    """The spec's jobs and searches as TrainingPipeline / TuningPipeline constructs, each given the
    spec's own entry and its requests as the environment rendered and validated them. The pipelines
    share one role, log group and topic, which live here with the searches; with many jobs the job
    pipelines spread over shard stacks."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: ResolvedEnvironment,
        foundation: FoundationStack,
        project_root: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        spec = plan.spec
        names = plan.names
        self.topic = foundation.notifications(self, f"sagestack {names.prefix} training")
        self.log_group = pipeline_log_group(self, plan, foundation)
        self.role = iam.Role(
            self,
            "PipelineRole",
            assumed_by=states_principal(self),
            description=f"Step Functions pipelines of sagestack {names.prefix}",
        )
        shared: dict[str, Any] = dict(
            role=self.role,
            log_group=self.log_group,
            topic=self.topic,
            poll_interval=Duration.seconds(spec.pipeline.poll_interval),
            backoff=Duration.seconds(spec.pipeline.backoff),
            quota_codes=plan.files.quota_codes,
            registry=foundation.model_registry,
        )
        lineage = lock_lineage(plan)
        self.endpoints: dict[str, ResolvedEndpoint] = {}
        self.pipelines: dict[str, TrainingPipeline] = {}
        self.shards: dict[int, Stack] = {}
        check_shards(plan)
        self.queues = {
            key: TrainingQueue(self, f"Queue-{key}", names=names, key=key, queue=queue)
            for key, queue in spec.queues.items()
        }
        # Each request rendered with stand-ins and validated once, as `plan`, `render` and `lock` see
        # it; the pipelines render the same jobs and searches with the deployment's tokens.
        requests = render_training(plan, project_root)
        sharded = len(spec.jobs) > PIPELINES_IN_ONE_STACK
        for key, job in spec.jobs.items():
            self.pipelines[key] = TrainingPipeline(
                self._shard(plan, pipeline_shard(key)) if sharded else self,
                f"Pipeline-{key}",
                names=names,
                job=key,
                image=foundation.image_for(job),
                code=str(project_root / job.source_dir),
                execution_role=foundation.execution_role,
                artifacts=foundation.artifacts,
                encryption_key=foundation.key,
                region=plan.region,
                tags=plan.tags,
                job_spec=job,
                validated=requests.jobs[key],
                registrations=self._registrations(plan, key),
                lineage=lineage,
                mlflow_server_arn=foundation.mlflow_server_arn,
                **shared,
            )
            if job.queue is not None and job.queue.name in self.queues:
                self.pipelines[key].node.add_dependency(self.queues[job.queue.name])
        self.tuning_pipelines: dict[str, TuningPipeline] = {}
        for key, tuning in spec.tuning.items():
            self.tuning_pipelines[key] = TuningPipeline(
                self,
                f"Tuning-{key}",
                training=self.pipelines[tuning.job],
                search=key,
                tuning_spec=tuning,
                validated=requests.tuning[key],
                registrations=self._registrations(plan, key),
                **shared,
            )

    def _shard(self, plan: ResolvedEnvironment, index: int) -> Stack:
        if index not in self.shards:
            stage = Stage.of(self)
            assert stage is not None
            self.shards[index] = Stack(
                stage,
                f"Training-{index:02d}",
                stack_name=plan.names.stack(f"training-{index:02d}"),
                description=f"sagestack {plan.names.prefix}: training pipelines, shard {index} of {SHARDS}",
                termination_protection=self.termination_protection,
            )
        return self.shards[index]

    @property
    def job_plans(self) -> dict[str, Any]:
        return {k: p.job_plan for k, p in self.pipelines.items()}

    @property
    def tuning_requests(self) -> dict[str, dict[str, Any]]:
        return {k: p.request for k, p in self.tuning_pipelines.items()}

    def _registrations(self, plan: ResolvedEnvironment, source: str) -> list[ModelRegistration]:
        """Compile and register steps for the endpoints that serve this job's (or search's) model."""
        endpoints = endpoints_fed_by(plan, source)
        self.endpoints.update({ep.key: ep for ep in endpoints if ep.transform is None})
        return [ModelRegistration.from_endpoint_plan(ep) for ep in endpoints]


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


def pipeline_log_group(
    scope: Construct, plan: ResolvedEnvironment, foundation: FoundationStack
) -> logs.LogGroup:
    """The environment's pipeline log group (Names.pipeline_log_group): execution data at level ALL
    holds hyperparameters and artifacts, so the project key encrypts it like everything else (its
    policy lets CloudWatch Logs use it for this group); kept or deleted with the data (retain_data)."""
    return logs.LogGroup(
        scope,
        "PipelineLogs",
        log_group_name=plan.names.pipeline_log_group,
        retention=retention(plan.spec.pipeline.log_retention_days),
        encryption_key=foundation.key,
        removal_policy=RemovalPolicy.RETAIN if plan.retain_data else RemovalPolicy.DESTROY,
    )


def retention(days: int) -> logs.RetentionDays:
    return getattr(logs.RetentionDays, _RETENTION_NAMES[days])  # type: ignore[no-any-return]
