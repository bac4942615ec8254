"""The model an endpoint serves (AWS::SageMaker::Model): a model package, as registered, in the
package's own container — with dynamic batching in the container's environment, and the VPC it
runs in (aws-sagemaker-alpha's model.ts)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs.prop_types import typed_fields
from sagestack.constructs.validation import validate_as_request
from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.endpoints.batching import batching_environment


@typed_fields
@dataclass(frozen=True)
class VpcPlacement:
    """The model's containers run in these subnets, behind these security groups (Model VpcConfig)."""

    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]


@typed_fields
@dataclass(frozen=True)
class Batching:
    """Dynamic batching in the PyTorch inference container (TorchServe): a worker takes up to
    max_batch_size waiting requests, waiting at most max_delay for the batch to fill. Rendered as the
    model's container environment: SAGEMAKER_TS_BATCH_SIZE, SAGEMAKER_TS_MAX_BATCH_DELAY,
    SAGEMAKER_TS_MIN/MAX_WORKERS (default: one worker per GPU, else per vCPU of the instance type,
    per accelerator or CPU core of a component, one when serverless — setting any SAGEMAKER_TS_
    variable would otherwise drop the container to one worker), SAGEMAKER_TS_RESPONSE_TIMEOUT and the
    threads per worker. handler: the TorchServe handler (TS_DEFAULT_SERVICE_HANDLER) —
    'inference:handle' by default, the model's own inference.py answering a batch with one forward
    pass; None keeps the container's handler, which runs input/predict/output_fn once per request."""

    max_batch_size: int
    max_delay: Duration = field(default_factory=lambda: Duration.millis(5))
    workers: int | None = None
    threads_per_worker: int = 1
    response_timeout: Duration = field(default_factory=lambda: Duration.seconds(60))
    handler: str | None = "inference:handle"

    def environment(self, default_workers: int) -> dict[str, str]:
        return batching_environment(
            max_batch_size=self.max_batch_size,
            max_delay_ms=int(self.max_delay.to_milliseconds()),
            workers=self.workers,
            default_workers=default_workers,
            threads_per_worker=self.threads_per_worker,
            response_timeout_s=int(self.response_timeout.to_seconds()),
            handler=self.handler,
        )


def default_workers(instance_type: str | None) -> int:
    """TorchServe's own default: one worker per GPU, else one per vCPU."""
    if instance_type is None:
        return 1

    try:
        it = lookup(instance_type)
    except (KeyError, ValueError):
        return 1
    return it.gpus or it.neuron_cores or it.vcpu or 1


def serving_model(
    scope: Construct,
    id: str,
    *,
    role_arn: str,
    model_package: str,
    workers: int,
    batching: Batching | None = None,
    vpc: VpcPlacement | None = None,
) -> sagemaker.CfnModel:
    """A model of `model_package`, network-isolated, with no explicit name: a new pin replaces it,
    and the endpoint moves to the new config by a guarded update. workers: the batching default."""
    model = sagemaker.CfnModel(
        scope,
        id,
        execution_role_arn=role_arn,
        primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
            model_package_name=model_package,
            # added to the package's own container environment (SAGEMAKER_PROGRAM, …)
            environment=batching.environment(workers) if batching else None,
        ),
        enable_network_isolation=True,
        vpc_config=sagemaker.CfnModel.VpcConfigProperty(
            subnets=list(vpc.subnet_ids), security_group_ids=list(vpc.security_group_ids)
        )
        if vpc
        else None,
    )
    validate_as_request(model, "CreateModel", add={"ModelName": "generated-by-cloudformation"})
    return model
