"""The sagestack spec: pydantic models with the SageMaker Python SDK's names.

Shape only (types, enums, required keys, unknown keys); meaning across entries (references,
instance/distribution agreement, files that must exist) is checked by the rules in rules.py.
"""

from __future__ import annotations

import re
import typing
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from sagestack.spec.types import (
    AccountId,
    ClusterInstanceType,
    EmailAddress,
    EntryName,
    HostingInstanceType,
    HyperparameterValue,
    ModelPackageArn,
    PhoneNumber,
    ProjectName,
    Region,
    Seconds,
    TrainingInstanceCandidates,
    TransformInstanceCandidates,
)

MAX_RUN_LIMIT = 28 * 24 * 3600  # SageMaker's MaxRuntimeInSeconds ceiling (28 days)


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _exactly_one(model: BaseModel, keys: tuple[str, ...], what: str) -> None:
    given = [k for k in keys if getattr(model, k) is not None]
    if len(given) != 1:
        raise PydanticCustomError(
            "one_of",
            "{what} needs exactly one of {keys}; got {given}",
            {"what": what, "keys": ", ".join(keys), "given": ", ".join(given) or "none"},
        )


# ---------------------------------------------------------------- images


class DlcImage(StrictModel):
    """An AWS Deep Learning Container, resolved per instance type (cpu / gpu / neuronx) and region."""

    framework: Literal["pytorch", "tensorflow", "huggingface"] = "pytorch"
    version: str = Field(description="framework version, e.g. '2.5'")
    py_version: str = Field(pattern=r"^py3\d+$", description="e.g. py311")


class DockerfileImage(StrictModel):
    directory: str = Field(description="folder holding the Dockerfile, relative to the project root")
    build_args: dict[str, str] = Field(default_factory=dict)
    target: str | None = None


class ImageSpec(StrictModel):
    """Exactly one of: dlc, dockerfile, uri."""

    dlc: DlcImage | None = None
    # A string is shorthand for {directory: …}; the before-validator expands it, so code sees a model.
    dockerfile: DockerfileImage | str | None = None
    uri: str | None = Field(default=None, pattern=r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/.+")

    @model_validator(mode="before")
    @classmethod
    def _dockerfile_shorthand(cls, data: Any) -> Any:
        # `dockerfile: containers/training` is shorthand for `dockerfile: {directory: …}`.
        if isinstance(data, dict) and isinstance(data.get("dockerfile"), str):
            data = {**data, "dockerfile": {"directory": data["dockerfile"]}}
        return data

    @property
    def dockerfile_spec(self) -> DockerfileImage | None:
        """`dockerfile` as a model (the before-validator has expanded the string shorthand)."""
        return self.dockerfile if isinstance(self.dockerfile, DockerfileImage) else None

    @model_validator(mode="after")
    def _one_source(self) -> ImageSpec:
        _exactly_one(self, ("dlc", "dockerfile", "uri"), "an image")
        return self


# ---------------------------------------------------------------- training jobs


class TorchDistributed(StrictModel):
    """torchrun on every host (nproc_per_node = accelerators per host)."""


class SmddpDistribution(StrictModel):
    """SageMaker distributed data parallel (p4d / p4de / p3dn)."""

    custom_mpi_options: str = ""


class MpiDistribution(StrictModel):
    """MPI (Horovod)."""

    processes_per_host: int | None = Field(default=None, ge=1, description="default: accelerators per host")
    custom_mpi_options: str = ""


class SmpDistribution(StrictModel):
    """SageMaker model parallelism: v2 (torch.sagemaker, built on PyTorch FSDP, launched by torchrun
    in the SMP container) or the archived v1 (pipeline/tensor parallelism, launched by mpirun)."""

    version: Literal[1, 2] = Field(
        default=2, description="2: SMP v2 (PyTorch >= 2.0); 1: archived, PyTorch <= 2.0"
    )
    parameters: dict[str, Any] = Field(
        default_factory=dict,
        description="v2: hybrid_shard_degree, tensor_parallel_degree, sm_activation_offloading, …; "
        "v1: partitions, microbatches, pipeline, optimize, placement_strategy, ddp, …",
    )
    processes_per_host: int | None = Field(
        default=None, ge=1, description="v1 only (MPI): default accelerators per host"
    )
    custom_mpi_options: str = Field(default="", description="v1 only (MPI)")


class Distribution(StrictModel):
    torch_distributed: TorchDistributed | None = None
    smddp: SmddpDistribution | None = None
    mpi: MpiDistribution | None = None
    smp: SmpDistribution | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Distribution:
        _exactly_one(self, ("torch_distributed", "smddp", "mpi", "smp"), "distribution")
        return self

    @property
    def kind(self) -> str:
        for k in ("torch_distributed", "smddp", "mpi", "smp"):
            if getattr(self, k) is not None:
                return k
        raise AssertionError("validated: exactly one kind")


class CheckpointSpec(StrictModel):
    every_steps: int | None = Field(default=None, ge=1, description="save every N optimizer steps")
    keep_last: int = Field(default=3, ge=1)
    local_path: str = "/opt/ml/checkpoints"


_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((\S+ ){5}\S+\)$")
_AT = re.compile(r"^at\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\)$")


class ScheduleSpec(StrictModel):
    """Retrain on a schedule (EventBridge Scheduler): the job's pipeline starts with fresh names."""

    expression: str = Field(
        description="cron(min hour day-of-month month day-of-week year), rate(N days|hours|minutes) or "
        "at(yyyy-mm-ddThh:mm:ss), as EventBridge Scheduler reads them"
    )
    timezone: str = Field(default="UTC", description="an IANA time zone the expression is read in")
    window: Seconds | None = Field(
        default=None,
        ge=60,
        le=86400,
        description="a flexible time window: start any time within this much after the scheduled time",
    )
    enabled: bool = True

    @model_validator(mode="after")
    def _expression(self) -> ScheduleSpec:
        e = self.expression.strip()
        rate = _RATE.match(e)
        if not (rate or _CRON.match(e) or _AT.match(e)):
            raise PydanticCustomError(
                "schedule",
                "'{given}' is not a schedule expression; write cron(0 3 ? * MON *) (six fields), "
                "rate(7 days) or at(2027-01-01T03:00:00)",
                {"given": self.expression},
            )
        if rate and int(rate[1]) < 1:
            raise PydanticCustomError("schedule", "a rate needs at least 1 (rate(1 day))", {})
        if rate and (int(rate[1]) == 1) != (not rate[2].endswith("s")):
            raise PydanticCustomError(
                "schedule",
                "'{given}': EventBridge Scheduler reads rate(1 day) and rate(2 days), singular for 1",
                {"given": self.expression},
            )
        import zoneinfo

        if self.timezone not in zoneinfo.available_timezones():
            from sagestack.catalog.suggest import did_you_mean

            raise PydanticCustomError(
                "timezone",
                "'{given}' is not an IANA time zone{hint}",
                {
                    "given": self.timezone,
                    "hint": did_you_mean(self.timezone, sorted(zoneinfo.available_timezones())),
                },
            )
        return self


DebuggerRuleName = Literal[
    "vanishing_gradient",
    "exploding_tensor",
    "overfit",
    "overtraining",
    "poor_weight_initialization",
    "loss_not_decreasing",
    "saturated_activation",
    "dead_relu",
    "weight_update_ratio",
    "all_zero",
    "class_imbalance",
    "tensor_variance",
    "unchanged_tensor",
    "check_input_images",
]


RuleValue = str | int | float | bool


class DebuggerRuleSpec(StrictModel):
    """A built-in Debugger rule with its parameters and what to do when it fires."""

    rule: DebuggerRuleName
    parameters: dict[str, RuleValue] = Field(
        default_factory=dict, description="the rule's own parameters, e.g. {threshold: 0.0001}"
    )
    stop_training: bool | None = Field(default=None, description="default: debugger.stop_on_issue")
    email: list[EmailAddress] = Field(default_factory=list)
    sms: list[PhoneNumber] = Field(
        default_factory=list, description="E.164 phone numbers, e.g. '+14155550100'"
    )


class DebuggerHookSpec(StrictModel):
    """The debug hook the script runs (smdebug): what it saves and how often."""

    parameters: dict[str, RuleValue] = Field(
        default_factory=dict,
        description="hook parameters, e.g. {train.save_interval: 100, eval.save_interval: 10}",
    )
    collections: dict[str, dict[str, RuleValue]] = Field(
        default_factory=dict,
        description="collections to save with their parameters, e.g. {weights: {save_histogram: true}, losses: {}}",
    )


def _rules_items_schema(schema: dict[str, Any]) -> None:
    # The YAML may name a rule alone; the schema says so (validation expands it first).
    schema["items"] = {
        "anyOf": [{"type": "string", "enum": list(typing.get_args(DebuggerRuleName))}, schema["items"]]
    }


class DebuggerSpec(StrictModel):
    rules: list[DebuggerRuleSpec] = Field(min_length=1, max_length=20, json_schema_extra=_rules_items_schema)
    stop_on_issue: bool = False
    hook: DebuggerHookSpec | None = None

    def stops_training(self, rule: DebuggerRuleSpec) -> bool:
        """Whether the rule's actions stop the job: its own stop_training, else stop_on_issue."""
        return rule.stop_training if rule.stop_training is not None else self.stop_on_issue

    @model_validator(mode="before")
    @classmethod
    def _rule_name_shorthand(cls, data: Any) -> Any:
        # `- vanishing_gradient` is shorthand for `- {rule: vanishing_gradient}`
        if isinstance(data, dict) and isinstance(data.get("rules"), list):
            rules = [{"rule": r} if isinstance(r, str) else r for r in data["rules"]]
            data = {**data, "rules": rules}
        return data


class FrameworkProfiling(StrictModel):
    """Detailed framework profiling (Profiler's DetailedProfilingConfig)."""

    start_step: int = Field(default=5, ge=0)
    num_steps: int = Field(default=10, ge=1)


class DataloaderProfiling(StrictModel):
    start_step: int = Field(default=5, ge=0)
    num_steps: int = Field(default=10, ge=1)
    metrics_regex: str = ".*"


class PythonProfiling(StrictModel):
    start_step: int = Field(default=5, ge=0)
    num_steps: int = Field(default=10, ge=1)
    profiler: Literal["cprofile", "pyinstrument"] = "cprofile"
    cprofile_timer: Literal["total_time", "cpu_time", "off_cpu_time"] = "total_time"


ProfilerRuleName = Literal[
    "profiler_report",
    "cpu_bottleneck",
    "gpu_memory_increase",
    "io_bottleneck",
    "low_gpu_utilization",
    "batch_size",
    "step_outlier",
    "load_balancing",
    "max_initialization_time",
    "overall_system_usage",
]


class ProfilerSpec(StrictModel):
    system_interval_ms: Literal[100, 200, 500, 1000, 5000, 60000] = 500
    framework: FrameworkProfiling | None = Field(
        default=None, description="detailed framework profiling (not for PyTorch >= 2.0: use profile=true)"
    )
    dataloader: DataloaderProfiling | None = Field(default=None, description="not for PyTorch >= 2.0")
    python: PythonProfiling | None = Field(default=None, description="not for PyTorch >= 2.0")
    rules: list[ProfilerRuleName] = Field(default_factory=list)

    @property
    def framework_metrics(self) -> list[str]:
        return [k for k in ("framework", "dataloader", "python") if getattr(self, k) is not None]


class FileSystemSpec(StrictModel):
    """An FSx for Lustre or EFS file system a channel mounts (FileSystemDataSource). The job must run
    in a VPC that reaches it (vpc:)."""

    id: str = Field(pattern=r"^fs-[0-9a-f]{8,}$", description="the file system's id, fs-…")
    type: Literal["FSxLustre", "EFS"]
    directory_path: str = Field(
        pattern=r"^/", description="FSx for Lustre: /<mount name>/<path>; EFS: /<path>", max_length=4096
    )
    access_mode: Literal["ro", "rw"] = "ro"


class ChannelSpec(StrictModel):
    """An input channel: an S3 prefix (s3://…, or a key under the project bucket), or a file system,
    and how it is read."""

    file_system: FileSystemSpec | None = Field(
        default=None, description="read from FSx for Lustre or EFS instead of S3 (needs vpc:)"
    )
    s3_uri: str | None = None
    key_prefix: str | None = Field(default=None, description="a prefix in the project bucket")
    local_path: str | None = Field(default=None, description="used by `sagestack local train`")
    input_mode: Literal["File", "Pipe", "FastFile"] | None = None
    content_type: str | None = None
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = "FullyReplicated"


class VpcSpec(StrictModel):
    subnets: list[str] = Field(min_length=1, max_length=16)
    security_groups: list[str] = Field(min_length=1, max_length=5)
    egress: bool = Field(
        default=True,
        description="false: the subnets have no route out (no NAT gateway or PyPI mirror), so the "
        "container cannot pip install the source dir's requirements.txt",
    )


class ModelSizing(StrictModel):
    parameters: float = Field(gt=0, description="number of model parameters, e.g. 1.2e6")
    precision: Literal["fp32", "tf32", "fp16", "bf16", "fp8"] = "fp32"
    optimizer: Literal["adam", "adamw", "sgd", "sgd_momentum"] = "adamw"


class JobSpec(StrictModel):
    image: str = Field(description="a key of images:")
    source_dir: str = "training_src"
    entry_point: str = "train.py"
    instance_type: TrainingInstanceCandidates
    instance_count: int = Field(default=1, ge=1, le=1000)
    volume_size_gb: int = Field(default=30, ge=1, le=16384)
    volume_kms: bool = True
    max_run: Seconds = Field(default=24 * 3600, ge=1, le=MAX_RUN_LIMIT)
    input_mode: Literal["File", "Pipe", "FastFile"] = "File"
    channels: dict[str, ChannelSpec] = Field(default_factory=dict)
    distribution: Distribution | None = None
    use_spot_instances: bool = False
    max_wait: Seconds | None = Field(default=None, ge=1, le=MAX_RUN_LIMIT)
    checkpoint: CheckpointSpec | None = None
    hyperparameters: dict[str, HyperparameterValue] = Field(default_factory=dict)
    metric_definitions: dict[str, str] = Field(default_factory=dict, description="metric name -> regex")
    debugger: DebuggerSpec | None = None
    profiler: ProfilerSpec | None = None
    tensorboard: bool = False
    environment: dict[str, str] = Field(default_factory=dict)
    efa: bool | None = Field(default=None, description="default: on for multi-node jobs on EFA-capable types")
    vpc: VpcSpec | None = None
    network_isolation: bool = False
    encrypt_inter_container_traffic: bool | None = Field(
        default=None, description="default: on when multi-node"
    )
    retry_attempts: int = Field(default=1, ge=1, le=30, description="RetryStrategy.MaximumRetryAttempts")
    keep_alive: Seconds | None = Field(default=None, ge=0, le=3600, description="warm pool keep-alive")
    run_on_deploy: bool = False
    schedule: ScheduleSpec | None = Field(
        default=None,
        description="retrain on a schedule: the pipeline starts with fresh job names (new data, new model)",
    )
    tags: dict[str, str] = Field(default_factory=dict)
    training_plans: dict[str, str] = Field(
        default_factory=dict,
        description="instance type -> a SageMaker training plan (reserved capacity) ARN for that candidate; "
        "`sagestack capacity offerings JOB` lists what can be reserved",
    )
    sizing: ModelSizing | None = Field(
        default=None,
        # `model:` was this key's first name; it still reads, but an endpoint's `model:` is its source.
        validation_alias=AliasChoices("sizing", "model"),
        description="the model's size, for the memory and communication estimate of `sagestack plan`",
    )

    @property
    def uses_smp_v2(self) -> bool:
        """SMP v2 runs only in the SMP container (torch.sagemaker exists nowhere else)."""
        d = self.distribution
        return d is not None and d.smp is not None and d.smp.version == 2


# ---------------------------------------------------------------- tuning


class ObjectiveSpec(StrictModel):
    metric: str
    type: Literal["Maximize", "Minimize"]


class RangeSpec(StrictModel):
    continuous: tuple[float, float] | None = None
    integer: tuple[int, int] | None = None
    categorical: list[str | int | float] | None = Field(default=None, min_length=1, max_length=30)
    scaling: Literal["Auto", "Linear", "Logarithmic", "ReverseLogarithmic"] = "Auto"

    @model_validator(mode="after")
    def _one_kind(self) -> RangeSpec:
        _exactly_one(self, ("continuous", "integer", "categorical"), "a range")
        return self


class HyperbandSpec(StrictModel):
    min_resource: int = Field(ge=1)
    max_resource: int = Field(ge=1)


class CompletionSpec(StrictModel):
    target_objective_value: float | None = None
    max_jobs_not_improving: int | None = Field(default=None, ge=3)
    max_runtime: Seconds | None = None


class WarmStartSpec(StrictModel):
    parents: list[str] = Field(min_length=1, max_length=5)
    type: Literal["IdenticalDataAndAlgorithm", "TransferLearning"] = "IdenticalDataAndAlgorithm"


class TuningSpec(StrictModel):
    job: str = Field(description="a key of jobs:")
    objective: ObjectiveSpec
    strategy: Literal["Bayesian", "Random", "Hyperband", "Grid"] = "Bayesian"
    ranges: dict[str, RangeSpec] = Field(min_length=1)
    max_jobs: int | None = Field(
        default=None, ge=1, description="default: Grid's combinations, else required"
    )
    max_parallel_jobs: int = Field(default=1, ge=1)
    early_stopping: Literal["Off", "Auto"] = "Off"
    hyperband: HyperbandSpec | None = None
    completion: CompletionSpec | None = None
    random_seed: int | None = None
    warm_start: WarmStartSpec | None = None
    static_hyperparameters: dict[str, HyperparameterValue] = Field(default_factory=dict)


# ---------------------------------------------------------------- endpoints


class ModelSource(StrictModel):
    from_: str = Field(alias="from", description="a job or tuning entry whose (best) model is served")


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

    min: int = Field(default=1, ge=0, description="0 only for async endpoints (scale to zero)")
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


class EndpointSpec(StrictModel):
    model: ModelSource | None = Field(
        default=None, description="which pipeline registers this endpoint's model"
    )
    model_package: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:model-package/.+$",
        description="the model package ARN this environment serves (the promotion pin)",
    )
    compile: CompileSpec | None = None
    instance_type: HostingInstanceType | None = None
    initial_instance_count: int = Field(default=1, ge=1)
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

    model_package: ModelPackageArn = Field(description="the model package ARN this component serves")
    copies: int = Field(default=1, ge=1, description="copies deployed at first")
    max_copies: int | None = Field(
        default=None, ge=1, description="autoscale copies up to this on invocations per copy"
    )
    invocations_per_copy: int = Field(default=100, ge=1, description="per minute, the copy scaling target")
    cpu_cores: float = Field(default=1, gt=0, description="CPU cores per copy")
    memory_mb: int = Field(ge=128, description="memory per copy (MinMemoryRequiredInMb)")
    accelerators: int | None = Field(default=None, ge=1, description="GPUs / Neuron devices per copy")


class MonitorSpec(StrictModel):
    """Model Monitor data quality: a baseline job on the training data, then a schedule that
    compares captured requests with it; violations become CloudWatch metrics and an alarm."""

    baseline_data: str | None = Field(
        default=None,
        pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$",
        description="the training data (CSV or JSON Lines, one record per line) the baseline is computed "
        "on; default: s3://<bucket>/monitoring/<endpoint>/baseline-data/",
    )
    dataset_format: Literal["csv", "json"] = "csv"
    csv_header: bool = Field(default=True, description="the baseline CSV's first line names the features")
    schedule: str = Field(
        default="cron(0 * ? * * *)",
        pattern=r"^cron\(.+\)$|^NOW$",
        description="ScheduleExpression: hourly by default",
    )
    instance_type: str = Field(default="ml.m5.xlarge", pattern=r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
    max_runtime: Seconds = Field(default=1800, ge=60, le=86400)
    alarm_features: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="alarm when any of these features drifts from the baseline (feature_baseline_drift_<name>)",
    )
    drift_threshold: float = Field(
        default=0.1, gt=0, le=1, description="the baseline distance above which a feature has drifted"
    )


# ---------------------------------------------------------------- batch transform


class TransformSpec(StrictModel):
    """A batch transform (CreateTransformJob) over a prefix of the project bucket, with the model a
    pipeline registers (model: from; the transform runs after it) and/or a pinned model package
    (its own pipeline, `sagestack run`)."""

    model: ModelSource | None = Field(
        default=None, description="the pipeline that trains the model registers it and runs the transform"
    )
    model_package: ModelPackageArn | None = Field(
        default=None, description="the model package ARN this environment scores with (the pin)"
    )
    instance_type: TransformInstanceCandidates
    instance_count: int = Field(default=1, ge=1)
    input: str | None = Field(
        default=None,
        pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$",
        description="default: s3://<bucket>/transform/<key>/input/",
    )
    content_type: str = "application/json"
    accept: str | None = "application/json"
    split_type: Literal["None", "Line", "RecordIO", "TFRecord"] = "Line"
    batch_strategy: Literal["MultiRecord", "SingleRecord"] = "MultiRecord"
    max_payload_mb: int = Field(default=6, ge=0, le=100)
    max_concurrent_transforms: int | None = Field(default=None, ge=1)
    assemble_with: Literal["None", "Line"] = "Line"
    join_source: Literal["None", "Input"] = "None"
    input_filter: str | None = Field(default=None, max_length=63, pattern=r"^\$")
    output_filter: str | None = Field(default=None, max_length=63, pattern=r"^\$")
    invocation_timeout: Seconds = Field(default=600, ge=1, le=3600)
    invocation_retries: int = Field(default=3, ge=0, le=3)
    environment: dict[str, str] = Field(default_factory=dict)


# ---------------------------------------------------------------- project


# ---------------------------------------------------------------- clusters (SageMaker HyperPod)


class ClusterGroupSpec(StrictModel):
    """An instance group of a HyperPod cluster: Slurm's controller, a login node, or compute nodes."""

    instance_type: ClusterInstanceType
    count: int = Field(default=1, ge=1, le=2000)
    node_type: Literal["Controller", "Login", "Compute"] = "Compute"
    threads_per_core: Literal[1, 2] | None = Field(default=None, description="1 turns hyper-threading off")
    volume_size_gb: int | None = Field(
        default=None, ge=1, le=16384, description="an extra EBS volume per node (mounted at /opt/sagemaker)"
    )
    partitions: list[str] = Field(default_factory=list, description="Slurm partitions of compute nodes")
    training_plan: str | None = Field(
        default=None, description="a training plan ARN that reserves this group"
    )
    deep_health_checks: bool = Field(
        default=True,
        description="InstanceStress and InstanceConnectivity checks on accelerated nodes at start",
    )


class ClusterFsxSpec(StrictModel):
    """An FSx for Lustre file system every node mounts, linked to the project bucket's data/ prefix."""

    storage_gib: int = Field(default=1200, ge=1200, description="PERSISTENT_2: 1200 or a multiple of 2400")
    throughput_per_tib: Literal[125, 250, 500, 1000] = 250
    mount_path: str = Field(default="/fsx", pattern=r"^/[a-z0-9_/-]+$")


class LifecycleSpec(StrictModel):
    source_dir: str = Field(
        default="cluster_src", description="the lifecycle scripts, relative to the project root"
    )
    on_create: str = Field(default="on_create.sh", description="the script each node runs when it is created")


class ClusterSpec(StrictModel):
    """A SageMaker HyperPod cluster with the Slurm orchestrator, in its own VPC (one Availability
    Zone, as EFA needs), its nodes in a security group open to itself, FSx for Lustre at /fsx."""

    instance_groups: dict[EntryName, ClusterGroupSpec] = Field(min_length=1)
    lifecycle: LifecycleSpec = Field(default_factory=LifecycleSpec)
    node_recovery: Literal["Automatic", "None"] = "Automatic"
    fsx: ClusterFsxSpec | None = Field(default_factory=ClusterFsxSpec)
    vpc_cidr: str = Field(default="10.42.0.0/16", pattern=r"^\d+\.\d+\.\d+\.\d+/\d+$")


class BucketSpec(StrictModel):
    noncurrent_checkpoint_days: int = Field(default=30, ge=1, description="expire old checkpoint versions")
    abort_incomplete_upload_days: int = Field(default=7, ge=1)


class PipelineSpec(StrictModel):
    """How the training pipelines poll and retry (Step Functions)."""

    poll_interval: Seconds = Field(default=60, ge=1, le=3600, description="DescribeTrainingJob polling")
    backoff: Seconds = Field(default=120, ge=0, le=86400, description="wait before trying the next candidate")
    log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653] = (
        90
    )


# ---------------------------------------------------------------- delivery and tracking

_CONNECTION_ARN = re.compile(
    r"^arn:aws[a-z-]*:(codeconnections|codestar-connections):[a-z0-9-]+:\d{12}:connection/[\w-]+$"
)


class DeliverySourceSpec(StrictModel):
    """Where the delivery pipeline takes the repository from: a CodeConnections connection to
    GitHub / GitLab / Bitbucket, or a zip in S3."""

    connection: str | None = Field(
        default=None, description="a CodeConnections (CodeStar Connections) ARN, e.g. to GitHub"
    )
    repository: str | None = Field(default=None, description="owner/name, with connection")
    branch: str = Field(default="main", description="with connection")
    bucket: str | None = Field(default=None, description="an S3 bucket (versioned) holding the source zip")
    key: str | None = Field(default=None, description="the zip's key, with bucket")

    @model_validator(mode="after")
    def _kind(self) -> DeliverySourceSpec:
        _exactly_one(self, ("connection", "bucket"), "delivery.source")
        if self.connection is not None:
            if not _CONNECTION_ARN.match(self.connection):
                raise PydanticCustomError(
                    "connection",
                    "'{given}' is not a CodeConnections ARN (arn:aws:codeconnections:<region>:<account>:"
                    "connection/<id>); create one in the console (Developer Tools > Connections)",
                    {"given": self.connection},
                )
            if not self.repository or "/" not in self.repository:
                raise PydanticCustomError(
                    "repository", "a connection source needs repository: owner/name", {}
                )
        if self.bucket is not None and not self.key:
            raise PydanticCustomError("key", "an S3 source needs key: (the zip's object key)", {})
        return self


class DeliverySpec(StrictModel):
    """A CDK Pipelines stack in a tooling account that deploys every environment, in order: a
    promotion is a reviewed commit the pipeline deploys."""

    account: AccountId = Field(description="the tooling account the pipeline runs in")
    region: Region | None = Field(default=None, description="default: the project's region")
    source: DeliverySourceSpec
    environments: list[str] = Field(
        min_length=1, description="the environments it deploys, in order (e.g. [dev, staging, prod])"
    )
    approval: list[str] = Field(
        default_factory=lambda: ["prod"], description="environments deployed only after a manual approval"
    )
    install: list[str] = Field(
        default_factory=lambda: [
            "pip install --extra-index-url https://download.pytorch.org/whl/cpu -e '.[train,dev]'",
            "npm ci",
        ],
        description="the synth step's install commands",
    )
    tests: list[str] = Field(
        default_factory=lambda: ["python -m pytest -q -m 'not synth and not e2e and not train' tests/unit"],
        description="the fast test tiers the synth step runs before `cdk synth`",
    )
    pipeline_name: str | None = Field(default=None, description="default: <project>-delivery")


class MlflowSpec(StrictModel):
    """A SageMaker managed MLflow tracking server for the environment (or one that exists)."""

    server: str | None = Field(
        default=None,
        description="an existing tracking server's ARN to log to (default: one is created per environment)",
    )
    size: Literal["Small", "Medium", "Large"] = "Small"
    version: str | None = Field(default=None, description="MLflow version (default: SageMaker's newest)")
    automatic_model_registration: bool = False
    maintenance_window: str | None = Field(
        default=None, description="weekly start, e.g. Sun:02:00 (default: SageMaker's choice)"
    )

    @model_validator(mode="after")
    def _server(self) -> MlflowSpec:
        if self.server is not None and not re.match(
            r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:mlflow-(tracking-server|app)/.+$", self.server
        ):
            raise PydanticCustomError(
                "server",
                "'{given}' is not a SageMaker MLflow ARN (arn:aws:sagemaker:<region>:<account>:"
                "mlflow-tracking-server/<name>)",
                {"given": self.server},
            )
        if self.maintenance_window is not None and not re.match(
            r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun):([01]\d|2[0-3]):[0-5]\d$", self.maintenance_window
        ):
            raise PydanticCustomError(
                "maintenance_window",
                "'{given}' is not a weekly start; write e.g. Sun:02:00",
                {"given": self.maintenance_window},
            )
        return self


class TrackingSpec(StrictModel):
    """Experiment tracking: every training job logs parameters, metrics per step and its model."""

    mlflow: MlflowSpec | None = None


class ProjectSpec(StrictModel):
    """A whole sagestack project, as one environment sees it (project file + overlay)."""

    project: ProjectName
    region: Region
    account: AccountId | None = Field(default=None, description="omit for environment-agnostic templates")
    retain_data: bool = Field(default=True, description="keep buckets, keys, repositories on stack deletion")
    tags: dict[str, str] = Field(default_factory=dict)
    bucket: BucketSpec = Field(default_factory=BucketSpec)
    pipeline: PipelineSpec = Field(default_factory=PipelineSpec)
    images: dict[EntryName, ImageSpec] = Field(default_factory=dict)
    jobs: dict[EntryName, JobSpec] = Field(default_factory=dict)
    tuning: dict[EntryName, TuningSpec] = Field(default_factory=dict)
    endpoints: dict[EntryName, EndpointSpec] = Field(default_factory=dict)
    transforms: dict[EntryName, TransformSpec] = Field(default_factory=dict)
    clusters: dict[EntryName, ClusterSpec] = Field(default_factory=dict)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)
    delivery: DeliverySpec | None = Field(
        default=None, description="a CDK Pipelines stack that deploys the environments from the repository"
    )
    require_approved_models: bool = Field(
        default=False,
        description="`sagestack promote` into this environment accepts only Approved model packages",
    )
