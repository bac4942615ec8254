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
