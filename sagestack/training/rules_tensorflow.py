"""Rules about the framework a job's container runs and TensorFlow's distributions: a distribution
only the other framework's container launches, the versions SageMaker's SDK accepts, what the
TensorFlow container does with parameter servers, and the learning rate of a larger global batch.

A job's framework is read from its image: a DLC's `framework`, or an AWS training DLC's repository
in a `uri`. A Dockerfile image (or a team's own registry image) runs an unknown container: the
rules that depend on the framework say nothing about it."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagestack.core.catalog.instances import InstanceType, instance_type, instance_types_for
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.training.hp_names import (
    BATCH_SIZE,
    LEARNING_RATE,
    LEARNING_RATE_SCALING,
    as_int,
    as_number,
    key_named,
)
from sagestack.training.models import TENSORFLOW_KINDS, JobSpec
from sagestack.training.rules import Framework, job_framework

# The SDK's TensorFlow estimator refuses MultiWorkerMirroredStrategy below this version
# (sagemaker/estimator.py `_validate_mwms_config`: {"tensorflow": {"framework_version": "2.9"}}).
MWMS_MIN_TENSORFLOW = (2, 9)
# SMDDP for TensorFlow: the SDK's SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["tensorflow"] runs
# from 2.3 to 2.11 ("smdataparallel excludes support for tf>=2.12").
SMDDP_TENSORFLOW = ((2, 3), (2, 11))
# Keras 3 is TensorFlow's Keras from 2.16, and tf.estimator is gone from it.
KERAS3_TENSORFLOW = (2, 16)

# …and the options of a script that scales (or warms up) its learning rate itself, as
# training_src/train.py does (--lr_scaling linear --reference_batch 64 --warmup_steps -1).
SCALING_OPTION = re.compile(
    r"""["']--(?:lr[_-]scaling|reference[_-]batch|(?:lr[_-])?warm[_-]?up[_-](?:steps|epochs|ratio))["']"""
)
MAX_SCRIPT_BYTES = 1024 * 1024


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


@rule(
    "tensorflow-distribution-needs-tensorflow",
    "error",
    "multi_worker_mirrored_strategy and parameter_server run only in a TensorFlow container",
    why=(
        "Only SageMaker's TensorFlow container reads sagemaker_multi_worker_mirrored_strategy_enabled and "
        "sagemaker_parameter_server_enabled (it sets TF_CONFIG on every host); the PyTorch container ignores "
        "them and runs the script once per host with no cluster, so every host trains alone."
    ),
    fix=(
        "Point the job's image at a TensorFlow DLC (dlc: {framework: tensorflow, version: '2.19', "
        "py_version: py312}), or use distribution: {torch_distributed: {}} with the PyTorch image."
    ),
)
def tensorflow_distribution_needs_tensorflow(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        dist = job.distribution
        if dist is None or dist.kind not in TENSORFLOW_KINDS:
            continue
        fw = job_framework(ctx, job)
        if fw.name != "pytorch":
            continue
        yield Finding(
            ("jobs", name, "distribution", dist.kind),
            f"{dist.kind} is launched by SageMaker's TensorFlow container, but images.{job.image} is "
            f"{fw.text}: its container ignores the setting and runs the script once per host with no "
            f"TF_CONFIG, so each of the {job.instance_count} host(s) trains alone; use distribution: "
            "{torch_distributed: {}} with this image, or a TensorFlow image",
        )


@rule(
    "tensorflow-no-pytorch-distribution",
    "error",
    "a TensorFlow container is not given torch_distributed, SMP, or SMDDP past TensorFlow 2.11",
    why=(
        "torchrun is PyTorch's launcher: the TensorFlow container ignores torch_distributed and runs the "
        "script once per host. The model parallelism library v2 and SMDDP discontinued TensorFlow (the SDK's "
        "TensorFlow estimator says so; it accepts SMDDP only with TensorFlow 2.3 to 2.11)."
    ),
    fix=(
        "Use distribution: {multi_worker_mirrored_strategy: {}} (or {mpi: {}} for Horovod) with a TensorFlow "
        "image, or a PyTorch image for torch_distributed/smp."
    ),
)
def tensorflow_no_pytorch_distribution(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        dist = job.distribution
        fw = job_framework(ctx, job)
        if dist is None or fw.name != "tensorflow":
            continue
        where = ("jobs", name, "distribution", dist.kind)
        instead = "use distribution: {multi_worker_mirrored_strategy: {}} (or {mpi: {}} for Horovod)"
        if dist.kind == "torch_distributed":
            yield Finding(
                where,
                f"torch_distributed launches the script with torchrun, which only the PyTorch container does; "
                f"images.{job.image} is {fw.text}, whose container runs the script once per host with no "
                f"cluster (each host trains alone); {instead}",
            )
        elif dist.kind == "smp":
            yield Finding(
                where,
                f"the SageMaker model parallelism library (smp) runs in PyTorch containers only (v2 "
                f"discontinued TensorFlow) and images.{job.image} is {fw.text}; {instead}, or use a PyTorch image",
            )
        elif dist.kind == "smddp" and fw.version is not None:
            low, high = SMDDP_TENSORFLOW
            if not low <= fw.version <= high:
                yield Finding(
                    where,
                    f"SMDDP discontinued TensorFlow: SageMaker's SDK accepts it with TensorFlow "
                    f"{_dotted(low)} to {_dotted(high)} only, and images.{job.image} is {fw.text}; {instead}",
                )


@rule(
    "mwms-framework-version",
    "error",
    "multi_worker_mirrored_strategy needs TensorFlow >= 2.9",
    why=(
        "SageMaker's TensorFlow estimator refuses MultiWorkerMirroredStrategy below TensorFlow 2.9 ('only "
        "supported from framework_version 2.9'): older TensorFlow containers do not set its TF_CONFIG."
    ),
    fix="Use a TensorFlow image of version 2.9 or later (dlc: {framework: tensorflow, version: '2.19', …}).",
)
def mwms_framework_version(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        dist = job.distribution
        if dist is None or dist.multi_worker_mirrored_strategy is None:
            continue
        fw = job_framework(ctx, job)
        if fw.name == "tensorflow" and fw.version is not None and fw.version < MWMS_MIN_TENSORFLOW:
            yield Finding(
                ("jobs", name, "distribution", "multi_worker_mirrored_strategy"),
                f"MultiWorkerMirroredStrategy needs TensorFlow >= {_dotted(MWMS_MIN_TENSORFLOW)} on SageMaker, "
                f"and images.{job.image} is {fw.text}; use a TensorFlow 2.9 or later image",
            )


def _parameter_server_jobs(ctx: RuleContext) -> Iterator[tuple[str, JobSpec, Framework]]:
    """Jobs with parameter servers whose container may be TensorFlow's (a PyTorch image is
    tensorflow-distribution-needs-tensorflow's business)."""
    for name, job in ctx.spec.jobs.items():
        if job.distribution is None or job.distribution.parameter_server is None:
            continue
        fw = job_framework(ctx, job)
        if fw.name != "pytorch":
            yield name, job, fw


@rule(
    "parameter-server-single-host",
    "warning",
    "parameter_server needs 2 or more hosts",
    why=(
        "The TensorFlow container enables parameter servers only for more than one host (training.py: "
        "`sagemaker_parameter_server_enabled and len(env.hosts) > 1`): on one host it sets no TF_CONFIG "
        "and runs the script as if there were no distribution."
    ),
    fix=(
        "Use distribution: {multi_worker_mirrored_strategy: {}} on one host (it mirrors over the host's GPUs), "
        "or instance_count: 2 or more."
    ),
)
def parameter_server_single_host(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _fw in _parameter_server_jobs(ctx):
        if job.instance_count == 1:
            yield Finding(
                ("jobs", name, "distribution", "parameter_server"),
                "the TensorFlow container starts parameter servers only on 2 or more hosts: on 1 host it sets "
                "no TF_CONFIG and runs the script once, as with no distribution; use distribution: "
                "{multi_worker_mirrored_strategy: {}} to use the host's GPUs, or instance_count: 2 or more",
            )


@rule(
    "parameter-server-gpus-per-host",
    "warning",
    "parameter_server on multi-GPU hosts uses one GPU per host",
    why=(
        "With parameter servers the TensorFlow container starts one worker per host (and forces the host's "
        "parameter server onto the CPU): unless the script mirrors over the host's GPUs itself, the others "
        "idle. The SDK warns the same (PARAMETER_SERVER_MULTI_GPU_WARNING)."
    ),
    fix="Use distribution: {multi_worker_mirrored_strategy: {}}, or single-GPU instance types.",
)
def parameter_server_gpus_per_host(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _fw in _parameter_server_jobs(ctx):
        if job.instance_count < 2:
            continue  # parameter-server-single-host: no parameter servers at all
        for i, itype in enumerate(job.instance_type):
            it = instance_type(itype)
            if it.gpus < 2:
                continue
            single = _single_gpu_type(it)
            alt = f" (e.g. {single})" if single else ""
            yield Finding(
                ("jobs", name, "instance_type", i),
                f"parameter_server on {it.name} ({it.gpus} GPUs): the TensorFlow container starts one worker "
                f"per host and its parameter server on the CPU, so {it.gpus - 1} of the {it.gpus} GPUs idle "
                f"unless the script mirrors over them; use distribution: {{multi_worker_mirrored_strategy: {{}}}}, "
                f"or a single-GPU type{alt}",
            )


def _single_gpu_type(it: InstanceType) -> str | None:
    """The cheapest training type of the same family with one GPU."""
    same = [instance_type(n) for n in instance_types_for("training") if n.startswith(f"ml.{it.family}.")]
    ones = [o for o in same if o.gpus == 1]
    return min(ones, key=lambda o: o.price_per_hour or float("inf")).name if ones else None


@rule(
    "parameter-server-keras3",
    "warning",
    "parameter_server's TF_CONFIG names a `master` task, which TensorFlow >= 2.16 has no use for",
    why=(
        "The container's parameter-server TF_CONFIG names the first host's task `master` (the TF1 Estimator's "
        "name; tf.estimator is gone from TensorFlow 2.16). TF 2's ParameterServerStrategy refuses that "
        "cluster ('Disallowed task type … master'), and Keras 3, TensorFlow's Keras from 2.16, has no "
        "parameter-server support in model.fit."
    ),
    fix=(
        "Use distribution: {multi_worker_mirrored_strategy: {}}; or, in the script, rename TF_CONFIG's master "
        "task to chief and train with a tf.distribute.coordinator.ClusterCoordinator loop."
    ),
)
def parameter_server_keras3(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, fw in _parameter_server_jobs(ctx):
        if job.instance_count < 2 or fw.name != "tensorflow" or fw.version is None:
            continue
        if fw.version >= KERAS3_TENSORFLOW:
            yield Finding(
                ("jobs", name, "distribution", "parameter_server"),
                f"images.{job.image} is {fw.text}: the container's TF_CONFIG names the first host's task "
                "`master` (tf.estimator's name; it is gone from 2.16), which TF 2's ParameterServerStrategy "
                "refuses, and Keras 3's model.fit has no parameter-server support; use distribution: "
                "{multi_worker_mirrored_strategy: {}}, or rename master to chief in the script and train "
                "with a ClusterCoordinator loop",
            )


def replicas(job: JobSpec, it: InstanceType) -> int:
    """Data-parallel replicas: the devices that each take a batch per synchronous step. 1 when the
    hosts do not train one model together (no distribution), or updates are not synchronous
    (parameter servers), or the parallelism is of the model (smp)."""
    dist = job.distribution
    if dist is None or dist.kind in ("parameter_server", "smp"):
        return 1
    if dist.mpi is not None and dist.mpi.processes_per_host:
        return job.instance_count * dist.mpi.processes_per_host
    # torchrun, SMDDP and MPI start a process per device; MWMS mirrors over every GPU of the host
    per_host = (it.gpus or 1) if dist.kind in TENSORFLOW_KINDS else it.accelerators_per_host
    return job.instance_count * per_host


@rule(
    "data-parallel-learning-rate",
    "info",
    "a learning rate set for one device is scaled with the data-parallel global batch",
    why=(
        "Data parallelism multiplies the global batch by the number of replicas; a learning rate tuned for "
        "one device then takes too small steps. Scaling it linearly with the global batch, warmed up over the "
        "first steps, keeps accuracy (Goyal et al., 2017). A job whose hyperparameters or entry point name a "
        "scaling or warm-up option (training_src/train.py's --lr_scaling, --reference_batch, --warmup_steps) "
        "is taken to handle it."
    ),
    fix=(
        "Scale the learning rate with the global batch and warm it up (pass e.g. lr_scaling: linear and "
        "reference_batch: 64 to a script that reads them), or lower the per-device batch (or accumulate "
        "gradients on fewer devices) to keep the global batch the learning rate was tuned for."
    ),
)
def data_parallel_learning_rate(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        hps = job.hyperparameters
        lr_key = key_named(hps, LEARNING_RATE)
        if lr_key is None or key_named(hps, LEARNING_RATE_SCALING) or script_scales(ctx, job):
            continue
        by_count: dict[int, list[str]] = {}  # replicas -> the candidates that make that many
        for itype in job.instance_type:
            n = replicas(job, instance_type(itype))
            if n > 1:
                by_count.setdefault(n, []).append(f"{job.instance_count}x {itype}")
        for n, where in by_count.items():
            yield Finding(
                ("jobs", name, "hyperparameters", lr_key), _learning_rate_message(job, lr_key, n, where)
            )


def script_scales(ctx: RuleContext, job: JobSpec) -> bool:
    """The job's entry point declares a learning-rate scaling or warm-up option (its default is the
    script's answer): read from a regular file of the project, of a script's size."""
    script = ctx.root / job.source_dir / job.entry_point
    try:
        if not script.resolve().is_relative_to(ctx.root.resolve()) or not script.is_file():
            return False
        if script.stat().st_size > MAX_SCRIPT_BYTES:
            return False
        return SCALING_OPTION.search(script.read_text(errors="replace")) is not None
    except OSError:
        return False


def _learning_rate_message(job: JobSpec, lr_key: str, n: int, where: list[str]) -> str:
    hps = job.hyperparameters
    lr, batch_key = hps[lr_key], key_named(hps, BATCH_SIZE)
    batch = as_int(hps[batch_key]) if batch_key else None
    sizes = f"{n}x {batch_key}={batch} = {n * batch}" if batch is not None else f"{n}x the per-device batch"
    rate = as_number(lr)
    scaled = f" (linear: {lr} -> {rate * n:g})" if rate is not None else ""
    return (
        f"{n} data-parallel replicas ({' or '.join(where)}) make the global batch {sizes}: scale {lr_key} "
        f"with it{scaled} and warm it up, unless the script does; or keep the global batch (a smaller "
        "per-device batch, gradient accumulation)"
    )
