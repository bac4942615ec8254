"""HyperPodCluster's typed props: its instance groups and its file system in CDK types. They build
the spec's own `clusters:` entry (clusters.models.ClusterSpec), so one model validates both doors
and one renderer (clusters.request) renders the CreateCluster request from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Size
from pydantic import ValidationError

from sagestack.clusters.models import ClusterSpec
from sagestack.constructs.prop_types import typed_fields


@typed_fields
@dataclass(frozen=True)
class ClusterInstanceGroup:
    """One instance group of the cluster. Each None takes the spec's default.

    instance_type: an 'ml.…' type HyperPod offers (required).
    count: instances (default 1).
    node_type: 'Controller' | 'Login' | 'Compute' (default 'Compute').
    threads_per_core: 1 turns hyper-threading off (default: the instance type's).
    volume_size: an extra EBS volume per node, mounted at /opt/sagemaker (default: none).
    partitions: the Slurm partitions of compute nodes (default: none).
    training_plan: a training plan ARN that reserves this group (default: none).
    deep_health_checks: InstanceStress and InstanceConnectivity on accelerated nodes at start
      (default True).
    """

    instance_type: str
    count: int | None = None
    node_type: str | None = None
    threads_per_core: int | None = None
    volume_size: Size | None = None
    partitions: Sequence[str] = ()
    training_plan: str | None = None
    deep_health_checks: bool | None = None

    def spec(self) -> dict[str, Any]:
        """This group as a `clusters:` entry's instance group (unset keys omitted)."""
        entry: dict[str, Any] = {
            "instance_type": self.instance_type,
            "count": self.count,
            "node_type": self.node_type,
            "threads_per_core": self.threads_per_core,
            "volume_size_gb": int(self.volume_size.to_gibibytes()) if self.volume_size else None,
            "partitions": list(self.partitions) or None,
            "training_plan": self.training_plan,
            "deep_health_checks": self.deep_health_checks,
        }
        return {k: v for k, v in entry.items() if v is not None}


@typed_fields
@dataclass(frozen=True)
class ClusterFileSystem:
    """FSx for Lustre (PERSISTENT_2) that every node mounts, linked to the bucket's data/ prefix.
    Each None takes the spec's default.

    storage: 1200 GiB or a multiple of 2400 GiB (default 1200 GiB).
    throughput_per_tib: MB/s per TiB: 125 | 250 | 500 | 1000 (default 250).
    mount_path: where the nodes mount it (default '/fsx').
    """

    storage: Size | None = None
    throughput_per_tib: int | None = None
    mount_path: str | None = None

    def spec(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "storage_gib": int(self.storage.to_gibibytes()) if self.storage else None,
            "throughput_per_tib": self.throughput_per_tib,
            "mount_path": self.mount_path,
        }
        return {k: v for k, v in entry.items() if v is not None}


DEFAULT_FILE_SYSTEM = ClusterFileSystem()


def resolve_cluster_spec(
    spec: ClusterSpec | Mapping[str, Any] | None,
    *,
    instance_groups: Mapping[str, ClusterInstanceGroup] | None,
    file_system: ClusterFileSystem | None,
    on_create: str | None,
    node_recovery: bool | None,
    vpc_cidr: str | None,
    availability_zone: str | None = None,
) -> ClusterSpec:
    """The cluster as the spec's ClusterSpec, from either door: the typed props (instance_groups …)
    or `spec` (a `clusters:` entry, or its dict); ValueError when both or neither are given, or
    listing what the model refuses."""
    typed = (on_create, node_recovery, vpc_cidr, availability_zone)
    if spec is not None:
        if instance_groups is not None or file_system is not DEFAULT_FILE_SYSTEM or typed != (None,) * 4:
            raise ValueError(
                "HyperPodCluster: give either spec or the typed props (instance_groups …), not both"
            )
        return spec if isinstance(spec, ClusterSpec) else ClusterSpec.model_validate(dict(spec))
    if instance_groups is None:
        raise ValueError("HyperPodCluster: give instance_groups (or spec, a `clusters:` entry)")
    entry: dict[str, Any] = {
        "instance_groups": {name: g.spec() for name, g in instance_groups.items()},
        "fsx": file_system.spec() if file_system else None,
    }
    if on_create is not None:
        entry["lifecycle"] = {"on_create": on_create}
    if node_recovery is not None:
        entry["node_recovery"] = "Automatic" if node_recovery else "None"
    if vpc_cidr is not None:
        entry["vpc_cidr"] = vpc_cidr
    if availability_zone is not None:
        entry["availability_zone"] = availability_zone
    try:
        return ClusterSpec.model_validate(entry)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
        raise ValueError(f"HyperPodCluster: {problems}") from None
