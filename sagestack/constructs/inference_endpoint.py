"""InferenceEndpoint: a SageMaker endpoint serving a model package — a compiled (Neo / Inferentia)
one as registered by a pipeline — real-time, serverless or asynchronous, or several models as
inference components on shared instances; with autoscaling that survives updates, and a guarded
update (blue/green or rolling) that CloudWatch alarms roll back."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration, Size
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.nag import acknowledge
from sagestack.constructs.validation import validate_as_request

VARIANT = "AllTraffic"  # blue/green updates need the same variant name in the old and new config
MAX_EXECUTION_TIMEOUT = 14400  # BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds ceiling
MIN_EXECUTION_TIMEOUT = 600


@dataclass(frozen=True)
class ServerlessConfig:
    """A serverless endpoint: memory (1-6 GiB in 1 GiB steps) and concurrent invocations (1-200)."""

    memory_size: Size
    max_concurrency: int = 5


@dataclass(frozen=True)
class AutoScaling:
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute)."""

    min_capacity: int = 1
    max_capacity: int = 1
    invocations_per_instance: int = 1000
    # Async endpoints track the queue instead: ApproximateBacklogSizePerInstance. With
    # min_capacity 0 a step policy wakes the fleet when requests wait with no instance.
    backlog_per_instance: float = 5
    scale_in_cooldown: Duration = field(default_factory=lambda: Duration.minutes(5))
    scale_out_cooldown: Duration = field(default_factory=lambda: Duration.minutes(1))


@dataclass(frozen=True)
class DataCapture:
    """Capture requests and responses under the artifact bucket's capture/<endpoint>/ prefix."""

    artifacts: ArtifactBucketBase
    sampling_percentage: int = 100
    folder: str | None = None  # under capture/ (default: the endpoint's name)


@dataclass(frozen=True)
class AsyncInference:
    """Asynchronous inference: requests queue; results land under the artifact bucket's
    async/<endpoint>/output/, failures under async/<endpoint>/failures/ (encrypted with the bucket's
    key); SNS topics (encrypted with it too) say which succeeded and which failed."""

    artifacts: ArtifactBucketBase
    max_concurrent_invocations_per_instance: int | None = None
    notify: bool = True
    include_response_in_notification: bool = False
    folder: str | None = None  # under async/ (default: the endpoint's name)


@dataclass(frozen=True)
class VpcPlacement:
    """The model's containers run in these subnets, behind these security groups (Model VpcConfig)."""

    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]


@dataclass(frozen=True)
class InferenceComponent:
    """One model on a shared endpoint: its model package, copies, and what each copy needs."""

    name: str
    model_package: str
    memory: Size
    cpu_cores: float = 1
    accelerators: int | None = None
    copies: int = 1
    max_copies: int | None = None  # autoscale copies on invocations per copy up to this
    invocations_per_copy: int = 100


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
        if self.max_batch_size < 1 or self.threads_per_worker < 1 or (self.workers or 1) < 1:
            raise ValueError("Batching: max_batch_size, workers and threads_per_worker must be >= 1")
        workers = str(self.workers or max(1, default_workers))
        env = {
            "SAGEMAKER_TS_BATCH_SIZE": str(self.max_batch_size),
            "SAGEMAKER_TS_MAX_BATCH_DELAY": str(int(self.max_delay.to_milliseconds())),
            "SAGEMAKER_TS_MIN_WORKERS": workers,
            "SAGEMAKER_TS_MAX_WORKERS": workers,
            "SAGEMAKER_TS_RESPONSE_TIMEOUT": str(int(self.response_timeout.to_seconds())),
            "SAGEMAKER_MODEL_SERVER_WORKERS": workers,
            "OMP_NUM_THREADS": str(self.threads_per_worker),
            "SAGESTACK_SERVE_THREADS": str(self.threads_per_worker),
        }
        if self.handler:
            env["TS_DEFAULT_SERVICE_HANDLER"] = self.handler
        return env


def default_workers(instance_type: str | None) -> int:
    """TorchServe's own default: one worker per GPU, else one per vCPU."""
    if instance_type is None:
        return 1
    from sagestack.core.catalog.instances import instance_type as lookup

    try:
        it = lookup(instance_type)
    except (KeyError, ValueError):
        return 1
    return it.gpus or it.neuron_cores or it.vcpu or 1


@dataclass(frozen=True)
class Rollout:
    """A guarded update while alarms watch; an alarm rolls it back. traffic: 'canary' | 'linear' |
    'all_at_once' shift traffic to a second (blue/green) fleet; 'rolling' replaces the fleet
    step_percent (of 5-50 %) at a time without a second fleet. Inf1 and serverless always shift all at
    once (SageMaker's guardrail exclusions); serverless cannot roll."""

    traffic: str = "canary"
    step_percent: int = 10
    wait: Duration = field(default_factory=lambda: Duration.minutes(5))
    termination_wait: Duration = field(default_factory=lambda: Duration.minutes(10))
    max_5xx_errors: int = 0
    max_latency: Duration | None = None


class InferenceEndpointBase(Construct):
    """Grants and metrics of an endpoint, created here or imported (`InferenceEndpoint.from_endpoint_name`)."""

    endpoint_name: str
    variant_name: str = VARIANT

    @property
    def endpoint_arn(self) -> str:
        from aws_cdk import Stack

        return Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=self.endpoint_name
        )

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """InvokeEndpoint (and its streaming form) on this endpoint only."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(actions.ENDPOINT_INVOKE), resource_arns=[self.endpoint_arn]
        )

    def metric(
        self, metric_name: str, *, statistic: str = "Average", period: Duration | None = None
    ) -> cloudwatch.Metric:
        """One of the variant's AWS/SageMaker metrics (per minute unless told)."""
        return cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=metric_name,
            dimensions_map={"EndpointName": self.endpoint_name, "VariantName": self.variant_name},
            statistic=statistic,
            period=period or Duration.minutes(1),
        )

    def metric_model_latency(
        self, *, statistic: str = "p99", period: Duration | None = None
    ) -> cloudwatch.Metric:
        """ModelLatency, in microseconds."""
        return self.metric("ModelLatency", statistic=statistic, period=period)

    def metric_invocation_5xx_errors(
        self, *, statistic: str = "Sum", period: Duration | None = None
    ) -> cloudwatch.Metric:
        return self.metric("Invocation5XXErrors", statistic=statistic, period=period)

    def metric_invocation_4xx_errors(
        self, *, statistic: str = "Sum", period: Duration | None = None
    ) -> cloudwatch.Metric:
        return self.metric("Invocation4XXErrors", statistic=statistic, period=period)

    def metric_invocations(
        self, *, statistic: str = "Sum", period: Duration | None = None
    ) -> cloudwatch.Metric:
        return self.metric("Invocations", statistic=statistic, period=period)


class _ImportedEndpoint(InferenceEndpointBase):
    def __init__(self, scope: Construct, id: str, endpoint_name: str, variant_name: str) -> None:
        super().__init__(scope, id)
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name


class InferenceEndpoint(InferenceEndpointBase):
    """Props:
    endpoint_name: the physical name (callers invoke it by name; see Names.endpoint).
    model_package: the model package ARN to serve (a pipeline's registration, pinned by promotion).
    execution_role: pulls the image and the model (ExecutionRole, or any IRole).
    encryption_key: encrypts the instances' storage volumes (instance fleets; serverless takes none).
    instance_type / initial_instance_count (1): an instance fleet; or serverless: ServerlessConfig.
    autoscaling: AutoScaling (instance fleets only; default none). The current instance count is
      kept across updates (RetainAllVariantProperties), so a new model never drops an autoscaled
      fleet back to its initial count; a data capture change still takes effect.
    data_capture: DataCapture (default none).
    rollout: Rollout (default: canary 10 %, 5 min bake, rolled back on any 5XX).
    async_inference: AsyncInference (instance fleets only; default: real-time).
    vpc: VpcPlacement (default: none; the execution role needs VPC access).
    components: InferenceComponent entries instead of model_package: several models on the
      fleet, which managed instance scaling sizes between autoscaling's min and max.
    batching: Batching (default none: the container answers one request per forward pass).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint_name: str,
        model_package: str | None = None,
        execution_role: iam.IRole | iam.IGrantable,
        encryption_key: kms.IKey | None = None,
        instance_type: str | None = None,
        initial_instance_count: int = 1,
        serverless: ServerlessConfig | None = None,
        autoscaling: AutoScaling | None = None,
        data_capture: DataCapture | None = None,
        rollout: Rollout | None = None,
        async_inference: AsyncInference | None = None,
        vpc: VpcPlacement | None = None,
        components: tuple[InferenceComponent, ...] | list[InferenceComponent] = (),
        batching: Batching | None = None,
    ) -> None:
        super().__init__(scope, id)
        if (instance_type is None) == (serverless is None):
            raise ValueError(f"endpoint '{endpoint_name}': give either instance_type or serverless")
        if (model_package is None) == (not components):
            raise ValueError(f"endpoint '{endpoint_name}': give either model_package or components")
        if serverless is not None and (async_inference is not None or components):
            raise ValueError(f"endpoint '{endpoint_name}': serverless endpoints are neither async nor shared")
        if rollout is not None and rollout.traffic == "rolling" and serverless is not None:
            raise ValueError(f"endpoint '{endpoint_name}': serverless endpoints cannot roll; use all_at_once")
        self.endpoint_name = endpoint_name
        self.instance_type = instance_type
        self.serverless = serverless
        self.async_inference = async_inference
        role_arn = execution_role.role_arn if hasattr(execution_role, "role_arn") else None
        if role_arn is None:
            raise ValueError("execution_role: give an ExecutionRole or an iam.IRole")
        self._role_arn = role_arn
        self._vpc = vpc
        self._batching = batching
        rollout = rollout or Rollout()
        # No explicit names on the model and config: a new pin replaces them, and the endpoint moves
        # to the new config by a guarded update.
        self.model = (
            self._model("Model", model_package, default_workers(instance_type)) if model_package else None
        )
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT,
            model_name=self.model.attr_model_name if self.model else None,
            initial_variant_weight=None if components else 1.0,
            initial_instance_count=initial_instance_count if instance_type else None,
            instance_type=instance_type,
            serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                memory_size_in_mb=int(serverless.memory_size.to_mebibytes()),
                max_concurrency=serverless.max_concurrency,
            )
            if serverless
            else None,
            managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED",
                min_instance_count=autoscaling.min_capacity if autoscaling else initial_instance_count,
                max_instance_count=autoscaling.max_capacity if autoscaling else initial_instance_count,
            )
            if components
            else None,
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy="LEAST_OUTSTANDING_REQUESTS"
            )
            if components
            else None,
        )
        capture = None
        if data_capture is not None:
            capture = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                enable_capture=True,
                initial_sampling_percentage=data_capture.sampling_percentage,
                destination_s3_uri=data_capture.artifacts.s3_uri(
                    "capture", data_capture.folder or endpoint_name
                ),
                kms_key_id=data_capture.artifacts.encryption_key.key_arn
                if data_capture.artifacts.encryption_key
                else None,
                capture_options=[
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input"),
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output"),
                ],
                capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                    json_content_types=["application/json"]
                ),
            )
        self.success_topic: sns.Topic | None = None
        self.error_topic: sns.Topic | None = None
        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[variant],
            kms_key_id=encryption_key.key_arn if (encryption_key is not None and instance_type) else None,
            data_capture_config=capture,
            async_inference_config=self._async_config(async_inference, encryption_key, execution_role)
            if async_inference
            else None,
            # Inference components name their models; the endpoint config names the role instead.
            execution_role_arn=role_arn if components else None,
        )
        validate_as_request(
            self.config, "CreateEndpointConfig", add={"EndpointConfigName": "generated-by-cloudformation"}
        )
        self.alarms = self._alarms(rollout)
        # A model change keeps the variant's current instance count (autoscaling's, not the
        # config's initial one): RetainAllVariantProperties, except the data capture settings, which
        # follow the new config. Without autoscaling the config's count is the truth.
        retain = autoscaling is not None and instance_type is not None and not components
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            # Inference components update themselves (their own rolling policy); the endpoint's
            # config changes only with the fleet.
            deployment_config=None if components else self._deployment(rollout),
            retain_all_variant_properties=True if retain else None,
            exclude_retained_variant_properties=[
                sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type="DataCaptureConfig")
            ]
            if retain
            else None,
        )
        validate_as_request(self.endpoint, "UpdateEndpoint", drop=("Tags",))
        validate_as_request(
            self.endpoint,
            "CreateEndpoint",
            drop=("RetainAllVariantProperties", "ExcludeRetainedVariantProperties", "RetainDeploymentConfig"),
        )
        # The rollback alarms are referenced by name (Ref), which orders them before the endpoint.
        self.scalable_target: appscaling.CfnScalableTarget | None = None
        if autoscaling is not None and instance_type is not None and not components:
            self._autoscaling(autoscaling)
        self.components: dict[str, sagemaker.CfnInferenceComponent] = {}
        for component in components:
            self._component(component, rollout)

    def _model(self, id: str, model_package: str, workers: int) -> sagemaker.CfnModel:
        model = sagemaker.CfnModel(
            self,
            id,
            execution_role_arn=self._role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                model_package_name=model_package,
                # added to the package's own container environment (SAGEMAKER_PROGRAM, …)
                environment=self._batching.environment(workers) if self._batching else None,
            ),
            enable_network_isolation=True,
            vpc_config=self._vpc_config(),
        )
        validate_as_request(model, "CreateModel", add={"ModelName": "generated-by-cloudformation"})
        return model

    def _vpc_config(self) -> sagemaker.CfnModel.VpcConfigProperty | None:
        if self._vpc is None:
            return None
        return sagemaker.CfnModel.VpcConfigProperty(
            subnets=list(self._vpc.subnet_ids), security_group_ids=list(self._vpc.security_group_ids)
        )

    def _async_config(
        self, a: AsyncInference, key: kms.IKey | None, role: iam.IRole | iam.IGrantable
    ) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty:
        folder = a.folder or self.endpoint_name
        notification = None
        if a.notify:
            self.success_topic = self._topic("SuccessTopic", "succeeded", key)
            self.error_topic = self._topic("ErrorTopic", "failed", key)
            # SageMaker publishes as the execution role. The grant is a policy of this construct's
            # own (the role may live in another stack, which must not depend on this one).
            publish = iam.Policy(
                self,
                "PublishPolicy",
                statements=[
                    iam.PolicyStatement(
                        actions=["sns:Publish"],
                        resources=[self.success_topic.topic_arn, self.error_topic.topic_arn],
                    )
                ],
            )
            publish.attach_to_role(getattr(role, "role", role))  # type: ignore[arg-type]
            if key is not None:
                publish.add_statements(
                    iam.PolicyStatement(
                        actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=[key.key_arn]
                    )
                )
                acknowledge(
                    publish,
                    {
                        "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "Publishing to the encrypted "
                        "topics: data keys of the project key only."
                    },
                )
            notification = sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                success_topic=self.success_topic.topic_arn,
                error_topic=self.error_topic.topic_arn,
                include_inference_response_in=["SUCCESS_NOTIFICATION_TOPIC"]
                if a.include_response_in_notification
                else None,
            )
        return sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                s3_output_path=a.artifacts.s3_uri("async", folder, "output") + "/",
                s3_failure_path=a.artifacts.s3_uri("async", folder, "failures") + "/",
                kms_key_id=a.artifacts.encryption_key.key_arn if a.artifacts.encryption_key else None,
                notification_config=notification,
            ),
            client_config=sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                max_concurrent_invocations_per_instance=a.max_concurrent_invocations_per_instance
            )
            if a.max_concurrent_invocations_per_instance
            else None,
        )

    def _topic(self, id: str, what: str, key: kms.IKey | None) -> sns.Topic:
        topic = sns.Topic(
            self,
            id,
            display_name=f"{self.endpoint_name}: async requests that {what}",
            master_key=key,
            enforce_ssl=True,
        )
        if key is None:
            acknowledge(topic, {"AwsSolutions-SNS2": "No encryption_key was given to the endpoint."})
        return topic

    def _component(self, c: InferenceComponent, rollout: Rollout) -> None:
        model = self._model(f"Model-{c.name}", c.model_package, c.accelerators or max(1, int(c.cpu_cores)))
        component_name = f"{self.endpoint_name}-{c.name}"
        resource = sagemaker.CfnInferenceComponent(
            self,
            f"Component-{c.name}",
            inference_component_name=component_name,
            endpoint_name=self.endpoint.attr_endpoint_name,
            variant_name=VARIANT,
            specification=sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty(
                model_name=model.attr_model_name,
                compute_resource_requirements=sagemaker.CfnInferenceComponent.InferenceComponentComputeResourceRequirementsProperty(
                    number_of_cpu_cores_required=c.cpu_cores,
                    min_memory_required_in_mb=int(c.memory.to_mebibytes()),
                    number_of_accelerator_devices_required=c.accelerators,
                ),
            ),
            runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                copy_count=c.copies
            ),
            deployment_config=sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty(
                rolling_update_policy=sagemaker.CfnInferenceComponent.InferenceComponentRollingUpdatePolicyProperty(
                    maximum_batch_size=sagemaker.CfnInferenceComponent.InferenceComponentCapacitySizeProperty(
                        type="COPY_COUNT", value=max(1, c.copies * rollout.step_percent // 100)
                    ),
                    wait_interval_in_seconds=int(rollout.wait.to_seconds()),
                ),
                auto_rollback_configuration=sagemaker.CfnInferenceComponent.AutoRollbackConfigurationProperty(
                    alarms=[
                        sagemaker.CfnInferenceComponent.AlarmProperty(alarm_name=a.alarm_name)
                        for a in self.alarms
                    ]
                ),
            ),
        )
        validate_as_request(resource, "CreateInferenceComponent", drop=("DeploymentConfig",))
        self.components[c.name] = resource
        if c.max_copies is None:
            return
        target = appscaling.CfnScalableTarget(
            self,
            f"ScalableTarget-{c.name}",
            service_namespace="sagemaker",
            resource_id=f"inference-component/{component_name}",
            scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
            min_capacity=c.copies,
            max_capacity=c.max_copies,
        )
        target.node.add_dependency(resource)
        appscaling.CfnScalingPolicy(
            self,
            f"InvocationsPerCopy-{c.name}",
            policy_name=f"{component_name}-invocations",
            policy_type="TargetTrackingScaling",
            scaling_target_id=target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=float(c.invocations_per_copy),
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="SageMakerInferenceComponentInvocationsPerCopy"
                ),
            ),
        )

    @staticmethod
    def from_endpoint_name(
        scope: Construct, id: str, endpoint_name: str, *, variant_name: str = VARIANT
    ) -> InferenceEndpointBase:
        """An endpoint deployed elsewhere: grant invoking it, alarm on its metrics."""
        return _ImportedEndpoint(scope, id, endpoint_name, variant_name)

    def _alarms(self, r: Rollout) -> list[cloudwatch.Alarm]:
        alarms = [
            self._alarm(
                "Errors",
                "5xx",
                "model errors (5XX) during or after a rollout",
                self.metric_invocation_5xx_errors(),
                threshold=r.max_5xx_errors,
                periods=1,
            )
        ]
        if r.max_latency is not None:
            ms = int(r.max_latency.to_milliseconds())
            alarms.append(
                self._alarm(
                    "Latency",
                    "latency",
                    f"p99 model latency above {ms} ms",
                    self.metric_model_latency(),  # microseconds
                    threshold=ms * 1000,
                    periods=2,
                )
            )
        return alarms

    def _alarm(
        self, id: str, suffix: str, what: str, metric: cloudwatch.Metric, *, threshold: float, periods: int
    ) -> cloudwatch.Alarm:
        """An alarm on one of the variant's metrics rising above `threshold`."""
        return cloudwatch.Alarm(
            self,
            id,
            alarm_name=f"{self.endpoint_name}-{suffix}",
            alarm_description=f"{self.endpoint_name}: {what}",
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=periods,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _deployment(self, r: Rollout) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        traffic = r.traffic
        # Inf1 and serverless endpoints shift all traffic at once (SageMaker's guardrail exclusions).
        if self.serverless is not None or (self.instance_type or "").startswith("ml.inf1."):
            traffic = "all_at_once"
        wait = int(r.wait.to_seconds())
        termination_wait = int(r.termination_wait.to_seconds())
        rollback = sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in self.alarms]
        )
        if traffic == "rolling":
            batch = sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=r.step_percent)
            steps = -(-100 // r.step_percent)
            return sagemaker.CfnEndpoint.DeploymentConfigProperty(
                rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                    maximum_batch_size=batch,
                    wait_interval_in_seconds=wait,
                    maximum_execution_timeout_in_seconds=min(
                        MAX_EXECUTION_TIMEOUT, max(MIN_EXECUTION_TIMEOUT, steps * (wait + 900))
                    ),
                    # A rollback brings the whole old fleet back at once: the new one misbehaves.
                    rollback_maximum_batch_size=sagemaker.CfnEndpoint.CapacitySizeProperty(
                        type="CAPACITY_PERCENT", value=100
                    ),
                ),
                auto_rollback_configuration=rollback,
            )
        step = sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=r.step_percent)
        routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type=traffic.upper(),
            wait_interval_in_seconds=wait,
            canary_size=step if traffic == "canary" else None,
            linear_step_size=step if traffic == "linear" else None,
        )
        steps = {"canary": 2, "linear": -(-100 // r.step_percent), "all_at_once": 1}[traffic]
        timeout = min(
            MAX_EXECUTION_TIMEOUT, max(MIN_EXECUTION_TIMEOUT, steps * wait + termination_wait + 1800)
        )
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=routing,
                termination_wait_in_seconds=termination_wait,
                maximum_execution_timeout_in_seconds=timeout,
            ),
            auto_rollback_configuration=rollback,
        )

    def _autoscaling(self, a: AutoScaling) -> None:
        self.scalable_target = appscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=a.min_capacity,
            max_capacity=a.max_capacity,
        )
        self.scalable_target.node.add_dependency(self.endpoint)
        if self.async_inference is not None:
            self._backlog_scaling(a)
            return
        appscaling.CfnScalingPolicy(
            self,
            "InvocationsPerInstance",
            policy_name=f"{self.endpoint_name}-invocations",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.scalable_target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=float(a.invocations_per_instance),
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="SageMakerVariantInvocationsPerInstance"
                ),
                scale_in_cooldown=int(a.scale_in_cooldown.to_seconds()),
                scale_out_cooldown=int(a.scale_out_cooldown.to_seconds()),
            ),
        )

    def _backlog_scaling(self, a: AutoScaling) -> None:
        """Async: track the queue per instance; from zero instances, a step policy on
        HasBacklogWithoutCapacity adds the first one (target tracking cannot scale out from zero)."""
        assert self.scalable_target is not None
        appscaling.CfnScalingPolicy(
            self,
            "BacklogPerInstance",
            policy_name=f"{self.endpoint_name}-backlog",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.scalable_target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=float(a.backlog_per_instance),
                customized_metric_specification=appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                    namespace="AWS/SageMaker",
                    metric_name="ApproximateBacklogSizePerInstance",
                    dimensions=[
                        appscaling.CfnScalingPolicy.MetricDimensionProperty(
                            name="EndpointName", value=self.endpoint_name
                        )
                    ],
                    statistic="Average",
                ),
                scale_in_cooldown=int(a.scale_in_cooldown.to_seconds()),
                scale_out_cooldown=int(a.scale_out_cooldown.to_seconds()),
            ),
        )
        if a.min_capacity > 0:
            return
        wake = appscaling.CfnScalingPolicy(
            self,
            "WakeOnBacklog",
            policy_name=f"{self.endpoint_name}-wake",
            policy_type="StepScaling",
            scaling_target_id=self.scalable_target.ref,
            step_scaling_policy_configuration=appscaling.CfnScalingPolicy.StepScalingPolicyConfigurationProperty(
                adjustment_type="ChangeInCapacity",
                metric_aggregation_type="Average",
                cooldown=int(a.scale_out_cooldown.to_seconds()),
                step_adjustments=[
                    appscaling.CfnScalingPolicy.StepAdjustmentProperty(
                        metric_interval_lower_bound=0, scaling_adjustment=1
                    )
                ],
            ),
        )
        cloudwatch.CfnAlarm(
            self,
            "BacklogWithoutCapacity",
            alarm_name=f"{self.endpoint_name}-wake",
            alarm_description=f"{self.endpoint_name}: requests wait and no instance runs; start one",
            namespace="AWS/SageMaker",
            metric_name="HasBacklogWithoutCapacity",
            dimensions=[cloudwatch.CfnAlarm.DimensionProperty(name="EndpointName", value=self.endpoint_name)],
            statistic="Average",
            period=60,
            evaluation_periods=2,
            datapoints_to_alarm=2,
            threshold=1,
            comparison_operator="GreaterThanOrEqualToThreshold",
            treat_missing_data="missing",
            alarm_actions=[wake.ref],
        )
