"""ModelPackageGroup: the project's model registry for one environment."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct


class ModelPackageGroup(Construct):
    """A SageMaker model package group. Stateful: keep its construct ID; retained outside dev.

    Props: group_name (explicit: pipelines and promotion refer to it by name), description,
    retain (default True).
    """

    def __init__(
        self, scope: Construct, id: str, *, group_name: str, description: str = "", retain: bool = True
    ) -> None:
        super().__init__(scope, id)
        self.resource = sagemaker.CfnModelPackageGroup(
            self,
            "Resource",
            model_package_group_name=group_name,
            model_package_group_description=description or None,
        )
        self.resource.apply_removal_policy(RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY)
        self.group_name = group_name
        self.group_arn = self.resource.attr_model_package_group_arn
