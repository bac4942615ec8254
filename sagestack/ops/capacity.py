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

from sagestack.clusters.models import ClusterSpec
from sagestack.core.catalog.instances import instance_type
from sagestack.core.catalog.quotas import (
    OPTIMIZATION_USAGE,
    TRAINING_INSTANCES_TOTAL,
    quota_name,
    training_usage,
)
from sagestack.endpoints.models import EndpointSpec
from sagestack.llm.optimization_job import ResolvedOptimization, resolve_optimizations

# Row and Shortfall are re-exported: callers name them here.
from sagestack.ops.capacity_rows import Row as Row
from sagestack.ops.capacity_rows import Shortfall as Shortfall
from sagestack.ops.capacity_rows import (
    choose_first_with_room,
    price_of,
    shortfall_of,
    status_of,
    types_with_quota,
)
from sagestack.ops.endpoint_capacity import deployed, endpoint_capacity
from sagestack.ops.quota_book import QuotaBook
from sagestack.project.environment import ResolvedEnvironment
from sagestack.training.models import JobSpec
from sagestack.transforms.models import TransformSpec
from sagestack.tuning.models import TuningSpec

SPOT_SAVINGS = 0.70  # an assumption: SageMaker quotes "up to 90%"; spot prices are not published per type
HOURS_PER_MONTH = 730


@dataclass
class CapacityReport:
    env: str
    book: QuotaBook
    rows: list[Row]
    shortfalls: list[Shortfall]
    warnings: list[str] = field(default_factory=list)  # worth a look, never a failure

    @property
    def short(self) -> bool:
        return bool(self.shortfalls)

    def monthly_cost(self, endpoint: str) -> tuple[float, float] | None:
        """An instance endpoint's cost per month on its cheapest and dearest priced pool (its
        shadow aside); None when the catalog prices none of them."""
        costs = [
            r.cost_on_demand
            for r in self.rows
            if r.kind == "endpoint" and r.key == endpoint and r.cost_on_demand is not None
        ]
        return (min(costs), max(costs)) if costs else None

    def chosen(self, kind: str, key: str) -> Row | None:
        return next((r for r in self.rows if r.kind == kind and r.key == key and r.chosen), None)


def _training_cost(itype: str, instance_hours: float) -> tuple[float | None, float | None, float | None]:
    """($/h, on-demand cost, spot estimate) of `instance_hours` on `itype`; None where the catalog
    has no price."""
    price = instance_type(itype).price_per_hour
    if price is None:
        return None, None, None
    on_demand = price * instance_hours
    return price, on_demand, on_demand * (1 - SPOT_SAVINGS)


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
        if ep.model is not None or deployed(ep):
            _add_endpoint(tally, key, ep)
    for o in resolve_optimizations(plan.names, spec.endpoints):
        _add_optimization(tally, o)
    for key, transform in spec.transforms.items():
        _add_transform(tally, key, transform)
    for key, cluster in spec.clusters.items():
        _add_cluster(tally, key, cluster)
    _add_training_total(tally)
    return CapacityReport(plan.env, book, tally.rows, tally.shortfalls, tally.warnings)


@dataclass
class _Tally:
    """What evaluate() has found so far: rows, shortfalls, and the training that runs at once."""

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
                status=status_of(None if avail is None else avail - together, need),
                chosen=False,
                price_per_hour=price,
                cost_on_demand=on_demand,
                cost_spot=spot,
                cost_basis=f"≤ {hours:g} h (max_run)",
                note="run on deploy" if job.run_on_deploy else "",
            )
        )
    chosen_index = choose_first_with_room(job_rows)
    tally.rows += job_rows
    if chosen_index is None:
        first = job_rows[0]
        others = types_with_quota(book, usage, need, like=job.instance_type[0], exclude=job.instance_type)
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
    status = status_of(avail, need)
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
            c for c in job.instance_type[1:] if status_of(book.available(quota_name(c, kind)), need) == "ok"
        )
        tally.short("tuning", key, qn, need, alternatives)
    tally.largest_training = max(tally.largest_training, need)


def _add_endpoint(tally: _Tally, key: str, ep: EndpointSpec) -> None:
    """Serverless concurrency has no instance quota to check; an instance endpoint is placeable
    when one of its pools has room (ops/endpoint_capacity.py)."""
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
    found = endpoint_capacity(tally.book, key, ep)
    tally.rows += found.rows
    tally.shortfalls += found.shortfalls
    tally.warnings += found.warnings


def _add_optimization(tally: _Tally, o: ResolvedOptimization) -> None:
    """An LLM's optimization job runs on one instance (MaxInstanceCount unset) of its
    DeploymentInstanceType, counted in that type's endpoint quota — beside its own endpoint's
    instances there, since `sagestack run` starts it while the endpoint serves. It costs at most
    max_runtime of that type (SageMaker may pick the instance for quantization and compilation, and
    charges for the one it uses; the target type's price is the estimate)."""
    qn = quota_name(o.instance_type, OPTIMIZATION_USAGE)
    beside = sum(
        r.needed
        for r in tally.rows
        if r.kind in ("endpoint", "shadow") and r.key == o.endpoint and r.chosen and r.quota == qn
    )
    avail = tally.book.available(qn)
    hours = o.optimize.max_runtime / 3600
    price = price_of(o.instance_type)
    tally.rows.append(
        Row(
            kind="optimization",
            key=o.label,
            instance_type=o.instance_type,
            count=1,
            quota=qn,
            needed=1 + beside,
            available=avail,
            status=status_of(avail, 1 + beside),
            chosen=True,
            price_per_hour=price,
            cost_on_demand=price * hours if price is not None else None,
            cost_basis=f"≤ {hours:g} h (max_runtime) per run",
            note=f"beside the endpoint's {beside:g}" if beside else "",
        )
    )
    if status_of(avail, 1 + beside) == "short":
        alternatives = types_with_quota(
            tally.book, OPTIMIZATION_USAGE, 1.0, like=o.instance_type, exclude=[o.instance_type]
        )
        tally.short("optimization", o.label, qn, 1 + beside, alternatives)


def _add_transform(tally: _Tally, key: str, t: TransformSpec) -> None:
    """One row per candidate; the first with room is chosen."""
    need = float(t.instance_count)
    transform_rows = []
    for itype in t.instance_type:
        qn = quota_name(itype, "transform")
        avail = tally.book.available(qn)
        price = price_of(itype)
        transform_rows.append(
            Row(
                kind="transform",
                key=key,
                instance_type=itype,
                count=t.instance_count,
                quota=qn,
                needed=need,
                available=avail,
                status=status_of(avail, need),
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
    if choose_first_with_room(transform_rows) is None:
        tally.short("transform", key, transform_rows[0].quota, need)


def _add_cluster(tally: _Tally, key: str, cluster: ClusterSpec) -> None:
    """Each instance group of a cluster needs its count for as long as the cluster exists."""
    for group_name, group in cluster.instance_groups.items():
        qn = quota_name(group.instance_type, "cluster")
        avail = tally.book.available(qn)
        status = status_of(avail, float(group.count))
        price = price_of(group.instance_type)
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
    status = status_of(avail, total_need)
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
