"""The spec of a SageMaker HyperPod cluster (`clusters:`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sagestack.core.model import StrictModel
from sagestack.core.types import (
    ClusterInstanceType,
    EntryName,
    ProjectPath,
)


class ClusterGroupSpec(StrictModel):
    """An instance group of a HyperPod cluster: Slurm's controller, a login node, or compute nodes."""

    instance_type: ClusterInstanceType
    count: int = Field(default=1, ge=1, le=2000)
    node_type: Literal["Controller", "Login", "Compute"] = "Compute"
    threads_per_core: Literal[1, 2] | None = Field(default=None, description="1 turns hyper-threading off")
    volume_size_gb: int | None = Field(
        default=None, ge=1, le=16384, description="an extra EBS volume per node (mounted at /opt/sagemaker)"
    )
    partitions: list[str] = Field(default_factory=list, description="Slurm partitions of compute nodes")
    training_plan: str | None = Field(
        default=None, description="a training plan ARN that reserves this group"
    )
    deep_health_checks: bool = Field(
        default=True,
        description="InstanceStress and InstanceConnectivity checks on accelerated nodes at start",
    )


class ClusterFsxSpec(StrictModel):
    """An FSx for Lustre file system every node mounts, linked to the project bucket's data/ prefix."""

    storage_gib: int = Field(default=1200, ge=1200, description="PERSISTENT_2: 1200 or a multiple of 2400")
    throughput_per_tib: Literal[125, 250, 500, 1000] = 250
    mount_path: str = Field(default="/fsx", pattern=r"^/[a-z0-9_/-]+$")


class LifecycleSpec(StrictModel):
    source_dir: ProjectPath = Field(
        default="cluster_src", description="the lifecycle scripts, relative to the project root"
    )
    on_create: ProjectPath = Field(
        default="on_create.sh", description="the script each node runs when it is created"
    )


class ClusterSpec(StrictModel):
    """A SageMaker HyperPod cluster with the Slurm orchestrator, in its own VPC (one Availability
    Zone, as EFA needs), its nodes in a security group open to itself, FSx for Lustre at /fsx."""

    instance_groups: dict[EntryName, ClusterGroupSpec] = Field(min_length=1)
    lifecycle: LifecycleSpec = Field(default_factory=LifecycleSpec)
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    fsx: ClusterFsxSpec | None = Field(default_factory=ClusterFsxSpec)
    vpc_cidr: str = Field(default="10.42.0.0/16", pattern=r"^\d+\.\d+\.\d+\.\d+/\d+$")
    availability_zone: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$",
        description="the Availability Zone of the cluster's VPC, e.g. us-east-1a (default: the first "
        "of the region's zones, which a synth for an account looks up with its credentials; an "
        "environment without an account gets Fn::GetAZs at deploy)",
    )
