"""ExecutionRole: the role SageMaker jobs run as, scoped to the project's own resources."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sagestack.constructs.checkpoint_bucket import PREFIXES, CheckpointBucket
from sagestack.constructs.nag import acknowledge, nag_text

# SageMaker's own log groups; a job can write only its own kind's streams.
LOG_GROUPS = ("TrainingJobs", "Endpoints", "CompilationJobs", "ProcessingJobs")


class ExecutionRole(Construct):
    """A role SageMaker assumes for training, tuning, compilation and hosting.

    It may read and write only the project bucket's prefixes, use the project key, write to
    SageMaker's log groups and metrics, and pull the images granted with `TrainingImage.grant_pull`.
    Props: artifacts (the CheckpointBucket), encryption_key, role_name (default: generated),
    vpc_access (default False: add ENI permissions for jobs in a VPC).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        artifacts: CheckpointBucket,
        encryption_key: kms.IKey,
        role_name: str | None = None,
        vpc_access: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self.role = iam.Role(
            self,
            "Resource",
            role_name=role_name,
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="SageMaker execution role for sagestack jobs and endpoints",
        )
        artifacts.grant_prefix_read_write(self.role)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=[encryption_key.key_arn],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kms:CreateGrant", "kms:DescribeKey"],
                resources=[encryption_key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            )
        )
        stack = Stack.of(self)
        log_group_arns = [
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=f"/aws/sagemaker/{g}:*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for g in LOG_GROUPS
        ]
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                resources=log_group_arns,
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "aws/sagemaker/*"]}},
            )
        )
        if vpc_access:
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "ec2:CreateNetworkInterface",
                        "ec2:CreateNetworkInterfacePermission",
                        "ec2:DeleteNetworkInterface",
                        "ec2:DeleteNetworkInterfacePermission",
                        "ec2:DescribeNetworkInterfaces",
                        "ec2:DescribeVpcs",
                        "ec2:DescribeDhcpOptions",
                        "ec2:DescribeSubnets",
                        "ec2:DescribeSecurityGroups",
                    ],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
                )
            )
        self.role_arn = self.role.role_arn
        self._acknowledge(artifacts, log_group_arns)

    def _acknowledge(self, artifacts: CheckpointBucket, log_group_arns: list[str]) -> None:
        """Each wildcard the role holds, and why it is the narrowest form possible."""
        findings = {
            "AwsSolutions-IAM5[Resource::*]": "ecr:GetAuthorizationToken, cloudwatch:PutMetricData and the "
            "EC2 network-interface calls have no resource-level permissions; PutMetricData is limited to "
            "SageMaker namespaces and EC2 calls to the stack's region by condition.",
        }
        for p in PREFIXES:
            arn = nag_text(self, f"{artifacts.bucket.bucket_arn}/{p}/*")
            findings[f"AwsSolutions-IAM5[Resource::{arn}]"] = (
                f"Objects under the project bucket's '{p}/' prefix, which SageMaker jobs read and write."
            )
        for arn in log_group_arns:
            findings[f"AwsSolutions-IAM5[Resource::{nag_text(self, arn)}]"] = (
                "Log streams in one of SageMaker's own /aws/sagemaker log groups, which SageMaker names per job."
            )
        acknowledge(self.role, findings)
