"""DeliveryStack: a CDK Pipelines pipeline in the tooling account that deploys every environment
from the repository — synth (fast tests, then a locked `cdk synth`), then one stage per
environment in its own account, in order, those listed under `approval` behind a manual approval.
A promotion is then a reviewed commit (the pin in config/envs/<env>.yaml and its lock) that the
pipeline deploys. Each target account trusts the tooling account (`cdk bootstrap --trust`), which
`sagestack check` verifies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration, Environment, RemovalPolicy, Stack, pipelines
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_codepipeline as codepipeline
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sagestack.app.stage import EnvironmentStage
from sagestack.constructs.artifact_bucket import access_log_bucket, log_to
from sagestack.constructs.compliance import acknowledge_compliance
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.delivery.models import DeliverySpec

SYNTH_CONTEXT = "-c sagestack:locked=true"  # the pipeline deploys what the reviewed locks say


def pipeline_name(project: str, delivery: DeliverySpec) -> str:
    return delivery.pipeline_name or f"{project}-delivery"


class DeliveryStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        project: str,
        delivery: DeliverySpec,
        stages: Sequence[EnvironmentStage],
        region: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope, id, env=Environment(account=delivery.account, region=delivery.region or region), **kwargs
        )
        self.delivery = delivery
        source = self._source(delivery)
        self.synth = pipelines.CodeBuildStep(
            "Synth",
            input=source,
            install_commands=list(delivery.install),
            commands=[*delivery.tests, f"npx cdk synth --quiet {SYNTH_CONTEXT}"],
            env={"AWS_EC2_METADATA_DISABLED": "true"},
            primary_output_directory="cdk.out",
        )
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name=pipeline_name(project, delivery),
            synth=self.synth,
            # Each environment is its own account: artifacts are encrypted with a key they may use.
            cross_account_keys=True,
            pipeline_type=codepipeline.PipelineType.V2,
            enable_key_rotation=True,
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(
                    build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                    compute_type=codebuild.ComputeType.MEDIUM,
                ),
            ),
        )
        by_env = {s.plan.env: s for s in stages}
        self.approvals: dict[str, pipelines.ManualApprovalStep] = {}
        for env in delivery.environments:
            pre: list[pipelines.Step] = []
            if env in delivery.approval:
                step = pipelines.ManualApprovalStep(
                    f"Approve-{env}",
                    comment=f"Deploy {project} to {env}: review the change (the lock diff and `sagestack plan "
                    f"--env {env}`) before approving.",
                )
                self.approvals[env] = step
                pre.append(step)
            self.pipeline.add_stage(by_env[env], pre=pre)
        self.pipeline.build_pipeline()
        self._keep_artifact_history()
        self._lint_acknowledgements()
        self._acknowledge()

    def _source(self, delivery: DeliverySpec) -> pipelines.CodePipelineSource:
        src = delivery.source
        if src.connection is not None:
            assert src.repository is not None
            return pipelines.CodePipelineSource.connection(
                src.repository, src.branch, connection_arn=src.connection, trigger_on_push=True
            )
        assert src.bucket is not None and src.key is not None
        return pipelines.CodePipelineSource.s3(
            s3.Bucket.from_bucket_name(self, "SourceBucket", src.bucket), src.key
        )

    def _keep_artifact_history(self) -> None:
        """The artifact bucket CDK Pipelines creates keeps replaced versions (a month) and logs its
        requests to a log bucket of its own; CDK Pipelines offers neither, so they are set on it."""
        bucket = self.pipeline.pipeline.artifact_bucket
        cfn = bucket.node.default_child
        assert isinstance(cfn, s3.CfnBucket)
        cfn.versioning_configuration = s3.CfnBucket.VersioningConfigurationProperty(status="Enabled")
        cfn.lifecycle_configuration = s3.CfnBucket.LifecycleConfigurationProperty(
            rules=[
                s3.CfnBucket.RuleProperty(
                    id="expire-replaced-artifacts",
                    status="Enabled",
                    noncurrent_version_expiration=s3.CfnBucket.NoncurrentVersionExpirationProperty(
                        noncurrent_days=30
                    ),
                    abort_incomplete_multipart_upload=s3.CfnBucket.AbortIncompleteMultipartUploadProperty(
                        days_after_initiation=7
                    ),
                )
            ]
        )
        logs = access_log_bucket(
            self, "PipelineAccessLogs", removal_policy=RemovalPolicy.RETAIN, abort_after=Duration.days(7)
        )
        log_to(bucket, logs, "pipeline-artifacts/")

    def _lint_acknowledgements(self) -> None:
        """CDK Pipelines writes each target account's deploy-role ARN as Fn::Join of strings and
        pseudo parameters; cfn-lint prefers Fn::Sub there (E3703). Same value, generated inside
        aws-cdk-lib: acknowledged on the pipeline resource, as cdk-nag findings are."""
        cfn = self.pipeline.pipeline.node.default_child
        assert isinstance(cfn, codepipeline.CfnPipeline)
        cfn.add_metadata("cfn-lint", {"config": {"ignore_checks": ["E3703"]}})
        # The pipeline references its role by GetAtt already; CDK's DependsOn on it is what cfn-lint
        # calls redundant (W3005). The DependsOn on the role's policy stays.
        policy = self.pipeline.pipeline.role.node.try_find_child("DefaultPolicy")
        if policy is not None and isinstance(policy.node.default_child, iam.CfnPolicy):
            cfn.add_override("DependsOn", [self.get_logical_id(policy.node.default_child)])

    def _acknowledge(self) -> None:
        """CDK Pipelines generates its roles; each wildcard cdk-nag finds in them is acknowledged
        with the reason that covers it — a finding no reason covers stays (and fails the synth)."""
        acknowledge(
            self,
            {
                "AwsSolutions-CB4": "The CodeBuild projects write only to the pipeline's artifact bucket, which "
                "is encrypted with the pipeline's customer-managed KMS key (cross_account_keys).",
            },
        )
        # Each CodeBuild project CDK Pipelines makes takes CodePipeline's artifact as its source.
        acknowledge_compliance(self, ["CodeBuildProjectSourceRepoUrl"])
        for policy in self.node.find_all():
            if not isinstance(policy, iam.CfnPolicy):
                continue
            document = self.resolve(policy.policy_document)
            findings: dict[str, str] = {}
            for statement in document.get("Statement", []):
                actions = statement.get("Action", [])
                resources = statement.get("Resource", [])
                for action in [actions] if isinstance(actions, str) else actions:
                    if "*" in action and (why := _wildcard_reason(action)):
                        findings[f"AwsSolutions-IAM5[Action::{action}]"] = why
                for resource in [resources] if not isinstance(resources, list) else resources:
                    text = nag_text(self, resource)
                    if "*" in text and (why := _wildcard_reason(text, statement)):
                        findings[f"AwsSolutions-IAM5[Resource::{text}]"] = why
            if findings:
                acknowledge(policy, findings)


def _wildcard_reason(value: str, statement: dict[str, Any] | None = None) -> str | None:
    """Why a wildcard CDK Pipelines grants is right; None for one no reason here covers."""
    if value.startswith("s3:"):
        return (
            "CDK Pipelines' read/write of objects in its own artifact bucket only (the statement's resource)."
        )
    if value.startswith("kms:"):
        return (
            "Encryption and decryption with the pipeline's own artifact key only (the statement's resource)."
        )
    if value.startswith("<PipelineArtifactsBucket") and value.endswith("/*"):
        return "The objects of the pipeline's own artifact bucket (build artifacts)."
    if ":report-group/" in value:
        return "CodeBuild test-report groups in the tooling account, as CodeBuild's service role needs them."
    if ":log-group:/aws/codebuild/" in value:
        return "CodeBuild's own log groups in the tooling account."
    if statement is None:
        return None
    actions = statement.get("Action", [])
    actions = {actions} if isinstance(actions, str) else set(actions)
    if value == "*" and actions <= {
        "codebuild:BatchGetBuilds",
        "codebuild:StartBuild",
        "codebuild:StopBuild",
    }:
        return (
            "Build control of the asset-publishing projects CDK Pipelines creates (names generated at synth)."
        )
    if value == "*" and actions <= {"cloudformation:DescribeStacks", "s3:ListBucket"}:
        return "Self-mutation reads the pipeline stack's status and lists the asset buckets it publishes to."
    tagged = statement.get("Condition", {}).get("ForAnyValue:StringEquals", {})
    if actions == {"sts:AssumeRole"} and "iam:ResourceTag/aws-cdk:bootstrap-role" in tagged:
        return (
            "Only the CDK bootstrap roles (the aws-cdk:bootstrap-role tag condition), to publish and deploy."
        )
    return None
