"""Rules about what SageMaker offers a training job today: the network pip needs for a source
dir's requirements, the model parallel library's versions and instance types, retired tools and
types (Training Compiler, framework profiling on PyTorch 2, ml.p2), file-system channels and
training plans."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagestack.core.catalog.instances import RETIRED_FAMILIES, current_replacement
from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.core.types import arn_region
from sagestack.training.hp_names import TRAINING_COMPILER, keys_named
from sagestack.training.rules import candidates


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
    for name, job, i, it in candidates(ctx):
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
        if dlc is not None and dlc.framework == "pytorch" and _version_tuple(dlc.version) > (2, 0):
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
        for key in keys_named(job.hyperparameters, TRAINING_COMPILER):
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
    for name, _job, i, it in candidates(ctx):
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
            elif arn_region(arn) != ctx.spec.region:
                yield Finding(where, f"the plan is in {arn_region(arn)}; jobs run in {ctx.spec.region}")
        if job.training_plans and job.use_spot_instances:
            yield Finding(
                ("jobs", name, "use_spot_instances"),
                "a training plan is reserved on-demand capacity: managed spot does not run on it; "
                "set use_spot_instances: false or drop training_plans",
            )
