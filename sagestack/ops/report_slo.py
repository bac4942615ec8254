"""`sagestack plan`'s performance targets: each endpoint's `slo:` — the target, its candidates with
the catalog's on-demand price (for an LLM, what memory bandwidth allows one user on each), which of
them the cloud's recommendation job measures, and the commands that measure them and show the
verdict. Offline: the spec and the catalog only; the verdict itself is `status` and `recommend`'s."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sagestack.capacity.ledger import price_of
from sagestack.endpoints.models import SloSpec
from sagestack.endpoints.recommend import ResolvedRecommendation, resolve_recommendations
from sagestack.endpoints.recommend_states import measured
from sagestack.endpoints.rules_slo import serves_llm
from sagestack.llm.slo import ceiling
from sagestack.ops.recommend import measure_command
from sagestack.project.environment import ResolvedEnvironment


@dataclass(frozen=True)
class SloCandidate:
    instance_type: str
    price_per_hour: float | None  # the catalog's on-demand figure; None where it has none
    measured: bool  # the job measures it (an AI recommendation job: botocore's GPU types, 3 at most)
    serves_now: bool  # the endpoint's first pool today
    max_tokens_per_second: float | None = None  # LLM: one user's decode rate, at most (bandwidth)
    min_ttft_ms: float | None = None  # LLM: the first token, at least (one read of the weights)


@dataclass(frozen=True)
class SloPlan:
    endpoint: str
    kind: str  # "classic" | "llm"
    deployed: bool  # in this environment: only then is there a pipeline that measures it
    target: str
    slo: SloSpec
    candidates: tuple[SloCandidate, ...] = ()
    job: str | None = None  # the recommendation job's name (content-addressed: a changed target, a new job)
    measure: str | None = None
    show: str | None = None


def target_text(slo: SloSpec) -> str:
    """'p95 ≤ 20 ms, p99 ≤ 50 ms at 100 requests/s per instance'; an LLM's per user at its profile."""
    parts = [
        f"{label} ≤ {value:g} ms" for label, value in (("p95", slo.p95_ms), ("p99", slo.p99_ms)) if value
    ]
    if slo.ttft_ms is not None:
        parts.append(f"TTFT ≤ {slo.ttft_ms:g} ms")
    if slo.tokens_per_second is not None:
        parts.append(f"≥ {slo.tokens_per_second:g} tokens/s per user")
    text = ", ".join(parts)
    if slo.requests_per_second is not None:
        rate = f"{slo.requests_per_second:g} requests/s per instance"
        text = f"{text} at {rate}" if text else rate
    if slo.tokens is not None:
        text += f", {slo.tokens.input} tokens in, {slo.tokens.output} out"
    return text


def _candidate(r: ResolvedRecommendation, itype: str, taken: list[str], serving: str | None) -> SloCandidate:
    bound = ceiling(r.llm, itype) if r.llm is not None else None
    return SloCandidate(
        itype,
        price_of(itype),
        itype in taken,
        itype == serving,
        None if bound is None else round(bound.tokens_per_second, 1),
        None if bound is None else round(bound.first_token_ms, 2),
    )


def slo_plans(plan: ResolvedEnvironment) -> list[SloPlan]:
    """Each endpoint with slo: in the spec's order; one this environment does not deploy, or with no
    candidate to measure, is named with its target only."""
    env, endpoints = plan.env, plan.spec.endpoints
    resolved = {r.endpoint: r for r in resolve_recommendations(plan.names, endpoints)}
    out = []
    for key, ep in endpoints.items():
        if ep.slo is None:
            continue
        kind = "llm" if serves_llm(ep) else "classic"
        r = resolved.get(key)
        if r is None:
            out.append(SloPlan(key, kind, ep.deploy, target_text(ep.slo), ep.slo))
            continue
        taken, serving = measured(r), (ep.instance_type or [None])[0]
        out.append(
            SloPlan(
                key,
                r.kind,
                True,
                target_text(ep.slo),
                ep.slo,
                tuple(_candidate(r, t, taken, serving) for t in r.candidates),
                r.job_label,
                measure_command(key, env),
                f"sagestack recommend {key} --env {env}",
            )
        )
    return out


def slo_notes(p: SloPlan, env: str) -> list[str]:
    """What `plan` says under the table for one endpoint: its target, why a candidate is not
    measured, and the commands (quoted: kept whole, pasted they run)."""
    lines = [f"{p.endpoint}: target {p.target}"]
    if not p.deployed:
        return [*lines, f"{p.endpoint}: not deployed in {env} (deploy: false): measured where it is deployed"]
    if not p.candidates:
        return [*lines, f"{p.endpoint}: no candidate to measure: give slo.candidates or instance_type"]
    unpriced = [c.instance_type for c in p.candidates if c.price_per_hour is None]
    if unpriced:
        lines.append(
            f"{p.endpoint}: n/a: no catalog price for {', '.join(unpriced)}; the job measures its cost"
        )
    skipped = [c.instance_type for c in p.candidates if not c.measured]
    if skipped:
        lines.append(
            f"{p.endpoint}: {', '.join(skipped)} not measured: an AI recommendation job measures "
            "botocore's GPU types, three at most"
        )
    lines.append(f"{p.endpoint}: measure with `{p.measure}`, then `{p.show}` shows the verdict")
    if p.slo.on_registration:
        lines.append(f"{p.endpoint}: measured again on each approved version (slo.on_registration)")
    return lines


def slo_json(plans: list[SloPlan]) -> dict[str, Any]:
    """What the section shows, as data."""
    return {
        p.endpoint: {
            "kind": p.kind,
            "deployed": p.deployed,
            "target": p.target,
            "slo": p.slo.model_dump(mode="json", exclude_none=True),
            "candidates": [asdict(c) for c in p.candidates],
            "job": p.job,
            "measure": p.measure,
            "show": p.show,
        }
        for p in plans
    }
