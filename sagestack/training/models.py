"""The spec of a training job (`jobs:`): shape only; meaning across entries is in rules.py."""

from __future__ import annotations

import re
import typing
from typing import Any, Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_core import PydanticCustomError

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.model import StrictModel, VpcSpec, exactly_one
from sagestack.core.types import (
    EmailAddress,
    HyperparameterValue,
    PhoneNumber,
    ProjectPath,
    Seconds,
    TrainingInstanceCandidates,
)
from sagestack.queues.models import JobQueueRef

MAX_RUN_LIMIT = 28 * 24 * 3600  # SageMaker's MaxRuntimeInSeconds ceiling (28 days)
# max_wait's ceiling too: SageMaker states none for MaxWaitTimeInSeconds, but ends every training job
# 30 days after it starts (publishing included), and 28 days is the longest it runs.
MAX_WAIT_LIMIT = MAX_RUN_LIMIT
# A spot job without max_wait may wait for capacity (and across interruptions) as long again as it
# runs: MaxWaitTimeInSeconds includes the run (the SageMaker SDK asks for max_wait with spot).
DEFAULT_SPOT_WAIT_FACTOR = 2


class TorchDistributed(StrictModel):
    """torchrun on every host (nproc_per_node = accelerators per host)."""


class SmddpDistribution(StrictModel):
    """SageMaker distributed data parallel (p4d / p4de / p3dn)."""

    custom_mpi_options: str = ""


class MpiDistribution(StrictModel):
    """MPI (Horovod)."""

    processes_per_host: int | None = Field(default=None, ge=1, description="default: accelerators per host")
    custom_mpi_options: str = ""


class MultiWorkerMirroredStrategy(StrictModel):
    """TensorFlow's MultiWorkerMirroredStrategy: the TensorFlow container sets TF_CONFIG on every host
    (one worker per host, port 8890) and runs the script once per host; the strategy uses every GPU
    of the host in that process (TensorFlow >= 2.9 on SageMaker)."""


class ParameterServerDistribution(StrictModel):
    """TensorFlow parameter servers: on 2 or more hosts the TensorFlow container starts a parameter
    server on every host (port 2223) beside one worker (port 2222), with TF_CONFIG naming a `master`
    task, `worker` tasks and `ps` tasks."""


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


DISTRIBUTION_KINDS = (
    "torch_distributed",
    "smddp",
    "mpi",
    "smp",
    "multi_worker_mirrored_strategy",
    "parameter_server",
)
# The kinds only the TensorFlow container runs (the PyTorch container ignores their flags).
TENSORFLOW_KINDS = ("multi_worker_mirrored_strategy", "parameter_server")


class Distribution(StrictModel):
    torch_distributed: TorchDistributed | None = None
    smddp: SmddpDistribution | None = None
    mpi: MpiDistribution | None = Field(default=None, description="MPI: Horovod (PyTorch or TensorFlow)")
    smp: SmpDistribution | None = None
    multi_worker_mirrored_strategy: MultiWorkerMirroredStrategy | None = Field(
        default=None, description="TensorFlow: MultiWorkerMirroredStrategy, one worker per host"
    )
    parameter_server: ParameterServerDistribution | None = Field(
        default=None, description="TensorFlow: a parameter server and a worker on every host"
    )

    @model_validator(mode="after")
    def _one_kind(self) -> Distribution:
        exactly_one(self, DISTRIBUTION_KINDS, "distribution")
        return self

    @property
    def kind(self) -> str:
        for k in DISTRIBUTION_KINDS:
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


class ModelSizing(StrictModel):
    parameters: float = Field(gt=0, description="number of model parameters, e.g. 1.2e6")
    precision: Literal["fp32", "tf32", "fp16", "bf16", "fp8"] = "fp32"
    optimizer: Literal["adam", "adamw", "sgd", "sgd_momentum"] = "adamw"


class JobSpec(StrictModel):
    image: str = Field(description="a key of images:")
    source_dir: ProjectPath = "training_src"
    entry_point: ProjectPath = "train.py"
    instance_type: TrainingInstanceCandidates
    instance_count: int = Field(default=1, ge=1, le=1000)
    volume_size_gb: int = Field(default=30, ge=1, le=16384)
    volume_kms: bool = True
    max_run: Seconds = Field(default=24 * 3600, ge=1, le=MAX_RUN_LIMIT)
    input_mode: Literal["File", "Pipe", "FastFile"] = "File"
    channels: dict[str, ChannelSpec] = Field(default_factory=dict)
    distribution: Distribution | None = None
    use_spot_instances: bool = False
    max_wait: Seconds | None = Field(
        default=None,
        ge=1,
        le=MAX_WAIT_LIMIT,
        description="spot only: the run plus the time to wait for spot capacity "
        "(StoppingCondition.MaxWaitTimeInSeconds, >= max_run); default: max_run doubled, at most 28 days",
    )
    max_pending_time: Seconds | None = Field(
        default=None,
        ge=30 * 60,
        le=28 * 24 * 3600,
        description="stop the job when it has waited this long for capacity, 30 minutes to 28 days "
        "(StoppingCondition.MaxPendingTimeInSeconds; the SDK's max_pending_time_in_seconds); counts only "
        "for accelerated instance types, and over every candidate of InstancePreferences together",
    )
    checkpoint: CheckpointSpec | None = None
    model_dir: Literal[False] | str | None = Field(
        default=None,
        description="TensorFlow images: the --model_dir argument the SDK's TensorFlow estimator passes "
        "(unset: s3://<output>/<job name>/model, or /opt/ml/model under MPI; false: none; a string: "
        "that S3 URI or container path). The SavedModel itself belongs in SM_MODEL_DIR",
    )
    launcher: Literal["toolkit", "drivers"] = Field(
        default="toolkit",
        description="how the container starts the script. toolkit: the SageMaker SDK v2's script mode "
        "(sagemaker_program, sagemaker_submit_directory), run by the training toolkit inside AWS's "
        "Deep Learning Containers; drivers: the SDK v3's ModelTrainer contract (/bin/bash runs the "
        "SDK's sm_train.sh and drivers from an sm_drivers channel, the code from a code channel), "
        "which needs only Python in the image: for a team's own image, an NGC image, any image",
    )
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
    enable_infra_check: bool | None = Field(
        default=None,
        description="SageMaker's infrastructure health check of the instances before the script starts "
        "(InfraCheckConfig.EnableInfraCheck; the SDK v3's InfraCheckConfig(enable_infra_check=...)); "
        "default: SageMaker's. A tuning job's trials cannot ask for it (the tuning API has no such key); "
        "the local run has no instances to check and ignores it",
    )
    keep_alive: Seconds | None = Field(default=None, ge=0, le=3600, description="warm pool keep-alive")
    run_on_deploy: bool = False
    queue: JobQueueRef | None = Field(
        default=None,
        description="submit the job to a training queue (queues:) instead of starting it at once: Batch "
        "starts it when the queue's capacity and the share allow",
    )
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
    def spot_max_wait(self) -> int | None:
        """MaxWaitTimeInSeconds: None on demand; max_wait, or (unset) max_run doubled, at most 28 days."""
        if not self.use_spot_instances:
            return None
        if self.max_wait is not None:
            return self.max_wait
        return max(self.max_run, min(DEFAULT_SPOT_WAIT_FACTOR * self.max_run, MAX_WAIT_LIMIT))

    @property
    def uses_smp_v2(self) -> bool:
        """SMP v2 runs only in the SMP container (torch.sagemaker exists nowhere else)."""
        d = self.distribution
        return d is not None and d.smp is not None and d.smp.version == 2
