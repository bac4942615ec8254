"""Rules about training jobs: instance types, distribution and its launcher, spot and
checkpoints, hyperparameters and metrics must agree before a cluster is paid for."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagestack.core.catalog.instances import InstanceType, instance_type
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.training.models import JobSpec

SMDDP_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge")
HYPERPARAMETERS_MAX = 100
HP_KEY_MAX, HP_VALUE_MAX = 256, 2500
# Keys sagestack adds itself (script mode + the largest distribution set), counted against the 100.
RESERVED_HYPERPARAMETERS = 11  # + checkpoint_every_steps, checkpoint_keep_last


def _candidates(ctx: RuleContext) -> Iterator[tuple[str, JobSpec, int, InstanceType]]:
    for name, job in ctx.spec.jobs.items():
        for i, itype in enumerate(job.instance_type):
            yield name, job, i, instance_type(itype)


@rule(
    "smddp-instance-types",
    "error",
    "SMDDP runs only on ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p3dn.24xlarge",
    why=(
        "The SageMaker distributed data parallel library runs only on "
        "the listed GPU types; elsewhere the job fails at start-up."
    ),
    fix="Use torch_distributed (NCCL) on other types, or move to ml.p4d/p4de/p3dn.",
)
def smddp_instance_types(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, i, it in _candidates(ctx):
        if job.distribution and job.distribution.smddp is not None and it.name not in SMDDP_TYPES:
            if it.family.startswith("p5"):
                continue  # p5 is the p5 rule's business: SMDDP works there, under torch_distributed
            yield Finding(
                ("jobs", name, "instance_type", i),
                f"SMDDP (distribution: smddp) does not run on {it.name}; it needs one of "
                f"{', '.join(SMDDP_TYPES)}, or use distribution: {{torch_distributed: {{}}}} (NCCL)",
            )


@rule(
    "trainium-torch-distributed",
    "error",
    "Trainium (ml.trn*) accepts only torch_distributed",
    why=(
        "Trainium jobs are launched by torchrun with the Neuron runtime "
        "(torch_distributed); MPI, SMDDP and SMP are not supported there."
    ),
    fix="Use distribution: {torch_distributed: {}} on ml.trn*.",
)
def trainium_torch_distributed(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _i, it in _candidates(ctx):
        acc = it.accelerator
        if acc is None or acc.kind != "trainium" or job.distribution is None:
            continue
        if job.distribution.kind != "torch_distributed":
            yield Finding(
                ("jobs", name, "distribution"),
                f"{it.name} (Trainium) runs distributed training only with torch_distributed (torchrun over "
                f"Neuron), not {job.distribution.kind}; write distribution: {{torch_distributed: {{}}}}",
            )


@rule(
    "p5-smddp-needs-torch-distributed",
    "error",
    "SMDDP on p5 is launched by torch_distributed",
    why="On p5, SMDDP is launched by torchrun, not mpirun; the SDK refuses the smddp launcher there.",
    fix="Use torch_distributed with the smddp backend in the script, or another instance type.",
)
def p5_smddp(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _i, it in _candidates(ctx):
        if it.family.startswith("p5") and job.distribution is not None and job.distribution.smddp is not None:
            yield Finding(
                ("jobs", name, "distribution"),
                f"on {it.name}, SMDDP runs under torchrun: use distribution: {{torch_distributed: {{}}}} "
                "and initialise the process group with backend 'smddp' in the script",
            )


@rule(
    "mpi-processes-per-host",
    "error",
    "MPI processes per host do not exceed the accelerators per host",
    why=(
        "More MPI processes than accelerators makes processes share a GPU (or "
        "a Neuron core): out of memory or a collective that never completes."
    ),
    fix="Lower processes_per_host to the accelerators per host (see `sagestack plan`), or omit it.",
)
def mpi_processes_per_host(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _i, it in _candidates(ctx):
        mpi = job.distribution.mpi if job.distribution else None
        if mpi is None or mpi.processes_per_host is None or not it.is_accelerated:
            continue
        if mpi.processes_per_host > it.accelerators_per_host:
            yield Finding(
                ("jobs", name, "distribution", "mpi", "processes_per_host"),
                f"{mpi.processes_per_host} processes per host, but {it.name} has {it.accelerators_per_host} "
                f"accelerator(s): processes would share a device; use at most {it.accelerators_per_host}",
            )


@rule(
    "efa-multi-node",
    "warning",
    "multi-node jobs on EFA-capable types use EFA",
    why=(
        "Multi-node training over TCP on EFA-capable types wastes "
        "most of the network: collectives are several times slower."
    ),
    fix=(
        "Leave efa unset (on by default for multi-node) or "
        "set efa: true; use the train-efa image (book ch. 5)."
    ),
)
def efa_multi_node(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _i, it in _candidates(ctx):
        if job.instance_count > 1 and it.efa and job.efa is False:
            yield Finding(
                ("jobs", name, "efa"),
                f"{job.instance_count}x {it.name} with efa: false: gradients cross the network over TCP; "
                "EFA (OS-bypass, up to the instance's full bandwidth) is usually much faster",
            )


@rule(
    "distribution-on-single-cpu",
    "warning",
    "a distribution on one CPU instance has nothing to distribute",
    why="A distribution on one CPU instance starts one process: the launcher's overhead, no parallelism.",
    fix="Drop distribution:, or use a multi-accelerator type or more instances.",
)
def distribution_on_single_cpu(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _i, it in _candidates(ctx):
        if job.distribution is not None and job.instance_count == 1 and not it.is_accelerated:
            yield Finding(
                ("jobs", name, "distribution"),
                f"distribution on a single {it.name} (no accelerator) starts one process; drop it, or use "
                "more instances or an accelerated type",
            )


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
    fix="Add checkpoint: {every_steps: N}; the script saves there and resumes (training_src/train.py does).",
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
        elif job.checkpoint.every_steps is None:
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
    from sagestack.core.catalog.instances import instance_types_for

    for name, job, i, it in _candidates(ctx):
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
        yield Finding(
            ("jobs", name, "instance_type", i),
            f"{total}x {it.name} puts one {acc.model} on each host, so every gradient exchange crosses the "
            f"network; 1x {alt.name} has {has} on one host (NVLink/PCIe) and is usually faster",
        )


@rule(
    "multi-host-without-distribution",
    "warning",
    "several hosts with no distribution run the script independently on each",
    why=(
        "Without a distribution the toolkit runs the script on every host "
        "independently: N copies of the same training, paid N times."
    ),
    fix="Add distribution: {torch_distributed: {}} (or mpi/smddp/smp), or instance_count: 1.",
)
def multi_host_without_distribution(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if job.instance_count > 1 and job.distribution is None:
            yield Finding(
                ("jobs", name, "instance_count"),
                f"{job.instance_count} hosts and no distribution: the container runs the script "
                f"{job.instance_count} times independently (each host trains its own model, on its own "
                "share of a sharded channel); add distribution: {torch_distributed: {}} to train one model "
                "across them, or use instance_count: 1",
            )


# Hyperparameter names that scripts commonly use for DataLoader(num_workers=...).
DATALOADER_WORKER_KEYS = (
    "num_workers",
    "dataloader_num_workers",
    "dataloader_workers",
    "data_loader_workers",
    "num_data_workers",
    "data_workers",
    "workers",
)


def _processes_per_host(job: JobSpec, it: InstanceType) -> int:
    dist = job.distribution
    if dist is None:
        return 1  # the container's plain runner: one python per host
    if dist.mpi is not None and dist.mpi.processes_per_host:
        return dist.mpi.processes_per_host
    return it.accelerators_per_host


@rule(
    "dataloader-workers-per-cpu",
    "warning",
    "data-loader workers per process stay within the instance's vCPUs per process",
    why="More data-loader workers than vCPUs per process oversubscribes the CPU and slows training.",
    fix="Lower num_workers, or choose a type with more vCPUs per accelerator.",
)
def dataloader_workers_per_cpu(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, _i, it in _candidates(ctx):
        if it.vcpu is None:
            continue
        for key in DATALOADER_WORKER_KEYS:
            value = job.hyperparameters.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
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


@rule(
    "requirements-need-network",
    "error",
    "a source dir's requirements.txt is installed by the container over the network",
    why=(
        "The training toolkit runs pip install -r requirements.txt at start-up; with network "
        "isolation or a VPC without egress it fails after the instances are paid for."
    ),
    fix="Vendor wheels (--no-index --find-links wheels), or bake the packages into a dockerfile: image.",
)
def requirements_need_network(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        requirements = ctx.root / job.source_dir / "requirements.txt"
        if not requirements.is_file():
            continue
        if job.network_isolation:
            where: tuple[str | int, ...] = ("jobs", name, "network_isolation")
            why = "network_isolation: true gives the container no network"
        elif job.vpc is not None and not job.vpc.egress:
            where = ("jobs", name, "vpc", "egress")
            why = "its VPC subnets have no route out (vpc.egress: false)"
        else:
            continue
        text = requirements.read_text(errors="replace")
        if re.search(r"^\s*--no-index\b", text, re.MULTILINE):
            continue  # installs from files in the source dir (--no-index --find-links wheels/)
        yield Finding(
            where,
            f"{job.source_dir}/requirements.txt is installed with pip from the network before the script "
            f"starts, and {why}: the job would fail at that step. Vendor the wheels into the source dir "
            f"(pip download -r requirements.txt -d {job.source_dir}/wheels, then start requirements.txt with "
            "--no-index --find-links wheels), or bake them into a dockerfile: image",
        )


# SMP v2 (AWS docs, "Supported frameworks and AWS Regions" of the model parallelism library v2).
SMP_V2_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge")
# Parameters only SMP v1 (the archived, MPI-launched library) knows.
SMP_V1_ONLY = (
    "partitions",
    "pipeline_parallel_degree",
    "microbatches",
    "active_microbatches",
    "pipeline",
    "optimize",
    "placement_strategy",
    "ddp",
    "horovod",
    "memory_weight",
    "auto_partition",
    "default_partition",
    "contiguous",
    "skip_tracing",
    "sharded_data_parallel_degree",
    "delayed_parameter_initialization",
)


@rule(
    "smp-v2-instance-types",
    "error",
    "SMP v2 runs on ml.p4d, ml.p4de, ml.p5 and ml.p5e (48xlarge/24xlarge)",
    why="The SageMaker model parallel library v2 containers run only on ml.p4d, p4de, p5 and p5e.",
    fix="Move to one of those types, or use torch_distributed with FSDP yourself.",
)
def smp_v2_instance_types(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, i, it in _candidates(ctx):
        smp = job.distribution.smp if job.distribution else None
        if smp is not None and smp.version == 2 and it.name not in SMP_V2_TYPES:
            yield Finding(
                ("jobs", name, "instance_type", i),
                f"SMP v2 (distribution: smp) does not run on {it.name}; it needs one of {', '.join(SMP_V2_TYPES)} "
                "— or, for sharded data parallelism on other GPUs, torch_distributed with PyTorch FSDP",
            )


@rule(
    "smp-version-parameters",
    "error",
    "SMP v1 and v2 parameters are not mixed, and v1 needs PyTorch <= 2.0",
    why=(
        "SMP v1 (MPI-launched, PyTorch <= 2.0) and v2 (torchrun, FSDP-based) "
        "take different parameters; mixing them fails in the container."
    ),
    fix="Set smp.version and only that version's parameters; v1 needs a DLC version <= 2.0.",
)
def smp_version_parameters(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        smp = job.distribution.smp if job.distribution else None
        if smp is None:
            continue
        where = ("jobs", name, "distribution", "smp")
        if smp.version == 2:
            v1 = [k for k in smp.parameters if k in SMP_V1_ONLY]
            if v1:
                yield Finding(
                    (*where, "parameters", v1[0]),
                    f"{', '.join(v1)}: SMP v1 parameters (pipeline parallelism over MPI); SMP v2 is built on "
                    "PyTorch FSDP and takes hybrid_shard_degree, tensor_parallel_degree, sm_activation_offloading, "
                    "… — rewrite for v2, or set version: 1 (archived, PyTorch <= 2.0)",
                )
            for key in ("processes_per_host", "custom_mpi_options"):
                if key in smp.model_fields_set:
                    yield Finding(
                        (*where, key),
                        f"{key} configures SMP v1's mpirun; SMP v2 is launched by torchrun with one process per "
                        "GPU: drop it",
                    )
            continue
        image = ctx.spec.images.get(job.image)
        dlc = image.dlc if image is not None else None
        if dlc is not None and _version_tuple(dlc.version) > (2, 0):
            yield Finding(
                (*where, "version"),
                f"SMP v1 is archived: its last release (1.15) supports PyTorch up to 2.0, and images.{job.image} "
                f"is PyTorch {dlc.version}; use version: 2 (the SMP v2 container), or a PyTorch <= 2.0 image",
            )


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


@rule(
    "training-compiler",
    "error",
    "SageMaker Training Compiler gets no new releases; torch.compile replaces it",
    why="SageMaker Training Compiler receives no new releases; current DLCs do not include it.",
    fix="Use torch.compile in the script instead.",
)
def training_compiler(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        for key in ("compiler_config", "training_compiler", "sagemaker_training_compiler_enabled"):
            if key in job.hyperparameters:
                yield Finding(
                    ("jobs", name, "hyperparameters", key),
                    f"{key}: SageMaker Training Compiler's switch. It gets no new releases (AWS); use "
                    "PyTorch's own compiler instead: hyperparameters: {compile: true} (torch.compile in "
                    "training_src)",
                )


@rule(
    "framework-profiling-pytorch2",
    "error",
    "Profiler's framework metrics (detailed, dataloader, python) are not available for PyTorch >= 2.0",
    why=(
        "Debugger/Profiler's framework metrics (detailed, dataloader, python) "
        "are not supported for PyTorch >= 2.0; the job fails or records nothing."
    ),
    fix="Keep system profiling (system_interval_ms) and drop framework:, dataloader: and python:.",
)
def framework_profiling_pytorch2(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if job.profiler is None or not job.profiler.framework_metrics:
            continue
        image = ctx.spec.images.get(job.image)
        dlc = image.dlc if image is not None else None
        if dlc is None or dlc.framework != "pytorch" or _version_tuple(dlc.version) < (2, 0):
            continue
        for kind in job.profiler.framework_metrics:
            yield Finding(
                ("jobs", name, "profiler", kind),
                f"SageMaker Profiler's framework metrics ({kind}) are deprecated and not collected for "
                f"PyTorch 2.0 and later (images.{job.image} is PyTorch {dlc.version}); keep system monitoring "
                "(profiler: {system_interval_ms: …}) and its rules, and profile the script with "
                "hyperparameters: {profile: true} (torch.profiler traces in TensorBoard: tensorboard: true)",
            )


@rule(
    "retired-instance-type",
    "error",
    "no retired instance type (no current framework container runs there)",
    why=(
        "Retired types (ml.p2: K80 GPUs) are not supported by the current PyTorch "
        "(>= 1.13) and TensorFlow (>= 2.12) containers: the job cannot start."
    ),
    fix="Use the suggested current replacement.",
)
def retired_instance_type(ctx: RuleContext) -> Iterator[Finding]:
    from sagestack.core.catalog.instances import RETIRED_FAMILIES, current_replacement

    for name, _job, i, it in _candidates(ctx):
        if it.family not in RETIRED_FAMILIES:
            continue
        alt = current_replacement(it.name)
        hint = ""
        if alt is not None and alt.accelerator is not None:
            hint = (
                f"; the closest current type is {alt.name} ({alt.accelerator.count}x {alt.accelerator.model})"
            )
        yield Finding(
            ("jobs", name, "instance_type", i),
            f"{it.name} is retired for training: {RETIRED_FAMILIES[it.family]}{hint}",
        )


@rule(
    "file-system-channel",
    "error",
    "an FSx for Lustre or EFS channel runs in a VPC, in File mode, with no S3 settings",
    why=(
        "SageMaker mounts an FSx for Lustre or EFS channel over the job's network interfaces: "
        "without a VPC that reaches the file system the job fails at start-up, the mount "
        "supports File mode only, and S3 settings on such a channel would be ignored or refused."
    ),
    fix=(
        "Give the job vpc: (subnets that reach the file system; for FSx, in its Availability "
        "Zone), use input_mode File, and drop s3_uri / key_prefix / distribution from the channel."
    ),
)
def file_system_channel(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        for cname, ch in job.channels.items():
            if ch.file_system is None:
                continue
            where = ("jobs", name, "channels", cname)
            kind = "FSx for Lustre" if ch.file_system.type == "FSxLustre" else "EFS"
            if job.vpc is None:
                yield Finding(
                    (*where, "file_system"),
                    f"the job reaches {kind} file system {ch.file_system.id} only from inside its VPC: add "
                    "vpc: {subnets: [...], security_groups: [...]} with subnets that reach it (for FSx for "
                    "Lustre, in the file system's Availability Zone)",
                )
            mode = ch.input_mode or job.input_mode
            if mode != "File":
                yield Finding(
                    (*where, "input_mode"),
                    f"{kind} channels are mounted: input mode File only, not {mode}",
                )
            extra = [k for k in ("s3_uri", "key_prefix") if getattr(ch, k) is not None]
            if ch.distribution != "FullyReplicated":
                extra.append("distribution")
            if extra:
                yield Finding(
                    where,
                    f"a file-system channel reads from {ch.file_system.id}; drop {', '.join(extra)} "
                    "(S3 settings)",
                )


_TRAINING_PLAN_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:training-plan/.+$")


@rule(
    "training-plan",
    "error",
    "a training plan names one of the job's candidates, by ARN, in the project's region, not for spot",
    why=(
        "A SageMaker training plan reserves one instance type and count for a time window, "
        "in one region, as on-demand capacity; a plan named for a type the job does not "
        "list, in another region, or for a spot job is refused by CreateTrainingJob."
    ),
    fix=(
        "Key training_plans by one of the job's instance_type candidates, use a plan ARN of the "
        "project's region (`sagestack capacity offerings JOB` lists offerings), and train on demand."
    ),
)
def training_plan(ctx: RuleContext) -> Iterator[Finding]:
    from sagestack.core.catalog.suggest import did_you_mean

    for name, job in ctx.spec.jobs.items():
        for itype, arn in job.training_plans.items():
            where = ("jobs", name, "training_plans", itype)
            if itype not in job.instance_type:
                yield Finding(
                    where,
                    f"'{itype}' is not a candidate of this job{did_you_mean(itype, job.instance_type)} "
                    f"(candidates: {', '.join(job.instance_type)}); a plan reserves one instance type",
                )
            if not _TRAINING_PLAN_ARN.match(arn):
                yield Finding(
                    where,
                    f"'{arn}' is not a training plan ARN (arn:aws:sagemaker:<region>:<account>:training-plan/<name>)",
                )
            elif arn.split(":")[3] != ctx.spec.region:
                yield Finding(where, f"the plan is in {arn.split(':')[3]}; jobs run in {ctx.spec.region}")
        if job.training_plans and job.use_spot_instances:
            yield Finding(
                ("jobs", name, "use_spot_instances"),
                "a training plan is reserved on-demand capacity: managed spot does not run on it; "
                "set use_spot_instances: false or drop training_plans",
            )
