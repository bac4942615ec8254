"""Rules about measuring a performance target in the cloud (`sagestack run <endpoint> --recommend`):
the candidates an AI recommendation job can measure."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.service_model import enum_values
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.endpoints.recommend import AI_MAX_TYPES, AI_TYPES
from sagestack.endpoints.rules_slo import serves_llm


@rule(
    "endpoint-slo-cloud-candidates",
    "warning",
    "an LLM target's candidates are instance types an AI recommendation job measures (three at most)",
    why=(
        "CreateAIRecommendationJob takes up to three instance types from botocore's "
        "AIRecommendationInstanceType (NVIDIA GPU types: g5, g6, g6e, g7, p4d, p5 …): any other "
        "candidate is left out of the cloud measurement, and with none left there is nothing to measure."
    ),
    fix="List at most three GPU candidates in slo.candidates (or the endpoint's instance_type).",
)
def endpoint_slo_cloud_candidates(ctx: RuleContext) -> Iterator[Finding]:
    allowed = set(enum_values(AI_TYPES))
    for name, ep in ctx.spec.endpoints.items():
        if ep.slo is None or not serves_llm(ep):
            continue
        where = (
            ("endpoints", name, "slo", "candidates")
            if ep.slo.candidates
            else ("endpoints", name, "instance_type")
        )
        kept = 0
        for i, itype in enumerate(ep.slo_candidates):
            if itype not in allowed:
                yield Finding(
                    (*where, i),
                    f"{itype} is not an instance type an AI recommendation job measures (botocore's "
                    f"{AI_TYPES}); `--recommend` leaves it out",
                )
            elif kept == AI_MAX_TYPES:
                yield Finding(
                    (*where, i),
                    f"{itype}: an AI recommendation job measures {AI_MAX_TYPES} candidates at most; `--recommend` leaves it out",
                )
            else:
                kept += 1


@rule(
    "endpoint-slo-on-registration",
    "error",
    "a target measured on registration belongs to a classic model served from its group unpinned",
    why=(
        "slo.on_registration starts the recommendation pipeline when SageMaker approves a version in "
        "the environment's model package group, and the job measures that version. An LLM's job "
        "measures its weights in S3, and a pinned model_package is served whatever is approved next: "
        "no approval changes what either serves, so the rule would start jobs that measure nothing new."
    ),
    fix="Drop on_registration here (`sagestack run <endpoint> --recommend` measures on request), or "
    "set it only in the overlays of environments that serve the group's newest approved version.",
)
def endpoint_slo_on_registration(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.slo is None or not ep.slo.on_registration:
            continue
        if serves_llm(ep):
            yield Finding(
                ("endpoints", name, "slo", "on_registration"),
                f"'{name}' serves an llm: (its weights in S3), which no model package approval changes; "
                f"drop on_registration and measure with `sagestack run {name} --recommend`",
            )
        elif ep.model_package is not None:
            yield Finding(
                ("endpoints", name, "slo", "on_registration"),
                f"'{name}' serves the pinned model_package {ep.model_package}, which no approval "
                "changes; drop on_registration in this environment (set it in the overlays of those "
                "that serve the group's newest approved version) or unpin model_package",
            )
