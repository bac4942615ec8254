"""The spec of a SageMaker HyperPod cluster (`clusters:`)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, WithJsonSchema, model_validator

from sagestack.core.model import StrictModel
from sagestack.core.types import (
    ClusterInstanceType,
    EntryName,
    ProjectPath,
)


class KubernetesTaint(StrictModel):
    """A Kubernetes taint on an EKS-orchestrated group's nodes (KubernetesConfig.Taints)."""

    key: str = Field(min_length=1, max_length=317)
    value: str | None = Field(default=None, min_length=1, max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


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
    capacity: Literal["on-demand", "spot"] | None = Field(
        default=None,
        description="orchestrator eks: the group's capacity, CapacityRequirements (default: HyperPod's, on-demand)",
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="orchestrator eks: Kubernetes labels on the group's nodes"
    )
    taints: list[KubernetesTaint] = Field(
        default_factory=list,
        max_length=50,
        description="orchestrator eks: Kubernetes taints on the group's nodes",
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


class _ClusterBase(StrictModel):
    """What every HyperPod cluster has, whichever orchestrator."""

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


# Kubernetes versions HyperPod supports for its EKS orchestrator: AWS's "Getting started with Amazon
# EKS support in SageMaker HyperPod" (docs.amazonaws.cn, sagemaker-hyperpod-eks-prerequisites, read
# 2026-12) lists 1.28 to 1.34; the default is the newest.
KUBERNETES_VERSIONS = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34")


# An access entry's principal: an IAM role of an account (a path allowed), as IAM writes its ARN.
IAM_ROLE_ARN = r"^arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9_+=,.@/-]+$"


def _role_arn(value: str) -> str:
    if not re.match(IAM_ROLE_ARN, value):
        raise ValueError(
            "an IAM role's ARN, as `aws iam get-role --role-name NAME --query Role.Arn` prints it "
            "(arn:aws:iam::123456789012:role/ml-admin): EKS gives that role an access entry"
        )
    return value


RoleArn = Annotated[
    str, AfterValidator(_role_arn), WithJsonSchema({"type": "string", "pattern": IAM_ROLE_ARN})
]


class EksSpec(StrictModel):
    """The EKS cluster that orchestrates a HyperPod cluster (`orchestrator: eks`)."""

    admin_roles: list[RoleArn] = Field(
        min_length=1,
        description="IAM role ARNs given cluster-admin access entries (the people who run kubectl and "
        "install HyperPod's Helm chart)",
    )
    kubernetes_version: Literal["1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34"] = "1.34"
    vpc_cni_version: str | None = Field(
        default=None,
        pattern=r"^v1\.(18\.([3-9]|\d\d+)|(19|[2-9]\d)\.\d+)-eksbuild\.\d+$",
        description="the VPC CNI add-on's version, 1.18.3 or later as HyperPod requires, e.g. "
        "v1.20.4-eksbuild.1 (default: EKS's default for the Kubernetes version)",
    )
    public_endpoint_cidrs: list[str] = Field(
        default_factory=list,
        description="CIDRs that may reach the Kubernetes API from the internet (default: none; the "
        "endpoint is private to the VPC)",
    )
    second_zone: str | None = Field(
        default=None,
        pattern=r"^[a-z]{2}(-[a-z]+)+-\d+[a-z]$",
        description="EKS needs subnets in two zones: the second, when availability_zone is named",
    )
    helm_dependencies: Literal["pending", "installed"] = Field(
        default="pending",
        description="HyperPod's Helm chart must be installed on the EKS cluster before the HyperPod "
        "cluster is created: 'pending' deploys the EKS cluster only and prints the helm step; "
        "'installed' adds the HyperPod cluster",
    )
    autoscaling: bool = Field(
        default=False,
        description="HyperPod's managed Karpenter autoscaling: nodes added for pending pods and removed "
        "when idle (down to zero), through a cluster role HyperPod assumes to add and delete nodes; "
        "the NodeClass and NodePool that say what to launch are Kubernetes objects you apply",
    )
    training_operator: bool = Field(default=True, description="the HyperPod training operator add-on")
    task_governance: bool = Field(default=True, description="the HyperPod task governance add-on (Kueue)")


class ObservabilityMetricsSpec(StrictModel):
    """The level of each metric category HyperPod's observability add-on collects (its
    `metricsProvider`), with the values and defaults AWS's own setup template allows."""

    training: Literal["BASIC", "ADVANCED"] = "BASIC"
    task_governance: Literal["DISABLED", "ADVANCED"] = Field(
        default="DISABLED", description="Kueue's queue and quota metrics (needs eks.task_governance)"
    )
    scaling: Literal["DISABLED", "ADVANCED"] = Field(default="DISABLED", description="autoscaling metrics")
    cluster: Literal["BASIC", "ADVANCED"] = "BASIC"
    node: Literal["BASIC", "ADVANCED"] = "BASIC"
    accelerated_compute: Literal["BASIC", "ADVANCED"] = Field(
        default="BASIC", description="GPU (DCGM) and Neuron metrics"
    )
    network: Literal["DISABLED", "ADVANCED"] = Field(default="DISABLED", description="EFA metrics")


class ObservabilitySpec(StrictModel):
    """orchestrator eks: HyperPod's observability add-on (amazon-sagemaker-hyperpod-observability),
    writing the cluster's metrics to an Amazon Managed Service for Prometheus workspace."""

    metrics: ObservabilityMetricsSpec = Field(default_factory=ObservabilityMetricsSpec)
    logging: bool = Field(
        default=False,
        description="the add-on sends container logs to CloudWatch Logs, under the cluster's "
        "/aws/sagemaker/Clusters/<name>/ log groups",
    )
    prometheus_workspace: str | None = Field(
        default=None,
        pattern=r"^arn:aws[-a-z]*:aps:[a-z0-9-]+:\d{12}:workspace/[0-9A-Za-z][-.0-9A-Za-z_]*$",
        description="an existing Amazon Managed Service for Prometheus workspace's ARN to write to "
        "(default: a workspace is created for the cluster, encrypted with the project key)",
    )
    addon_version: str | None = Field(
        default=None,
        pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$",
        description="the add-on's version, e.g. v1.0.5-eksbuild.1 (default: EKS's default)",
    )


class TeamSpec(StrictModel):
    """A team's share of an EKS-orchestrated cluster (task governance: a ComputeQuota)."""

    quota: dict[str, int] = Field(
        default_factory=dict,
        description="instances per type guaranteed to the team, e.g. {ml.p5.48xlarge: 2}",
    )
    fair_share_weight: int = Field(default=0, ge=0, le=100)
    sharing: Literal["Lend", "DontLend", "LendAndBorrow"] = Field(
        default="LendAndBorrow", description="whether the team lends its idle quota and borrows others'"
    )
    borrow: dict[str, int] = Field(
        default_factory=dict, description="at most this many instances per type borrowed from others"
    )
    preempt: Literal["Never", "LowerPriority"] = Field(
        default="LowerPriority", description="whether the team's tasks preempt its own lower-priority tasks"
    )
    jobs: list[str] = Field(
        default_factory=list, description="the spec's jobs this team runs on the cluster (checked to fit)"
    )


class ClusterSpec(_ClusterBase):
    """A SageMaker HyperPod cluster in its own VPC, orchestrated by Slurm (the default: nodes in one
    Availability Zone as EFA needs, a security group open to itself, FSx for Lustre at /fsx) or by
    EKS (`orchestrator: eks`, an EKS control plane in the same VPC, with `teams:` sharing it)."""

    orchestrator: Literal["slurm", "eks"] = "slurm"
    eks: EksSpec | None = None
    teams: dict[EntryName, TeamSpec] = Field(default_factory=dict)
    priority_classes: dict[str, int] = Field(
        default_factory=dict,
        description="orchestrator eks: task priority classes and their weights (0-100), highest first",
    )
    fair_share: bool = Field(default=True, description="teams borrow idle compute by fair-share weight")
    observability: ObservabilitySpec | None = Field(
        default=None,
        description="orchestrator eks: HyperPod's observability add-on and its Prometheus workspace "
        "(default: none; {} turns it on with AWS's default metric levels)",
    )

    @model_validator(mode="after")
    def _eks_needs_its_settings(self) -> ClusterSpec:
        if self.orchestrator == "eks" and self.eks is None:
            raise ValueError("orchestrator: eks needs eks: {admin_roles: [<role ARN>]}")
        if self.orchestrator == "slurm" and self.eks is not None:
            raise ValueError("eks: is for orchestrator: eks")
        if self.eks and self.availability_zone and not self.eks.second_zone:
            raise ValueError("orchestrator: eks with a named availability_zone needs eks.second_zone")
        return self
