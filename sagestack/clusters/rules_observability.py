"""Rules of HyperPod's observability add-on on an EKS-orchestrated cluster (`observability:`).
Whether a Slurm cluster may have it is `cluster-orchestrator-settings`' (rules_teams.py)."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.clusters.observability import SMALLEST_NODE_SIZE, node_size
from sagestack.core.rules import Finding, RuleContext, rule


@rule(
    "cluster-observability-node",
    "warning",
    f"a cluster with the observability add-on has a group of {SMALLEST_NODE_SIZE}xlarge nodes or larger",
    why=(
        "AWS's setup guide for the HyperPod observability add-on: the smallest instance type that works "
        f"is {SMALLEST_NODE_SIZE}xlarge, so that a node holds the add-on's pods beside what already "
        "runs there. On smaller nodes its pods stay Pending, the add-on never becomes ACTIVE and "
        "CloudFormation rolls the deploy back after the HyperPod cluster was created."
    ),
    fix=f"Give one instance group a {SMALLEST_NODE_SIZE}xlarge type or larger (e.g. a system group of "
    "ml.m5.4xlarge), or remove observability:.",
)
def cluster_observability_node(ctx: RuleContext) -> Iterator[Finding]:
    for name, cluster in ctx.spec.clusters.items():
        if cluster.orchestrator != "eks" or cluster.observability is None:
            continue
        sizes = {g.instance_type: node_size(g.instance_type) for g in cluster.instance_groups.values()}
        if max(sizes.values()) < SMALLEST_NODE_SIZE:
            yield Finding(
                ("clusters", name, "observability"),
                f"no group of {SMALLEST_NODE_SIZE}xlarge or larger ({', '.join(sorted(sizes))}): the "
                f"add-on's pods need one; add e.g. system: {{instance_type: ml.m5.{SMALLEST_NODE_SIZE}xlarge}}",
            )


@rule(
    "cluster-observability-metrics",
    "warning",
    "task governance metrics are asked for on a cluster with the task governance add-on",
    why=(
        "The add-on's task governance metrics are Kueue's, which the "
        "amazon-sagemaker-hyperpod-taskgovernance add-on installs: without it the category collects "
        "nothing, and the dashboards built on it stay empty."
    ),
    fix="Set eks.task_governance: true (the default), or metrics.task_governance: DISABLED.",
)
def cluster_observability_metrics(ctx: RuleContext) -> Iterator[Finding]:
    for name, cluster in ctx.spec.clusters.items():
        seen = cluster.observability
        if cluster.eks is None or seen is None or seen.metrics.task_governance == "DISABLED":
            continue
        if not cluster.eks.task_governance:
            yield Finding(
                ("clusters", name, "observability", "metrics", "task_governance"),
                "ADVANCED task governance metrics need eks.task_governance: true (Kueue's metrics)",
            )
