"""HyperPodCluster: a SageMaker HyperPod cluster with the Slurm orchestrator, in a VPC of one
Availability Zone (EFA needs its nodes together), its nodes in a security group open to itself,
FSx for Lustre mounted on every node and linked to the artifact bucket's data/ prefix, lifecycle
scripts from the project, and a least-privilege role for the nodes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_deployment as s3_deployment
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.clusters.models import ClusterFsxSpec, ClusterSpec
from sagestack.clusters.request import ClusterContext, create_cluster_request, stand_in_cluster_context
from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.cluster_observability import ClusterObservability
from sagestack.constructs.cluster_props import (
    DEFAULT_FILE_SYSTEM,
    ClusterFileSystem,
    ClusterInstanceGroup,
    resolve_cluster_spec,
)
from sagestack.constructs.cluster_teams import ClusterTeams
from sagestack.constructs.compliance import acknowledge_compliance
from sagestack.constructs.eks_control_plane import EksControlPlane
from sagestack.constructs.log_encryption import allow_log_group_encryption
from sagestack.constructs.nag import acknowledge, acknowledge_at_synth, nag_text
from sagestack.constructs.prefix_deployment import deploy_to_prefix, grant_prefix
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.validation import stand_in_deployment
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.names import CLUSTER_TAG, Names

LUSTRE_PORTS = ((988, 988), (1018, 1023))


class HyperPodCluster(Construct):
    """Props:
    names / key: the cluster's name is Names.cluster(key).
    lifecycle_dir: the folder of lifecycle scripts (copied to the artifact bucket, code/clusters/<key>/).
    artifacts / encryption_key: the project's bucket and key.
    The cluster, as typed props (each default: the spec's):
      instance_groups: name -> ClusterInstanceGroup (required: at least one).
      file_system: ClusterFileSystem (default: 1200 GiB of FSx for Lustre at /fsx); None: none.
      on_create: the lifecycle script each node runs when created (default 'on_create.sh').
      node_recovery: replace faulty nodes automatically (default True).
      vpc_cidr: the new VPC's range (default '10.42.0.0/16').
      availability_zone: the new VPC's zone, e.g. 'us-east-1a' (default: the region's first; in a
        stack with an account, CDK looks the zones up with credentials at `cdk synth`). CDK's Vpc
        asks its stack for the region's zones even then: to skip that lookup, return the named
        zone from your stack's availability_zones (as sagestack's ClusterStack does).
    spec: or the cluster as the spec's `clusters:` entry (a ClusterSpec or its dict), in place of
      the typed props (the spec path's door); validated by the same model.
    vpc: default: a new VPC (public + private subnets in one Availability Zone, one NAT gateway,
      flow logs); pass one to use its private subnets.
    removal_policy: of the file system and of the Prometheus workspace `observability:` creates
      (default RETAIN).
    tags: cluster tags; sagestack:cluster=<key> is always added (`sagestack cost` groups by it).
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        names: Names,
        key: str,
        lifecycle_dir: str,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        instance_groups: Mapping[str, ClusterInstanceGroup] | None = None,
        file_system: ClusterFileSystem | None = DEFAULT_FILE_SYSTEM,
        on_create: str | None = None,
        node_recovery: bool | None = None,
        vpc_cidr: str | None = None,
        availability_zone: str | None = None,
        spec: ClusterSpec | Mapping[str, Any] | None = None,
        vpc: ec2.IVpc | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        cluster = resolve_cluster_spec(
            spec,
            instance_groups=instance_groups,
            file_system=file_system,
            on_create=on_create,
            node_recovery=node_recovery,
            vpc_cidr=vpc_cidr,
            availability_zone=availability_zone,
        )
        self.spec = cluster
        self.names = names
        self.key = key

        self.vpc = vpc or self._vpc(cluster.vpc_cidr, self._zones(cluster), encryption_key)
        private = self.vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, one_per_az=True)
        subnet = private.subnets[0]  # the nodes' (one zone: EFA and Lustre)
        self.security_group = ec2.SecurityGroup(
            self,
            "Nodes",
            vpc=self.vpc,
            description=f"HyperPod {names.cluster(key)}: nodes reach each other (EFA, Slurm, Lustre)",
            allow_all_outbound=True,
        )
        # EFA requires all traffic to and from the group itself.
        self.security_group.add_ingress_rule(
            self.security_group, ec2.Port.all_traffic(), "nodes of the cluster"
        )
        acknowledge_compliance(self.security_group, ["EC2RestrictedCommonPorts"])
        self.file_system = (
            self._file_system(cluster.fsx, subnet, artifacts, encryption_key, removal_policy)
            if cluster.fsx is not None
            else None
        )
        self.eks = (
            EksControlPlane(
                self,
                "Eks",
                name=names.eks_cluster(key),
                spec=cluster.eks,
                subnets=private.subnets,
                security_group=self.security_group,
                encryption_key=encryption_key,
            )
            if cluster.eks is not None
            else None
        )
        prefix = names.cluster_lifecycle_prefix(key)
        self.scripts = self._lifecycle_scripts(lifecycle_dir, artifacts, prefix)
        self.role = self._node_role(artifacts, prefix)
        tag_items = tuple(sorted((tags or {}).items()))
        self.autoscaling_role = self._autoscaling_role(
            tuple(sorted({**dict(tag_items), CLUSTER_TAG: key}.items()))
        )
        self.request = self._request(subnet, artifacts, encryption_key, tag_items)
        self.cluster_name = self.request["ClusterName"]
        self.resource: sagemaker.CfnCluster | None = None
        self.teams: ClusterTeams | None = None
        self.observability: ClusterObservability | None = None  # with the cluster, below
        self.cluster_arn: str | None = None
        if cluster.eks is not None and cluster.eks.helm_dependencies == "pending":
            return  # HyperPod's Helm chart goes on the EKS cluster first (EksControlPlane.helm_step)
        self.resource = self._cluster()
        self.cluster_arn = self.resource.attr_cluster_arn
        if self.eks is not None and (cluster.teams or cluster.priority_classes):
            self.teams = ClusterTeams(
                self,
                "Teams",
                names=names,
                key=key,
                spec=cluster,
                cluster_arn=self.cluster_arn,
                tags=tag_items,
            )
        self.observability = self._observability(encryption_key, removal_policy)

    def _observability(
        self, encryption_key: kms.IKey, removal_policy: RemovalPolicy
    ) -> ClusterObservability | None:
        """observability: HyperPod's add-on and its workspace, once the cluster has nodes."""
        if self.eks is None or self.resource is None or self.spec.observability is None:
            return None
        return ClusterObservability(
            self,
            "Observability",
            spec=self.spec.observability,
            control_plane=self.eks,
            cluster_name=self.cluster_name,
            after=self.resource,
            encryption_key=encryption_key,
            alias=self.names.cluster(self.key),
            removal_policy=removal_policy,
        )

    def _cluster(self) -> sagemaker.CfnCluster:
        """The AWS::SageMaker::Cluster carrying the request; on EKS, created after the add-ons."""
        resource = sagemaker.CfnCluster(self, "Resource", cluster_name=self.cluster_name)
        props = (
            "InstanceGroups",
            "VpcConfig",
            "Orchestrator",
            "NodeRecovery",
            "NodeProvisioningMode",
            "AutoScaling",
            "ClusterRole",
            "Tags",
        )
        for prop in props:
            if prop in self.request:
                resource.add_property_override(prop, self.request[prop])
        resource.node.add_dependency(self.scripts)
        if self.eks is not None:
            resource.node.add_dependency(*self.eks.addons)
        return resource

    def _file_system(
        self,
        spec: ClusterFsxSpec,
        subnet: ec2.ISubnet,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        removal_policy: RemovalPolicy,
    ) -> fsx.LustreFileSystem:
        """FSx for Lustre in the nodes' subnet, its /data linked to the bucket's data/ prefix."""
        file_system = fsx.LustreFileSystem(
            self,
            "Fsx",
            vpc=self.vpc,
            vpc_subnet=subnet,
            security_group=self.security_group,
            storage_capacity_gib=spec.storage_gib,
            kms_key=encryption_key,
            removal_policy=removal_policy,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType.PERSISTENT_2,
                per_unit_storage_throughput=spec.throughput_per_tib,
                data_compression_type=fsx.LustreDataCompressionType.LZ4,
            ),
        )
        fsx.CfnDataRepositoryAssociation(
            self,
            "Data",
            file_system_id=file_system.file_system_id,
            file_system_path="/data",
            data_repository_path=artifacts.s3_uri("data") + "/",
            batch_import_meta_data_on_create=True,
            s3=fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=["NEW", "CHANGED", "DELETED"]
                )
            ),
        )
        return file_system

    def _request(
        self,
        subnet: ec2.ISubnet,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        tags: tuple[tuple[str, str], ...],
    ) -> dict[str, Any]:
        """The CreateCluster request, validated with stand-ins, rendered with the stack's tokens."""

        cluster, names, key = self.spec, self.names, self.key
        tags = tuple(sorted({**dict(tags), CLUSTER_TAG: key}.items()))  # cost groups by it
        stand_ins = stand_in_cluster_context(
            stand_in_deployment(self, tags=tags), fsx=cluster.fsx is not None, eks=self.eks is not None
        )
        validate_request("CreateCluster", create_cluster_request(names, key, cluster, stand_ins))
        stack = Stack.of(self)
        deployment = Deployment(
            region=stack.region,
            account=stack.account,
            role_arn=self.role.role_arn,  # the nodes' own role
            bucket=artifacts.bucket_name,
            kms_key_id=encryption_key.key_arn,
            tags=tags,
        )
        context = ClusterContext(
            deployment=deployment,
            subnets=(subnet.subnet_id,),
            security_groups=(self.security_group.security_group_id,),
            fsx_dns_name=self.file_system.dns_name if self.file_system else None,
            fsx_mount_name=self.file_system.mount_name if self.file_system else None,
            eks_cluster_arn=self.eks.cluster_arn if self.eks else None,
            autoscaling_role_arn=self.autoscaling_role.role_arn if self.autoscaling_role else None,
        )
        return create_cluster_request(names, key, cluster, context)

    def _autoscaling_role(self, tags: tuple[tuple[str, str], ...]) -> iam.Role | None:
        """eks.autoscaling: the role HyperPod's managed Karpenter assumes to add and delete this
        cluster's nodes (AWS's documented trust and actions), held to the cluster by its tags: its ARN
        ends in an ID HyperPod assigns, so no name pattern can name it."""
        if self.spec.eks is None or not self.spec.eks.autoscaling:
            return None
        role = iam.Role(
            self,
            "AutoscalingRole",
            assumed_by=iam.ServicePrincipal("hyperpod.sagemaker.amazonaws.com"),
            description=f"HyperPod {self.names.cluster(self.key)}: Karpenter adds and removes nodes",
        )
        arn = Stack.of(self).format_arn(service="sagemaker", resource="cluster", resource_name="*")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions.CLUSTER_AUTOSCALING),
                resources=[arn],
                conditions={"StringEquals": {f"aws:ResourceTag/{k}": v for k, v in tags}},
            )
        )
        acknowledge(
            role,
            {
                f"AwsSolutions-IAM5[Resource::{nag_text(self, arn)}]": "A HyperPod cluster's ARN ends in an "
                "ID assigned at creation: the statement is held to this cluster by its tags (environment "
                "and sagestack:cluster), which CreateCluster sets.",
            },
        )
        return role

    @staticmethod
    def _zones(cluster: ClusterSpec) -> list[str] | int:
        """The VPC's zones: the named one (and EKS's second), or how many the region's first give."""
        if cluster.availability_zone is None:
            return 2 if cluster.eks is not None else 1
        second = [cluster.eks.second_zone] if cluster.eks is not None and cluster.eks.second_zone else []
        return [cluster.availability_zone, *second]

    def _lifecycle_scripts(
        self, lifecycle_dir: str, artifacts: ArtifactBucketBase, prefix: str
    ) -> s3_deployment.BucketDeployment:
        """The scripts, unzipped under the cluster's prefix (HyperPod reads a folder, not an archive),
        copied by a role that may write that prefix only (constructs/prefix_deployment.py)."""
        return deploy_to_prefix(
            self,
            "Lifecycle",
            source=lifecycle_dir,
            artifacts=artifacts,
            prefix=prefix,
            what="The lifecycle scripts of the cluster",
            role_description=f"Copies the lifecycle scripts of HyperPod cluster {self.names.cluster(self.key)}",
        )

    def _vpc(self, cidr: str, zones: list[str] | int, key: kms.IKey) -> ec2.Vpc:
        # EFA and Lustre: every node in one Availability Zone (an EKS control plane needs subnets in
        # a second). A named zone needs no lookup; without one, a stack with an account asks CDK for
        # the region's zones (a context lookup).
        zone = zones[0] if isinstance(zones, list) else None
        where: dict[str, Any] = (
            {"availability_zones": zones} if isinstance(zones, list) else {"max_azs": zones}
        )
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            **where,
            nat_gateways=1,
            subnet_configuration=[
                # the NAT gateway's only (it has an Elastic IP): nothing launched there gets a public address
                ec2.SubnetConfiguration(
                    name="public",
                    subnet_type=ec2.SubnetType.PUBLIC,
                    cidr_mask=24,
                    map_public_ip_on_launch=False,
                ),
                ec2.SubnetConfiguration(
                    name="nodes", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=18
                ),
            ],
        )
        # Flow logs under the project key, whose policy lets CloudWatch Logs use it for this group only
        flow_logs = self.names.cluster_flow_log_group(self.key)
        allow_log_group_encryption(key, flow_logs)
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                logs.LogGroup(
                    self,
                    "FlowLogs",
                    log_group_name=flow_logs,
                    retention=logs.RetentionDays.ONE_MONTH,
                    encryption_key=key,
                )
            ),
        )
        vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        acknowledge_compliance(vpc, ["VPCDefaultSecurityGroupClosed", "VPCNoUnrestrictedRouteToIGW"])
        if zone:
            acknowledge(
                vpc,
                {
                    "CloudFormation-Validate::W3010": "The zone is the one the cluster's spec names "
                    "(availability_zone:), where its capacity is: a chosen zone, not a hard-coded guess."
                },
            )
        return vpc

    def _node_role(self, artifacts: ArtifactBucketBase, prefix: str) -> iam.Role:
        """What a node does as the cluster's execution role: read its lifecycle scripts, manage its
        network interfaces, write its logs and metrics, and take SSM sessions (how people log in)."""
        stack = Stack.of(self)
        role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"Nodes of HyperPod cluster {self.names.cluster(self.key)}",
        )
        scripts = grant_prefix(role, artifacts, prefix, actions.S3_OBJECTS_READ, actions.KMS_DECRYPT)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[*actions.VPC_NETWORK_INTERFACES, "ec2:DetachNetworkInterface"],
                resources=["*"],
                conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
            )
        )
        logs_arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name="/aws/sagemaker/Clusters/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_policy(iam.PolicyStatement(actions=list(actions.LOGS_WRITE), resources=[logs_arn]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=list(actions.METRICS_PUT),
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/Clusters*"]}},
            )
        )
        role.add_to_policy(iam.PolicyStatement(actions=list(actions.SSM_SESSIONS), resources=["*"]))
        if self.eks is not None:
            self._kubernetes_node_grants(role)
        acknowledge(
            role,
            {
                "AwsSolutions-IAM5[Resource::*]": "EC2 network-interface calls, cloudwatch:PutMetricData and the "
                "ssmmessages channel calls have no resource-level permissions; EC2 is limited to the stack's "
                "region and metrics to HyperPod's namespace by condition."
                + (
                    " On an EKS node also the VPC CNI's Describe calls and ecr:GetAuthorizationToken, "
                    "which have none either."
                    if self.eks is not None
                    else ""
                ),
                f"AwsSolutions-IAM5[Resource::{nag_text(self, logs_arn)}]": "Log streams in HyperPod's own "
                "/aws/sagemaker/Clusters log groups, which SageMaker names per cluster.",
            },
        )
        acknowledge_at_synth(
            role,
            {
                lambda c: f"AwsSolutions-IAM5[Resource::{nag_text(c, scripts)}]": "The cluster's lifecycle "
                "scripts under its own code/clusters/<cluster>/ prefix.",
            },
        )
        return role

    def _kubernetes_node_grants(self, role: iam.Role) -> None:
        """What an EKS-orchestrated node does besides: the VPC CNI (which runs as the node) gives pods
        addresses on the node's interfaces, the kubelet pulls images and joins its cluster, and pods
        take Pod Identity roles."""
        assert self.eks is not None
        stack = Stack.of(self)

        def ec2_arn(resource: str) -> str:
            return stack.format_arn(service="ec2", resource=resource, resource_name="*")

        interfaces, instances = ec2_arn("network-interface"), ec2_arn("instance")
        role.add_to_policy(
            iam.PolicyStatement(
                actions=list(actions.EKS_NODE_INTERFACES),
                resources=[interfaces, instances],
            )
        )
        role.add_to_policy(iam.PolicyStatement(actions=list(actions.EKS_NODE_DESCRIBE), resources=["*"]))
        # Images of AWS's add-on registries (their accounts differ per region) and the project's own.
        repositories = stack.format_arn(service="ecr", account="*", resource="repository", resource_name="*")
        role.add_to_policy(iam.PolicyStatement(actions=list(actions.ECR_PULL), resources=[repositories]))
        role.add_to_policy(iam.PolicyStatement(actions=list(actions.ECR_AUTH), resources=["*"]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["eks:DescribeCluster", "eks-auth:AssumeRoleForPodIdentity"],
                resources=[self.eks.cluster_arn],
            )
        )
        acknowledge(
            role,
            {
                f"AwsSolutions-IAM5[Resource::{nag_text(role, interfaces)}]": "The VPC CNI assigns pod "
                "addresses on the node's interfaces, which exist only at run time; this account and region.",
                f"AwsSolutions-IAM5[Resource::{nag_text(role, instances)}]": "The VPC CNI attaches interfaces "
                "to its own node, an instance HyperPod launches at run time; this account and region.",
                f"AwsSolutions-IAM5[Resource::{nag_text(role, repositories)}]": "Images of the EKS add-ons "
                "live in AWS's registries, whose accounts differ per region; pulls only, this region.",
            },
        )
