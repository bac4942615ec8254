"""Resolution of a spec for one environment (names, images, later requests, quotas, cost)."""

from sagestack.plan.environment import EnvironmentPlan, ResolvedImage, resolve_environment

__all__ = ["EnvironmentPlan", "ResolvedImage", "resolve_environment"]
