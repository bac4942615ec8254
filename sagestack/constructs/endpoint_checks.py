"""What InferenceEndpoint refuses at the call, before building anything: one model source, an
instance fleet or serverless, what serverless, asynchronous and shadowed endpoints exclude."""

from __future__ import annotations

from collections.abc import Sequence

from sagestack.constructs.endpoint_async import AsyncInference
from sagestack.constructs.endpoint_components import InferenceComponent
from sagestack.constructs.endpoint_config import ServerlessConfig, ShadowVariant
from sagestack.constructs.endpoint_llm import LlmModel
from sagestack.constructs.endpoint_rollout import Rollout


def check_props(
    endpoint_name: str,
    model_package: str | None,
    llm: LlmModel | None,
    instance_types: tuple[str, ...],
    serverless: ServerlessConfig | None,
    rollout: Rollout | None,
    async_inference: AsyncInference | None,
    components: Sequence[InferenceComponent],
) -> None:
    if (not instance_types) == (serverless is None):
        raise ValueError(f"endpoint '{endpoint_name}': give either instance_type or serverless")
    if not 1 <= len(instance_types) <= 5 and serverless is None:
        raise ValueError(f"endpoint '{endpoint_name}': give one to five instance types (InstancePools)")
    models = sum(x is not None for x in (model_package, llm)) + bool(components)
    if models != 1:
        raise ValueError(f"endpoint '{endpoint_name}': give exactly one of model_package, llm or components")
    if serverless is not None and (async_inference is not None or components or llm is not None):
        raise ValueError(
            f"endpoint '{endpoint_name}': serverless endpoints are neither async, shared nor LLM"
        )
    if rollout is not None and rollout.traffic == "rolling" and serverless is not None:
        raise ValueError(f"endpoint '{endpoint_name}': serverless endpoints cannot roll; use all_at_once")


def check_shadow(
    endpoint_name: str,
    shadow: ShadowVariant | None,
    serverless: ServerlessConfig | None,
    async_inference: AsyncInference | None,
    components: Sequence[InferenceComponent],
    rollout: Rollout | None,
) -> None:
    """SageMaker refuses shadow variants on serverless and asynchronous endpoints (shadow tests'
    exclusions); a shadow needs a model of its own (components name theirs); and a rolling update
    excludes multi-variant endpoints (deployment guardrails' exclusions), so a shadow's endpoint
    moves by blue/green."""
    if shadow is None:
        return
    if serverless is not None or async_inference is not None or components:
        raise ValueError(
            f"endpoint '{endpoint_name}': a shadow variant needs a real-time instance fleet of one model"
        )
    if rollout is not None and rollout.traffic == "rolling":
        raise ValueError(
            f"endpoint '{endpoint_name}': rolling updates exclude multi-variant endpoints; with a shadow "
            "use canary, linear or all_at_once"
        )
