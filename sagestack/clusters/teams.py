"""Task governance of an EKS-orchestrated HyperPod cluster: the cluster policy (the
CreateClusterSchedulerConfig request: priority classes, fair share, idle-compute sharing) and one
compute quota per team (CreateComputeQuota: instances per type, fair-share weight, lending and
borrowing). AWS::SageMaker::ClusterSchedulerConfig and AWS::SageMaker::ComputeQuota carry the same
shapes; both are validated against botocore's model at synth."""

from __future__ import annotations

import hashlib
from typing import Any

from sagestack.clusters.models import ClusterSpec, TeamSpec
from sagestack.core.names import Names

NAME_MAX = 63  # EntityName


def _entity_name(base: str, suffix: str) -> str:
    """`base-suffix`, shortened with a digest when longer than an EntityName may be."""
    name = f"{base}-{suffix}"
    if len(name) <= NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: NAME_MAX - 9]}-{digest}"


def scheduler_config_name(names: Names, key: str) -> str:
    return _entity_name(names.cluster(key), "policy")


def compute_quota_name(names: Names, key: str, team: str) -> str:
    return _entity_name(names.cluster(key), team)


def _tags(tags: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return {"Tags": [{"Key": k, "Value": v} for k, v in tags]} if tags else {}


def scheduler_config_request(
    names: Names, key: str, spec: ClusterSpec, cluster_arn: str, tags: tuple[tuple[str, str], ...] = ()
) -> dict[str, Any]:
    """The cluster policy: priority classes (highest weight first), fair share, and idle compute
    shared when any team lends."""
    ranked = sorted(spec.priority_classes.items(), key=lambda item: (-item[1], item[0]))
    sharing = any(t.sharing != "DontLend" for t in spec.teams.values())
    config: dict[str, Any] = {
        "FairShare": "Enabled" if spec.fair_share else "Disabled",
        "IdleResourceSharing": "Enabled" if sharing else "Disabled",
    }
    if ranked:
        config["PriorityClasses"] = [{"Name": n, "Weight": w} for n, w in ranked]
    return {
        "Name": scheduler_config_name(names, key),
        "ClusterArn": cluster_arn,
        "SchedulerConfig": config,
        "Description": f"Task governance of HyperPod cluster {names.cluster(key)} (sagestack)",
        **_tags(tags),
    }


def compute_quota_request(
    names: Names,
    key: str,
    team_name: str,
    team: TeamSpec,
    cluster_arn: str,
    tags: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """One team's compute quota."""
    sharing: dict[str, Any] = {"Strategy": team.sharing}
    if team.borrow and team.sharing == "LendAndBorrow":
        sharing["AbsoluteBorrowLimits"] = [
            {"InstanceType": t, "Count": n} for t, n in sorted(team.borrow.items())
        ]
    return {
        "Name": compute_quota_name(names, key, team_name),
        "ClusterArn": cluster_arn,
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [{"InstanceType": t, "Count": n} for t, n in sorted(team.quota.items())],
            "ResourceSharingConfig": sharing,
            "PreemptTeamTasks": team.preempt,
        },
        "ComputeQuotaTarget": {"TeamName": team_name, "FairShareWeight": team.fair_share_weight},
        "ActivationState": "Enabled",
        "Description": f"Team {team_name}'s share of HyperPod cluster {names.cluster(key)} (sagestack)",
        **_tags(tags),
    }


def stand_in_cluster_arn(region: str, account: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:cluster/abcdef012345"
