"""ClusterStack: the HyperPod clusters of one environment (clusters: in the spec)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from constructs import Construct

from sagestack.app.foundation import FoundationStack
from sagestack.constructs.cluster import HyperPodCluster
from sagestack.project import ResolvedEnvironment


class ClusterStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: ResolvedEnvironment,
        foundation: FoundationStack,
        project_root: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        zones = [c.availability_zone for c in plan.spec.clusters.values()]
        seconds = [c.eks.second_zone for c in plan.spec.clusters.values() if c.eks and c.eks.second_zone]
        self._named_zones = sorted({z for z in [*zones, *seconds] if z}) if all(zones) else []
        self.clusters: dict[str, HyperPodCluster] = {}
        for key, spec in plan.spec.clusters.items():
            cluster = HyperPodCluster(
                self,
                f"Cluster-{key}",
                names=plan.names,
                key=key,
                spec=spec,
                lifecycle_dir=str(project_root / spec.lifecycle.source_dir),
                artifacts=foundation.artifacts,
                encryption_key=foundation.key,
                removal_policy=RemovalPolicy.RETAIN if plan.retain_data else RemovalPolicy.DESTROY,
                tags=plan.tags,
            )
            self.clusters[key] = cluster
            CfnOutput(self, f"ClusterName{key.replace('-', '')}", value=cluster.cluster_name)
            if cluster.eks is not None:
                CfnOutput(
                    self,
                    f"HelmStep{key.replace('-', '')}",
                    value=cluster.eks.helm_step(self.region),
                    description="Run before the HyperPod cluster is created (then set "
                    f"clusters.{key}.eks.helm_dependencies: installed)",
                )

    @property
    def availability_zones(self) -> list[str]:
        """The zones the clusters name, when each names one: CDK's Vpc asks its stack for the
        region's zones even when given its own, which in a stack with an account is a context
        lookup (app/lookups.py reports it when unresolved)."""
        return getattr(self, "_named_zones", None) or super().availability_zones
