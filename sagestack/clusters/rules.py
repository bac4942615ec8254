"""HyperPod cluster rules."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

from sagestack.core.rules import Finding, RuleContext, rule


@rule(
    "cluster-controller",
    "error",
    "a Slurm cluster has exactly one controller node and at least one compute group",
    why=(
        "A HyperPod cluster with the Slurm orchestrator runs slurmctld on its "
        "one Controller node; none, two, or a controller group of several nodes "
        "fails cluster creation, and without a Compute group no job can run."
    ),
    fix=(
        "Give exactly one group node_type: Controller with count 1 (a "
        "CPU type is enough) and at least one node_type: Compute group."
    ),
)
def cluster_controller(ctx: RuleContext) -> Iterator[Finding]:
    for name, cluster in ctx.spec.clusters.items():
        if cluster.orchestrator != "slurm":
            continue  # EKS runs its control plane itself
        groups = cluster.instance_groups
        controllers = [g for g, spec in groups.items() if spec.node_type == "Controller"]
        if len(controllers) != 1:
            yield Finding(
                ("clusters", name, "instance_groups"),
                f"{len(controllers)} Controller groups ({', '.join(controllers) or 'none'}); Slurm needs exactly one: "
                "add e.g. controller: {instance_type: ml.m5.xlarge, node_type: Controller}",
            )
        for g in controllers:
            if groups[g].count != 1:
                yield Finding(
                    ("clusters", name, "instance_groups", g, "count"),
                    f"a Slurm controller group has one node, not {groups[g].count}",
                )
        if not any(spec.node_type == "Compute" for spec in groups.values()):
            yield Finding(
                ("clusters", name, "instance_groups"), "no Compute group: jobs would have nowhere to run"
            )


@rule(
    "cluster-lifecycle-script",
    "error",
    "a cluster's lifecycle folder holds its on_create script, executable, valid bash",
    why=(
        "Every node runs the OnCreate lifecycle script when it is created; a missing, "
        "non-executable or broken script fails node creation after the instances are paid for."
    ),
    fix=(
        "Keep the script in the lifecycle folder (cluster_src/ "
        "by default), chmod +x it, and fix what bash -n reports."
    ),
)
def cluster_lifecycle_script(ctx: RuleContext) -> Iterator[Finding]:
    import subprocess

    for name, cluster in ctx.spec.clusters.items():
        folder = ctx.root / cluster.lifecycle.source_dir
        script = folder / cluster.lifecycle.on_create
        where = ("clusters", name, "lifecycle")
        if not folder.is_dir():
            yield Finding(
                (*where, "source_dir"),
                f"{cluster.lifecycle.source_dir}/ does not exist (`sagestack init` writes a default one there)",
            )
            continue
        if not script.is_file():
            yield Finding(
                (*where, "on_create"),
                f"{cluster.lifecycle.source_dir}/{cluster.lifecycle.on_create} does not exist",
            )
            continue
        if not os.access(script, os.X_OK):
            yield Finding(
                (*where, "on_create"), f"{script.relative_to(ctx.root)} is not executable: chmod +x it"
            )
        if shutil.which("bash") is None:
            continue  # no bash here to read the script with (the nodes have one): nothing to say
        check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            yield Finding(
                (*where, "on_create"), f"bash -n {script.name}: {check.stderr.strip().splitlines()[-1]}"
            )
        elif shutil.which("shellcheck"):
            lint = subprocess.run(
                ["shellcheck", "-S", "error", "-f", "gcc", str(script)],
                capture_output=True,
                text=True,
                timeout=60,
            )
            for line in lint.stdout.splitlines()[:5]:
                yield Finding((*where, "on_create"), f"shellcheck: {line.split(':', 1)[-1].strip()}")


@rule(
    "cluster-availability-zone",
    "error",
    "a cluster's availability_zone is a zone of the environment's region",
    why=(
        "The cluster's VPC, subnets and file system are created in that zone of the stack's region; "
        "a zone of another region (an overlay that moved the region) fails the deploy."
    ),
    fix="Name a zone of the environment's region (e.g. us-east-1a for us-east-1), or set it per environment.",
)
def cluster_availability_zone(ctx: RuleContext) -> Iterator[Finding]:
    region = ctx.spec.region
    for name, cluster in ctx.spec.clusters.items():
        zone = cluster.availability_zone
        if zone is not None and (zone[:-1] != region):
            yield Finding(
                ("clusters", name, "availability_zone"),
                f"{zone} is not a zone of {region}: write e.g. availability_zone: {region}a",
            )
