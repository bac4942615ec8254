"""ExecutionRole: the role SageMaker jobs and endpoints run as, scoped to the project's own resources."""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import PREFIXES, ArtifactBucketBase
from sagestack.constructs.grants import grant_once
from sagestack.constructs.nag import acknowledge, acknowledge_at_synth, nag_text, nag_texts
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.read_once import attribute
from sagestack.constructs.trust import sagemaker_principal
from sagestack.core.names import Names

# SageMaker's own log groups; a job can write only its own kind's streams. Jobs share one group per
# kind (/aws/sagemaker/TrainingJobs, a stream per job); an endpoint or an inference component has a
# group of its own, /aws/sagemaker/Endpoints/<endpoint name> (/aws/sagemaker/InferenceComponents/
# <component name>), so those are granted by their names' pattern.
LOG_GROUPS = (
    "TrainingJobs",
    "CompilationJobs",
    "ProcessingJobs",
    "TransformJobs",
)
LOG_GROUPS_PER_RESOURCE = ("Endpoints", "InferenceComponents")
SAGEMAKER = "sagemaker.amazonaws.com"


@jsii.implements(iam.IGrantable)
class ExecutionRoleBase(Construct):
    """What an execution role offers, created here or imported (`ExecutionRole.from_role_arn`).
    It is IGrantable: grant it access as you would a Role (`bucket.grant_read(execution_role)`)."""

    role: iam.IRole

    @property
    def grant_principal(self) -> iam.IPrincipal:
        # a role's principal is the role: read through jsii once (every grant to it asks)
        return attribute(self.role, "grant_principal")  # type: ignore[no-any-return]

    @property
    def role_arn(self) -> str:
        return str(attribute(self.role, "role_arn"))  # a token: read through jsii once

    def grant_pass_role(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` (a pipeline's role) pass this role to SageMaker, and to nothing else."""
        return grant_once(
            grantee,
            actions.PASS_ROLE,
            [self.role.role_arn],
            {"StringEquals": {"iam:PassedToService": SAGEMAKER}},
        )

    def grant_object_read(self, bucket_arn_for_object: str) -> iam.Grant:
        """Read one object (a job's code archive), not the bucket it lies in."""
        return grant_once(self, actions.S3_OBJECT_GET, [bucket_arn_for_object])

    def grant_prefix_read(self, bucket: s3.IBucket, prefix: str, what: str) -> None:
        """Read the objects under one prefix (a key ending in '/') of `bucket` and list that prefix
        only (a job's launch files, which SageMaker downloads as S3Prefix channels); `what` says what
        lies there (the acknowledgement's reason)."""
        objects = bucket.arn_for_objects(f"{prefix}*")
        grant_once(self, actions.S3_OBJECT_GET, [objects])
        grant_once(self, actions.S3_LIST, [bucket.bucket_arn], {"StringLike": {"s3:prefix": [f"{prefix}*"]}})
        acknowledge_at_synth(
            self.role,
            {
                lambda c: f"AwsSolutions-IAM5[Resource::{nag_text(c, objects)}]": f"{what}: read only, "
                f"under their own content-addressed {prefix} prefix.",
            },
        )

    def grant_debugger_actions(self, names: Names, *, stop_training: bool, notify: bool) -> None:
        """Debugger rule actions run as the execution role: StopTraining stops the job it watches,
        Email/SMS publish through the SNS topic smdebug creates (SMDebugRules)."""
        stack = Stack.of(self)
        if stop_training:
            jobs = stack.format_arn(
                service="sagemaker", resource="training-job", resource_name=names.training_job_pattern
            )
            # held to the environment's tags too: the name pattern also matches a sibling's jobs
            # (`digits-dev-*` is environment `dev-eu`'s as well)
            tagged = {f"aws:ResourceTag/{key}": value for key, value in sorted(names.tags.items())}
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=list(actions.TRAINING_JOBS_STOP),
                    resources=[jobs],
                    conditions={"StringEquals": tagged},
                )
            )
            acknowledge(
                self.role,
                {
                    f"AwsSolutions-IAM5[Resource::{nag_text(self, jobs)}]": "A Debugger rule's StopTraining "
                    "action stops the training job it watches; job names are content-addressed under the "
                    "environment's prefix, so the prefix is the narrowest resource."
                },
            )
        if notify:
            topic = stack.format_arn(service="sns", resource="SMDebugRules")
            self.role.add_to_principal_policy(
                iam.PolicyStatement(actions=list(actions.DEBUGGER_NOTIFY), resources=[topic])
            )


class _ImportedExecutionRole(ExecutionRoleBase):
    def __init__(self, scope: Construct, id: str, role: iam.IRole) -> None:
        super().__init__(scope, id)
        self.role = role


class ExecutionRole(ExecutionRoleBase):
    """A role SageMaker assumes for training, tuning, compilation and hosting.

    It may read and write only the artifact bucket's prefixes, use the project key, write to
    SageMaker's log groups and metrics, and pull the images granted with `TrainingImage.grant_pull`.

    Props:
      artifacts: the ArtifactBucket (its prefixes are granted read/write).
      encryption_key: the project key.
      role_name: default: generated by CloudFormation.
      vpc_access: add the network-interface permissions jobs in a VPC need (default False).
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        role_name: str | None = None,
        vpc_access: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self.role = role = iam.Role(
            self,
            "Resource",
            role_name=role_name,
            assumed_by=sagemaker_principal(self),
            description="SageMaker execution role for sagestack jobs and endpoints",
        )
        artifacts.grant_prefix_read_write(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions.KMS_USE), resources=[encryption_key.key_arn])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions.KMS_GRANT_FOR_AWS_RESOURCE),
                resources=[encryption_key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            )
        )
        stack = Stack.of(self)
        # the group itself (CreateLogGroup) and its streams (`:*`); an endpoint's or a component's
        # group is named after it (a component's name is CloudFormation's)
        names = [f"/aws/sagemaker/{g}" for g in LOG_GROUPS]
        names += [f"/aws/sagemaker/{g}/*" for g in LOG_GROUPS_PER_RESOURCE]
        log_group_arns = [
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=f"{name}{suffix}",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for name in names
            for suffix in ("", ":*")
        ]
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions.LOGS_WRITE), resources=log_group_arns)
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions.METRICS_PUT),
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "aws/sagemaker/*"]}},
            )
        )
        if vpc_access:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=list(actions.VPC_NETWORK_INTERFACES),
                    resources=["*"],
                    conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
                )
            )
        self._acknowledge(artifacts, log_group_arns)

    @staticmethod
    @typed_props
    def from_role_arn(scope: Construct, id: str, role_arn: str, *, mutable: bool = True) -> ExecutionRoleBase:
        """An execution role that already exists. With mutable=True (the default) grants made to it
        are attached as a new policy in this stack; with False they are dropped (manage them yourself)."""
        return _ImportedExecutionRole(
            scope, id, iam.Role.from_role_arn(scope, f"{id}Role", role_arn, mutable=mutable)
        )

    def _acknowledge(self, artifacts: ArtifactBucketBase, log_group_arns: Sequence[str]) -> None:
        """Each wildcard the role holds, and why it is the narrowest form possible."""
        findings = {
            "AwsSolutions-IAM5[Resource::*]": "ecr:GetAuthorizationToken, cloudwatch:PutMetricData and the "
            "EC2 network-interface calls have no resource-level permissions; PutMetricData is limited to "
            "SageMaker namespaces and EC2 calls to the stack's region by condition.",
        }
        bucket_arn = attribute(artifacts.bucket, "bucket_arn")
        wildcards = [a for a in log_group_arns if "*" in a]
        texts = nag_texts(self, [f"{bucket_arn}/{p}/*" for p in PREFIXES] + wildcards)
        for p, arn in zip(PREFIXES, texts[: len(PREFIXES)], strict=True):
            findings[f"AwsSolutions-IAM5[Resource::{arn}]"] = (
                f"Objects under the project bucket's '{p}/' prefix, which SageMaker jobs read and write."
            )
        for arn in texts[len(PREFIXES) :]:
            findings[f"AwsSolutions-IAM5[Resource::{arn}]"] = (
                "Log streams in one of SageMaker's own /aws/sagemaker log groups, which SageMaker names per "
                "job; an endpoint's and an inference component's group is named after it."
            )
        acknowledge(self.role, findings)
