"""HyperPod clusters resolved for one environment: the CreateCluster request (what the
AWS::SageMaker::Cluster resource carries, validated against botocore's model at synth), and the
sbatch script that runs a job's training_src on the cluster with the container's torchrun arguments."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from sagestack.clusters.models import ClusterGroupSpec, ClusterSpec
from sagestack.core.catalog.instances import instance_type as catalog_instance
from sagestack.core.contract import to_cmd_args
from sagestack.core.deployment import Deployment
from sagestack.core.names import Names
from sagestack.training.models import JobSpec
from sagestack.training.request import script_arguments

DEEP_HEALTH_CHECKS = ["InstanceStress", "InstanceConnectivity"]
EBS_MOUNT = "/opt/sagemaker"  # where HyperPod mounts an instance group's extra EBS volume


@dataclass(frozen=True)
class ClusterContext:
    """What a cluster's request needs besides its spec (tokens in the template, stand-ins when
    validating): the deployment — its role_arn the role the nodes run as (the instance groups'
    ExecutionRole, the cluster's own), its bucket the one holding the lifecycle scripts under
    code/clusters/<key>/ — and the network and file system the cluster stack makes."""

    deployment: Deployment
    subnets: tuple[str, ...]
    security_groups: tuple[str, ...]
    fsx_dns_name: str | None = None
    fsx_mount_name: str | None = None
    eks_cluster_arn: str | None = None  # orchestrator eks: the EKS cluster the nodes join
    autoscaling_role_arn: str | None = None  # eks.autoscaling: the role HyperPod's Karpenter assumes


def _accelerated(instance_type: str) -> bool:
    try:
        return catalog_instance(instance_type).is_accelerated
    except (KeyError, ValueError):
        family = instance_type.split(".")[1]
        return family.startswith(("p", "g", "trn", "inf"))


def create_cluster_request(names: Names, key: str, spec: ClusterSpec, ctx: ClusterContext) -> dict[str, Any]:
    """The CreateClusterRequest for one cluster (its CloudFormation resource takes the same shape)."""
    groups = []
    lifecycle_uri = ctx.deployment.s3.cluster_lifecycle(key)
    for name, g in spec.instance_groups.items():
        group: dict[str, Any] = {
            "InstanceGroupName": name,
            "InstanceType": g.instance_type,
            "InstanceCount": g.count,
            "ExecutionRole": ctx.deployment.role_arn,
            "LifeCycleConfig": {"SourceS3Uri": lifecycle_uri, "OnCreate": spec.lifecycle.on_create},
        }
        if spec.orchestrator == "eks":
            group.update(_kubernetes_group(g))
        else:
            group["SlurmConfig"] = {"NodeType": g.node_type}
            if g.partitions:
                group["SlurmConfig"]["PartitionNames"] = list(g.partitions)
        if g.threads_per_core is not None:
            group["ThreadsPerCore"] = g.threads_per_core
        storage: list[dict[str, Any]] = []
        if g.volume_size_gb is not None:
            storage.append({"EbsVolumeConfig": {"VolumeSizeInGB": g.volume_size_gb}})
        if spec.fsx is not None and ctx.fsx_dns_name and ctx.fsx_mount_name:
            storage.append(
                {
                    "FsxLustreConfig": {
                        "DnsName": ctx.fsx_dns_name,
                        "MountName": ctx.fsx_mount_name,
                        "MountPath": spec.fsx.mount_path,
                    }
                }
            )
        if storage:
            group["InstanceStorageConfigs"] = storage
        if g.deep_health_checks and _accelerated(g.instance_type):
            group["OnStartDeepHealthChecks"] = list(DEEP_HEALTH_CHECKS)
        if g.training_plan:
            group["TrainingPlanArn"] = g.training_plan
        groups.append(group)
    request: dict[str, Any] = {
        "ClusterName": names.cluster(key),
        "InstanceGroups": groups,
        "VpcConfig": {"SecurityGroupIds": list(ctx.security_groups), "Subnets": list(ctx.subnets)},
        "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
        "NodeRecovery": spec.node_recovery,
    }
    if spec.orchestrator == "eks":
        if not ctx.eks_cluster_arn:
            raise ValueError(f"cluster {key}: orchestrator eks needs the EKS cluster's ARN")
        request["Orchestrator"] = {"Eks": {"ClusterArn": ctx.eks_cluster_arn}}
        # Continuous provisioning: HyperPod brings up the nodes it can and keeps trying for the rest,
        # rather than failing the whole cluster when one group's capacity is short.
        request["NodeProvisioningMode"] = "Continuous"
        if spec.eks is not None and spec.eks.autoscaling:
            if not ctx.autoscaling_role_arn:
                raise ValueError(f"cluster {key}: eks.autoscaling needs the role HyperPod assumes to scale")
            # HyperPod's managed Karpenter, built on continuous provisioning (above)
            request["AutoScaling"] = {"Mode": "Enable", "AutoScalerType": "Karpenter"}
            request["ClusterRole"] = ctx.autoscaling_role_arn
    if ctx.deployment.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in ctx.deployment.tags]
    return request


def _kubernetes_group(g: ClusterGroupSpec) -> dict[str, Any]:
    """An EKS-orchestrated group's own keys: its capacity type, Kubernetes labels and taints."""
    out: dict[str, Any] = {}
    if g.capacity is not None:
        out["CapacityRequirements"] = {"Spot": {}} if g.capacity == "spot" else {"OnDemand": {}}
    config: dict[str, Any] = {}
    if g.labels:
        config["Labels"] = dict(g.labels)
    if g.taints:
        config["Taints"] = [
            {"Key": t.key, **({"Value": t.value} if t.value else {}), "Effect": t.effect} for t in g.taints
        ]
    if config:
        out["KubernetesConfig"] = config
    return out


def stand_in_cluster_context(deployment: Deployment, *, fsx: bool, eks: bool = False) -> ClusterContext:
    """`deployment`'s stand-ins (Deployment.stand_ins), with a stand-in network and file system."""
    return ClusterContext(
        deployment=deployment,
        subnets=("subnet-0123456789abcdef0",),
        security_groups=("sg-0123456789abcdef0",),
        fsx_dns_name=f"fs-0123456789abcdef0.fsx.{deployment.region}.amazonaws.com" if fsx else None,
        fsx_mount_name="abcdefgh" if fsx else None,
        eks_cluster_arn=(
            f"arn:aws:eks:{deployment.region}:{deployment.account}:cluster/stand-in" if eks else None
        ),
        autoscaling_role_arn=f"arn:aws:iam::{deployment.account}:role/stand-in-autoscaling" if eks else None,
    )


# ---------------------------------------------------------------- sbatch


def compute_group(spec: ClusterSpec) -> tuple[str, Any]:
    """The compute group a job runs on: the largest."""
    if spec.orchestrator != "slurm":
        raise ValueError("an sbatch script needs a Slurm cluster (this one is orchestrated by EKS)")
    compute = [(n, g) for n, g in spec.instance_groups.items() if g.node_type == "Compute"]
    if not compute:
        raise ValueError("the cluster has no Compute instance group")
    return max(compute, key=lambda item: item[1].count)


def sbatch_script(
    names: Names, cluster_key: str, spec: ClusterSpec, job_key: str, job: JobSpec, *, code_dir: str
) -> str:
    """An sbatch script that runs the job's entry point on the cluster as the training container
    would: torchrun on every node (one srun task per node), the hyperparameters as the toolkit's
    arguments, SM_* folders on the shared file system."""

    group_name, group = compute_group(spec)
    nodes = min(job.instance_count, group.count)
    try:
        per_node = max(1, catalog_instance(group.instance_type).accelerators_per_host)
    except (KeyError, ValueError):
        per_node = 1
    shared = spec.fsx.mount_path if spec.fsx is not None else "$HOME"
    base = f"$SAGESTACK_SHARED/sagestack/{names.prefix}/{job_key}"
    args = " ".join(shlex.quote(a) for a in to_cmd_args(script_arguments(job)))
    partition = f"#SBATCH --partition={group.partitions[0]}\n" if group.partitions else ""
    env_lines = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(job.environment.items()))
    hours, rest = divmod(job.max_run, 3600)
    return f"""#!/bin/bash
# {job_key} on HyperPod cluster {names.cluster(cluster_key)} ({nodes}x {group.instance_type}, group {group_name}).
# Written by `sagestack cluster submit {job_key} --cluster {cluster_key} --env {names.env}`.
#SBATCH --job-name={names.prefix}-{job_key}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --time={hours:02d}:{rest // 60:02d}:00
#SBATCH --output=%x-%j.out
{partition}set -euo pipefail

# The shared file system every node mounts, and the job's code on it (copy training_src there).
export SAGESTACK_SHARED=${{SAGESTACK_SHARED:-{shared}}}
export SAGESTACK_CODE_DIR=${{SAGESTACK_CODE_DIR:-{code_dir}}}
export SAGESTACK_PROCS_PER_NODE=${{SAGESTACK_PROCS_PER_NODE:-{per_node}}}
# What the training container keeps under /opt/ml lives in the job's folder on the shared file
# system (a node's own /opt/ml is HyperPod's).
export SAGEMAKER_BASE_DIR={base}
export SM_MODEL_DIR={base}/model
export SM_OUTPUT_DIR={base}/output
export SM_OUTPUT_DATA_DIR={base}/output/data
export SAGESTACK_CHECKPOINT_DIR={base}/checkpoints
export SM_NUM_GPUS="$SAGESTACK_PROCS_PER_NODE"
{env_lines}mkdir -p "$SM_MODEL_DIR" "$SM_OUTPUT_DATA_DIR" "$SAGESTACK_CHECKPOINT_DIR"

# The first node of the allocation hosts the rendezvous, as algo-1 does in the training container.
# (Read whole, not through `head`: under pipefail a closed pipe would fail the script.)
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node="${{nodes[0]}}"
export MASTER_ADDR="$head_node" MASTER_PORT=${{MASTER_PORT:-29500}}

srun --ntasks-per-node=1 bash -c '
  cd "$SAGESTACK_CODE_DIR"
  exec torchrun --nnodes "$SLURM_NNODES" --nproc_per_node "$SAGESTACK_PROCS_PER_NODE" --node_rank "$SLURM_NODEID" \\
    --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \\
    {shlex.quote(job.entry_point)} {args}
'
"""
