"""An LLM's optimization job (`llm.optimize`), resolved for one environment: the CreateOptimizationJob
request that quantizes, compiles, shards or adds speculative decoding to the weights, and the
CreateModelPackage request that registers what it writes for review — rendered from the spec and a
Deployment (tokens in the template, stand-ins when validating against botocore's model).

The job's name is a hash of the llm: section (optimize included) and the instance type it is
optimized for, so an unchanged spec starts no second job: the pipeline follows the one that exists.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sagestack.core.catalog.service_model import enum_values, validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.layout import S3Layout
from sagestack.core.model import VpcSpec
from sagestack.core.names import Names
from sagestack.llm.environment import container_environment
from sagestack.llm.hosting import weights_location
from sagestack.llm.images import llm_image_uri
from sagestack.llm.models import LlmSpec, OptimizeSpec
from sagestack.llm.sizing import tensor_parallel_degree

DEPLOYMENT_TYPES = "OptimizationJobDeploymentInstanceType"  # botocore's enum of what a job targets
CONTENT_TYPES = ["application/json"]


# The llm: fields added since optimization jobs were first named: each enters the hash only when set,
# and kv_cache_headroom (whose default went from 0.2 to the family's own) as it was then, so a spec
# that sets none of them keeps its job's name.
ADDED_SINCE_NAMED = ("num_layers", "num_kv_heads", "head_dim", "kv_bytes_per_token", "kv_cache_dtype")
HEADROOM_WHEN_NAMED = 0.2


def published_fields(llm: LlmSpec) -> dict[str, Any]:
    """The llm: section as the job's hash reads it."""
    # weights.kms_key decrypts the weights, it does not change them: not part of the job's identity
    data = llm.model_dump(mode="json", exclude={"weights": {"kms_key"}})
    for name in ADDED_SINCE_NAMED:
        if data.get(name) is None:
            data.pop(name, None)
    if data.get("kv_cache_headroom") is None:
        data["kv_cache_headroom"] = HEADROOM_WHEN_NAMED
    return data


@dataclass(frozen=True)
class ResolvedOptimization:
    """One LLM with `optimize:` — an endpoint's own llm, or one inference component's."""

    endpoint: str
    component: str | None
    llm: LlmSpec
    instance_types: tuple[str, ...]  # the endpoint's pools: the package supports them all
    accelerators: int | None  # a component's devices per copy
    vpc: VpcSpec | None
    names: Names

    @property
    def optimize(self) -> OptimizeSpec:
        assert self.llm.optimize is not None
        return self.llm.optimize

    @property
    def key(self) -> str:
        """In names: the endpoint, or '<endpoint>-<component>'."""
        return self.endpoint if self.component is None else f"{self.endpoint}-{self.component}"

    @property
    def label(self) -> str:
        """As the user names it: 'chat' or 'chat/chat'."""
        return self.endpoint if self.component is None else f"{self.endpoint}/{self.component}"

    @property
    def instance_type(self) -> str:
        """DeploymentInstanceType: optimize.instance_type, else the endpoint's first pool type."""
        return self.optimize.instance_type or self.instance_types[0]

    @property
    def digest(self) -> str:
        spec = {"llm": published_fields(self.llm), "instance_type": self.instance_type}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

    @property
    def job_name(self) -> str:
        return self.names.optimization_job(self.key, self.digest)

    @property
    def state_machine(self) -> str:
        return self.names.optimization_state_machine(self.key)

    def weights_uri(self, bucket: str) -> str:
        return weights_location(self.llm, bucket)

    def output_uri(self, bucket: str) -> str:
        return S3Layout(bucket).optimized(self.endpoint, self.job_name)

    def served_spec(self) -> LlmSpec:
        """The llm as the optimized model serves it: a quantization the job applied is loaded so."""
        q = self.optimize.quantization
        return self.llm.model_copy(update={"quantization": q}) if q else self.llm


class HostsLlm(Protocol):
    """What an LLM is optimized inside: an `endpoints:` entry (or one of its components), read by
    shape so that llm/ stays below endpoints/ (endpoints.models.EndpointSpec is one)."""

    @property
    def llm(self) -> LlmSpec | None: ...
    @property
    def accelerators(self) -> int | None: ...


class HostsLlms(Protocol):
    @property
    def deploy(self) -> bool: ...
    @property
    def instance_type(self) -> Any: ...  # the pools, in priority order (None: serverless)
    @property
    def llm(self) -> LlmSpec | None: ...
    @property
    def vpc(self) -> VpcSpec | None: ...
    @property
    def components(self) -> Mapping[str, HostsLlm]: ...


def resolve_optimizations(names: Names, endpoints: Mapping[str, HostsLlms]) -> Iterator[ResolvedOptimization]:
    """Every llm: with optimize: of the endpoints the environment deploys (and their components)."""
    for name, ep in endpoints.items():
        types = tuple(ep.instance_type or ())
        if not ep.deploy or not types:
            continue  # no pools (serverless, or unset): nothing to optimize for, a rule says so
        if ep.llm is not None and ep.llm.optimize is not None:
            yield ResolvedOptimization(name, None, ep.llm, types, None, ep.vpc, names)
        for cname, c in ep.components.items():
            if c.llm is not None and c.llm.optimize is not None:
                yield ResolvedOptimization(name, cname, c.llm, types, c.accelerators, ep.vpc, names)


def _configs(o: ResolvedOptimization) -> list[dict[str, Any]]:
    """One OptimizationConfigs entry per technique asked, in the API's order."""
    opt = o.optimize
    configs: list[dict[str, Any]] = []
    if opt.quantization:
        configs.append(
            {"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": opt.quantization}}}
        )
    if opt.compilation:
        configs.append({"ModelCompilationConfig": {}})
    if opt.sharding:
        tp = tensor_parallel_degree(o.llm, o.instance_type, o.accelerators)
        configs.append(
            {"ModelShardingConfig": {"OverrideEnvironment": {"OPTION_TENSOR_PARALLEL_DEGREE": str(tp)}}}
        )
    if opt.speculative_decoding:
        configs.append({"ModelSpeculativeDecodingConfig": {"Technique": opt.speculative_decoding}})
    return configs


def optimization_request(o: ResolvedOptimization, deployment: Deployment) -> dict[str, Any]:
    """CreateOptimizationJob for `o` (values only a deployment knows from `deployment`)."""
    opt = o.optimize
    environment = {
        **container_environment(o.llm, instance_type=o.instance_type, accelerators=o.accelerators),
        **opt.environment,
    }
    request: dict[str, Any] = {
        "OptimizationJobName": o.job_name,
        "RoleArn": deployment.role_arn,
        "ModelSource": {"S3": {"S3Uri": o.weights_uri(deployment.bucket)}},
        "DeploymentInstanceType": o.instance_type,
        "OptimizationEnvironment": environment,
        "OptimizationConfigs": _configs(o),
        "OutputConfig": {
            "S3OutputLocation": o.output_uri(deployment.bucket),
            "KmsKeyId": deployment.kms_key_id,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": opt.max_runtime},
    }
    if o.vpc is not None:
        request["VpcConfig"] = {
            "SecurityGroupIds": list(o.vpc.security_groups),
            "Subnets": list(o.vpc.subnets),
        }
    if deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in deployment.tags]
    return request


def package_request(
    o: ResolvedOptimization, deployment: Deployment, *, env: str, group: str
) -> dict[str, Any]:
    """CreateModelPackage of what the job wrote: the family's image, the output as an uncompressed
    S3 prefix, the container environment the optimized model is served with, for review."""
    served = o.served_spec()
    container = {
        "Image": llm_image_uri(served, region=deployment.region, instance_type=o.instance_type),
        "ModelDataSource": {
            "S3DataSource": {
                "S3Uri": o.output_uri(deployment.bucket),
                "S3DataType": "S3Prefix",
                "CompressionType": "None",
            }
        },
        "Environment": container_environment(
            served, instance_type=o.instance_type, accelerators=o.accelerators
        ),
    }
    techniques = [k for k, v in _asked(o.optimize).items() if v]
    request: dict[str, Any] = {
        # Idempotent per job: a rerun that follows the existing job registers its output once
        # (ClientToken: 36 characters at most, so the job name's hash).
        "ClientToken": hashlib.md5(f"{group}/{o.job_name}".encode(), usedforsecurity=False).hexdigest(),
        "ModelPackageGroupName": group,
        "ModelPackageDescription": f"sagestack {env}: LLM for endpoint '{o.label}', optimized "
        f"({', '.join(techniques)}) for {o.instance_type}",
        "ModelApprovalStatus": "PendingManualApproval",
        "InferenceSpecification": {
            "Containers": [container],
            "SupportedContentTypes": CONTENT_TYPES,
            "SupportedResponseMIMETypes": CONTENT_TYPES,
            "SupportedRealtimeInferenceInstanceTypes": list(o.instance_types),
        },
        "CustomerMetadataProperties": {
            "sagestack:endpoint": o.label,
            "sagestack:environment": env,
            "sagestack:optimization-job": o.job_name,
            "sagestack:spec-hash": o.digest,
        },
    }
    if deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in deployment.tags]
    return request


def _asked(opt: OptimizeSpec) -> dict[str, bool]:
    return {
        f"quantization {opt.quantization}": bool(opt.quantization),
        "compilation": opt.compilation,
        "sharding": opt.sharding,
        f"speculative decoding {opt.speculative_decoding}": bool(opt.speculative_decoding),
    }


def deployment_type_problem(instance_type: str) -> str | None:
    """Why an optimization job cannot target `instance_type` (botocore's enum), or None."""
    allowed = enum_values(DEPLOYMENT_TYPES)
    if instance_type in allowed:
        return None
    families = sorted({t.rsplit(".", 1)[0] for t in allowed})
    return (
        f"{instance_type} is not an instance type optimization jobs target (CreateOptimizationJob's "
        f"DeploymentInstanceType takes {', '.join(families)} types)"
    )


def stand_in_requests(
    o: ResolvedOptimization, deployment: Deployment, *, env: str, group: str
) -> dict[str, dict[str, Any]]:
    """The job and the registration of its output, with concrete stand-ins."""
    return {
        "CreateOptimizationJob": optimization_request(o, deployment),
        "CreateModelPackage": package_request(o, deployment, env=env, group=group),
    }


def validate_optimization(o: ResolvedOptimization, deployment: Deployment, *, env: str, group: str) -> None:
    """RequestValidationError listing every problem botocore's model finds."""
    for operation, request in stand_in_requests(o, deployment, env=env, group=group).items():
        validate_request(operation, request)
