"""The one authority for physical names. Everything sagestack names in AWS — stacks, state machines,
jobs, endpoints, parameters, the model package group, the repository, the pipelines' log group —
is spelled here, from a project and an environment; nothing else builds these strings.

`Names("digits", "dev").state_machine("classifier")` -> 'digits-dev-classifier'. The constructs take
a Names (a CDK user chooses project and environment); the spec path makes one per environment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sagestack.core.layout import S3Layout

TRAINING_JOB_NAME_MAX = 63
TUNING_JOB_NAME_MAX = 32  # CreateHyperParameterTuningJob's limit
# A model package's version (ModelPackageVersion, an Integer: at most 2147483647).
PACKAGE_VERSION_DIGITS_MAX = 10
COMPILE_NAME_PREFIX_MAX = 30  # + '-' + 32 hex digits of an MD5 = 63, SageMaker's limit
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# The tags that name what a resource belongs to, beside the environment's own (`Names.tags`), so
# Cost Explorer can attribute its spend (`sagestack cost`) once they are cost allocation tags:
# an endpoint's SageMaker resources carry its key, a HyperPod cluster its key.
ENDPOINT_TAG = "sagestack:endpoint"
CLUSTER_TAG = "sagestack:cluster"


@dataclass(frozen=True)
class Names:
    project: str
    env: str

    def __post_init__(self) -> None:
        for what, value in (("project", self.project), ("environment", self.env)):
            if not _NAME.match(value):
                raise ValueError(
                    f"{what} {value!r}: use lowercase letters, digits and '-' (it is part of every "
                    "resource name), e.g. 'digits' or 'dev'"
                )

    @property
    def prefix(self) -> str:
        """'<project>-<env>': the prefix of every physical name (IAM grants are scoped to it)."""
        return f"{self.project}-{self.env}"

    def stack(self, kind: str) -> str:
        return f"{self.prefix}-{kind}"

    @property
    def key_alias(self) -> str:
        return f"alias/sagestack/{self.prefix}"

    @property
    def repository(self) -> str:
        return f"{self.prefix}-training"

    @property
    def model_package_group(self) -> str:
        return self.prefix

    @property
    def pipeline_log_group(self) -> str:
        """Where the pipelines' executions log (Step Functions' vended-logs prefix)."""
        return f"/aws/vendedlogs/states/sagestack/{self.prefix}"

    def entry_log_group(self, entry: str) -> str:
        """A pipeline's own log group, when it is not given the environment's shared one."""
        return f"{self.pipeline_log_group}/{entry}"

    def training_state_machine(self, job: str) -> str:
        return f"{self.prefix}-{job}"

    def tuning_state_machine(self, search: str) -> str:
        return f"{self.prefix}-tune-{search}"

    def state_machine(self, entry: str, *, tuning: bool = False) -> str:
        return self.tuning_state_machine(entry) if tuning else self.training_state_machine(entry)

    def training_job(self, job: str, digest: str, candidate_index: int) -> str:
        """'<prefix>-<job>-<hash8>-<i>', the front cut so the whole fits SageMaker's 63 characters."""
        suffix = f"-{digest[:8]}-{candidate_index}"
        return f"{self.prefix}-{job}"[: TRAINING_JOB_NAME_MAX - len(suffix)].rstrip("-") + suffix

    def preference_job(self, job: str, digest: str) -> str:
        """The one job a pipeline creates with InstancePreferences: '<prefix>-<job>-<hash8>-p'."""
        suffix = f"-{digest[:8]}-p"
        return f"{self.prefix}-{job}"[: TRAINING_JOB_NAME_MAX - len(suffix)].rstrip("-") + suffix

    @property
    def promotion_reader_role(self) -> str:
        """The role another account's promotion assumes to read this environment's packages and their
        artifacts (it trusts only the environments that promote from this one)."""
        return f"{self.prefix}-promotion-reader"

    @property
    def promoter_policy(self) -> str:
        """The managed policy whoever runs `sagestack promote --to <env>` needs in this account."""
        return f"{self.prefix}-promoter"

    @property
    def tracking_server(self) -> str:
        """The environment's SageMaker managed MLflow tracking server."""
        return f"{self.prefix}-mlflow"

    @property
    def mlflow_app(self) -> str:
        """The environment's serverless MLflow App (`tracking.mlflow.app`)."""
        return f"{self.prefix}-mlflow"

    def mlflow_experiment(self, job: str) -> str:
        """A job's MLflow experiment (every run of the job, cloud and local, is a run in it)."""
        return f"{self.prefix}-{job}"

    def retrain_schedule(self, job: str) -> str:
        """The EventBridge Scheduler schedule that retrains a job (64 characters at most)."""
        suffix = "-retrain"
        return f"{self.prefix}-{job}"[: 64 - len(suffix)].rstrip("-") + suffix

    @property
    def training_job_pattern(self) -> str:
        """Every training job of this environment (for IAM resources)."""
        return f"{self.prefix}-*"

    def tuning_job(self, search: str, digest: str) -> str:
        """'<project>-<search>-<hash8>' cut to SageMaker's 32 characters, the hash kept (no room for
        the environment: the hash, which covers it, tells environments apart)."""
        suffix = f"-{digest[:8]}"
        return f"{self.project}-{search}"[: TUNING_JOB_NAME_MAX - len(suffix)].rstrip("-") + suffix

    @property
    def tuning_job_pattern(self) -> str:
        """Every tuning job of the project: 32 characters leave no room for the environment, so IAM
        statements on this pattern also need the environment's tags (`tags`) as conditions."""
        return f"{self.project}-*"

    @property
    def tags(self) -> dict[str, str]:
        """The tags every request of this environment carries: IAM conditions scope by them where a
        name cannot (tuning jobs)."""
        return {"sagestack:project": self.project, "sagestack:environment": self.env}

    def request_tags(self, tags: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
        """`tags` with this environment's own (`tags`), which a caller may not set otherwise."""
        given = dict(tags or {})
        for key, value in self.tags.items():
            if given.setdefault(key, value) != value:
                raise ValueError(
                    f"tag {key}={given[key]!r}: sagestack sets it to {value!r} (IAM grants are scoped by it); "
                    "drop it from the tags"
                )
        return tuple(sorted(given.items()))

    def endpoint(self, key: str) -> str:
        return f"{self.prefix}-{key}"

    def compilation_prefix(self, endpoint_key: str) -> str:
        return self.endpoint(endpoint_key)[:COMPILE_NAME_PREFIX_MAX].rstrip("-")

    @property
    def compilation_job_pattern(self) -> str:
        return self._cut_name_pattern

    @property
    def _cut_name_pattern(self) -> str:
        """Names cut to COMPILE_NAME_PREFIX_MAX before their hash: '<prefix>-*' while the prefix
        fits (so 'digits-dev' never matches 'digits-dev2-…'), else the prefix as cut."""
        if len(self.prefix) <= COMPILE_NAME_PREFIX_MAX:
            return f"{self.prefix}-*"
        return f"{self.prefix[:COMPILE_NAME_PREFIX_MAX]}*"

    def transform_prefix(self, key: str) -> str:
        """Transform jobs and the models they run: '<prefix>-<md5>', within SageMaker's 63."""
        return f"{self.prefix}-{key}"[:COMPILE_NAME_PREFIX_MAX].rstrip("-")

    def transform_state_machine(self, key: str) -> str:
        return f"{self.prefix}-transform-{key}"

    @property
    def transform_job_pattern(self) -> str:
        """Transform jobs and models of this environment (their names start with its prefix)."""
        return self._cut_name_pattern

    def optimization_job(self, key: str, digest: str) -> str:
        """An LLM optimization job: '<prefix>-<key>-<hash12>', content-addressed by the llm spec (an
        unchanged spec starts no second job), the front cut to SageMaker's 63 characters."""
        suffix = f"-{digest[:12]}"
        return f"{self.prefix}-{key}"[: TRAINING_JOB_NAME_MAX - len(suffix)].rstrip("-") + suffix

    def optimization_state_machine(self, key: str) -> str:
        return f"{self.prefix}-optimize-{key}"

    @property
    def optimization_job_pattern(self) -> str:
        """Optimization jobs of this environment (their names start with its prefix)."""
        return f"{self.prefix}-*"

    def recommendation_job(self, key: str, digest: str, version: str | None = None) -> str:
        """An endpoint's recommendation job (AI recommendation or Inference Recommender):
        '<prefix>-<endpoint>-<hash12>', content-addressed by its target, candidates and model; with
        the version of the model package measured when the pipeline finds it at run time,
        '<prefix>-<endpoint>-<hash12>-v<version>' — room kept for the longest version (an Integer:
        10 digits), so the name the run renders is within 63 characters whatever it finds."""
        if version is None:
            return self.optimization_job(key, digest)
        room = len("-v") + PACKAGE_VERSION_DIGITS_MAX
        suffix = f"-{digest[:12]}"
        stem = f"{self.prefix}-{key}"[: TRAINING_JOB_NAME_MAX - len(suffix) - room].rstrip("-")
        return f"{stem}{suffix}-v{version}"

    def recommendation_state_machine(self, key: str) -> str:
        return f"{self.prefix}-recommend-{key}"

    def recommendation_rule(self, key: str) -> str:
        """The EventBridge rule that starts an endpoint's recommendation pipeline when a version is
        approved in its group (64 characters at most)."""
        suffix = "-on-approval"
        return f"{self.prefix}-recommend-{key}"[: 64 - len(suffix)].rstrip("-") + suffix

    def baseline_state_machine(self, endpoint_key: str) -> str:
        return f"{self.prefix}-baseline-{endpoint_key}"

    def monitoring_schedule(self, endpoint_key: str) -> str:
        """The data-quality schedule and its job definition: '<endpoint>-data-quality'."""
        return f"{self.endpoint(endpoint_key)}-data-quality"

    @property
    def processing_job_pattern(self) -> str:
        return self._cut_name_pattern

    def queue(self, key: str) -> str:
        """A training queue's Batch service environment, scheduling policy and job queue: '<prefix>-<queue>'."""
        return f"{self.prefix}-{key}"

    def cluster(self, key: str) -> str:
        """A HyperPod cluster: '<prefix>-<cluster>'."""
        return f"{self.prefix}-{key}"

    def eks_cluster(self, key: str) -> str:
        """The EKS cluster an `orchestrator: eks` HyperPod cluster runs on: '<prefix>-<cluster>-eks'."""
        return f"{self.cluster(key)}-eks"

    def cluster_flow_log_group(self, key: str) -> str:
        """Where a cluster's VPC flow logs go (named, so the project key's policy can name it)."""
        return f"/sagestack/{self.prefix}/clusters/{key}/flow-logs"

    def cluster_lifecycle_prefix(self, key: str) -> str:
        """Where a cluster's lifecycle scripts lie in the artifact bucket (under code/)."""
        return S3Layout.cluster_lifecycle_key(key)

    @property
    def parameters_path(self) -> str:
        """The SSM path under which this environment's pipelines record results (no leading '/')."""
        return f"sagestack/{self.project}/{self.env}"

    def best_model_parameter(self, search: str) -> str:
        """The SSM parameter where a tuning pipeline records its best training job and model."""
        return f"/{self.parameters_path}/tuning/{search}/best-model"

    @property
    def best_model_parameter_pattern(self) -> str:
        return f"{self.parameters_path}/tuning/*"
