"""Rules about an endpoint's instance pools (several instance types in priority order), its
capacity reservation and its shadow variant."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.core.types import arn_region

_INTERCHANGEABLE = {"CPU", "NVIDIA GPU"}


def accelerator_group(itype: str) -> str:
    """What a model built for `itype` needs of another type: the same kind of accelerator."""
    try:
        acc = lookup(itype).accelerator
    except KeyError:
        return "unknown"
    if acc is None:
        return "CPU"
    if acc.kind == "unknown":
        return "unknown"
    if acc.kind == "nvidia":
        return "NVIDIA GPU"
    if acc.model == "Inferentia":
        return "Inferentia (Inf1)"
    return "Inferentia2 / Trainium (Neuron)"


@rule(
    "endpoint-provision-timeout",
    "error",
    "provision_timeout is given only with two or more instance types",
    why=(
        "VariantInstanceProvisionTimeoutInSeconds is how long SageMaker tries one instance pool before "
        "the next; with one instance type there is no next pool and the setting means nothing."
    ),
    fix="Give instance_type as a list of two or more types, or remove provision_timeout.",
)
def endpoint_provision_timeout(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.provision_timeout is not None and len(ep.instance_type or ()) < 2:
            yield Finding(
                ("endpoints", name, "provision_timeout"),
                "provision_timeout chooses when SageMaker moves to the next instance pool; this endpoint has "
                f"{len(ep.instance_type or ())} instance type: list two or more, or remove it",
            )


@rule(
    "endpoint-pool-accelerators",
    "error",
    "an endpoint's instance pools are all Neuron (Inferentia2 / Trainium), all Inf1, or none",
    why=(
        "SageMaker places a variant on whichever pool has capacity, with the same model and container: "
        "Neuron images and Neuron-compiled models run only on Neuron devices, and CUDA or CPU images not "
        "on Inferentia or Trainium, so a pool of another kind fails only when SageMaker falls back to it. "
        "(A CPU and a GPU type may share a PyTorch model: the CUDA build runs on CPU; an LLM container's "
        "needs are llm-container-instance's.)"
    ),
    fix="Keep every instance type of the list on the same accelerator as the first (e.g. "
    "[ml.g5.2xlarge, ml.g6.2xlarge], or [ml.inf2.xlarge, ml.trn1.2xlarge]).",
)
def endpoint_pool_accelerators(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        types = ep.instance_type or []
        if len(types) < 2:
            continue
        first = accelerator_group(types[0])
        for i, itype in enumerate(types[1:], start=1):
            group = accelerator_group(itype)
            if "unknown" not in (group, first) and group != first and {group, first} != _INTERCHANGEABLE:
                yield Finding(
                    ("endpoints", name, "instance_type", i),
                    f"{itype} is {group}, but the first pool {types[0]} is {first}: SageMaker would serve the "
                    f"same model and container on both; list only {first} types",
                )


@rule(
    "endpoint-capacity-reservation",
    "error",
    "a capacity reservation is for an instance endpoint in the training plan's region",
    why=(
        "CapacityReservationConfig reserves instances of a production variant from a training plan; a "
        "serverless endpoint has no instances, and a plan is regional."
    ),
    fix="Use capacity_reservation on an instance_type endpoint, with a training plan of the project's region.",
)
def endpoint_capacity_reservation(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        arn = ep.capacity_reservation
        if arn is None:
            continue
        path = ("endpoints", name, "capacity_reservation")
        if ep.serverless is not None or ep.primary_instance_type is None:
            yield Finding(path, "a capacity reservation holds instances; a serverless endpoint has none")
        region = arn_region(arn)
        if region != ctx.spec.region:
            yield Finding(
                path,
                f"the training plan is in {region} but the endpoint is deployed in {ctx.spec.region}: reserve "
                f"capacity in {ctx.spec.region}",
            )


@rule(
    "endpoint-shadow-region",
    "error",
    "a shadow variant's model package lives in the endpoint's region",
    why="A model package is regional; a shadow variant, like production, serves only a package of its region.",
    fix="Register (copy) the candidate in the project's region and pin that package as the shadow.",
)
def endpoint_shadow_region(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.shadow is None:
            continue
        region = arn_region(ep.shadow.model_package)
        if region != ctx.spec.region:
            yield Finding(
                ("endpoints", name, "shadow", "model_package"),
                f"the candidate package is in {region} but the endpoint is in {ctx.spec.region}: register it "
                f"in {ctx.spec.region} and pin that one",
            )
