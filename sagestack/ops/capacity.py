"""Quotas and cost of an environment's plan: which instance candidate each job gets, what each
job, search and endpoint needs at once against what the account allows, and what it may cost.

Needs are summed over what runs at once: every job started on deploy (run_on_deploy) shares the
account with the others started then and with the endpoints, which always run; a search needs
max_parallel_jobs x instance_count; an endpoint its autoscaling maximum. On-demand and spot
quotas are separate names; the aggregate "Number of instances across all training jobs" is
checked too. Pure: the quota values come in a QuotaBook (live, or a snapshot file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sagestack.clusters.models import ClusterSpec
from sagestack.core.catalog.instances import instance_type
from sagestack.core.catalog.quotas import TRAINING_INSTANCES_TOTAL, QuotaUsage, quota_name, training_usage
from sagestack.endpoints.components import pack
from sagestack.endpoints.models import EndpointSpec
from sagestack.ops.quota_book import QuotaBook
from sagestack.project.environment import ResolvedEnvironment
from sagestack.training.models import JobSpec
from sagestack.transforms.models import TransformSpec
from sagestack.tuning.models import TuningSpec

SPOT_SAVINGS = 0.70  # an assumption: SageMaker quotes "up to 90%"; spot prices are not published per type
HOURS_PER_MONTH = 730
Status = Literal["ok", "short", "unchecked"]


@dataclass
class Row:
    kind: Literal["job", "tuning", "endpoint", "transform", "cluster", "aggregate"]
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

    def message(self) -> str:
        free = max(0.0, self.available)
        what = {
            "job": "job",
            "tuning": "tuning entry",
            "endpoint": "endpoint",
            "transform": "batch transform",
            "cluster": "cluster group",
            "aggregate": "the environment",
        }[self.kind]
        subject = f"{what} '{self.key}'" if self.kind != "aggregate" else what
        fixes = []
        if free >= 1 and self.kind in ("job", "endpoint", "transform", "cluster"):
            fixes.append(f"lower the count to {int(free)}")
        if self.kind == "tuning" and free >= 1:
            fixes.append(f"lower max_parallel_jobs so that at most {int(free)} instances run at once")
        if self.alternatives:
            verb = "add a candidate" if self.kind == "job" else "use a candidate"
            fixes.append(f"{verb} with quota ({', '.join(self.alternatives)})")
        desired = self.value - self.available + self.needed
        fixes.append(
            "ask for more: aws service-quotas request-service-quota-increase --service-code sagemaker "
            f"--quota-code {self.code} --desired-value {desired:g}"
        )
        return (
            f"{subject} needs {self.needed:g} of '{self.quota}' ({self.code}); the account allows "
            f"{self.value:g} with {self.value - self.available:g} in use, so {free:g} are free. To fix: "
            + "; or ".join(fixes)
        )


@dataclass
class CapacityReport:
    env: str
    book: QuotaBook
    rows: list[Row]
    shortfalls: list[Shortfall]

    @property
    def short(self) -> bool:
        return bool(self.shortfalls)

    def chosen(self, kind: str, key: str) -> Row | None:
        return next((r for r in self.rows if r.kind == kind and r.key == key and r.chosen), None)


def _shortfall(
    book: QuotaBook, kind: str, key: str, quota: str, needed: float, alternatives: tuple[str, ...] = ()
) -> Shortfall:
    """A short quota was checked, so the book has its value and code."""
    q = book.values[quota]
    available = book.available(quota)
    assert available is not None
    return Shortfall(kind, key, quota, q.code, needed, available, q.value, alternatives)


def _types_with_quota(
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


def _training_cost(itype: str, instance_hours: float) -> tuple[float | None, float | None, float | None]:
    """($/h, on-demand cost, spot estimate) of `instance_hours` on `itype`; None where the catalog
    has no price."""
    price = instance_type(itype).price_per_hour
    if price is None:
        return None, None, None
    on_demand = price * instance_hours
    return price, on_demand, on_demand * (1 - SPOT_SAVINGS)


def _price(itype: str) -> float | None:
    """On-demand $/h of a type, None where the catalog does not know it."""
    try:
        return instance_type(itype).price_per_hour
    except (KeyError, ValueError):
        return None


def _choose_first_with_room(candidates: list[Row]) -> int | None:
    """Mark the first candidate whose quota is not short as chosen; its index (None: all short)."""
    for i, row in enumerate(candidates):
        if row.status != "short":
            row.chosen = True
            return i
    return None


def _status(available: float | None, needed: float) -> Status:
    if available is None:
        return "unchecked"
    return "ok" if available >= needed else "short"


def evaluate(plan: ResolvedEnvironment, book: QuotaBook) -> CapacityReport:
    """Every job's, search's, endpoint's, transform's and cluster group's quota against `book`,
    with what runs at once after a deploy summed, and the environment's training total."""
    spec = plan.spec
    tally = _Tally(book)
    for key, job in spec.jobs.items():
        _add_job(tally, key, job)
    for key, tuning in spec.tuning.items():
        _add_tuning(tally, key, tuning, spec.jobs[tuning.job])
    for key, ep in spec.endpoints.items():
        if ep.model_package is not None or ep.model is not None or ep.components:
            _add_endpoint(tally, key, ep)
    for key, transform in spec.transforms.items():
        _add_transform(tally, key, transform)
    for key, cluster in spec.clusters.items():
        _add_cluster(tally, key, cluster)
    _add_training_total(tally)
    return CapacityReport(plan.env, book, tally.rows, tally.shortfalls)


@dataclass
class _Tally:
    """What evaluate() has found so far: rows, shortfalls, and the training that runs at once."""

    book: QuotaBook
    rows: list[Row] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)
    at_once: dict[str, float] = field(default_factory=dict)  # quota -> instances of jobs run on deploy
    training_at_once: float = 0.0
    largest_training: float = 0.0  # the largest job or search: the total must fit it alone

    def short(
        self, kind: str, key: str, quota: str, needed: float, alternatives: tuple[str, ...] = ()
    ) -> None:
        self.shortfalls.append(_shortfall(self.book, kind, key, quota, needed, alternatives))


def _add_job(tally: _Tally, key: str, job: JobSpec) -> None:
    """One row per candidate; the first with room is chosen. A job run on deploy shares its quota
    with the others run then."""
    book = tally.book
    usage = training_usage(job.use_spot_instances)
    need = float(job.instance_count)
    hours = job.max_run / 3600
    job_rows = []
    for itype in job.instance_type:
        qn = quota_name(itype, usage)
        together = tally.at_once.get(qn, 0.0) if job.run_on_deploy else 0.0
        avail = book.available(qn)
        price, on_demand, spot = _training_cost(itype, need * hours)
        job_rows.append(
            Row(
                kind="job",
                key=key,
                instance_type=itype,
                count=job.instance_count,
                quota=qn,
                needed=need + together,
                available=avail,
                status=_status(None if avail is None else avail - together, need),
                chosen=False,
                price_per_hour=price,
                cost_on_demand=on_demand,
                cost_spot=spot,
                cost_basis=f"≤ {hours:g} h (max_run)",
                note="run on deploy" if job.run_on_deploy else "",
            )
        )
    chosen_index = _choose_first_with_room(job_rows)
    tally.rows += job_rows
    if chosen_index is None:
        first = job_rows[0]
        others = _types_with_quota(book, usage, need, like=job.instance_type[0], exclude=job.instance_type)
        tally.short("job", key, first.quota, first.needed, others)
    elif job.run_on_deploy:
        qn = job_rows[chosen_index].quota
        tally.at_once[qn] = tally.at_once.get(qn, 0.0) + need
    if job.run_on_deploy:
        tally.training_at_once += need
    tally.largest_training = max(tally.largest_training, need)


def _add_tuning(tally: _Tally, key: str, tuning: TuningSpec, job: JobSpec) -> None:
    """A search needs max_parallel_jobs x instance_count of its job's first candidate."""
    book = tally.book
    itype = job.instance_type[0]
    kind = training_usage(job.use_spot_instances)
    qn = quota_name(itype, kind)
    need = float(tuning.max_parallel_jobs * job.instance_count)
    avail = book.available(qn)
    status = _status(avail, need)
    trials = tuning.max_jobs or 1
    price, on_demand, spot = _training_cost(itype, trials * job.instance_count * job.max_run / 3600)
    tally.rows.append(
        Row(
            kind="tuning",
            key=key,
            instance_type=itype,
            count=job.instance_count,
            quota=qn,
            needed=need,
            available=avail,
            status=status,
            chosen=True,
            price_per_hour=price,
            cost_on_demand=on_demand,
            cost_spot=spot,
            cost_basis=f"≤ {trials} trials x {job.max_run / 3600:g} h",
            note=f"{tuning.max_parallel_jobs} trials at once",
        )
    )
    if status == "short":
        alternatives = tuple(
            c for c in job.instance_type[1:] if _status(book.available(quota_name(c, kind)), need) == "ok"
        )
        tally.short("tuning", key, qn, need, alternatives)
    tally.largest_training = max(tally.largest_training, need)


def _add_endpoint(tally: _Tally, key: str, ep: EndpointSpec) -> None:
    """An endpoint needs its autoscaling maximum; it costs its minimum per month. Serverless
    concurrency has no instance quota to check."""
    if ep.serverless is not None:
        tally.rows.append(
            Row(
                kind="endpoint",
                key=key,
                instance_type="serverless",
                count=0,
                quota="(serverless concurrency)",
                needed=float(ep.serverless.max_concurrency),
                available=None,
                status="unchecked",
                chosen=True,
                cost_basis="per request",
                note=f"{ep.serverless.memory_mb} MB, {ep.serverless.max_concurrency} concurrent",
            )
        )
        return
    assert ep.primary_instance_type is not None
    high = ep.autoscaling.max if ep.autoscaling else ep.initial_instance_count
    low = ep.autoscaling.min if ep.autoscaling else ep.initial_instance_count
    note = "deployed" if (ep.model_package or ep.components) else "no package pinned yet"
    if ep.components:
        packing = pack(ep)
        low = max(low, packing.instances_needed)
        note = f"{len(ep.components)} components: initial copies on {packing.instances_needed} instance(s)"
    elif ep.async_ is not None:
        note += ", async" + (" (scales to zero)" if low == 0 else "")
    qn = quota_name(ep.primary_instance_type, "endpoint")
    avail = tally.book.available(qn)
    status = _status(avail, float(high))
    price = instance_type(ep.primary_instance_type).price_per_hour
    tally.rows.append(
        Row(
            kind="endpoint",
            key=key,
            instance_type=ep.primary_instance_type,
            count=high,
            quota=qn,
            needed=float(high),
            available=avail,
            status=status,
            chosen=True,
            price_per_hour=price,
            cost_on_demand=price * low * HOURS_PER_MONTH if price is not None else None,
            cost_basis=f"per month at {low} instance(s) ({high} at most)",
            note=note,
        )
    )
    if status == "short":
        tally.short("endpoint", key, qn, float(high))


def _add_transform(tally: _Tally, key: str, t: TransformSpec) -> None:
    """One row per candidate; the first with room is chosen."""
    need = float(t.instance_count)
    transform_rows = []
    for itype in t.instance_type:
        qn = quota_name(itype, "transform")
        avail = tally.book.available(qn)
        price = _price(itype)
        transform_rows.append(
            Row(
                kind="transform",
                key=key,
                instance_type=itype,
                count=t.instance_count,
                quota=qn,
                needed=need,
                available=avail,
                status=_status(avail, need),
                chosen=False,
                price_per_hour=price,
                cost_on_demand=price * need if price is not None else None,
                cost_basis="per hour of a run",
                note="pinned package"
                if t.model_package
                else f"after {t.model.from_ if t.model else '?'} registers",
            )
        )
    tally.rows += transform_rows
    if _choose_first_with_room(transform_rows) is None:
        tally.short("transform", key, transform_rows[0].quota, need)


def _add_cluster(tally: _Tally, key: str, cluster: ClusterSpec) -> None:
    """Each instance group of a cluster needs its count for as long as the cluster exists."""
    for group_name, group in cluster.instance_groups.items():
        qn = quota_name(group.instance_type, "cluster")
        avail = tally.book.available(qn)
        status = _status(avail, float(group.count))
        price = _price(group.instance_type)
        tally.rows.append(
            Row(
                kind="cluster",
                key=f"{key}/{group_name}",
                instance_type=group.instance_type,
                count=group.count,
                quota=qn,
                needed=float(group.count),
                available=avail,
                status=status,
                chosen=True,
                price_per_hour=price,
                cost_on_demand=price * group.count if price is not None else None,
                cost_basis="per hour while the cluster exists"
                + (" (training plan)" if group.training_plan else ""),
                note=f"{group.node_type.lower()} nodes",
            )
        )
        if status == "short":
            tally.short("cluster", f"{key}/{group_name}", qn, float(group.count))


def _add_training_total(tally: _Tally) -> None:
    """The account's "Number of instances across all training jobs" must hold the jobs started on
    deploy together, and the largest job or search alone."""
    total_need = max(tally.training_at_once, tally.largest_training)
    if not total_need:
        return
    avail = tally.book.available(TRAINING_INSTANCES_TOTAL)
    status = _status(avail, total_need)
    tally.rows.append(
        Row(
            kind="aggregate",
            key="training",
            instance_type="(all types)",
            count=int(total_need),
            quota=TRAINING_INSTANCES_TOTAL,
            needed=total_need,
            available=avail,
            status=status,
            chosen=True,
            note="jobs started on deploy together, or the largest job or search",
        )
    )
    if status == "short":
        tally.short("aggregate", "training", TRAINING_INSTANCES_TOTAL, total_need)


class QuotaShortfallError(Exception):
    """A quota is short for an environment's plan (the same message `sagestack plan` prints)."""

    def __init__(self, reports: list[CapacityReport]) -> None:
        self.reports = reports
        lines = []
        for r in reports:
            lines.append(f"{r.env}: quotas short ({r.book.detail}):")
            lines += [f"  ✗ {s.message()}" for s in r.shortfalls]
        super().__init__("\n".join(lines))
