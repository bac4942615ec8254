"""An endpoint's performance target (`slo:`) measured in the cloud, resolved for one environment:
the AI workload configuration (AWS::SageMaker::AIWorkloadConfig, CreateAIWorkloadConfig's shapes)
and the job that measures the candidates against it —

- an LLM: CreateAIRecommendationJob (the weights in S3, the target's metrics, up to three candidate
  instance types from botocore's `AIRecommendationInstanceType`; results to S3, a model package
  group and the environment's MLflow);
- a classic model: CreateInferenceRecommendationsJob (Inference Recommender, an Advanced job: one
  endpoint configuration per candidate, the traffic the target implies, the latency threshold and
  the request rate as its stopping conditions).

Every request is rendered from the spec and a Deployment (tokens in the template, stand-ins when
validated against botocore's model). Job names are '<prefix>-<endpoint>-<hash12>', a hash of the
target, the candidates and the model: an unchanged spec starts no second job, the pipeline follows
the one that exists. A classic endpoint served unpinned measures the group's newest approved package,
which only the run knows: its job is '<prefix>-<endpoint>-<hash12>-v<version>', rendered by the run
(States.Format), so a newly approved version is measured by a job of its own and an unchanged model
and target follow the job that measured them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sagestack.core.catalog.service_model import enum_values, validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.names import Names
from sagestack.endpoints.models import EndpointSpec, SloSpec
from sagestack.llm.hosting import weights_location
from sagestack.llm.models import LlmSpec

AI_TYPES = "AIRecommendationInstanceType"  # botocore's enum of what an AI recommendation job measures
AI_MAX_TYPES = 3  # AIRecommendationComputeSpec.InstanceTypes: "up to 3 instance types"
FRAMEWORKS = {
    "djl-lmi": "LMI",
    "vllm": "VLLM",
    "huggingface-vllm": "VLLM",
}  # AIRecommendationInferenceFramework
WORKLOAD_NAME_MAX = 63
IR_JOB_SECONDS = 7200  # Inference Recommender's own default for an Advanced job
IR_PHASE_SECONDS = 120
MEASURE_SECONDS = 600  # how long the aiperf workload runs
# The package a run finds, for validation: the longest version there is, so the job's name as the
# run renders it is judged at its longest (botocore's max length and pattern).
STAND_IN_VERSION = str(2**31 - 1)
STAND_IN_PACKAGE = f"arn:aws:sagemaker:us-east-1:123456789012:model-package/stand-in/{STAND_IN_VERSION}"


@dataclass(frozen=True)
class ResolvedRecommendation:
    """One endpoint with `slo:` in one environment, and the LLM it serves (if it serves one)."""

    endpoint: str
    slo: SloSpec
    candidates: tuple[str, ...]
    llm: LlmSpec | None
    model_package: str | None  # the environment's pin (classic): else the group's newest approved
    names: Names

    @property
    def kind(self) -> str:
        return "llm" if self.llm is not None else "classic"

    @property
    def digest(self) -> str:
        spec = {
            # what is measured, not what starts the measuring: turning on_registration on or off
            # renames no job
            "slo": self.slo.model_dump(mode="json", exclude={"on_registration"}),
            "candidates": list(self.candidates),
            "llm": None if self.llm is None else self.llm.model_dump(mode="json"),
            "model_package": self.model_package,
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    @property
    def finds_package(self) -> bool:
        """A classic model served unpinned: what is measured (the group's newest approved package)
        and so the job's name are known to the run only."""
        return self.llm is None and self.model_package is None

    @property
    def on_registration(self) -> bool:
        """Measured again whenever a version is approved in the group (an EventBridge rule starts the
        pipeline with the approval event; the package it names is the one measured)."""
        return self.slo.on_registration and self.finds_package

    def job_name(self, version: str | None = None) -> str:
        """The job's name: from the spec alone (an LLM's weights, a pinned package), or with the
        `version` of the package the run found ('{}' gives States.Format's template)."""
        if not self.finds_package:
            return self.names.recommendation_job(self.endpoint, self.digest)
        if version is None:
            raise ValueError(f"endpoint '{self.endpoint}': its job's name needs the package version found")
        return self.names.recommendation_job(self.endpoint, self.digest, version)

    @property
    def job_label(self) -> str:
        """The job's name as a reader sees it before the run (comments, docs)."""
        return self.job_name("<version>") if self.finds_package else self.job_name()

    @property
    def workload_name(self) -> str:
        """Lowercase letters and digits only: DeleteAIWorkloadConfig lowercases the name it looks up
        (aws-cdk-lib's CfnAIWorkloadConfig docs), and a changed workload is a new resource (the
        hash), since CloudFormation cannot replace a resource that keeps its custom name."""
        suffix = hashlib.sha256(workload_spec(self).encode()).hexdigest()[:12]
        stem = re.sub(r"[^a-z0-9]", "", f"{self.names.prefix}{self.endpoint}".lower())
        return stem[: WORKLOAD_NAME_MAX - len(suffix)] + suffix

    @property
    def state_machine(self) -> str:
        return self.names.recommendation_state_machine(self.endpoint)

    def output_uri(self, bucket: str) -> str:
        return f"s3://{bucket}/recommendations/{self.endpoint}/{self.job_name()}/"


def _llm_of(ep: EndpointSpec) -> LlmSpec | None:
    """The endpoint's own llm, else its first component's (the target is the endpoint's)."""
    if ep.llm is not None:
        return ep.llm
    return next((c.llm for c in ep.components.values() if c.llm is not None), None)


def resolve_recommendations(
    names: Names, endpoints: Mapping[str, EndpointSpec]
) -> Iterator[ResolvedRecommendation]:
    """Every endpoint this environment deploys with slo: and candidates to measure (the job deploys
    the candidates itself, never the endpoint; it measures the model the environment serves)."""
    for name, ep in endpoints.items():
        if not ep.deploy or ep.slo is None or not ep.slo_candidates:
            continue
        yield ResolvedRecommendation(name, ep.slo, ep.slo_candidates, _llm_of(ep), ep.model_package, names)


def workload_spec(r: ResolvedRecommendation) -> str:
    """WorkloadSpec.Inline: the benchmark the service runs (its schema asks for a `benchmark` whose
    `type` is 'aiperf'); the parameters are aiperf's own option names."""
    slo = r.slo
    params: dict[str, Any] = {"benchmark_duration": MEASURE_SECONDS}
    if slo.requests_per_second is not None:
        params["request_rate"] = slo.requests_per_second
    else:
        params["concurrency"] = 1  # one user: the per-user figures the target names
    if r.llm is not None:
        params.update(endpoint_type="chat", streaming=True)
        if slo.tokens is not None:
            params["synthetic_input_tokens_mean"] = slo.tokens.input
            params["output_tokens_mean"] = slo.tokens.output
    return json.dumps({"benchmark": {"type": "aiperf", "parameters": params}}, sort_keys=True)


def workload_request(r: ResolvedRecommendation, deployment: Deployment) -> dict[str, Any]:
    """CreateAIWorkloadConfig (the CloudFormation resource's properties are the same shapes)."""
    request: dict[str, Any] = {
        "AIWorkloadConfigName": r.workload_name,
        "AIWorkloadConfigs": {"WorkloadSpec": {"Inline": workload_spec(r)}},
    }
    if deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in deployment.tags]
    return request


def ai_candidates(r: ResolvedRecommendation) -> list[str]:
    """The candidates an AI recommendation job can measure (botocore's enum; at most three)."""
    allowed = set(enum_values(AI_TYPES))
    return [t for t in r.candidates if t in allowed][:AI_MAX_TYPES]


def _constraints(slo: SloSpec) -> list[dict[str, str]]:
    metrics = []
    if slo.ttft_ms is not None:
        metrics.append("ttft-ms")
    if slo.tokens_per_second is not None or slo.requests_per_second is not None:
        metrics.append("throughput")
    metrics.append("cost")  # of the configurations that meet the rest, the cheapest
    return [{"Metric": m} for m in metrics]


def ai_recommendation_request(
    r: ResolvedRecommendation, deployment: Deployment, *, workload_arn: str, mlflow_arn: str | None = None
) -> dict[str, Any]:
    """CreateAIRecommendationJob for an LLM endpoint's target."""
    assert r.llm is not None
    output: dict[str, Any] = {"S3OutputLocation": r.output_uri(deployment.bucket)}
    if mlflow_arn is not None:
        output["MlflowConfig"] = {
            "MlflowResourceArn": mlflow_arn,
            "MlflowExperimentName": r.names.mlflow_experiment(f"recommend-{r.endpoint}"),
            "MlflowRunName": r.job_name(),
        }
    request: dict[str, Any] = {
        "AIRecommendationJobName": r.job_name(),
        "ModelSource": {"S3": {"S3Uri": weights_location(r.llm, deployment.bucket)}},
        "OutputConfig": output,
        "AIWorkloadConfigIdentifier": workload_arn,
        "PerformanceTarget": {"Constraints": _constraints(r.slo)},
        "RoleArn": deployment.role_arn,
        "ComputeSpec": {"InstanceTypes": ai_candidates(r)},
    }
    framework = FRAMEWORKS.get(r.llm.container)
    if framework is not None:
        request["InferenceSpecification"] = {"Framework": framework}
    if deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in deployment.tags]
    return request


def traffic_pattern(slo: SloSpec) -> dict[str, Any]:
    """Users ramped in two phases to the rate the target names (Inference Recommender's users each
    send requests back to back; one user per 10 requests/s at the target's latency is a start)."""
    users = max(1, math.ceil((slo.requests_per_second or 10) / 10))
    return {
        "TrafficType": "PHASES",
        "Phases": [
            {"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": IR_PHASE_SECONDS},
            {"InitialNumberOfUsers": users, "SpawnRate": users, "DurationInSeconds": IR_PHASE_SECONDS},
        ],
    }


def stopping_conditions(slo: SloSpec) -> dict[str, Any]:
    """The latency threshold (the API takes one: p95 when given, else p99) and the request rate, as
    invocations per minute, past which a candidate's load test stops."""
    out: dict[str, Any] = {}
    if slo.requests_per_second is not None:
        out["MaxInvocations"] = math.ceil(slo.requests_per_second * 60)
    for label, value in (("P95", slo.p95_ms), ("P99", slo.p99_ms)):
        if value is not None:
            out["ModelLatencyThresholds"] = [{"Percentile": label, "ValueInMilliseconds": math.ceil(value)}]
            break
    return out


def inference_recommendations_request(r: ResolvedRecommendation, deployment: Deployment) -> dict[str, Any]:
    """CreateInferenceRecommendationsJob (Advanced) for a classic endpoint's target; the model
    package is the environment's pin, else one the pipeline finds at run time (ModelPackageVersionArn
    and the job's name then come from the run: see recommend_states; stand-ins here)."""
    request: dict[str, Any] = {
        "JobName": r.job_name(STAND_IN_VERSION if r.finds_package else None),
        "JobType": "Advanced",
        "RoleArn": deployment.role_arn,
        "JobDescription": f"sagestack: {r.endpoint}'s instance types against its slo",
        "InputConfig": {
            "ModelPackageVersionArn": r.model_package or STAND_IN_PACKAGE,
            "JobDurationInSeconds": IR_JOB_SECONDS,
            "TrafficPattern": traffic_pattern(r.slo),
            "ResourceLimit": {"MaxNumberOfTests": len(r.candidates), "MaxParallelOfTests": 1},
            "EndpointConfigurations": [{"InstanceType": t} for t in r.candidates],
            "VolumeKmsKeyId": deployment.kms_key_id,
        },
        "OutputConfig": {"KmsKeyId": deployment.kms_key_id},
    }
    stopping = stopping_conditions(r.slo)
    if stopping:
        request["StoppingConditions"] = stopping
    if deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in deployment.tags]
    return request


def stand_in_workload_arn(r: ResolvedRecommendation, deployment: Deployment) -> str:
    return f"arn:aws:sagemaker:{deployment.region}:{deployment.account}:ai-workload-config/{r.workload_name}"


def validate_recommendation(
    r: ResolvedRecommendation, deployment: Deployment, *, mlflow_arn: str | None
) -> None:
    """Every request the pipeline sends, rendered with stand-ins and judged by botocore's model."""
    validate_request("CreateAIWorkloadConfig", workload_request(r, deployment))
    if r.llm is not None:
        if not ai_candidates(r):
            raise ValueError(
                f"endpoint '{r.endpoint}': slo candidates {', '.join(r.candidates)}: none is an instance "
                f"type an AI recommendation job measures (botocore's {AI_TYPES}: GPU types such as "
                "ml.g5.2xlarge, ml.g6e.xlarge, ml.p5.48xlarge)"
            )
        validate_request(
            "CreateAIRecommendationJob",
            ai_recommendation_request(
                r, deployment, workload_arn=stand_in_workload_arn(r, deployment), mlflow_arn=mlflow_arn
            ),
        )
    else:
        validate_request(
            "CreateInferenceRecommendationsJob", inference_recommendations_request(r, deployment)
        )
