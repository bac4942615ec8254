"""Rules about an endpoint's performance target (`slo:`): its keys fit what the endpoint serves,
its candidates can run the model, and a batching delay does not already spend the latency."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.neo import cloud_target
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.endpoints.models import EndpointSpec, SloSpec


def _with_slo(ctx: RuleContext) -> Iterator[tuple[str, EndpointSpec, SloSpec]]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.slo is not None:
            yield name, ep, ep.slo


def serves_llm(ep: EndpointSpec) -> bool:
    return ep.llm is not None or any(c.llm is not None for c in ep.components.values())


@rule(
    "endpoint-slo-llm-keys",
    "error",
    "time to first token, tokens per second and a token profile are an LLM endpoint's targets",
    why=(
        "A model answered in one piece has no first token and no decode rate: the benchmark of a "
        "classic endpoint measures whole-request latency and requests per second, so an LLM key there "
        "is a target nothing measures (and a sign the wrong endpoint carries it)."
    ),
    fix="Use p95_ms / p99_ms / requests_per_second on this endpoint, or move the target to the LLM's.",
)
def endpoint_slo_llm_keys(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep, slo in _with_slo(ctx):
        if serves_llm(ep):
            continue
        for key in slo.llm_targets:
            yield Finding(
                ("endpoints", name, "slo", key),
                f"{key} is an LLM target, but '{name}' serves no llm: (it answers each request whole); "
                "use p95_ms, p99_ms or requests_per_second",
            )


@rule(
    "endpoint-slo-candidates",
    "error",
    "every candidate instance type of a target can run the model compiled for the endpoint",
    why=(
        "A model compiled by Neo for one device runs only on that family: measuring an ml_c5 artifact "
        "on an ml.m5 candidate fails to load, so the candidate is no candidate."
    ),
    fix="List candidates of the compile target's family (ml_c5 -> ml.c5.*), or compile for the other.",
)
def endpoint_slo_candidates(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep, slo in _with_slo(ctx):
        c = ep.compile
        target = cloud_target(c.target_device) if c is not None and c.target_device else None
        if target is None or not slo.candidates:
            continue
        for i, itype in enumerate(slo.candidates):
            if not itype.startswith(target.instance_prefix):
                yield Finding(
                    ("endpoints", name, "slo", "candidates", i),
                    f"{itype} cannot run the model compiled for {target.device} (it runs on "
                    f"{target.instance_prefix}* instances); list {target.instance_prefix}* candidates",
                )


@rule(
    "endpoint-slo-batching-delay",
    "warning",
    "a latency target leaves room for the batching delay",
    why=(
        "With batching, a request whose batch does not fill waits max_delay_ms before its forward "
        "pass (TorchServe's maxBatchDelay): at light load every request waits it, so a p95 or p99 "
        "target at or below the delay is missed whenever traffic is not heavy enough to fill batches."
    ),
    fix="Lower batching.max_delay_ms well below the latency target, or raise the target.",
)
def endpoint_slo_batching_delay(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep, slo in _with_slo(ctx):
        if ep.batching is None or ep.batching.max_delay_ms == 0:
            continue
        for key in ("p95_ms", "p99_ms"):
            target = getattr(slo, key)
            if target is not None and target <= ep.batching.max_delay_ms:
                yield Finding(
                    ("endpoints", name, "slo", key),
                    f"{key} {target:g} is not above batching.max_delay_ms {ep.batching.max_delay_ms}: a "
                    "request whose batch does not fill waits that long before its forward pass",
                )
