"""OptimizationStack: the optimization pipelines of one environment — one per LLM (an endpoint's, or
an inference component's) whose `llm.optimize` is set, on the endpoints the environment deploys.
`sagestack run <endpoint> --env E` starts them; each registers its optimized model for review, which
promotion then pins."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from constructs import Construct

from sagestack.app.foundation import FoundationStack
from sagestack.constructs.llm_optimization import OptimizationPipeline
from sagestack.llm.optimization_job import ResolvedOptimization, resolve_optimizations
from sagestack.project import ResolvedEnvironment


def optimizations_of(plan: ResolvedEnvironment) -> list[ResolvedOptimization]:
    """The LLMs this environment optimizes (stage.EnvironmentStage asks before loading this stack)."""
    return list(resolve_optimizations(plan.names, plan.spec.endpoints))


class OptimizationStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: ResolvedEnvironment,
        foundation: FoundationStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        topic = foundation.notifications(self, f"sagestack {plan.names.prefix} optimization")
        self.pipelines: dict[str, OptimizationPipeline] = {}
        for o in optimizations_of(plan):
            self.pipelines[o.label] = OptimizationPipeline(
                self,
                f"Optimize-{o.key}",
                names=plan.names,
                endpoint=o.endpoint,
                component=o.component,
                llm=o.llm,
                instance_types=o.instance_types,
                accelerators=o.accelerators,
                vpc=o.vpc,
                execution_role=foundation.execution_role,
                artifacts=foundation.artifacts,
                encryption_key=foundation.key,
                registry=foundation.model_registry,
                poll_interval=Duration.seconds(plan.spec.pipeline.poll_interval),
                backoff=Duration.seconds(plan.spec.pipeline.backoff),
                quota_codes=plan.files.quota_codes,
                tags=plan.tags,
                topic=topic,
            )
