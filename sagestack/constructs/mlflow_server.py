"""SageMaker managed MLflow whose artifacts live under the project bucket's mlflow/ prefix, each with
its own role: MlflowTrackingServer (a server billed by the hour) and MlflowApp (serverless); their
grant_logging, and grant_mlflow_logging for an ARN, let a job's role log to either."""

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
from sagestack.training.context import is_mlflow_app


def tracking_server_arn(name: str, *, region: str | None = None, account: str | None = None) -> str:
    return f"arn:{Aws.PARTITION}:sagemaker:{region or Aws.REGION}:{account or Aws.ACCOUNT_ID}:mlflow-tracking-server/{name}"


def grant_mlflow_logging(grantee: iam.IGrantable, server_arn: str) -> iam.Grant:
    """Experiments, runs, parameters, metrics and tags on one tracking server or MLflow App (its
    artifacts go to S3 with the grantee's own bucket grants). IAM authorizes a tracking server's
    calls as sagemaker-mlflow:<API> and an App's as sagemaker:CallMlflowAppApi."""
    logging = actions.MLFLOW_APP_LOG if is_mlflow_app(server_arn) else actions.MLFLOW_LOG
    return iam.Grant.add_to_principal(grantee=grantee, actions=list(logging), resource_arns=[server_arn])


def mlflow_role(
    scope: Construct,
    kind: str,
    name: str,
    *,
    artifacts: ArtifactBucketBase,
    encryption_key: kms.IKey,
    model_registration: bool,
) -> iam.Role:
    """The role SageMaker's MLflow (`kind`: tracking server, MLflow App) runs as: the bucket's
    mlflow/ prefix through its key, and the model registry where it registers logged models."""
    role = iam.Role(
        scope,
        "Role",
        assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
        description=f"SageMaker managed MLflow {kind} {name}",
    )
    artifacts.grant_prefix_read_write(role, ("mlflow",))
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=list(actions.KMS_USE), resources=[encryption_key.key_arn])
    )
    if model_registration:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions.MLFLOW_MODEL_REGISTRATION),
                resources=[f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:model-package*"],
            )
        )
    findings = {
        f"AwsSolutions-IAM5[Resource::{nag_text(scope, artifacts.bucket.bucket_arn + '/mlflow/*')}]": (
            f"The {kind}'s artifacts: objects under the project bucket's mlflow/ prefix only."
        )
    }
    if model_registration:
        findings[
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:model-package*]"
        ] = "Automatic model registration creates packages and groups named after the logged models."
    acknowledge(role, findings)
    return role


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
        self.role = mlflow_role(
            self,
            "tracking server",
            name,
            artifacts=artifacts,
            encryption_key=encryption_key,
            model_registration=automatic_model_registration,
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

    @property
    def tracking_server_arn(self) -> str:
        return self.server.attr_tracking_server_arn

    def grant_logging(self, grantee: iam.IGrantable) -> iam.Grant:
        return grant_mlflow_logging(grantee, self.tracking_server_arn)


class MlflowApp(Construct):
    """Props:
    name: the App's name (Names.mlflow_app).
    artifacts: the ArtifactBucket; artifacts are stored under its mlflow/ prefix.
    encryption_key: the bucket's key (the App's role reads and writes through it).
    automatic_model_registration: register logged models in SageMaker's registry (default False).
    maintenance_window: weekly start, e.g. "Sun:02:00".

    A serverless MLflow: no size and no hourly charge while unused. Its metadata is encrypted with
    an AWS owned key: CloudFormation's AWS::SageMaker::MlflowApp has no KmsKeyId (the API's
    CreateMlflowApp does); the artifacts are encrypted with `encryption_key` by the bucket.
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
        automatic_model_registration: bool = False,
        maintenance_window: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.role = mlflow_role(
            self,
            "MLflow App",
            name,
            artifacts=artifacts,
            encryption_key=encryption_key,
            model_registration=automatic_model_registration,
        )
        self.app = sagemaker.CfnMlflowApp(
            self,
            "Resource",
            name=name,
            artifact_store_uri=artifacts.s3_uri("mlflow"),
            role_arn=self.role.role_arn,
            model_registration_mode="AutoModelRegistrationEnabled"
            if automatic_model_registration
            else "AutoModelRegistrationDisabled",
            weekly_maintenance_window_start=maintenance_window,
        )
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.app.node.add_dependency(policy)
        validate_as_request(self.app, "CreateMlflowApp")
        self.name = name

    @property
    def app_arn(self) -> str:
        """The App's ARN as IAM writes it (…:mlflow-app/<id>), built from the ID CloudFormation
        returns, so that its resource type stays readable (training.context.is_mlflow_app)."""
        return f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:mlflow-app/{self.app.attr_mlflow_app_id}"

    def grant_logging(self, grantee: iam.IGrantable) -> iam.Grant:
        return grant_mlflow_logging(grantee, self.app_arn)
