"""ModelPackageGroup: the project's model registry for one environment."""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct


class ModelPackageGroup(Construct):
    """A SageMaker model package group. Stateful: keep its construct ID; retained outside dev.

    Props: group_name (explicit: pipelines and promotion refer to it by name), description,
    retain (default True), reader_accounts: accounts that may read the group's packages (the
    environments models are promoted to; default none).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        group_name: str,
        description: str = "",
        retain: bool = True,
        reader_accounts: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        policy = None
        if reader_accounts:
            group_arn = stack.format_arn(
                service="sagemaker", resource="model-package-group", resource_name=group_name
            )
            packages_arn = stack.format_arn(
                service="sagemaker", resource="model-package", resource_name=f"{group_name}/*"
            )
            policy = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "PromotionTargetsReadPackages",
                        "Effect": "Allow",
                        "Principal": {"AWS": [f"arn:{Aws.PARTITION}:iam::{a}:root" for a in reader_accounts]},
                        "Action": [
                            "sagemaker:DescribeModelPackage",
                            "sagemaker:DescribeModelPackageGroup",
                            "sagemaker:ListModelPackages",
                        ],
                        "Resource": [group_arn, packages_arn],
                    }
                ],
            }
        self.resource = sagemaker.CfnModelPackageGroup(
            self,
            "Resource",
            model_package_group_name=group_name,
            model_package_group_description=description or None,
            model_package_group_policy=policy,
        )
        self.resource.apply_removal_policy(RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY)
        self.group_name = group_name
        self.group_arn = self.resource.attr_model_package_group_arn
