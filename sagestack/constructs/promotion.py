"""Promotion across accounts, both sides and nothing more: the source environment's
`PromotionReaderRole` (the target's promoter assumes it to read the source's packages and their
artifacts) and the target environment's `PromoterPolicy` (assume that role, copy into the target's
own bucket under models/promoted/, register in the target's own group). The target serves only
what it owns: no bucket, key or group policy of either side names the other account.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase, checked_prefixes
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.prop_types import typed_props

# Where the packages sagestack registers keep their artifacts: compiled models (models/compiled/),
# a copy promoted from upstream (models/promoted/), raw training output (uncompiled endpoints,
# transforms: output/), optimized LLMs (optimized/).
PACKAGE_PREFIXES = ("models", "output", "optimized")
# Where a promotion writes its copy in the target's bucket (S3Layout.promoted).
PROMOTED_PREFIX = "models/promoted"


def _via_s3() -> dict[str, dict[str, str]]:
    return {"StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"}}


class PromotionReaderRole(Construct):
    """The role a downstream environment's promoter assumes to read this environment's packages
    and their artifacts (`sagestack promote ENTRY --from <this> --to <downstream>`).

    Props:
      role_name: its physical name (Names.promotion_reader_role: the promoter builds its ARN).
      reader_accounts: the accounts of the environments that promote from this one — the only
        principals its trust policy names (one or more).
      model_registry: this environment's group; the role describes and lists it and its versions.
      artifacts: this environment's bucket; the role reads objects under `prefixes` and lists only them.
      encryption_key: the bucket's key; the role decrypts with it through S3 only (kms:ViaService).
      prefixes: default models/, output/, optimized/ (where registered packages keep their artifacts).
      max_session: default one hour.
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        role_name: str,
        reader_accounts: Sequence[str],
        model_registry: ModelPackageGroupBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        prefixes: Sequence[str] = PACKAGE_PREFIXES,
        max_session: Duration | None = None,
    ) -> None:
        super().__init__(scope, id)
        if not reader_accounts:
            raise ValueError("PromotionReaderRole: reader_accounts names no account; create no role instead")
        prefixes = checked_prefixes(prefixes)
        self.reader_accounts = tuple(sorted(set(reader_accounts)))
        self.role = iam.Role(
            self,
            "Role",
            role_name=role_name,
            assumed_by=iam.CompositePrincipal(*(iam.AccountPrincipal(a) for a in self.reader_accounts)),
            max_session_duration=max_session or Duration.hours(1),
            description="sagestack promotion: read this environment's model packages and their "
            "artifacts for " + ", ".join(self.reader_accounts),
        )
        model_registry.grant_read(self.role)
        objects = [artifacts.bucket.arn_for_objects(f"{p}/*") for p in prefixes]
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions.S3_OBJECT_GET), resources=objects)
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions.S3_LIST),
                resources=[artifacts.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}/*" for p in prefixes]}},
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions.KMS_DECRYPT), resources=[encryption_key.key_arn], conditions=_via_s3()
            )
        )
        acknowledge(
            self.role,
            {
                f"AwsSolutions-IAM5[Resource::{nag_text(self, model_registry.packages_arn)}]": "Every "
                "version of this environment's group: the promoter finds the package registered for its "
                "entry among them (read only).",
                **{
                    f"AwsSolutions-IAM5[Resource::{nag_text(self, arn)}]": "The objects under a prefix "
                    "where registered packages keep their artifacts (compiled models, training output, "
                    "optimized LLMs), which the promoter copies file by file (read only)."
                    for arn in objects
                },
            },
        )

    @property
    def role_arn(self) -> str:
        return self.role.role_arn


class PromoterPolicy(Construct):
    """A managed policy for whoever runs `sagestack promote ENTRY --from <source> --to <this>` in
    this environment's account (attach it to a CI role or a person's role).

    Props:
      policy_name: its physical name (Names.promoter_policy).
      source_reader_role_arn: the source environment's PromotionReaderRole (an account of "*" when the
        source names none: its trust policy still decides who may assume it).
      model_registry: this environment's group, where the copy is registered.
      artifacts: this environment's bucket; the copy goes under models/promoted/.
      encryption_key: the bucket's key (the copy is encrypted with it, through S3 only).
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        policy_name: str,
        source_reader_role_arn: str,
        model_registry: ModelPackageGroupBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
    ) -> None:
        super().__init__(scope, id)
        packages = [model_registry.group_arn, model_registry.packages_arn]
        copies = artifacts.bucket.arn_for_objects(f"{PROMOTED_PREFIX}/*")
        self.policy = iam.ManagedPolicy(
            self,
            "Policy",
            managed_policy_name=policy_name,
            description="sagestack promote into this environment: read the source through its reader "
            "role, copy into models/promoted/, register in this environment's group",
            statements=[
                iam.PolicyStatement(
                    sid="AssumeSourceReader",
                    actions=list(actions.ROLE_ASSUME),
                    resources=[source_reader_role_arn],
                ),
                iam.PolicyStatement(
                    sid="FindBucket",  # the ArtifactsBucketName output of this stack, exactly
                    actions=list(actions.STACK_DESCRIBE),
                    resources=[Aws.STACK_ID],
                ),
                iam.PolicyStatement(
                    sid="WriteCopies",
                    actions=[*actions.S3_OBJECT_PUT, *actions.S3_OBJECT_GET, *actions.S3_MULTIPART_ABORT],
                    resources=[copies],
                ),
                iam.PolicyStatement(
                    sid="ListCopies",
                    actions=list(actions.S3_LIST),
                    resources=[artifacts.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{PROMOTED_PREFIX}/*"]}},
                ),
                iam.PolicyStatement(
                    sid="EncryptCopies",
                    actions=list(actions.KMS_COPY),
                    resources=[encryption_key.key_arn],
                    conditions=_via_s3(),
                ),
                iam.PolicyStatement(
                    sid="RegisterCopies", actions=list(actions.MODEL_PACKAGES_PROMOTE), resources=packages
                ),
                iam.PolicyStatement(
                    sid="TagCopies",
                    actions=list(actions.TAGS_ADD),
                    resources=[model_registry.packages_arn],
                    conditions={"StringEquals": {"sagemaker:TaggingAction": "CreateModelPackage"}},
                ),
            ],
        )
        findings = {
            f"AwsSolutions-IAM5[Resource::{nag_text(self, copies)}]": "The copies a promotion writes "
            "(models/promoted/<entry>/<digest>/, content-addressed: only the prefix is known here).",
            f"AwsSolutions-IAM5[Resource::{nag_text(self, model_registry.packages_arn)}]": "Versions of "
            "this environment's group: each promotion registers a new version number, and finds an "
            "earlier copy of the same package among them.",
        }
        if ":iam::*:" in source_reader_role_arn:
            findings[f"AwsSolutions-IAM5[Resource::{nag_text(self, source_reader_role_arn)}]"] = (
                "The source environment names no account, so its reader role is named in any; the "
                "role's own trust policy names the only accounts that may assume it."
            )
        acknowledge(self.policy, findings)

    @property
    def policy_arn(self) -> str:
        return self.policy.managed_policy_arn


def reader_role_arn(role_name: str, account: str | None) -> str:
    """The ARN of a PromotionReaderRole in `account` ("*" when the environment names none)."""
    return f"arn:{Aws.PARTITION}:iam::{account or '*'}:role/{role_name}"
