"""Rules about the ways an endpoint serves — asynchronous, rolling updates, inference components,
Model Monitor: each combination AWS refuses (or silently ignores) is found before a deploy."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.instances import check_instance_type
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.core.types import arn_region
from sagestack.endpoints.components import copy_needs, instance_capacity, pack
from sagestack.endpoints.models import ComponentSpec, EndpointSpec


@rule(
    "endpoint-async",
    "error",
    "async endpoints run on an instance fleet serving one model",
    why=(
        "Asynchronous inference (AsyncInferenceConfig) queues requests for an instance fleet serving one "
        "model; serverless endpoints and inference components do not take it and CreateEndpointConfig fails."
    ),
    fix="Serve async from instance_type with model_package, or drop async:.",
)
def endpoint_async(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.async_ is None:
            continue
        path = ("endpoints", name, "async")
        if ep.serverless is not None:
            yield Finding(
                path, "serverless endpoints are real-time only; use instance_type for async inference"
            )
        if ep.components:
            yield Finding(
                path, "inference components serve real-time requests only; remove async or components"
            )


@rule(
    "endpoint-rollout",
    "error",
    "a rolling update needs an instance fleet",
    why=(
        "SageMaker's deployment guardrails exclude serverless endpoints from rolling updates (the "
        "update is refused), and Inf1 endpoints fall back to blue/green all at once with no bake time."
    ),
    fix="Use traffic: all_at_once there; roll instance fleets only.",
)
def endpoint_rollout(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.rollout.traffic != "rolling":
            continue
        path = ("endpoints", name, "rollout", "traffic")
        if ep.serverless is not None:
            yield Finding(
                path,
                "SageMaker does not roll serverless endpoints (a deployment-guardrails exclusion); use all_at_once",
            )
        if ep.primary_instance_type and ep.primary_instance_type.startswith("ml.inf1."):
            yield Finding(
                path,
                "Inf1 endpoints fall back to blue/green all at once (a deployment-guardrails exclusion); "
                "use all_at_once so the spec says what happens",
            )


@rule(
    "endpoint-components",
    "error",
    "inference components fit the instance type and own the endpoint's models",
    why=(
        "Inference components name their own models and the resources each copy needs; a copy "
        "larger than one instance is never placed (CreateInferenceComponent waits, then fails), "
        "and initial copies that need more instances than managed scaling's max stay pending."
    ),
    fix=(
        "Serve models only through components (no model/model_package/compile on the endpoint), ask "
        "for what one instance has, and let autoscaling.max hold the packing `sagestack plan` shows."
    ),
)
def endpoint_components(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if not ep.components:
            continue
        path = ("endpoints", name)
        for key in ("model", "model_package", "compile", "serverless"):
            if getattr(ep, key) is not None:
                yield Finding(
                    (*path, key),
                    f"an endpoint with components serves each component's model_package; remove {key}",
                )
        if ep.primary_instance_type is None:
            yield Finding(path, "inference components run on an instance fleet: give instance_type")
            continue
        per = instance_capacity(ep.primary_instance_type)
        for cname, c in ep.components.items():
            cpath = (*path, "components", cname)
            region = arn_region(c.model_package) if c.model_package else ctx.spec.region
            if region != ctx.spec.region:
                yield Finding(
                    (*cpath, "model_package"),
                    f"the package is in {region} but the endpoint is in {ctx.spec.region}",
                )
            if c.max_copies is not None and c.max_copies < c.copies:
                yield Finding((*cpath, "max_copies"), f"max_copies {c.max_copies} is below copies {c.copies}")
            yield from _min_copies(ep, cpath, c)
            yield from _copy_fits(ep, cpath, c)
        if per is None:
            continue
        packing = pack(ep)
        high = ep.autoscaling.max if ep.autoscaling else ep.initial_instance_count
        if not packing.unplaceable and packing.instances_needed > high:
            yield Finding(
                (*path, "components"),
                f"the initial copies need {packing.instances_needed} {ep.primary_instance_type} instances; managed "
                f"scaling allows at most {high}: raise autoscaling.max or lower copies",
            )


def _copy_fits(ep: EndpointSpec, cpath: tuple[str, ...], c: ComponentSpec) -> Iterator[Finding]:
    """One copy fits an instance of every pool type (SageMaker may place the fleet on any)."""
    need = copy_needs(c)
    for itype in ep.instance_type or ():
        per = instance_capacity(itype)
        if per is not None and not per.fits(need):
            yield Finding(
                cpath,
                f"one copy needs {need.cpu:g} CPU cores, {need.memory_mb:g} MB and {need.accelerators} "
                f"accelerator(s); {itype} has {per.cpu:g}, {per.memory_mb:g} MB and "
                f"{per.accelerators}: ask for less or choose a larger instance type",
            )


def _min_copies(ep: EndpointSpec, cpath: tuple[str, ...], c: ComponentSpec) -> Iterator[Finding]:
    """Scale to zero: the endpoint's instances go to zero only once every component's copies can."""
    if c.min_copies is not None:
        if c.max_copies is None:
            yield Finding((*cpath, "min_copies"), "min_copies bounds autoscaled copies: give max_copies too")
        elif c.min_copies > c.copies:
            yield Finding((*cpath, "min_copies"), f"min_copies {c.min_copies} is above copies {c.copies}")
    if ep.autoscaling is not None and ep.autoscaling.min == 0 and c.min_copies != 0:
        yield Finding(
            (*cpath, "min_copies"),
            "the endpoint scales to zero instances (autoscaling.min 0) only when every component scales "
            "to zero copies: give min_copies: 0 and max_copies",
        )


@rule(
    "endpoint-monitor",
    "error",
    "Model Monitor watches a captured, single-model instance endpoint",
    why=(
        "Model Monitor analyses the requests an endpoint captured; without "
        "data_capture it has nothing to read, and it monitors endpoints hosting "
        "one model on instances only. Its jobs run on processing instance types."
    ),
    fix="Add data_capture: {} and use a ProcessingInstanceType (e.g. ml.m5.xlarge).",
)
def endpoint_monitor(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        m = ep.monitor
        if m is None:
            continue
        path = ("endpoints", name, "monitor")
        if ep.data_capture is None:
            yield Finding(path, "Model Monitor reads the endpoint's captured requests: add data_capture: {}")
        if ep.components or ep.serverless is not None:
            yield Finding(path, "Model Monitor watches endpoints that host one model on instances")
        problem = check_instance_type(m.instance_type, "processing")
        if problem:
            yield Finding((*path, "instance_type"), problem)


@rule(
    "endpoint-shadow",
    "error",
    "a shadow variant runs beside a real-time fleet of one model, updated by blue/green",
    why=(
        "SageMaker refuses shadow variants on serverless and asynchronous endpoints and on Inf1 "
        "instances (shadow tests' exclusions); inference components name their own models, so there "
        "is no production model to shadow; and rolling updates exclude multi-variant endpoints "
        "(deployment guardrails' exclusions)."
    ),
    fix="Shadow an instance endpoint serving one model (model_package or llm), updated by canary, "
    "linear or all_at_once, on a type other than Inf1.",
)
def endpoint_shadow(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.shadow is None:
            continue
        path = ("endpoints", name, "shadow")
        kinds = (
            ("serverless", "serverless"),
            ("async_", "asynchronous"),
            ("components", "inference component"),
        )
        for key, what in kinds:
            if getattr(ep, key):
                yield Finding(path, f"SageMaker runs no shadow variant on {what} endpoints")
        shadow_type = ep.shadow.instance_type or ep.primary_instance_type or ""
        if shadow_type.startswith("ml.inf1.") or (ep.primary_instance_type or "").startswith("ml.inf1."):
            yield Finding(
                path, "SageMaker runs no shadow variant on Inf1 endpoints (a shadow tests exclusion)"
            )
        if ep.rollout.traffic == "rolling":
            yield Finding(
                ("endpoints", name, "rollout", "traffic"),
                "rolling updates exclude multi-variant endpoints, and a shadow makes two variants: use "
                "canary, linear or all_at_once",
            )
