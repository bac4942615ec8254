"""RecommendationStack: the recommendation pipelines of one environment — one per deployed endpoint
whose `slo:` names a target and candidates (each with its AI workload configuration). `sagestack run
<endpoint> --env E --recommend` starts one; `sagestack recommend <endpoint> --env E` reads its verdict."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from sagestack.app.foundation import FoundationStack
from sagestack.app.training import pipeline_log_group
from sagestack.constructs.recommendation import RecommendationPipeline
from sagestack.endpoints.recommend import ResolvedRecommendation, resolve_recommendations
from sagestack.project import ResolvedEnvironment


def recommendations_of(plan: ResolvedEnvironment) -> list[ResolvedRecommendation]:
    return list(resolve_recommendations(plan.names, plan.spec.endpoints))


class RecommendationStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: ResolvedEnvironment,
        foundation: FoundationStack,
        shared_logs: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        topic = foundation.notifications(self, f"sagestack {plan.names.prefix} recommendation")
        # The environment's pipeline log group: the training stack's where there is one (kept or
        # deleted with the data as retain_data says; the one group the project key lets CloudWatch
        # Logs encrypt for), else made here the same way.
        log_group: logs.ILogGroup = (
            logs.LogGroup.from_log_group_name(self, "PipelineLogs", plan.names.pipeline_log_group)
            if shared_logs
            else pipeline_log_group(self, plan, foundation)
        )
        self.pipelines: dict[str, RecommendationPipeline] = {}
        for r in recommendations_of(plan):
            self.pipelines[r.endpoint] = RecommendationPipeline(
                self,
                f"Recommend-{r.endpoint}",
                recommendation=r,
                execution_role=foundation.execution_role,
                artifacts=foundation.artifacts,
                encryption_key=foundation.key,
                registry=foundation.model_registry,
                mlflow_arn=foundation.mlflow_server_arn,
                poll_interval=Duration.seconds(plan.spec.pipeline.poll_interval),
                backoff=Duration.seconds(plan.spec.pipeline.backoff),
                quota_codes=plan.files.quota_codes,
                tags=plan.tags,
                topic=topic,
                log_group=log_group,
            )
