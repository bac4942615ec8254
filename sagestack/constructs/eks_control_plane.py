"""EksControlPlane: the EKS cluster that orchestrates a HyperPod cluster, as L1 resources (no kubectl
Lambda): API authentication with access entries for the admins and the deploying role, a private
endpoint, Kubernetes secrets envelope-encrypted with the project key, every control-plane log type,
and the add-ons HyperPod needs (the VPC CNI, the Pod Identity agent, cert-manager, the HyperPod
training operator and task governance)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, DefaultStackSynthesizer, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sagestack.clusters.models import EksSpec
from sagestack.constructs.nag import acknowledge, nag_text

LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
CLUSTER_ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
# The training operator's controller and the service account EKS binds its Pod Identity role to
# (AWS: "Using the HyperPod training operator", installation with the EKS add-on).
TRAINING_OPERATOR = ("aws-hyperpod", "hp-training-operator-controller-manager")


class EksControlPlane(Construct):
    """Props: name (the EKS cluster's), spec (the cluster's `eks:`), subnets (private, two zones or
    more), security_group (the HyperPod nodes' own, so nodes and control plane reach each other),
    encryption_key (envelope encryption of Kubernetes secrets)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        spec: EksSpec,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        encryption_key: kms.IKey,
    ) -> None:
        super().__init__(scope, id)
        self.spec = spec
        self.role = iam.Role(
            self,
            "ClusterRole",
            assumed_by=iam.ServicePrincipal("eks.amazonaws.com"),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonEKSClusterPolicy")],
            description=f"The EKS control plane of HyperPod cluster {name}",
        )
        acknowledge(
            self.role,
            {
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]": (
                    "The policy EKS documents for a cluster's service role; AWS keeps it to what the "
                    "control plane calls (ENIs in the cluster's subnets, load balancers, KMS grants)."
                ),
            },
        )
        public = bool(spec.public_endpoint_cidrs)
        self.resource = eks.CfnCluster(
            self,
            "Resource",
            name=name,
            version=spec.kubernetes_version,
            role_arn=self.role.role_arn,
            resources_vpc_config=eks.CfnCluster.ResourcesVpcConfigProperty(
                subnet_ids=[s.subnet_id for s in subnets],
                security_group_ids=[security_group.security_group_id],
                endpoint_private_access=True,
                endpoint_public_access=public,
                public_access_cidrs=list(spec.public_endpoint_cidrs) if public else None,
            ),
            # HyperPod supports API and API_AND_CONFIG_MAP; API alone: access entries, no aws-auth map.
            access_config=eks.CfnCluster.AccessConfigProperty(
                authentication_mode="API", bootstrap_cluster_creator_admin_permissions=False
            ),
            encryption_config=[
                eks.CfnCluster.EncryptionConfigProperty(
                    provider=eks.CfnCluster.ProviderProperty(key_arn=encryption_key.key_arn),
                    resources=["secrets"],
                )
            ],
            logging=eks.CfnCluster.LoggingProperty(
                cluster_logging=eks.CfnCluster.ClusterLoggingProperty(
                    enabled_types=[eks.CfnCluster.LoggingTypeConfigProperty(type=t) for t in LOG_TYPES]
                )
            ),
        )
        if public:
            acknowledge(
                self.resource,
                {
                    "AwsSolutions-EKS1": "The spec opens the Kubernetes API to the CIDRs it names "
                    "(eks.public_endpoint_cidrs) only, for the admins who install HyperPod's Helm chart.",
                },
            )
        self.cluster_name = name
        self.cluster_arn = self.resource.attr_arn
        self._access_entries()
        self.addons = self._addons()
        self.pod_identity_agent = self.addons[1]  # what every Pod Identity association needs first

    def _access_entries(self) -> None:
        """Cluster-admin access for each admin role of the spec and for CDK's deploy role (which
        deploys the stack and may run the Helm step): API authentication mode has no aws-auth map."""
        principals = {f"Admin{i}": arn for i, arn in enumerate(self.spec.admin_roles)}
        synthesizer = Stack.of(self).synthesizer
        if isinstance(synthesizer, DefaultStackSynthesizer):
            principals["Deployer"] = Fn.sub(synthesizer.deploy_role_arn)  # its ${AWS::…} placeholders
        for id, arn in principals.items():
            eks.CfnAccessEntry(
                self,
                id,
                cluster_name=self.resource.ref,
                principal_arn=arn,
                type="STANDARD",
                access_policies=[
                    eks.CfnAccessEntry.AccessPolicyProperty(
                        policy_arn=CLUSTER_ADMIN,
                        access_scope=eks.CfnAccessEntry.AccessScopeProperty(type="cluster"),
                    )
                ],
            )

    def _addons(self) -> list[eks.CfnAddon]:
        spec, stack = self.spec, Stack.of(self)
        addons = [
            eks.CfnAddon(
                self,
                "VpcCni",
                cluster_name=self.resource.ref,
                addon_name="vpc-cni",
                addon_version=spec.vpc_cni_version,
                resolve_conflicts="OVERWRITE",
            ),
            eks.CfnAddon(
                self, "PodIdentityAgent", cluster_name=self.resource.ref, addon_name="eks-pod-identity-agent"
            ),
        ]
        if spec.training_operator:
            cert_manager = eks.CfnAddon(
                self, "CertManager", cluster_name=self.resource.ref, addon_name="cert-manager"
            )
            role = iam.Role(
                self,
                "TrainingOperatorRole",
                assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com"),
                description=f"The HyperPod training operator of {self.cluster_name} (Pod Identity)",
            )
            role.assume_role_policy.add_statements(  # type: ignore[union-attr]
                iam.PolicyStatement(
                    actions=["sts:TagSession"], principals=[iam.ServicePrincipal("pods.eks.amazonaws.com")]
                )
            )
            clusters = stack.format_arn(
                service="sagemaker",
                resource="cluster",
                resource_name="*",
                arn_format=ArnFormat.SLASH_RESOURCE_NAME,
            )
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sagemaker:DescribeClusterNode", "sagemaker:ListClusterNodes"],
                    resources=[clusters],
                )
            )
            acknowledge(
                role,
                {
                    f"AwsSolutions-IAM5[Resource::{nag_text(role, clusters)}]": (
                        "HyperPod clusters get their ID at creation, after this role exists; the operator reads "
                        "node health only (DescribeClusterNode, ListClusterNodes)."
                    ),
                },
            )
            operator = eks.CfnAddon(
                self,
                "TrainingOperator",
                cluster_name=self.resource.ref,
                addon_name="amazon-sagemaker-hyperpod-training-operator",
                resolve_conflicts="OVERWRITE",
                pod_identity_associations=[
                    eks.CfnAddon.PodIdentityAssociationProperty(
                        role_arn=role.role_arn, service_account=TRAINING_OPERATOR[1]
                    )
                ],
            )
            operator.node.add_dependency(cert_manager, addons[1])
            addons += [cert_manager, operator]
        if spec.task_governance:
            addons.append(
                eks.CfnAddon(
                    self,
                    "TaskGovernance",
                    cluster_name=self.resource.ref,
                    addon_name="amazon-sagemaker-hyperpod-taskgovernance",
                )
            )
        return addons

    def helm_step(self, region: str) -> str:
        """The step HyperPod requires before its cluster is created (AWS: "Installing packages on the
        Amazon EKS cluster using Helm"), as commands that work as printed."""
        return (
            f"aws eks update-kubeconfig --region {region} --name {self.cluster_name} && "
            "git clone https://github.com/aws/sagemaker-hyperpod-cli.git && "
            "helm dependencies update sagemaker-hyperpod-cli/helm_chart/HyperPodHelmChart && "
            "helm install hyperpod-dependencies sagemaker-hyperpod-cli/helm_chart/HyperPodHelmChart "
            "--namespace kube-system"
        )
