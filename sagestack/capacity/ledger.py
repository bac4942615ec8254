"""The ledger capacity keeps: the quota book it checks against (the live account, read by
ops/account.py, or the environment's snapshot file config/envs/<env>.quotas.json, read with its
spec), a row per need, a shortfall and the message that says how to fix it (with the instance types
whose quota has room), the tally one pass adds to, and what capacity costs (on-demand prices from
the instance catalog, the spot estimate, an endpoint's month)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sagestack.core.catalog.instances import instance_type
from sagestack.core.catalog.quotas import QuotaUsage, quota_name
from sagestack.core.config import ENV_DIR

SPOT_SAVINGS = 0.70  # an assumption: SageMaker quotes "up to 90%"; spot prices are not published per type
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class QuotaValue:
    name: str
    code: str
    value: float


@dataclass
class QuotaBook:
    """Quota values and current usage of one account and region."""

    source: Literal["live", "snapshot", "none"]
    detail: str  # where the values come from, for the report
    values: dict[str, QuotaValue] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)

    def available(self, name: str) -> float | None:
        q = self.values.get(name)
        return None if q is None else q.value - self.usage.get(name, 0.0)

    def code(self, name: str) -> str | None:
        q = self.values.get(name)
        return q.code if q else None

    @classmethod
    def none(cls, why: str) -> QuotaBook:
        return cls("none", why)


def book_from_document(data: dict[str, Any], source: Literal["live", "snapshot"], detail: str) -> QuotaBook:
    values = {
        q["QuotaName"]: QuotaValue(q["QuotaName"], q["QuotaCode"], float(q["Value"]))
        for q in data.get("quotas", [])
    }
    usage = {k: float(v) for k, v in data.get("usage", {}).items()}
    return QuotaBook(source, detail, values, usage)


def snapshot_book(env: str, document: dict[str, Any] | None) -> QuotaBook | None:
    """The environment's quota snapshot (config/envs/<env>.quotas.json, read with its spec:
    `plan.files.quotas`), or None when it has none."""
    if document is None:
        return None
    taken = document.get("taken_at")
    detail = f"snapshot {ENV_DIR}/{env}.quotas.json" + (f" (taken {taken})" if taken else "")
    return book_from_document(document, "snapshot", detail)


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
            "cluster groups": "cluster groups",
            "aggregate": "the environment",
        }[self.kind]
        subject = f"{what} '{self.key}'" if self.kind != "aggregate" else what
        if self.kind == "cluster groups":  # groups on one type share its quota: key "a/x + b/y"
            subject = f"cluster groups {' and '.join(repr(k) for k in self.key.split(' + '))} together"
        needs = "need" if self.kind == "cluster groups" else "needs"
        fixes = []
        if free >= 1 and self.kind in ("job", "endpoint", "shadow", "transform", "cluster"):
            fixes.append(f"lower the count to {int(free)}")
        if free >= 1 and self.kind == "cluster groups":
            fixes.append(f"lower their counts to {int(free)} in all")
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
            f"{subject} {needs} {self.needed:g} of '{self.quota}' ({self.code}); the account allows "
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


def price_of(itype: str) -> float | None:
    """On-demand $/h of a type, None where the catalog does not know it."""
    try:
        return instance_type(itype).price_per_hour
    except (KeyError, ValueError):
        return None


def training_cost(itype: str, instance_hours: float) -> tuple[float | None, float | None, float | None]:
    """($/h, on-demand cost, spot estimate) of `instance_hours` on `itype`; None where the catalog
    has no price."""
    price = instance_type(itype).price_per_hour
    if price is None:
        return None, None, None
    on_demand = price * instance_hours
    return price, on_demand, on_demand * (1 - SPOT_SAVINGS)
