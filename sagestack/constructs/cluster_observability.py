"""ClusterObservability: HyperPod's observability add-on on an EKS-orchestrated cluster, the Amazon
Managed Service for Prometheus workspace it writes to (encrypted with the project key) and the Pod
Identity role of its collector, which may write to that workspace and, with logging, to the
cluster's own log groups only."""

from __future__ import annotations

from aws_cdk import ArnFormat, CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct

from sagestack.clusters.models import ObservabilitySpec
from sagestack.clusters.observability import (
    ADDON,
    SERVICE_ACCOUNT,
    addon_configuration,
    remote_write_endpoint,
    workspace_of,
)
from sagestack.constructs import actions
from sagestack.constructs.eks_control_plane import EksControlPlane
from sagestack.constructs.nag import acknowledge, nag_texts

PODS = "pods.eks.amazonaws.com"


class ClusterObservability(Construct):
    """Props:
    spec: the cluster's `observability:`.
    control_plane: the EKS cluster the add-on goes on (its Pod Identity agent goes first).
    cluster_name: the HyperPod cluster's name (its log groups are /aws/sagemaker/Clusters/<name>/…).
    after: the HyperPod cluster: the add-on's pods need a node to run on, so it is created after.
    encryption_key: the workspace's key (when sagestack creates the workspace).
    alias: the workspace's alias.
    removal_policy: of the workspace (default RETAIN: its metrics are kept)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        spec: ObservabilitySpec,
        control_plane: EksControlPlane,
        cluster_name: str,
        after: IConstruct,
        encryption_key: kms.IKey,
        alias: str,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.workspace: aps.CfnWorkspace | None = None
        if spec.prometheus_workspace is None:
            self.workspace = aps.CfnWorkspace(
                self, "Workspace", alias=alias, kms_key_arn=encryption_key.key_arn
            )
            self.workspace.apply_removal_policy(removal_policy)
            self.workspace_arn = self.workspace.attr_arn
            endpoint = remote_write_endpoint(stack.region, self.workspace.attr_workspace_id, stack.url_suffix)
        else:
            self.workspace_arn = spec.prometheus_workspace
            _, region, workspace_id = workspace_of(spec.prometheus_workspace)
            endpoint = remote_write_endpoint(region, workspace_id, stack.url_suffix)
        self.role = self._role(spec, control_plane, cluster_name)
        self.addon = eks.CfnAddon(
            self,
            "Addon",
            cluster_name=control_plane.resource.ref,
            addon_name=ADDON,
            addon_version=spec.addon_version,
            resolve_conflicts="OVERWRITE",
            configuration_values=stack.to_json_string(
                addon_configuration(spec, workspace_arn=self.workspace_arn, endpoint=endpoint)
            ),
            pod_identity_associations=[
                eks.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=self.role.role_arn, service_account=SERVICE_ACCOUNT
                )
            ],
        )
        # the role's policy in place before the collector starts writing (the ARN orders the role only)
        policy = self.role.node.find_child("DefaultPolicy")
        self.addon.node.add_dependency(control_plane.pod_identity_agent, after, policy)
        CfnOutput(self, "PrometheusEndpoint", value=endpoint, description="Query it, or add it to Grafana")

    def _role(self, spec: ObservabilitySpec, control_plane: EksControlPlane, cluster_name: str) -> iam.Role:
        """The collector's Pod Identity role: trusted by EKS Pod Identity for this EKS cluster of this
        account only (AWS's documented trust), allowed what AWS's setup grants, held to this
        cluster's workspace and log groups."""
        stack = Stack.of(self)
        principal = iam.ServicePrincipal(PODS).with_conditions(
            {
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnEquals": {"aws:SourceArn": control_plane.cluster_arn},
            }
        )
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.SessionTagsPrincipal(principal),
            description=f"HyperPod observability add-on of {cluster_name} (Pod Identity)",
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=list(actions.PROMETHEUS_REMOTE_WRITE), resources=[self.workspace_arn])
        )
        if not spec.logging:
            return role
        groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"/aws/sagemaker/Clusters/{cluster_name}/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        streams = f"{groups}:log-stream:*"
        role.add_to_policy(
            iam.PolicyStatement(actions=list(actions.OBSERVABILITY_LOG_GROUPS), resources=[groups])
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=list(actions.OBSERVABILITY_LOG_STREAMS), resources=[streams])
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=list(actions.OBSERVABILITY_LOGS_UNSCOPED), resources=["*"])
        )
        group_text, stream_text = nag_texts(self, [groups, streams])
        acknowledge(
            role,
            {
                f"AwsSolutions-IAM5[Resource::{group_text}]": "The HyperPod cluster's own log groups, "
                "which SageMaker names /aws/sagemaker/Clusters/<cluster>/<cluster ID> (the ID is "
                "assigned at creation).",
                f"AwsSolutions-IAM5[Resource::{stream_text}]": "Log streams the add-on's collector "
                "creates at run time, in the cluster's own log groups only.",
                "AwsSolutions-IAM5[Resource::*]": "logs:DescribeLogGroups and logs:StopQuery have no "
                "resource type in IAM's authorization data; AWS's add-on setup grants both.",
            },
        )
        return role
