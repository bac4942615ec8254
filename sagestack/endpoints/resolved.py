"""Endpoints resolved for one environment: each endpoint's names, compile target, inference image
and supported instance types (ResolvedEndpoint) — what the ServingStack serves, what a pipeline
registers after training (or tuning) for it, and what the local commands use. A batch transform
whose model a pipeline registers (`model: {from: …}`) resolves to an ResolvedEndpoint too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from sagestack.core.catalog.images import SERVERLESS_INSTANCE_HINT, ImageLookupError
from sagestack.core.catalog.instances import instance_types_for
from sagestack.core.catalog.neo import NeoTarget, cloud_target, compiled_image_uri, normalize_version
from sagestack.core.names import Names
from sagestack.endpoints.models import EndpointSpec
from sagestack.foundation.inference_images import InferenceImageError, inference_image_uri
from sagestack.foundation.models import ImageSpec
from sagestack.llm.images import LlmImageError, llm_image_uri
from sagestack.training.models import JobSpec
from sagestack.transforms.models import TransformSpec
from sagestack.transforms.request import ResolvedTransform


class ServedSpec(Protocol):
    """What of the project spec an endpoint resolves against (project.models.ProjectSpec is one)."""

    @property
    def endpoints(self) -> Mapping[str, EndpointSpec]: ...
    @property
    def transforms(self) -> Mapping[str, TransformSpec]: ...
    @property
    def images(self) -> Mapping[str, ImageSpec]: ...
    @property
    def jobs(self) -> Mapping[str, JobSpec]: ...
    def job_of(self, source: str) -> str: ...


class ResolvedEnvironment(Protocol):
    """What of a resolved environment an endpoint resolves against: typed by shape, since the
    project layer above builds it (project.environment.ResolvedEnvironment is one)."""

    @property
    def spec(self) -> ServedSpec: ...
    @property
    def region(self) -> str: ...
    @property
    def names(self) -> Names: ...


@dataclass(frozen=True)
class ResolvedEndpoint:
    key: str
    spec: EndpointSpec
    endpoint_name: str  # <project>-<env>-<key>
    target: NeoTarget | None  # the compile target, when compiled for a cloud device
    image_uri: str  # the catalog's inference image (a compiled model's job reports its own)
    supported_instance_types: tuple[str, ...]

    compile_name_prefix: str  # Names.compilation_prefix: compilation jobs are '<prefix>-<md5>'
    # A batch transform's registration: the package lists transform instance types, and the
    # transform runs right after it is registered.
    transform: ResolvedTransform | None = None
    # The serving container's framework: "tensorflow" is the TensorFlow Serving container (a
    # SavedModel, its own content types, no SAGEMAKER_PROGRAM); anything else runs inference.py.
    framework: str = "pytorch"

    @property
    def source(self) -> str | None:
        return self.spec.model.from_ if self.spec.model else None

    @property
    def state_key(self) -> str:
        """The key in state names (an endpoint and a transform may share a key)."""
        return f"{self.key} (transform)" if self.transform else self.key


class EndpointResolutionError(ValueError):
    pass


def serving_image_key(plan_spec: ServedSpec, source: str, image: str | None) -> str:
    """The images: key whose inference container serves the model `source` trains: the endpoint's
    `image:` when given, else the training job's image."""
    return image or plan_spec.jobs[plan_spec.job_of(source)].image


def _inference_image(
    plan: ResolvedEnvironment, what: str, source: str, instance_type: str, image: str | None = None
) -> tuple[str, str]:
    """The DLC inference image (and its framework) serving the model `source` (a job or search)
    trains, on `instance_type`; `image` is the endpoint's own choice of DLC."""

    key = serving_image_key(plan.spec, source, image)
    spec = plan.spec.images.get(key)
    if spec is None:
        raise EndpointResolutionError(f"{what}: image '{key}' is not a key of images:")
    try:
        uri = inference_image_uri(spec, region=plan.region, instance_type=instance_type)
    except InferenceImageError as e:
        if e.dlc is None:
            raise EndpointResolutionError(
                f"{what}: image '{key}' is not a Deep Learning Container, so sagestack knows no "
                "inference image for it; add compile: (Neo reports the image) or serve a registered model_package"
            ) from None
        raise EndpointResolutionError(f"{what}: {e}") from None
    return uri, spec.dlc.framework if spec.dlc else "pytorch"


def resolve_endpoint(plan: ResolvedEnvironment, key: str) -> ResolvedEndpoint:
    """Names, image and instance types of one endpoint (EndpointResolutionError if no image fits)."""

    ep = plan.spec.endpoints[key]
    inference_image, framework = "", "pytorch"  # "": served only from a pinned package's own image
    if ep.model is not None and not (ep.compile and ep.compile.target_device):
        itype = ep.primary_instance_type or SERVERLESS_INSTANCE_HINT
        inference_image, framework = _inference_image(
            plan, f"endpoint '{key}'", ep.model.from_, itype, ep.image
        )
    resolved = resolved_endpoint(
        names=plan.names, key=key, spec=ep, region=plan.region, inference_image=inference_image
    )
    return replace(resolved, framework=framework) if framework != resolved.framework else resolved


def resolved_endpoint(
    *, names: Names, key: str, spec: EndpointSpec, region: str, inference_image: str = ""
) -> ResolvedEndpoint:
    """An endpoint's names, compile target, image and supported instance types (every pool type's
    family). A compiled model's image comes from the Neo catalog (the compilation job reports it
    too); an LLM's from its container family for the first pool type; an uncompiled one is served
    by `inference_image`."""

    c = spec.compile
    target = cloud_target(c.target_device) if c and c.target_device else None
    hosting = instance_types_for("hosting")
    if target is not None:
        prefix = target.instance_prefix
        supported = tuple(t for t in hosting if t.startswith(prefix))
    elif spec.instance_type:
        families = tuple(dict.fromkeys(t.rsplit(".", 1)[0] + "." for t in spec.instance_type))
        supported = tuple(t for t in hosting if t.startswith(families))
    else:
        supported = tuple(t for t in hosting if t.startswith("ml.m5."))
    image = inference_image
    if spec.llm is not None and spec.primary_instance_type is not None and not image:
        try:
            image = llm_image_uri(spec.llm, region=region, instance_type=spec.primary_instance_type)
        except LlmImageError as e:
            raise EndpointResolutionError(f"endpoint '{key}': {e}") from None
    if c is not None and target is not None:
        try:
            image = compiled_image_uri(
                c.framework, normalize_version(c.framework, c.framework_version or "", target), target, region
            )
        except ImageLookupError:
            image = ""  # the compilation job reports the image; without one the pipeline fails and says so
    return ResolvedEndpoint(
        key=key,
        spec=spec,
        endpoint_name=names.endpoint(key),
        compile_name_prefix=names.compilation_prefix(key),
        target=target,
        image_uri=image,
        supported_instance_types=supported,
    )


def endpoints_fed_by(plan: ResolvedEnvironment, source: str) -> list[ResolvedEndpoint]:
    """The endpoints whose model a job's (or tuning entry's) pipeline registers, then the batch
    transforms it registers a model for and runs."""
    return [
        resolve_endpoint(plan, k)
        for k, ep in plan.spec.endpoints.items()
        if ep.model and ep.model.from_ == source
    ] + [
        resolve_transform_registration(plan, k)
        for k, t in plan.spec.transforms.items()
        if t.model and t.model.from_ == source
    ]


def resolve_transform_registration(plan: ResolvedEnvironment, key: str) -> ResolvedEndpoint:
    """What a pipeline registers for a `model: {from: …}` transform: the model as trained, served by
    the job's DLC inference image for the first candidate type, for the transform's types."""
    t = plan.spec.transforms[key]
    assert t.model is not None
    image, framework = _inference_image(plan, f"transform '{key}'", t.model.from_, t.instance_type[0])
    return ResolvedEndpoint(
        framework=framework,
        key=key,
        spec=EndpointSpec.model_validate({"model": {"from": t.model.from_}}),
        endpoint_name=plan.names.transform_prefix(key),
        target=None,
        image_uri=image,
        supported_instance_types=tuple(t.instance_type),
        compile_name_prefix=plan.names.transform_prefix(key),
        transform=ResolvedTransform.of(plan.names, key, t),
    )
