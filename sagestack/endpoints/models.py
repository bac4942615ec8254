"""The spec of an endpoint (`endpoints:`): real-time, serverless, async, components."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from sagestack.core.model import ModelSource, StrictModel, VpcSpec
from sagestack.core.types import (
    EntryName,
    HostingInstanceCandidates,
    HostingInstanceType,
    ModelPackageArn,
    Seconds,
)
from sagestack.llm.models import LlmSpec, ShadowSpec
from sagestack.monitoring.models import MonitorSpec


class CompileSpec(StrictModel):
    """A SageMaker Neo compilation (CreateCompilationJob) of the trained model for one target."""

    target_device: str | None = Field(default=None, description="a TargetDevice, e.g. ml_c5, ml_inf2")
    target_platform: dict[str, str] | None = Field(
        default=None, description="{Os, Arch, Accelerator}, instead of target_device"
    )
    framework: Literal["PYTORCH", "TENSORFLOW", "KERAS", "MXNET", "ONNX", "XGBOOST", "TFLITE"] = "PYTORCH"
    framework_version: str | None = Field(
        default=None, description="e.g. '2.0' (Neo's PyTorch tops out at 2.0)"
    )
    input_shapes: dict[str, list[int]] = Field(
        min_length=1, description="DataInputConfig: input name -> shape, e.g. {input0: [1, 1, 8, 8]}"
    )
    compiler_options: dict[str, Any] = Field(default_factory=dict)
    max_runtime: Seconds = Field(default=900, ge=1, description="the compilation job's MaxRuntimeInSeconds")


class AutoscalingSpec(StrictModel):
    """Target tracking on SageMakerVariantInvocationsPerInstance."""

    min: int = Field(
        default=1,
        ge=0,
        description="0 only for async endpoints and endpoints of inference components (scale to zero)",
    )
    max: int = Field(default=1, ge=1)
    invocations_per_instance: int = Field(default=1000, ge=1, description="per minute, the tracking target")
    backlog_per_instance: float = Field(
        default=5,
        gt=0,
        description="async endpoints: the tracking target for ApproximateBacklogSizePerInstance",
    )
    scale_in_cooldown: Seconds = 300
    scale_out_cooldown: Seconds = 60


class ServerlessSpec(StrictModel):
    memory_mb: Literal[1024, 2048, 3072, 4096, 5120, 6144] = 2048
    max_concurrency: int = Field(default=5, ge=1, le=200)


class DataCaptureSpec(StrictModel):
    sampling_percent: int = Field(default=100, ge=0, le=100)


class RolloutSpec(StrictModel):
    """A guarded update: traffic shifts to the new fleet (blue/green: canary, linear, all at once) or
    the fleet is replaced in batches (rolling) while CloudWatch alarms watch it; an alarm rolls the
    endpoint back automatically."""

    traffic: Literal["canary", "linear", "all_at_once", "rolling"] = "canary"
    canary_percent: int = Field(default=10, ge=1, le=99, description="canary / linear step size")
    batch_percent: int = Field(
        default=25,
        ge=5,
        le=50,
        description="rolling: the share of the fleet replaced per step (no second fleet is provisioned)",
    )
    wait: Seconds = Field(default=300, ge=0, le=3600, description="bake time between traffic steps")
    termination_wait: Seconds = Field(default=600, ge=0, le=3600, description="keep the old fleet this long")
    max_5xx_errors: int = Field(default=0, ge=0, description="alarm when a minute has more 5XX errors")
    max_latency_ms: int | None = Field(default=None, ge=1, description="alarm on ModelLatency p99 above this")


class BatchingSpec(StrictModel):
    """Dynamic batching in the PyTorch inference container (TorchServe) and in `sagestack local
    serve`, with the same meaning in both: a worker takes up to max_batch_size waiting requests,
    waiting at most max_delay_ms for the batch to fill, and answers them with one forward pass."""

    max_batch_size: int = Field(
        ge=1, le=1024, description="requests joined into one forward pass (SAGEMAKER_TS_BATCH_SIZE)"
    )
    max_delay_ms: int = Field(
        default=5,
        ge=0,
        le=10000,
        description="the longest a batch waits to fill, in ms (SAGEMAKER_TS_MAX_BATCH_DELAY); every "
        "request of a batch that does not fill waits this long",
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="model workers (processes) per instance (SAGEMAKER_TS_MIN/MAX_WORKERS); default: one "
        "per GPU, else per vCPU of the instance type (a component: per accelerator, else per CPU core)",
    )
    threads_per_worker: int = Field(
        default=1,
        ge=1,
        le=256,
        description="torch threads per worker (OMP_NUM_THREADS, SAGESTACK_SERVE_THREADS)",
    )
    response_timeout: Seconds = Field(
        default=60, ge=1, le=3600, description="a batch's forward pass longer than this restarts the worker"
    )
    handler: Literal["batched", "toolkit"] = Field(
        default="batched",
        description="batched: the model's inference.py handle() answers a batch with one forward pass; "
        "toolkit: the container's own handler (input/predict/output_fn once per request)",
    )


class MetricsSpec(StrictModel):
    """The endpoint config's MetricsConfig: utilization metrics beyond the per-variant defaults."""

    enhanced: bool = Field(
        default=False,
        description="EnableEnhancedMetrics: utilization and invocation metrics per instance and per "
        "container (per inference component)",
    )
    detailed_observability: bool = Field(
        default=False,
        description="EnableDetailedObservability: per-GPU utilization, memory and temperature, per-instance "
        "host metrics and the container's own Prometheus metrics",
    )
    publish_frequency: Literal[10, 30, 60, 120, 180, 240, 300] | None = Field(
        default=None, description="MetricPublishFrequencyInSeconds (SageMaker's default: 60)"
    )


class TokenProfile(StrictModel):
    """An LLM workload's token lengths: what a request sends and gets back (the benchmark's
    prompts and generations, and the shape every latency figure is measured at)."""

    input: int = Field(ge=1, le=1_000_000, description="prompt tokens per request")
    output: int = Field(ge=1, le=1_000_000, description="generated tokens per request")


class SloSpec(StrictModel):
    """A performance target: the latency and throughput one instance must reach, measured by
    `sagestack local bench` here (and by SageMaker's benchmark jobs in the cloud) against a workload
    of this shape. An LLM's target is time to first token and tokens per second per user at a
    token length profile; a classic model's, latency percentiles at a request rate."""

    p95_ms: float | None = Field(default=None, gt=0, description="95th-percentile latency, in ms")
    p99_ms: float | None = Field(default=None, gt=0, description="99th-percentile latency, in ms")
    requests_per_second: float | None = Field(
        default=None, gt=0, description="requests per second one instance sustains within the latency"
    )
    ttft_ms: float | None = Field(
        default=None, gt=0, description="LLM: time to first token at the 95th percentile, in ms"
    )
    tokens_per_second: float | None = Field(
        default=None,
        gt=0,
        description="LLM: generated tokens per second per user (one stream's decode rate, median)",
    )
    tokens: TokenProfile | None = Field(
        default=None, description="LLM: the workload's token lengths (needed with an LLM target)"
    )
    candidates: list[HostingInstanceType] | None = Field(
        default=None,
        min_length=1,
        max_length=10,
        description="instance types measured against the target (default: the endpoint's instance_type); "
        "measuring one never deploys it",
    )
    on_registration: bool = Field(
        default=False,
        description="also measure each model package version approved in the endpoint's group: an "
        "EventBridge rule starts the recommendation pipeline with the approval event, and the job "
        "measures that version (default: only `sagestack run <endpoint> --recommend`); for a classic "
        "model served unpinned only",
    )

    @model_validator(mode="after")
    def _a_target(self) -> SloSpec:
        targets = ("p95_ms", "p99_ms", "requests_per_second", "ttft_ms", "tokens_per_second")
        if all(getattr(self, k) is None for k in targets):
            raise ValueError(f"give at least one target ({', '.join(targets)})")
        if self.p95_ms is not None and self.p99_ms is not None and self.p99_ms < self.p95_ms:
            raise ValueError(
                f"p99_ms ({self.p99_ms:g}) is below p95_ms ({self.p95_ms:g}); the 99th percentile "
                "is never faster than the 95th"
            )
        if self.candidates is not None and len(set(self.candidates)) != len(self.candidates):
            raise ValueError("candidates names an instance type twice")
        return self

    @property
    def llm_targets(self) -> tuple[str, ...]:
        """The LLM-only keys given."""
        return tuple(k for k in ("ttft_ms", "tokens_per_second", "tokens") if getattr(self, k) is not None)


class EndpointSpec(StrictModel):
    model: ModelSource | None = Field(
        default=None, description="which pipeline registers this endpoint's model"
    )
    model_package: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:model-package/.+$",
        description="the model package ARN this environment serves (the promotion pin)",
    )
    image: EntryName | None = Field(
        default=None,
        description="a key of images: (a dlc:) whose inference container serves model: (default: the "
        "training job's image), e.g. a TensorFlow Serving version for a TensorFlow version that has none",
    )
    compile: CompileSpec | None = None
    llm: LlmSpec | None = Field(
        default=None, description="a large language model in an LLM serving container (instead of model:)"
    )
    instance_type: HostingInstanceCandidates | None = None
    initial_instance_count: int = Field(default=1, ge=1)
    provision_timeout: Seconds | None = Field(
        default=None,
        ge=300,
        le=3600,
        description="VariantInstanceProvisionTimeoutInSeconds: how long SageMaker tries one instance "
        "pool before the next (several instance types)",
    )
    capacity_reservation: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/.+$",
        description="a training plan ARN reserving the endpoint's capacity (CapacityReservationConfig, "
        "capacity-reservations-only)",
    )
    shadow: ShadowSpec | None = Field(
        default=None, description="a shadow variant: a candidate model receives a copy of the traffic"
    )
    serverless: ServerlessSpec | None = None
    autoscaling: AutoscalingSpec | None = None
    data_capture: DataCaptureSpec | None = None
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    batching: BatchingSpec | None = Field(
        default=None,
        description="dynamic batching in the serving container (default: none — one request per forward pass)",
    )
    vpc: VpcSpec | None = Field(
        default=None, description="the model's VpcConfig: its containers run in these subnets"
    )
    async_: AsyncSpec | None = Field(
        default=None, alias="async", description="asynchronous inference: requests queue, results land in S3"
    )
    components: dict[EntryName, ComponentSpec] = Field(
        default_factory=dict,
        description="inference components: several models share the endpoint's instances",
    )
    monitor: MonitorSpec | None = Field(
        default=None, description="Model Monitor data quality (needs data_capture)"
    )
    metrics: MetricsSpec | None = Field(
        default=None, description="the config's MetricsConfig: enhanced, per-GPU metrics (default: none)"
    )
    slo: SloSpec | None = Field(
        default=None,
        description="a performance target (latency, throughput; an LLM's time to first token and tokens "
        "per second per user) that `sagestack local bench` measures configurations against",
    )
    deploy: bool = Field(
        default=True,
        description="false: this environment does not deploy the endpoint (an overlay sets true where it does)",
    )

    @property
    def primary_instance_type(self) -> str | None:
        """The first (highest-priority) instance type; None when serverless."""
        return self.instance_type[0] if self.instance_type else None

    @property
    def slo_candidates(self) -> tuple[str, ...]:
        """The instance types measured against the slo: its candidates, else the endpoint's own."""
        if self.slo is not None and self.slo.candidates:
            return tuple(self.slo.candidates)
        return tuple(self.instance_type or ())


class AsyncSpec(StrictModel):
    """AsyncInferenceConfig: results under s3://<bucket>/async/<endpoint>/output/, failures under
    …/failures/ (KMS-encrypted), with SNS success and error topics."""

    max_concurrent_invocations_per_instance: int | None = Field(
        default=None, ge=1, le=1000, description="default: SageMaker chooses"
    )
    notify: bool = Field(default=True, description="publish success and error notifications to SNS topics")
    include_response_in_notification: bool = Field(
        default=False, description="success notifications carry the response (up to 128 KB)"
    )


class ComponentSpec(StrictModel):
    """One model on a shared endpoint (CreateInferenceComponent): its copies and what each needs."""

    model_package: ModelPackageArn | None = Field(
        default=None, description="the model package ARN this component serves (or llm:)"
    )
    llm: LlmSpec | None = Field(
        default=None,
        description="a large language model in an LLM serving container (instead of model_package)",
    )
    copies: int = Field(default=1, ge=1, description="copies deployed at first")
    max_copies: int | None = Field(
        default=None, ge=1, description="autoscale copies up to this on invocations per copy"
    )
    invocations_per_copy: int = Field(default=100, ge=1, description="per minute, the copy scaling target")
    min_copies: int | None = Field(
        default=None,
        ge=0,
        description="the fewest copies autoscaling keeps (default: copies); 0 scales the component to "
        "zero, and a request that finds no copy wakes one (needs max_copies)",
    )
    cpu_cores: float = Field(default=1, gt=0, description="CPU cores per copy")
    memory_mb: int = Field(ge=128, description="memory per copy (MinMemoryRequiredInMb)")
    accelerators: int | None = Field(default=None, ge=1, description="GPUs / Neuron devices per copy")

    @model_validator(mode="after")
    def _one_model(self) -> ComponentSpec:
        if (self.model_package is None) == (self.llm is None):
            raise ValueError("a component serves either model_package or llm (give exactly one)")
        return self
