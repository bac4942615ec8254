"""Task governance of an EKS-orchestrated HyperPodCluster: the cluster policy
(AWS::SageMaker::ClusterSchedulerConfig) and one AWS::SageMaker::ComputeQuota per team, each the
request botocore's model accepts (validated with stand-ins at synth, rendered with the cluster's ARN).
aws-cdk-lib 2.275 has CfnClusterSchedulerConfig but no L1 for ComputeQuota: that one is a CfnResource
of the CloudFormation type, whose schema cfn-lint checks."""

from __future__ import annotations

from aws_cdk import CfnResource, CfnTag
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.clusters.models import ClusterSpec
from sagestack.clusters.teams import compute_quota_request, scheduler_config_request, stand_in_cluster_arn
from sagestack.constructs.nag import acknowledge
from sagestack.constructs.validation import stand_in_deployment
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.names import Names

CfnSchedulerConfig = sagemaker.CfnClusterSchedulerConfig


class ClusterTeams(Construct):
    """The cluster policy and the teams' compute quotas of one cluster (`teams:`)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        names: Names,
        key: str,
        spec: ClusterSpec,
        cluster_arn: str,
        tags: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(scope, id)
        stand_ins = stand_in_deployment(self, tags=tags)
        stand_in = stand_in_cluster_arn(stand_ins.region, stand_ins.account)
        validate_request(
            "CreateClusterSchedulerConfig", scheduler_config_request(names, key, spec, stand_in, tags)
        )
        policy = scheduler_config_request(names, key, spec, cluster_arn, tags)
        config = policy["SchedulerConfig"]
        self.policy = CfnSchedulerConfig(
            self,
            "Policy",
            name=policy["Name"],
            cluster_arn=cluster_arn,
            scheduler_config=CfnSchedulerConfig.SchedulerConfigProperty(
                fair_share=config["FairShare"],
                idle_resource_sharing=config["IdleResourceSharing"],
                priority_classes=[
                    CfnSchedulerConfig.PriorityClassProperty(name=c["Name"], weight=c["Weight"])
                    for c in config.get("PriorityClasses", [])
                ]
                or None,
            ),
            description=policy["Description"],
            tags=[CfnTag(key=t["Key"], value=t["Value"]) for t in policy.get("Tags", [])] or None,
        )
        self.quotas: dict[str, CfnResource] = {}
        for team_name, team in spec.teams.items():
            validate_request(
                "CreateComputeQuota", compute_quota_request(names, key, team_name, team, stand_in, tags)
            )
            quota = CfnResource(
                self,
                f"Quota-{team_name}",
                type="AWS::SageMaker::ComputeQuota",
                properties=compute_quota_request(names, key, team_name, team, cluster_arn, tags),
            )
            # The policy first: quotas are judged against its priority classes and sharing.
            quota.node.add_dependency(self.policy)
            acknowledge(
                quota,
                {
                    "CloudFormation-Validate::F3006": "AWS::SageMaker::ComputeQuota is a CloudFormation type "
                    "newer than the schemas cdk-nag bundles; cfn-lint 1.58's us-east-1 schema has it and "
                    "checks these properties (tests/constructs/test_clusters_eks.py).",
                },
            )
            self.quotas[team_name] = quota
