"""Inference components: several models on one endpoint's shared fleet (AWS::SageMaker::
InferenceComponent), each with its copies, what a copy needs, its own rolling update that the
endpoint's alarms roll back, and autoscaling of its copies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Size
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs.endpoint_autoscaling import scale_copies
from sagestack.constructs.endpoint_llm import LlmModel
from sagestack.constructs.endpoint_rollout import Rollout
from sagestack.constructs.prop_types import typed_fields
from sagestack.constructs.validation import validate_as_request
from sagestack.endpoints.config_request import VARIANT

Component = sagemaker.CfnInferenceComponent


@typed_fields
@dataclass(frozen=True)
class InferenceComponent:
    """One model on a shared endpoint: its model package (or an LLM: `llm`, whose download and
    start-up timeouts become the component's StartupParameters), copies, and what each copy needs.
    min_copies: the fewest copies autoscaling keeps (default: copies); 0 scales the component to
    zero, and a request it cannot serve (NoCapacityInvocationFailures) wakes one copy."""

    name: str
    memory: Size
    model_package: str | None = None
    llm: LlmModel | None = None
    cpu_cores: float = 1
    accelerators: int | None = None
    copies: int = 1
    max_copies: int | None = None  # autoscale copies on invocations per copy up to this
    invocations_per_copy: int = 100
    min_copies: int | None = None

    def __post_init__(self) -> None:
        if (self.model_package is None) == (self.llm is None):
            raise ValueError(f"component '{self.name}': give model_package or llm (exactly one)")
        if self.min_copies is not None and self.max_copies is None:
            raise ValueError(f"component '{self.name}': min_copies needs max_copies (copies autoscale)")

    @property
    def workers(self) -> int:
        """The model server's default workers for one copy: one per accelerator, else per core."""
        return self.accelerators or max(1, int(self.cpu_cores))


def inference_component(
    scope: Construct,
    c: InferenceComponent,
    *,
    endpoint_name: str,
    endpoint: sagemaker.CfnEndpoint,
    model: sagemaker.CfnModel,
    rollout: Rollout,
    alarms: Sequence[cloudwatch.Alarm],
    alarm_topic: sns.ITopic | None = None,
) -> Component:
    """`c` on the endpoint's variant, serving `model`; named '<endpoint>-<component>'."""
    component_name = f"{endpoint_name}-{c.name}"
    resource = Component(
        scope,
        f"Component-{c.name}",
        inference_component_name=component_name,
        endpoint_name=endpoint.attr_endpoint_name,
        variant_name=VARIANT,
        specification=Component.InferenceComponentSpecificationProperty(
            model_name=model.attr_model_name,
            compute_resource_requirements=Component.InferenceComponentComputeResourceRequirementsProperty(
                number_of_cpu_cores_required=c.cpu_cores,
                min_memory_required_in_mb=int(c.memory.to_mebibytes()),
                number_of_accelerator_devices_required=c.accelerators,
            ),
            startup_parameters=_startup(c.llm),
        ),
        runtime_config=Component.InferenceComponentRuntimeConfigProperty(copy_count=c.copies),
        deployment_config=Component.InferenceComponentDeploymentConfigProperty(
            rolling_update_policy=Component.InferenceComponentRollingUpdatePolicyProperty(
                maximum_batch_size=Component.InferenceComponentCapacitySizeProperty(
                    type="COPY_COUNT", value=max(1, c.copies * rollout.step_percent // 100)
                ),
                wait_interval_in_seconds=int(rollout.wait.to_seconds()),
            ),
            auto_rollback_configuration=Component.AutoRollbackConfigurationProperty(
                alarms=[Component.AlarmProperty(alarm_name=a.alarm_name) for a in alarms]
            ),
        ),
    )
    validate_as_request(resource, "CreateInferenceComponent", drop=("DeploymentConfig",))
    if c.max_copies is not None:
        scale_copies(
            scope,
            c.name,
            component_name=component_name,
            component=resource,
            copies=c.copies if c.min_copies is None else c.min_copies,
            max_copies=c.max_copies,
            invocations_per_copy=c.invocations_per_copy,
            alarm_topic=alarm_topic,
        )
    return resource


def _startup(llm: LlmModel | None) -> Component.InferenceComponentStartupParametersProperty | None:
    """An LLM copy's time to download its weights and to pass the container's health check."""
    if llm is None or (llm.download_timeout is None and llm.startup_timeout is None):
        return None
    return Component.InferenceComponentStartupParametersProperty(
        model_data_download_timeout_in_seconds=int(llm.download_timeout.to_seconds())
        if llm.download_timeout
        else None,
        container_startup_health_check_timeout_in_seconds=int(llm.startup_timeout.to_seconds())
        if llm.startup_timeout
        else None,
    )
