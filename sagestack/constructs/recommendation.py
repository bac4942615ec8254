"""RecommendationPipeline: an endpoint's performance target (`slo:`) measured in the cloud — the AI
workload configuration (AWS::SageMaker::AIWorkloadConfig: the traffic and token lengths the target
names), and a pipeline that checks each candidate's endpoint quota and runs the recommendation job
(CreateAIRecommendationJob for an LLM, Inference Recommender's CreateInferenceRecommendationsJob for a
classic model), follows it, and ends with its Describe answer. `sagestack run <endpoint> --env E
--recommend` starts it, and with `slo: {on_registration: true}` so does each approval of a version in
the endpoint's group (a PackageApprovalTrigger: the event names the version measured); `sagestack
recommend <endpoint> --env E` reads the verdict. Nothing it measures is deployed: pinning a candidate
is a reviewed overlay change."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import CfnTag, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.approval_trigger import PackageApprovalTrigger
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.endpoint_llm import grant_weights_read
from sagestack.constructs.execution_role import ExecutionRoleBase
from sagestack.constructs.job_pipeline import JobPipeline, PipelineDeployment
from sagestack.constructs.mlflow_server import grant_mlflow_logging
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.validation import stand_in_deployment, token_deployment
from sagestack.core.standins import SAMPLE_ACCOUNT
from sagestack.endpoints.recommend import ResolvedRecommendation, validate_recommendation, workload_request
from sagestack.endpoints.recommend_states import recommendation_definition


class RecommendationPipeline(JobPipeline):
    """Props:
    recommendation: the endpoint's target, candidates and model, resolved (ResolvedRecommendation).
    execution_role, artifacts, encryption_key, registry: the job runs as the execution role, reads the
      weights (an LLM's) or the group's newest approved package (a classic model's, unless pinned) and
      writes s3://<bucket>/recommendations/<endpoint>/<job>/.
    mlflow_arn: the environment's MLflow tracking server or App (an LLM's job logs to it; default: none).
    on_registration: the PackageApprovalTrigger that starts the pipeline when a version is approved in
      the group, made when the target asks for it (`self.on_registration`; else None).
    role, log_group, topic, state_machine_name, poll_interval, backoff, quota_codes, tags: as
      TransformPipeline.
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        recommendation: ResolvedRecommendation,
        execution_role: ExecutionRoleBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        registry: ModelPackageGroupBase,
        mlflow_arn: str | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        backoff: Duration | None = None,
        quota_codes: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        r = recommendation
        names = r.names
        stack = Stack.of(scope)
        tag_pairs = names.request_tags(tags)
        validate_recommendation(
            r,
            stand_in_deployment(scope, tags=tag_pairs),
            mlflow_arn=None if mlflow_arn is None else _stand_in_mlflow(stack),
        )
        deployment = token_deployment(
            scope,
            role_arn=execution_role.role_arn,
            bucket=artifacts.bucket_name,
            kms_key_id=encryption_key.key_arn,
            tags=tag_pairs,
        )
        # The workload first (its ARN goes into the job's request): a resource, like an endpoint config.
        workload = workload_request(r, deployment)
        self.workload = sagemaker.CfnAIWorkloadConfig(
            scope,
            f"{id}Workload",
            ai_workload_config_name=workload["AIWorkloadConfigName"],
            ai_workload_configs=sagemaker.CfnAIWorkloadConfig.AIWorkloadConfigsProperty(
                workload_spec=sagemaker.CfnAIWorkloadConfig.WorkloadSpecProperty(
                    inline=workload["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"]
                )
            ),
            tags=[CfnTag(key=t["Key"], value=t["Value"]) for t in workload.get("Tags", [])],
        )
        pipeline = PipelineDeployment(
            role=role,
            log_group=log_group,
            topic=topic,
            encryption_key=encryption_key,
            state_machine_name=state_machine_name or r.state_machine,
            poll_interval=poll_interval,
            backoff=backoff,
            quota_codes=quota_codes,
        )
        super().__init__(
            scope,
            id,
            definition=recommendation_definition(
                r,
                deployment,
                pipeline.settings(),
                group=registry.group_name,
                workload_arn=self.workload.attr_ai_workload_config_arn,
                mlflow_arn=mlflow_arn if r.llm is not None else None,
            ),
            names=names,
            entry=f"recommend-{r.endpoint}",
            description=f"the recommendation of '{r.endpoint}''s instance type",
            **pipeline.construct_props(),
        )
        self.recommendation = r
        self._grant_job(r, execution_role, registry, mlflow_arn)
        execution_role.grant_pass_role(self.role)
        self._grant_quota_reads(stack.region)
        self.on_registration = self._on_registration(r, registry, topic)

    def _on_registration(
        self, r: ResolvedRecommendation, registry: ModelPackageGroupBase, topic: sns.ITopic | None
    ) -> PackageApprovalTrigger | None:
        if not r.slo.on_registration:
            return None
        if not r.finds_package:  # the spec's rule (endpoint-slo-on-registration) says it first
            raise ValueError(
                f"endpoint '{r.endpoint}': slo.on_registration measures each version approved in the "
                "group, but this endpoint serves "
                + ("an LLM's weights" if r.llm is not None else f"the pinned package {r.model_package}")
                + ", which no approval changes"
            )
        return PackageApprovalTrigger(
            self,
            "OnRegistration",
            pipeline=self,
            model_package_group_name=registry.group_name,
            rule_name=r.names.recommendation_rule(r.endpoint),
            description=f"Measures each approved version of '{r.endpoint}''s model against its slo",
            topic=topic,
        )

    def _grant_job(
        self,
        r: ResolvedRecommendation,
        execution_role: ExecutionRoleBase,
        registry: ModelPackageGroupBase,
        mlflow_arn: str | None,
    ) -> None:
        """Run the job of this kind (named by the environment's prefix), and let the execution role
        read what it measures and log where it logs."""
        names = r.names
        if r.llm is not None:
            self.grant_sagemaker(
                actions.AI_RECOMMENDATION_JOBS_RUN,
                "ai-recommendation-job",
                f"{names.prefix}-*",
                "AI recommendation jobs whose names start with this environment's prefix (content-addressed: "
                "the hash is known at synth, the prefix scopes every target's job).",
            )
            if r.llm.weights.s3.startswith("s3://"):  # the project bucket's prefixes are the role's already
                grant_weights_read(execution_role.role, r.llm.weights.s3)
            if mlflow_arn is not None:
                grant_mlflow_logging(execution_role.role, mlflow_arn)
        else:
            self.grant_sagemaker(
                actions.INFERENCE_RECOMMENDATIONS_JOBS_RUN,
                "inference-recommendations-job",
                f"{names.prefix}-*",
                "Inference Recommender jobs whose names start with this environment's prefix "
                "(content-addressed: the hash is known at synth).",
            )
            registry.grant_read(self.role)
            if isinstance(self.role, iam.Role):
                acknowledge(
                    self.role,
                    {
                        f"AwsSolutions-IAM5[Resource::{nag_text(self.role, registry.packages_arn)}]": "Versions "
                        "of this environment's model package group: the pipeline finds the newest approved "
                        "one (ListModelPackages), which Inference Recommender measures."
                    },
                )


def _stand_in_mlflow(stack: Stack) -> str:
    return f"arn:aws:sagemaker:us-east-1:{SAMPLE_ACCOUNT}:mlflow-app/app-stand-in"
