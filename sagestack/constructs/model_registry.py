"""ModelPackageGroup: a model registry — the versions a pipeline registers and an endpoint serves."""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.prop_types import typed_props


class ModelPackageGroupBase(Construct):
    """What a model package group offers, created here or imported
    (`ModelPackageGroup.from_model_package_group_name`)."""

    group_name: str

    @property
    def group_arn(self) -> str:
        """Built from the name (no cross-stack reference: grants in other stacks use it freely)."""
        return Stack.of(self).format_arn(
            service="sagemaker", resource="model-package-group", resource_name=self.group_name
        )

    @property
    def packages_arn(self) -> str:
        """Every version of the group: arn:…:model-package/<group>/*."""
        return Stack.of(self).format_arn(
            service="sagemaker", resource="model-package", resource_name=f"{self.group_name}/*"
        )

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Describe and list the group and its versions (what promotion and deployment read)."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(actions.MODEL_PACKAGES_READ),
            resource_arns=[self.group_arn, self.packages_arn],
        )

    def grant_register(self, grantee: iam.IGrantable) -> iam.Grant:
        """Register new versions (CreateModelPackage, tagged)."""
        grant = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(actions.MODEL_PACKAGES_CREATE),
            resource_arns=[self.group_arn, self.packages_arn],
        )
        principal = grantee.grant_principal
        if isinstance(principal, iam.Role):
            acknowledge(
                principal,
                {
                    f"AwsSolutions-IAM5[Resource::{nag_text(principal, self.packages_arn)}]": "Versions of "
                    "this model package group: each registration creates a new version number."
                },
            )
        return grant


class _ImportedModelPackageGroup(ModelPackageGroupBase):
    def __init__(self, scope: Construct, id: str, group_name: str) -> None:
        super().__init__(scope, id)
        self.group_name = group_name


class ModelPackageGroup(ModelPackageGroupBase):
    """A SageMaker model package group. Stateful: keep its construct ID.

    Props:
      group_name: explicit (pipelines and promotion refer to it by name; see Names.model_package_group).
      description: default none.
      removal_policy: default RETAIN.

    It has no resource policy: another account never reads it. Promotion copies a package into the
    target account's own group (`PromotionReaderRole` / `PromoterPolicy`, constructs/promotion.py).
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        group_name: str,
        description: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        self.group_name = group_name
        self.resource = sagemaker.CfnModelPackageGroup(
            self,
            "Resource",
            model_package_group_name=group_name,
            model_package_group_description=description or None,
        )
        self.resource.apply_removal_policy(removal_policy)

    @staticmethod
    @typed_props
    def from_model_package_group_name(scope: Construct, id: str, group_name: str) -> ModelPackageGroupBase:
        """A group that already exists (another environment's registry, or one made by hand)."""
        return _ImportedModelPackageGroup(scope, id, group_name)
