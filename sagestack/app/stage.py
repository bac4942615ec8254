"""EnvironmentStage: every stack of one environment (dev, staging, prod …)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aws_cdk import Environment, Stage, Tags
from constructs import Construct

from sagestack.app.foundation import FoundationStack, PromotionPeers
from sagestack.constructs.image_digests import ImageDigests
from sagestack.project import ResolvedEnvironment

if TYPE_CHECKING:
    from sagestack.app.clusters import ClusterStack
    from sagestack.app.llm_optimization import OptimizationStack
    from sagestack.app.recommendation import RecommendationStack
    from sagestack.app.serving import ServingStack
    from sagestack.app.training import TrainingStack


def optimization_needed(plan: ResolvedEnvironment) -> bool:
    """Whether a deployed endpoint's LLM (or a component's) has `optimize:` (llm_optimization's test,
    without importing its modules at start-up)."""
    return any(
        ep.deploy
        and ep.instance_type
        and any(
            llm is not None and llm.optimize is not None
            for llm in (ep.llm, *(c.llm for c in ep.components.values()))
        )
        for ep in plan.spec.endpoints.values()
    )


def recommendation_needed(plan: ResolvedEnvironment) -> bool:
    """Whether a deployed endpoint has an slo: with candidates (recommendation's test, without
    importing its modules at start-up)."""
    return any(ep.deploy and ep.slo is not None and ep.slo_candidates for ep in plan.spec.endpoints.values())


def serving_needed(plan: ResolvedEnvironment) -> bool:
    spec = plan.spec
    # serving.is_served's test, without importing the serving stack's modules at start-up
    return any(
        ep.deploy and (ep.model_package or ep.components or ep.llm) for ep in spec.endpoints.values()
    ) or any(t.model_package for t in spec.transforms.values())


class EnvironmentStage(Stage):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: ResolvedEnvironment,
        project_root: Path,
        promotion: PromotionPeers | None = None,
        image_digests: dict[str, str] | None = None,
    ) -> None:
        # No account in the overlay: account-agnostic templates, so synth needs no credentials.
        super().__init__(scope, id, env=Environment(account=plan.account, region=plan.region))
        self.plan = plan
        if image_digests:
            # A locked synth: every request names its images by digest (before any stack exists).
            ImageDigests.pin(self, image_digests)
        self.foundation = FoundationStack(
            self,
            "Foundation",
            plan=plan,
            project_root=project_root,
            promotion=promotion,
            stack_name=plan.names.stack("foundation"),
            description=f"sagestack {plan.names.prefix}: key, artifact bucket, registry, images, role",
            termination_protection=plan.retain_data and plan.account is not None,
        )
        # No jobs, no pipelines: an empty TrainingStack would still hold a role, a topic and a log group.
        self.training: TrainingStack | None = None
        if plan.spec.jobs:
            from sagestack.app.training import TrainingStack  # start-up: Step Functions, CloudWatch, ~0.3 s

            self.training = TrainingStack(
                self,
                "Training",
                plan=plan,
                foundation=self.foundation,
                project_root=project_root,
                stack_name=plan.names.stack("training"),
                description=f"sagestack {plan.names.prefix}: training pipelines (Step Functions)",
                termination_protection=plan.retain_data and plan.account is not None,
            )
        # Only what has pinned model packages is deployed (endpoints, components, transforms run by
        # `sagestack run`); the rest waits for a promotion.
        self.serving: ServingStack | None = None
        if serving_needed(plan):
            from sagestack.app.serving import ServingStack  # start-up: endpoints, autoscaling, ~0.2 s

            self.serving = ServingStack(
                self,
                "Serving",
                plan=plan,
                foundation=self.foundation,
                project_root=project_root,
                stack_name=plan.names.stack("serving"),
                description=f"sagestack {plan.names.prefix}: endpoints and batch transforms with the pinned "
                "model packages",
            )
        # LLM optimization jobs: a pipeline each, started by `sagestack run <endpoint>`.
        self.optimization: OptimizationStack | None = None
        if optimization_needed(plan):
            from sagestack.app.llm_optimization import OptimizationStack  # start-up: Step Functions, ~0.3 s

            self.optimization = OptimizationStack(
                self,
                "Optimization",
                plan=plan,
                foundation=self.foundation,
                stack_name=plan.names.stack("optimization"),
                description=f"sagestack {plan.names.prefix}: LLM optimization pipelines (Step Functions)",
            )
        # Performance targets measured in the cloud: a pipeline each, `sagestack run <endpoint> --recommend`.
        self.recommendation = self._recommendation(plan) if recommendation_needed(plan) else None
        # HyperPod clusters, each in its own VPC with its file system.
        self.clusters: ClusterStack | None = None
        if plan.spec.clusters:
            from sagestack.app.clusters import ClusterStack  # start-up: EC2/FSx modules, ~0.4 s

            self.clusters = ClusterStack(
                self,
                "Clusters",
                plan=plan,
                foundation=self.foundation,
                project_root=project_root,
                stack_name=plan.names.stack("clusters"),
                description=f"sagestack {plan.names.prefix}: SageMaker HyperPod clusters (Slurm)",
                termination_protection=plan.retain_data and plan.account is not None,
            )
        for key, value in plan.tags.items():
            Tags.of(self).add(key, value)

    def _recommendation(self, plan: ResolvedEnvironment) -> RecommendationStack:
        from sagestack.app.recommendation import RecommendationStack  # start-up: Step Functions, ~0.3 s

        stack = RecommendationStack(
            self,
            "Recommendation",
            plan=plan,
            foundation=self.foundation,
            shared_logs=self.training is not None,
            stack_name=plan.names.stack("recommendation"),
            description=f"sagestack {plan.names.prefix}: endpoint recommendation pipelines (Step Functions)",
        )
        if self.training is not None:  # its pipelines log to the training stack's log group
            stack.add_stack_dependency(self.training)
        return stack
