"""MlflowTrackingServer: a SageMaker managed MLflow tracking server whose artifacts live under the
project bucket's mlflow/ prefix, with its own role; grant_logging lets a job's role log to it."""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.validation import validate_as_request


def tracking_server_arn(name: str, *, region: str | None = None, account: str | None = None) -> str:
    return f"arn:{Aws.PARTITION}:sagemaker:{region or Aws.REGION}:{account or Aws.ACCOUNT_ID}:mlflow-tracking-server/{name}"


def grant_mlflow_logging(grantee: iam.IGrantable, server_arn: str) -> iam.Grant:
    """Experiments, runs, parameters, metrics and tags on one tracking server (its artifacts go to
    S3 with the grantee's own bucket grants)."""
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=list(actions.MLFLOW_LOG), resource_arns=[server_arn]
    )


class MlflowTrackingServer(Construct):
    """Props:
    name: the tracking server's name (Names.tracking_server).
    artifacts: the ArtifactBucket; artifacts are stored under its mlflow/ prefix.
    encryption_key: the bucket's key (the server's role reads and writes through it).
    size: Small | Medium | Large (default Small).
    mlflow_version: default: SageMaker's current one.
    automatic_model_registration: register logged models in SageMaker's registry (default False).
    maintenance_window: weekly start, e.g. "Sun:02:00".
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        size: str = "Small",
        mlflow_version: str | None = None,
        automatic_model_registration: bool = False,
        maintenance_window: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker managed MLflow tracking server {name}",
        )
        artifacts.grant_prefix_read_write(self.role, ("mlflow",))
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions.KMS_USE), resources=[encryption_key.key_arn])
        )
        if automatic_model_registration:
            self.role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=list(actions.MLFLOW_MODEL_REGISTRATION),
                    resources=[f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:model-package*"],
                )
            )
        self.server = sagemaker.CfnMlflowTrackingServer(
            self,
            "Resource",
            tracking_server_name=name,
            artifact_store_uri=artifacts.s3_uri("mlflow"),
            role_arn=self.role.role_arn,
            tracking_server_size=size,
            mlflow_version=mlflow_version,
            automatic_model_registration=automatic_model_registration,
            weekly_maintenance_window_start=maintenance_window,
        )
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.server.node.add_dependency(policy)
        validate_as_request(self.server, "CreateMlflowTrackingServer")
        self.name = name
        findings = {
            f"AwsSolutions-IAM5[Resource::{nag_text(self, artifacts.bucket.bucket_arn + '/mlflow/*')}]": (
                "The tracking server's artifacts: objects under the project bucket's mlflow/ prefix only."
            )
        }
        if automatic_model_registration:
            findings[
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:model-package*]"
            ] = "Automatic model registration creates packages and groups named after the logged models."
        acknowledge(self.role, findings)

    @property
    def tracking_server_arn(self) -> str:
        return self.server.attr_tracking_server_arn

    def grant_logging(self, grantee: iam.IGrantable) -> iam.Grant:
        return grant_mlflow_logging(grantee, self.tracking_server_arn)
