"""`assess`: one pass over an environment's work — every job's rendered instance candidates, every
search, endpoint (its pools and shadow), LLM optimization job, batch transform and cluster group —
with what runs at once summed per quota, against a QuotaBook; and what it may cost.

Needs are summed over what runs at once: every job started on deploy (run_on_deploy) shares the
account with the others started then and with the endpoints, which always run; a search needs
max_parallel_jobs x instance_count; an endpoint its autoscaling maximum. On-demand and spot
quotas are separate names; the aggregate "Number of instances across all training jobs" is
checked too. Every count is read from the environment's one rendering (project/requests.py): a
job's candidates from their CreateTrainingJob requests (the quota each draws on is the one its
pipeline checks at run time), an endpoint's pools, shadow and maximum from its CreateEndpointConfig
and RegisterScalableTarget, a cluster's groups from its CreateCluster, a transform's candidates
from its CreateTransformJob requests. The spec says only what no request carries: a search's
parallelism and trials, which endpoints and transforms wait for a model to register (the rows'
notes), how an endpoint's components pack, a queued job's queue, an LLM's optimization jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sagestack.capacity.endpoints import add_endpoint, add_optimization
from sagestack.capacity.ledger import (
    QuotaBook,
    Row,
    Shortfall,
    Tally,
    choose_first_with_room,
    price_of,
    status_of,
    training_cost,
    types_with_quota,
)
from sagestack.capacity.queues import add_queues
from sagestack.core.catalog.quotas import TRAINING_INSTANCES_TOTAL, quota_name, training_usage
from sagestack.core.names import Names
from sagestack.endpoints.models import EndpointSpec
from sagestack.llm.optimization_job import resolve_optimizations
from sagestack.queues.models import JobQueueRef, QueueSpec
from sagestack.training.candidates import RenderedCandidate
from sagestack.training.rendered import RenderedJob
from sagestack.transforms.models import TransformSpec
from sagestack.tuning.models import TuningSpec


class Workload(Protocol):
    """What capacity reads of a spec besides its rendered jobs (project.models.ProjectSpec is one)."""

    @property
    def tuning(self) -> Mapping[str, TuningSpec]: ...
    @property
    def endpoints(self) -> Mapping[str, EndpointSpec]: ...
    @property
    def transforms(self) -> Mapping[str, TransformSpec]: ...
    @property
    def queues(self) -> Mapping[str, QueueSpec]: ...


class Environment(Protocol):
    """An environment as capacity reads it (project.environment.ResolvedEnvironment is one)."""

    @property
    def env(self) -> str: ...
    @property
    def names(self) -> Names: ...
    @property
    def spec(self) -> Workload: ...


Requests = Mapping[str, Mapping[str, Any]]  # operation[ <part>] -> request


class Rendered(Protocol):
    """An environment's rendering as capacity reads it (project.requests.EnvironmentRequests is
    one): the jobs, each endpoint's fleet, each cluster's CreateCluster, each transform's jobs."""

    @property
    def jobs(self) -> Mapping[str, RenderedJob]: ...
    @property
    def fleets(self) -> Mapping[str, Requests]: ...
    @property
    def clusters(self) -> Requests: ...
    @property
    def transforms(self) -> Mapping[str, Requests]: ...


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


def assess(plan: Environment, requests: Rendered, book: QuotaBook) -> CapacityReport:
    """Every job's, search's, endpoint's, optimization's, transform's and cluster group's quota
    against `book`, with what runs at once after a deploy summed, and the environment's training
    total. `requests` is the environment's rendering (project.requests.render_training)."""
    spec = plan.spec
    tally = Tally(book)
    for key, rendered in requests.jobs.items():
        _add_job(tally, key, rendered, _queue_note(spec.queues, rendered.job.queue))
    for key, tuning in spec.tuning.items():
        _add_tuning(tally, key, tuning, requests.jobs[tuning.job])
    for key, fleet in requests.fleets.items():
        add_endpoint(tally, key, spec.endpoints[key], fleet)
    for o in resolve_optimizations(plan.names, spec.endpoints):
        add_optimization(tally, o)
    for key, transform in requests.transforms.items():
        _add_transform(tally, key, transform, _registers(spec.transforms[key]))
    _add_cluster(tally, requests.clusters)
    add_queues(tally, spec.queues, requests.jobs)
    _add_training_total(tally)
    return CapacityReport(plan.env, book, tally.rows, tally.shortfalls, tally.warnings)


def _count(c: RenderedCandidate) -> int:
    return int(c.request["ResourceConfig"]["InstanceCount"])


def _max_run(c: RenderedCandidate) -> int:
    return int(c.request["StoppingCondition"]["MaxRuntimeInSeconds"])


def _queue_note(queues: Mapping[str, QueueSpec], ref: JobQueueRef | None) -> str:
    """Where a queued job waits: its queue, share and the queue's capacity limit (plan shows it
    beside the quota: Batch starts the job when both allow)."""
    if ref is None or ref.name not in queues:
        return ""
    share = f", share {ref.share}" if ref.share else ""
    return f"queue {ref.name}{share} (≤ {queues[ref.name].max_instances} instances at once)"


def _add_job(tally: Tally, key: str, rendered: RenderedJob, queued: str = "") -> None:
    """One row per candidate; the first with room is chosen. A job run on deploy shares its quota
    with the others run then. `queued`: where a queued job waits, said on its rows."""
    book = tally.book
    run_on_deploy = rendered.job.run_on_deploy
    first = rendered.candidates[0]
    need = float(_count(first))
    job_rows = []
    for c in rendered.candidates:
        together = tally.at_once.get(c.quota_name, 0.0) if run_on_deploy else 0.0
        avail = book.available(c.quota_name)
        hours = _max_run(c) / 3600
        price, on_demand, spot = training_cost(c.instance_type, _count(c) * hours)
        job_rows.append(
            Row(
                kind="job",
                key=key,
                instance_type=c.instance_type,
                count=_count(c),
                quota=c.quota_name,
                needed=need + together,
                available=avail,
                status=status_of(None if avail is None else avail - together, need),
                chosen=False,
                price_per_hour=price,
                cost_on_demand=on_demand,
                cost_spot=spot,
                cost_basis=f"≤ {hours:g} h (max_run)",
                note=", ".join(n for n in ("run on deploy" if run_on_deploy else "", queued) if n),
            )
        )
    chosen_index = choose_first_with_room(job_rows)
    tally.rows += job_rows
    if chosen_index is None:
        usage = training_usage(bool(first.request.get("EnableManagedSpotTraining")))
        types = [c.instance_type for c in rendered.candidates]
        others = types_with_quota(book, usage, need, like=first.instance_type, exclude=types)
        tally.short("job", key, job_rows[0].quota, job_rows[0].needed, others)
    elif run_on_deploy:
        qn = job_rows[chosen_index].quota
        tally.at_once[qn] = tally.at_once.get(qn, 0.0) + need
    if run_on_deploy:
        tally.training_at_once += need
    tally.largest_training = max(tally.largest_training, need)


def _add_tuning(tally: Tally, key: str, tuning: TuningSpec, rendered: RenderedJob) -> None:
    """A search needs max_parallel_jobs x instance_count of its job's first candidate."""
    book = tally.book
    first = rendered.candidates[0]
    count = _count(first)
    need = float(tuning.max_parallel_jobs * count)
    avail = book.available(first.quota_name)
    status = status_of(avail, need)
    trials = tuning.max_jobs or 1
    hours = _max_run(first) / 3600
    price, on_demand, spot = training_cost(first.instance_type, trials * count * _max_run(first) / 3600)
    tally.rows.append(
        Row(
            kind="tuning",
            key=key,
            instance_type=first.instance_type,
            count=count,
            quota=first.quota_name,
            needed=need,
            available=avail,
            status=status,
            chosen=True,
            price_per_hour=price,
            cost_on_demand=on_demand,
            cost_spot=spot,
            cost_basis=f"≤ {trials} trials x {hours:g} h",
            note=f"{tuning.max_parallel_jobs} trials at once",
        )
    )
    if status == "short":
        alternatives = tuple(
            c.instance_type
            for c in rendered.candidates[1:]
            if status_of(book.available(c.quota_name), need) == "ok"
        )
        tally.short("tuning", key, first.quota_name, need, alternatives)
    tally.largest_training = max(tally.largest_training, need)


def _add_training_total(tally: Tally) -> None:
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


def _registers(t: TransformSpec) -> str:
    """Whose model a transform runs: a pinned package, or what a job registers."""
    return "pinned package" if t.model_package else f"after {t.model.from_ if t.model else '?'} registers"


def _add_transform(tally: Tally, key: str, requests: Requests, note: str) -> None:
    """One row per candidate (each CreateTransformJob, in the order they are tried); the first
    with room is chosen."""
    transform_rows = []
    for op, request in requests.items():
        if not op.startswith("CreateTransformJob"):
            continue
        resources = request["TransformResources"]
        itype, count = resources["InstanceType"], int(resources["InstanceCount"])
        need = float(count)
        qn = quota_name(itype, "transform")
        avail = tally.book.available(qn)
        price = price_of(itype)
        transform_rows.append(
            Row(
                kind="transform",
                key=key,
                instance_type=itype,
                count=count,
                quota=qn,
                needed=need,
                available=avail,
                status=status_of(avail, need),
                chosen=False,
                price_per_hour=price,
                cost_on_demand=price * need if price is not None else None,
                cost_basis="per hour of a run",
                note=note,
            )
        )
    tally.rows += transform_rows
    if choose_first_with_room(transform_rows) is None:
        tally.short("transform", key, transform_rows[0].quota, transform_rows[0].needed)


@dataclass(frozen=True)
class _Group:
    name: str  # cluster/group
    instance_type: str
    count: int
    node_type: str
    training_plan: bool


def _groups(clusters: Requests) -> dict[str, list[_Group]]:
    """Every instance group of every CreateCluster, by the cluster-usage quota it draws on."""
    by_quota: dict[str, list[_Group]] = {}
    for key, request in clusters.items():
        for g in request["InstanceGroups"]:
            group = _Group(
                name=f"{key}/{g['InstanceGroupName']}",
                instance_type=g["InstanceType"],
                count=int(g["InstanceCount"]),
                # an EKS-orchestrated group has no Slurm role: its nodes are all compute (workers)
                node_type=g.get("SlurmConfig", {}).get("NodeType", "Compute"),
                training_plan="TrainingPlanArn" in g,
            )
            by_quota.setdefault(quota_name(group.instance_type, "cluster"), []).append(group)
    return by_quota


def _add_cluster(tally: Tally, clusters: Requests) -> None:
    """Each instance group of a cluster needs its count for as long as the cluster exists. A
    cluster-usage quota is the account's, per instance type: every group of every cluster on one
    type draws on it together, so they are checked as one sum (two groups of 1 against a quota of
    1 are short), and each group's row shows that sum."""
    for qn, groups in _groups(clusters).items():
        need = float(sum(group.count for group in groups))
        avail = tally.book.available(qn)
        status = status_of(avail, need)
        for group in groups:
            price = price_of(group.instance_type)
            shared = [other.name for other in groups if other.name != group.name]
            tally.rows.append(
                Row(
                    kind="cluster",
                    key=group.name,
                    instance_type=group.instance_type,
                    count=group.count,
                    quota=qn,
                    needed=need,
                    available=avail,
                    status=status,
                    chosen=True,
                    price_per_hour=price,
                    cost_on_demand=price * group.count if price is not None else None,
                    cost_basis="per hour while the cluster exists"
                    + (" (training plan)" if group.training_plan else ""),
                    note=f"{group.node_type.lower()} nodes"
                    + (f", quota shared with {', '.join(shared)}" if shared else ""),
                )
            )
        if status == "short":
            if len(groups) == 1:
                tally.short("cluster", groups[0].name, qn, need)
            else:
                tally.short("cluster groups", " + ".join(group.name for group in groups), qn, need)


class QuotaShortfallError(Exception):
    """A quota is short for an environment's plan (the same message `sagestack plan` prints)."""

    def __init__(self, reports: list[CapacityReport]) -> None:
        self.reports = reports
        lines = []
        for r in reports:
            lines.append(f"{r.env}: quotas short ({r.book.detail}):")
            lines += [f"  ✗ {s.message()}" for s in r.shortfalls]
        super().__init__("\n".join(lines))
