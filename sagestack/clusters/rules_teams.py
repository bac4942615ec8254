"""Rules of EKS-orchestrated HyperPod clusters and their teams (task governance)."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.clusters.models import ClusterSpec
from sagestack.core.rules import Finding, RuleContext, rule

_SLURM_ONLY = ("partitions",)
_EKS_ONLY = ("capacity", "labels", "taints")
# The cluster-wide settings only an EKS-orchestrated cluster has, and why.
_EKS_FEATURES = {
    "teams": "need orchestrator: eks (HyperPod task governance runs on EKS)",
    "priority_classes": "need orchestrator: eks (HyperPod task governance runs on EKS)",
    "observability": "needs orchestrator: eks (amazon-sagemaker-hyperpod-observability is an EKS add-on; "
    "a Slurm cluster's metrics come from its lifecycle scripts)",
}


@rule(
    "cluster-orchestrator-settings",
    "error",
    "a cluster's settings are its orchestrator's: Slurm's node types and partitions, EKS's capacity, "
    "labels, taints, teams and observability add-on",
    why=(
        "CreateCluster refuses SlurmConfig on an EKS-orchestrated group and ignores nothing quietly: "
        "a Kubernetes label on a Slurm node, or a team's compute quota on a Slurm cluster "
        "(task governance is EKS's: Kueue), would never take effect."
    ),
    fix="Set orchestrator: eks for capacity, labels, taints, teams, priority_classes and "
    "observability (or remove them from a Slurm cluster); remove node_type and partitions from an EKS "
    "cluster's groups.",
)
def cluster_orchestrator_settings(ctx: RuleContext) -> Iterator[Finding]:
    for name, cluster in ctx.spec.clusters.items():
        eks = cluster.orchestrator == "eks"
        for g, group in cluster.instance_groups.items():
            where = ("clusters", name, "instance_groups", g)
            set_fields = group.model_fields_set
            wrong = [f for f in (_SLURM_ONLY if eks else _EKS_ONLY) if f in set_fields]
            if eks and "node_type" in set_fields and group.node_type != "Compute":
                wrong.append("node_type")
            for f in wrong:
                other = "Slurm's" if eks else "orchestrator eks's"
                yield Finding(
                    (*where, f), f"{f} is {other}; this cluster is orchestrated by {cluster.orchestrator}"
                )
        if not eks:
            for f, what in _EKS_FEATURES.items():
                if getattr(cluster, f):
                    yield Finding(("clusters", name, f), f"{f} {what}")


def _capacity(cluster: ClusterSpec) -> dict[str, int]:
    out: dict[str, int] = {}
    for group in cluster.instance_groups.values():
        out[group.instance_type] = out.get(group.instance_type, 0) + group.count
    return out


@rule(
    "cluster-team-quota",
    "error",
    "the teams' compute quotas of a type add up to no more than the cluster's groups of that type hold",
    why=(
        "A compute quota guarantees a team its instances; quotas beyond the cluster's nodes promise "
        "what does not exist, and teams queue for a guarantee that never comes."
    ),
    fix="Lower the quotas or add instances to the cluster's groups of that type.",
)
def cluster_team_quota(ctx: RuleContext) -> Iterator[Finding]:
    for name, cluster in ctx.spec.clusters.items():
        capacity = _capacity(cluster)
        asked: dict[str, list[str]] = {}
        for team_name, team in cluster.teams.items():
            for itype in team.quota:
                asked.setdefault(itype, []).append(team_name)
        for itype, teams in asked.items():
            total = sum(cluster.teams[t].quota[itype] for t in teams)
            if total > capacity.get(itype, 0):
                has = capacity.get(itype, 0)
                who = f"team {teams[0]} is" if len(teams) == 1 else f"teams {', '.join(teams)} are"
                yield Finding(
                    ("clusters", name, "teams", teams[-1], "quota", itype),
                    f"{who} given {total} {itype}; the cluster's groups hold {has}",
                )


def _lendable(cluster: ClusterSpec, itype: str, borrower: str) -> int:
    """What a team may borrow of a type at most: the lending teams' quotas and what no team holds."""
    lent, free, _ = _borrowable(cluster, itype, borrower)
    return lent + free


def _borrowable(cluster: ClusterSpec, itype: str, borrower: str) -> tuple[int, int, list[str]]:
    """Of a type, for `borrower`: what the other teams lend in total, what is in no team's quota,
    and the other teams that hold some but lend none (sharing: DontLend)."""
    capacity = _capacity(cluster).get(itype, 0)
    held = sum(t.quota.get(itype, 0) for t in cluster.teams.values())
    others = {n: t for n, t in cluster.teams.items() if n != borrower and t.quota.get(itype, 0)}
    lent = sum(t.quota[itype] for t in others.values() if t.sharing in ("Lend", "LendAndBorrow"))
    keepers = [n for n, t in others.items() if t.sharing == "DontLend"]
    return lent, max(0, capacity - held), keepers


def _borrow_message(team: str, itype: str, count: int, lent: int, free: int, keepers: list[str]) -> str:
    """Which team borrows how many of which type, what the others lend in total, and what to change."""
    most = lent + free
    unheld = f" and {free} {'is' if free == 1 else 'are'} in no team's quota" if free else ""
    change = f"lower its borrow to {most}" if most else "remove its borrow"
    if keepers:
        who = keepers[0] if len(keepers) == 1 else ", ".join(keepers)
        change += f", or let {who} lend (sharing: Lend or LendAndBorrow)"
    else:
        change += f", or add {itype} instances to the cluster's groups"
    return (
        f"team {team} borrows up to {count} {itype}, but the other teams lend {lent} in total{unheld}, "
        f"so it can borrow at most {most}: {change}"
    )


@rule(
    "cluster-team-borrow",
    "error",
    "a team borrows no more than the others lend (and only with sharing: LendAndBorrow)",
    why=(
        "A borrow limit above what the other teams lend, plus what no team holds, can never be met: "
        "the team plans on compute that is never idle for it. A team that does not borrow has no "
        "borrow limit."
    ),
    fix="Lower the team's borrow, let more teams lend (sharing: Lend or LendAndBorrow), or set "
    "sharing: LendAndBorrow on the borrowing team.",
)
def cluster_team_borrow(ctx: RuleContext) -> Iterator[Finding]:
    for name, cluster in ctx.spec.clusters.items():
        for team_name, team in cluster.teams.items():
            where = ("clusters", name, "teams", team_name, "borrow")
            if team.borrow and team.sharing != "LendAndBorrow":
                yield Finding(where, f"sharing: {team.sharing} does not borrow: set sharing: LendAndBorrow")
                continue
            for itype, count in team.borrow.items():
                lent, free, keepers = _borrowable(cluster, itype, team_name)
                if count > lent + free:
                    yield Finding(
                        (*where, itype), _borrow_message(team_name, itype, count, lent, free, keepers)
                    )


@rule(
    "cluster-team-job-fits",
    "error",
    "every job a team runs on the cluster fits the team's quota and what it may borrow",
    why=(
        "Kueue admits a job only when the team's quota plus what it may borrow covers all its pods at "
        "once: a job larger than that waits in the team's queue forever."
    ),
    fix="Raise the team's quota or borrow for the job's instance type, or run fewer instances.",
)
def cluster_team_job_fits(ctx: RuleContext) -> Iterator[Finding]:
    for name, cluster in ctx.spec.clusters.items():
        for team_name, team in cluster.teams.items():
            for i, job_name in enumerate(team.jobs):
                where = ("clusters", name, "teams", team_name, "jobs", i)
                job = ctx.spec.jobs.get(job_name)
                if job is None:
                    yield Finding(where, f"no job {job_name!r} in jobs:")
                    continue
                itype, count = job.instance_type[0], job.instance_count
                borrow = team.borrow.get(itype, 0) if team.sharing == "LendAndBorrow" else 0
                reach = team.quota.get(itype, 0) + min(borrow, _lendable(cluster, itype, team_name))
                if count > reach:
                    yield Finding(
                        where,
                        f"{job_name} needs {count} {itype}; team {team_name} can have at most {reach} "
                        "(its quota and what it may borrow)",
                    )
