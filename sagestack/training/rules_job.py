"""Rules about how a training job runs: spot capacity and its checkpoints, the hyperparameters and
metric regexes SageMaker accepts, and the use of its hosts (one multi-accelerator host over many
single ones, a distribution across hosts, data-loader workers per vCPU)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagestack.core.catalog.instances import InstanceType, instance_type, instance_types_for
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.training.hp_names import DATALOADER_WORKERS, as_int, keys_named
from sagestack.training.models import TENSORFLOW_KINDS, JobSpec
from sagestack.training.rules import candidates, job_framework

HYPERPARAMETERS_MAX = 100
HP_KEY_MAX, HP_VALUE_MAX = 256, 2500
# Keys sagestack adds itself (script mode + the largest distribution set), counted against the 100.
RESERVED_HYPERPARAMETERS = 11  # + checkpoint_every_steps, checkpoint_keep_last


@rule(
    "spot-max-wait",
    "error",
    "spot jobs wait at least as long as they run; max_wait only with spot",
    why=(
        "SageMaker requires MaxWaitTimeInSeconds >= "
        "MaxRuntimeInSeconds for spot, and refuses it without spot."
    ),
    fix="Set max_wait >= max_run with use_spot_instances: true, or remove max_wait.",
)
def spot_max_wait(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if job.max_wait is not None and not job.use_spot_instances:
            yield Finding(
                ("jobs", name, "max_wait"),
                "max_wait applies only to spot training (use_spot_instances: true)",
            )
        elif job.use_spot_instances and job.max_wait is not None and job.max_wait < job.max_run:
            yield Finding(
                ("jobs", name, "max_wait"),
                f"max_wait ({job.max_wait} s) is shorter than max_run ({job.max_run} s); SageMaker requires "
                "max_wait >= max_run (it includes the time spent waiting for spot capacity)",
            )


@rule(
    "spot-checkpoint",
    "error",
    "spot jobs checkpoint, at a stated interval",
    why=(
        "A spot job can be interrupted at any time; without checkpoints "
        "every interruption restarts from step 0 and may never finish."
    ),
    fix=(
        "Add checkpoint: {every_steps: N}; the script saves there and resumes (training_src/train.py does). "
        "On a TensorFlow image checkpoint: {} is enough when the script backs up on its own schedule "
        "(the Keras script init writes backs up every epoch)."
    ),
)
def spot_checkpoint(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if not job.use_spot_instances:
            continue
        if job.checkpoint is None:
            yield Finding(
                ("jobs", name, "use_spot_instances"),
                "spot training without a checkpoint location loses all progress on every interruption; "
                "add checkpoint: {every_steps: N}",
            )
        elif job.checkpoint.every_steps is None and job_framework(ctx, job).name != "tensorflow":
            yield Finding(
                ("jobs", name, "checkpoint"),
                "spot training needs checkpoint.every_steps, so the script saves progress it can resume from",
            )


@rule(
    "warm-pool-not-with-spot",
    "error",
    "warm pools (keep_alive) are not available to spot jobs",
    why="Warm pools (KeepAlivePeriodInSeconds) are not available to managed spot training.",
    fix="Remove keep_alive, or train on demand.",
)
def warm_pool_not_with_spot(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if job.use_spot_instances and job.keep_alive:
            yield Finding(
                ("jobs", name, "keep_alive"), "SageMaker warm pools do not support managed spot training"
            )


@rule(
    "hyperparameter-limits",
    "error",
    "at most 100 hyperparameters; keys <= 256 and values <= 2500 characters",
    why=(
        "CreateTrainingJob accepts at most 100 hyperparameters, keys up to 256 and "
        "values up to 2500 characters (sagestack adds the sagemaker_* keys to yours)."
    ),
    fix="Move large values into a config file in source_dir or a channel.",
)
def hyperparameter_limits(ctx: RuleContext) -> Iterator[Finding]:
    import json

    limit = HYPERPARAMETERS_MAX - RESERVED_HYPERPARAMETERS
    for name, job in ctx.spec.jobs.items():
        hps = job.hyperparameters
        if len(hps) > limit:
            yield Finding(
                ("jobs", name, "hyperparameters"),
                f"{len(hps)} hyperparameters; SageMaker allows 100 and sagestack adds up to "
                f"{RESERVED_HYPERPARAMETERS} (sagemaker_program, distribution keys …): at most {limit}",
            )
        for key, value in hps.items():
            if len(key) > HP_KEY_MAX:
                yield Finding(
                    ("jobs", name, "hyperparameters", key), f"key is {len(key)} characters; at most 256"
                )
            encoded = json.dumps(value)
            if len(encoded) > HP_VALUE_MAX:
                yield Finding(
                    ("jobs", name, "hyperparameters", key),
                    f"value is {len(encoded)} characters once encoded; at most 2500 (pass large settings as a "
                    "file in the source directory or a channel)",
                )


@rule(
    "metric-regex",
    "error",
    "metric regexes compile and capture the value in a group",
    why=(
        "SageMaker reads metrics from the log with each regex's first group; a regex that does not "
        "compile or has no group records nothing, and a tuning objective on it never improves."
    ),
    fix="Write e.g. 'val_accuracy=([0-9.]+)' — one capturing group around the number.",
)
def metric_regex(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if len(job.metric_definitions) > 40:
            yield Finding(
                ("jobs", name, "metric_definitions"), "SageMaker accepts at most 40 metric definitions"
            )
        for metric, regex in job.metric_definitions.items():
            path = ("jobs", name, "metric_definitions", metric)
            try:
                compiled = re.compile(regex)
            except re.error as e:
                yield Finding(path, f"regex {regex!r} does not compile: {e}")
                continue
            if compiled.groups < 1:
                yield Finding(
                    path,
                    f"regex {regex!r} has no capture group; SageMaker records the first group's match, e.g. "
                    f"'{metric}=([0-9.]+)'",
                )
            if len(regex) > 500:
                yield Finding(path, f"regex is {len(regex)} characters; at most 500")


@rule(
    "prefer-one-multi-accelerator-instance",
    "warning",
    "one multi-accelerator instance beats N single ones",
    why=(
        "N single-GPU instances talk over the network; one N-GPU instance "
        "uses NVLink or PCIe and starts faster, usually at the same price."
    ),
    fix="Use the suggested multi-accelerator type with instance_count: 1.",
)
def prefer_one_multi_accelerator_instance(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, i, it in candidates(ctx):
        acc = it.accelerator
        if job.instance_count < 2 or acc is None or acc.count != 1 or acc.kind == "unknown":
            continue
        total = job.instance_count
        same_family = [
            instance_type(n) for n in instance_types_for("training") if n.startswith(f"ml.{it.family}.")
        ]
        # the smallest host with room for all N devices (then the cheapest of those)
        roomy = [o for o in same_family if o.accelerator is not None and o.accelerator.count >= total]
        if not roomy:
            continue
        fewest = min(o.accelerator.count for o in roomy if o.accelerator is not None)
        alt = min(
            (o for o in roomy if o.accelerator is not None and o.accelerator.count == fewest),
            key=lambda o: o.price_per_hour or float("inf"),
        )
        has = (
            f"the same {total} {acc.model}s"
            if fewest == total
            else f"{fewest} {acc.model}s (room for your {total})"
        )
        # the TensorFlow container runs parameter servers only across hosts: one host mirrors instead
        how = (
            "; use distribution: {multi_worker_mirrored_strategy: {}} there (parameter servers run only "
            "across hosts)"
            if job.distribution is not None and job.distribution.parameter_server is not None
            else ""
        )
        yield Finding(
            ("jobs", name, "instance_type", i),
            f"{total}x {it.name} puts one {acc.model} on each host, so every gradient exchange crosses the "
            f"network; 1x {alt.name} has {has} on one host (NVLink/PCIe) and is usually faster{how}",
        )


@rule(
    "multi-host-without-distribution",
    "warning",
    "several hosts with no distribution run the script independently on each",
    why=(
        "Without a distribution the toolkit runs the script on every host "
        "independently: N copies of the same training, paid N times."
    ),
    fix=(
        "Add distribution: {torch_distributed: {}} to a PyTorch image (or mpi/smddp/smp), "
        "{multi_worker_mirrored_strategy: {}} to a TensorFlow image (or mpi/parameter_server), "
        "or set instance_count: 1."
    ),
)
def multi_host_without_distribution(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if job.instance_count > 1 and job.distribution is None:
            framework = job_framework(ctx, job).name
            add = {
                "pytorch": "distribution: {torch_distributed: {}}",
                "tensorflow": "distribution: {multi_worker_mirrored_strategy: {}}",
            }.get(
                framework or "",
                "distribution: {torch_distributed: {}} (a PyTorch container) or "
                "{multi_worker_mirrored_strategy: {}} (a TensorFlow one)",
            )
            yield Finding(
                ("jobs", name, "instance_count"),
                f"{job.instance_count} hosts and no distribution: the container runs the script "
                f"{job.instance_count} times independently (each host trains its own model, on its own "
                f"share of a sharded channel); add {add} to train one model across them, or use "
                "instance_count: 1",
            )


def _processes_per_host(job: JobSpec, it: InstanceType) -> int:
    dist = job.distribution
    if dist is None:
        return 1  # the container's plain runner: one python per host
    if dist.kind in TENSORFLOW_KINDS:
        return 1  # the TensorFlow container's one worker per host (its strategy drives the GPUs)
    if dist.mpi is not None and dist.mpi.processes_per_host:
        return dist.mpi.processes_per_host
    return it.accelerators_per_host


@rule(
    "dataloader-workers-per-cpu",
    "warning",
    "data-loader workers per process stay within the instance's vCPUs per process",
    why="More data-loader workers than vCPUs per process oversubscribes the CPU and slows training.",
    fix=(
        "Lower the data-loader workers (num_workers, num-data-workers, dataloader_num_workers, workers … "
        "in any spelling), or choose a type with more vCPUs per accelerator."
    ),
)
def dataloader_workers_per_cpu(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _i, it in candidates(ctx):
        if it.vcpu is None:
            continue
        for key in keys_named(job.hyperparameters, DATALOADER_WORKERS):
            value = as_int(job.hyperparameters[key])
            if value is None:
                continue
            procs = _processes_per_host(job, it)
            share = max(1, it.vcpu // procs)
            if value > share:
                yield Finding(
                    ("jobs", name, "hyperparameters", key),
                    f"{key}={value} data-loader workers per process, but {it.name} has {it.vcpu} vCPUs for "
                    f"{procs} training process(es) ({share} each): the extra workers contend for the same "
                    f"cores and slow every step; use at most {share}",
                )
