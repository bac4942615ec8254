"""ModelRegistration: compile (optionally, with SageMaker Neo) and register a pipeline's trained
model for an endpoint — the steps a TrainingPipeline or TuningPipeline appends after it succeeds,
validated at synth with stand-ins and emitted with the deployment's values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sagestack.constructs import actions
from sagestack.constructs.job_pipeline import JobPipeline
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.prop_types import typed_fields
from sagestack.constructs.transform_pipeline import grant_transform_steps
from sagestack.core.deployment import Deployment
from sagestack.core.names import Names
from sagestack.core.states import PipelineSettings
from sagestack.endpoints.models import EndpointSpec
from sagestack.endpoints.request import ModelStepContext, validate_model_requests
from sagestack.endpoints.resolved import ResolvedEndpoint, resolved_endpoint
from sagestack.endpoints.states import append_model_steps


@typed_fields
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
    _plan: ResolvedEndpoint | None = field(default=None, compare=False)

    def plan(self, names: Names, region: str, source: str) -> ResolvedEndpoint:
        if self._plan is not None:
            return self._plan
        spec: dict[str, Any] = {"model": {"from": source}}
        if self.compile is not None:
            spec["compile"] = dict(self.compile)
        if self.instance_type:
            spec["instance_type"] = self.instance_type
        elif self.serverless:
            spec["serverless"] = {}
        return resolved_endpoint(
            names=names,
            key=self.endpoint,
            spec=EndpointSpec.model_validate(spec),
            region=region,
            inference_image=self.inference_image,
        )

    @staticmethod
    def from_endpoint_plan(plan: ResolvedEndpoint) -> ModelRegistration:
        """The spec path's resolved endpoint (sagestack.endpoints.resolved.resolve_endpoint)."""
        return ModelRegistration(endpoint=plan.key, _plan=plan)


def append_registrations(
    definition: dict[str, Any],
    settings: PipelineSettings,
    registrations: Sequence[ModelRegistration],
    *,
    source: str,
    names: Names,
    registry: ModelPackageGroupBase | None,
    deployment: Deployment,
    stand_ins: Deployment,
    lineage: tuple[tuple[str, str], ...] = (),
) -> tuple[dict[str, Any], list[ResolvedEndpoint]]:
    """Compile and register steps after a pipeline's 'Succeeded' state, for the model `source`
    (a job or search) trains; their requests validated with `stand_ins`, emitted with the
    deployment's values. Returns the definition and the endpoints it registers for."""

    endpoints = [r.plan(names, deployment.region, source) for r in registrations]
    if not endpoints:
        return definition, endpoints
    if registry is None:
        raise ValueError("registrations need a registry (a ModelPackageGroup)")

    def context(values: Deployment) -> ModelStepContext:
        return ModelStepContext(
            deployment=values, env=names.env, group_name=registry.group_name, lineage=lineage
        )

    for ep in endpoints:
        validate_model_requests(ep, context(stand_ins))
    return append_model_steps(definition, endpoints, context(deployment), settings), endpoints


def grant_model_steps(pipeline: JobPipeline, registry: ModelPackageGroupBase | None) -> None:
    """The pipeline's role may run this environment's compilation jobs and register versions."""
    assert registry is not None
    pipeline.grant_sagemaker(
        actions.COMPILATION_JOBS_RUN,
        "compilation-job",
        pipeline.names.compilation_job_pattern,
        "Compilation jobs whose names start with this environment's prefix (names are content-addressed, "
        "so only the prefix is known at synth).",
    )
    registry.grant_register(pipeline.role)


def grant_registration_steps(
    pipeline: JobPipeline, registry: ModelPackageGroupBase | None, plans: Sequence[ResolvedEndpoint]
) -> None:
    """Compile and register; and, when a batch transform follows a registration, run it."""

    grant_model_steps(pipeline, registry)
    if any(p.transform is not None for p in plans):
        grant_transform_steps(pipeline)
