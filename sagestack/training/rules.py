"""Rules about a training job's distribution and its launcher on each candidate instance type:
SMDDP, Trainium, p5, MPI, EFA must agree before a cluster is paid for. Also the iteration over
candidate instance types the training rules share, and the framework a job's image runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from sagestack.core.catalog.images import dlc_framework
from sagestack.core.catalog.instances import InstanceType, instance_type
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.training.models import JobSpec

SMDDP_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p3dn.24xlarge")


def candidates(ctx: RuleContext) -> Iterator[tuple[str, JobSpec, int, InstanceType]]:
    """Every job's candidate instance types: the job's key, spec, the index in instance_type, the type."""
    for name, job in ctx.spec.jobs.items():
        for i, itype in enumerate(job.instance_type):
            yield name, job, i, instance_type(itype)


@dataclass(frozen=True)
class Framework:
    name: str | None  # pytorch, tensorflow; None: not known (a Dockerfile or a team's own image)
    version: tuple[int, ...] | None  # the framework's major.minor, when the image says it
    text: str  # how the image says it, for messages


def job_framework(ctx: RuleContext, job: JobSpec) -> Framework:
    """The framework the job's container runs, as its image declares it."""
    image = ctx.spec.images.get(job.image)
    if image is not None and image.dlc is not None:
        # the Hugging Face training DLCs sagestack resolves run PyTorch (their version is transformers')
        if image.dlc.framework == "huggingface":
            return Framework("pytorch", None, "a Hugging Face (PyTorch) DLC")
        dlc = image.dlc.framework
        return Framework(dlc, version_tuple(image.dlc.version), f"{_TITLE[dlc]} {image.dlc.version}")
    if image is not None and image.uri is not None:
        # an AWS training DLC's repository; the framework version leads its tag (2.19.0-gpu-py312-…)
        name = dlc_framework(image.uri)
        tag = re.search(r":(\d+\.\d+)(?:\.\d+)?-(?:cpu|gpu)", image.uri)
        version = version_tuple(tag[1]) if tag else None
        if name is None:
            return Framework(None, None, "its own image")
        return Framework(name, version, f"{_TITLE[name]} {tag[1]}" if tag else f"a {_TITLE[name]} DLC")
    return Framework(None, None, "its own image")


_TITLE = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2])


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
    for name, job, i, it in candidates(ctx):
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
    for name, job, _i, it in candidates(ctx):
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
    for name, job, _i, it in candidates(ctx):
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
    for name, job, _i, it in candidates(ctx):
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
    for name, job, _i, it in candidates(ctx):
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
    for name, job, _i, it in candidates(ctx):
        dist = job.distribution
        if dist is None or dist.parameter_server is not None:
            continue  # one host with parameter servers: parameter-server-single-host says more
        if job.instance_count == 1 and not it.is_accelerated:
            yield Finding(
                ("jobs", name, "distribution"),
                f"distribution on a single {it.name} (no accelerator) starts one process; drop it, or use "
                "more instances or an accelerated type",
            )
