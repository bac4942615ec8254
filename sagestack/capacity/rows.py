"""A row of a capacity report (one need against one quota), a shortfall and the message that says
how to fix it, and the instance types whose quota has room (the fix a shortfall offers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sagestack.capacity.book import QuotaBook
from sagestack.core.catalog.instances import instance_type
from sagestack.core.catalog.quotas import QuotaUsage, quota_name

Status = Literal["ok", "short", "unchecked"]


@dataclass
class Row:
    kind: Literal["job", "tuning", "endpoint", "shadow", "optimization", "transform", "cluster", "aggregate"]
    key: str
    instance_type: str
    count: int
    quota: str
    needed: float
    available: float | None
    status: Status
    chosen: bool
    price_per_hour: float | None = None  # per instance, on-demand
    cost_on_demand: float | None = None  # USD, bound (max_run) or per month for endpoints
    cost_spot: float | None = None
    cost_basis: str = ""
    note: str = ""


@dataclass(frozen=True)
class Shortfall:
    kind: str
    key: str
    quota: str
    code: str
    needed: float
    available: float
    value: float
    alternatives: tuple[str, ...] = ()
    others: tuple[tuple[str, float], ...] = ()  # an endpoint's other pools: (type, free), all short

    def message(self) -> str:
        free = max(0.0, self.available)
        what = {
            "job": "job",
            "tuning": "tuning entry",
            "endpoint": "endpoint",
            "shadow": "shadow variant of endpoint",
            "optimization": "optimization job of",
            "transform": "batch transform",
            "cluster": "cluster group",
            "aggregate": "the environment",
        }[self.kind]
        subject = f"{what} '{self.key}'" if self.kind != "aggregate" else what
        fixes = []
        if free >= 1 and self.kind in ("job", "endpoint", "shadow", "transform", "cluster"):
            fixes.append(f"lower the count to {int(free)}")
        if self.kind == "tuning" and free >= 1:
            fixes.append(f"lower max_parallel_jobs so that at most {int(free)} instances run at once")
        if self.alternatives:
            verb = {
                "job": "add a candidate",
                "endpoint": "add a pool",
                "optimization": "set optimize.instance_type to a type",
            }.get(self.kind, "use a candidate")
            fixes.append(f"{verb} with quota ({', '.join(self.alternatives)})")
        desired = self.value - self.available + self.needed
        fixes.append(
            "ask for more: aws service-quotas request-service-quota-increase --service-code sagemaker "
            f"--quota-code {self.code} --desired-value {desired:g}"
        )
        others = ", ".join(f"{t}: {max(0.0, f):g} free" for t, f in self.others)
        return (
            f"{subject} needs {self.needed:g} of '{self.quota}' ({self.code}); the account allows "
            f"{self.value:g} with {self.value - self.available:g} in use, so {free:g} are free"
            + (f"; its other pools are short too ({others})" if others else "")
            + ". To fix: "
            + "; or ".join(fixes)
        )


def shortfall_of(
    book: QuotaBook,
    kind: str,
    key: str,
    quota: str,
    needed: float,
    alternatives: tuple[str, ...] = (),
    others: tuple[tuple[str, float], ...] = (),
) -> Shortfall:
    """A short quota was checked, so the book has its value and code."""
    q = book.values[quota]
    available = book.available(quota)
    assert available is not None
    return Shortfall(kind, key, quota, q.code, needed, available, q.value, alternatives, others)


def types_with_quota(
    book: QuotaBook, usage: QuotaUsage, needed: float, *, like: str, exclude: list[str], most: int = 3
) -> tuple[str, ...]:
    """Instance types whose quota (same usage) has `needed` free, the ones with the same kind of
    accelerator as `like` first, cheapest first: candidates to add to the job."""
    suffix = quota_name("", usage).strip()
    wanted = instance_type(like).accelerator
    found = []
    for name, q in book.values.items():
        itype = name.removesuffix(" " + suffix)
        if itype == name or itype in exclude or q.value - book.usage.get(name, 0.0) < needed:
            continue
        try:
            it = instance_type(itype)
        except KeyError:
            continue
        same = (it.accelerator.kind if it.accelerator else None) == (wanted.kind if wanted else None)
        found.append((not same, it.price_per_hour if it.price_per_hour is not None else float("inf"), itype))
    return tuple(t for _, _, t in sorted(found)[:most])


def choose_first_with_room(candidates: list[Row]) -> int | None:
    """Mark the first candidate whose quota is not short as chosen; its index (None: all short)."""
    for i, row in enumerate(candidates):
        if row.status != "short":
            row.chosen = True
            return i
    return None


def status_of(available: float | None, needed: float) -> Status:
    if available is None:
        return "unchecked"
    return "ok" if available >= needed else "short"


@dataclass
class Tally:
    """What one pass over an environment has found so far (capacity/assess.py): rows, shortfalls,
    warnings, and the training that runs at once."""

    book: QuotaBook
    rows: list[Row] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    at_once: dict[str, float] = field(default_factory=dict)  # quota -> instances of jobs run on deploy
    training_at_once: float = 0.0
    largest_training: float = 0.0  # the largest job or search: the total must fit it alone

    def short(
        self, kind: str, key: str, quota: str, needed: float, alternatives: tuple[str, ...] = ()
    ) -> None:
        self.shortfalls.append(shortfall_of(self.book, kind, key, quota, needed, alternatives))
