"""Rules about how a job's container starts its script: the toolkit contract (the SDK v2's script
mode, run by AWS's training toolkit inside its Deep Learning Containers) or the drivers contract
(the SDK v3's ModelTrainer: sm_train.sh and the SDK's drivers, any image with Python).

An image can run the toolkit contract when it is a DLC, is built FROM one, or installs
sagemaker-training itself; a registry image that is not a DLC is taken on trust with a warning (its
inside cannot be read here)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from sagestack.core.catalog.images import dlc_framework
from sagestack.core.drivers import (
    HYPERPARAMETER_KEY,
    SHELL_NAME_TAIL,
    SMP_FIELDS,
    exported_text_problem,
    hyperparameter_exports,
    safe_serialize,
)
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.foundation.models import ImageSpec
from sagestack.training.launch_contract import launch_contract
from sagestack.training.launcher import DRIVERS_KINDS, drivers_config
from sagestack.training.models import JobSpec

_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", re.IGNORECASE | re.MULTILINE)
_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.MULTILINE)
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
TOOLKIT_PACKAGE = re.compile(r"sagemaker[-_]training\b")


def dockerfile_base(text: str, build_args: dict[str, str], target: str | None = None) -> str | None:
    """The image the built stage starts FROM (following stage names; ARG defaults and the spec's
    build_args substituted), or None when a variable has no value."""
    values = {m[1]: m[2] for m in _ARG.finditer(text.split("FROM", 1)[0]) if m[2]}
    values.update(build_args)
    stages: dict[str, str] = {}
    base = None
    for m in _FROM.finditer(text):
        image = _VARIABLE.sub(lambda v: values.get(v[1] or v[2], "\0"), m[1])
        image = stages.get(image.lower(), image)
        if m[2]:
            stages[m[2].lower()] = image
        base = image
        if target is not None and m[2] and m[2].lower() == target.lower():
            break
    return None if base is None or "\0" in base else base


def toolkit_verdict(image: ImageSpec, root: Path) -> tuple[str, str] | None:
    """('error' | 'warning', why) when the image may not have AWS's training toolkit; None when it has."""
    if image.dlc is not None:
        return None
    if image.uri is not None:
        if dlc_framework(image.uri) is not None:
            return None
        return "warning", f"{image.uri} is not an AWS training Deep Learning Container"
    docker = image.dockerfile_spec
    assert docker is not None
    path = root / docker.directory / "Dockerfile"
    if not path.is_file():
        return None  # the foundation's rules say the Dockerfile is missing
    text = path.read_text(errors="replace")
    base = dockerfile_base(text, docker.build_args, docker.target)
    if base is None or dlc_framework(base) is not None or TOOLKIT_PACKAGE.search(text):
        return None
    return "error", (
        f"{docker.directory}/Dockerfile builds FROM {base}, which is not an AWS training Deep Learning "
        "Container, and installs no sagemaker-training"
    )


@rule(
    "toolkit-needs-dlc",
    "error",
    "a job under the toolkit contract runs on an image that has AWS's training toolkit",
    why=(
        "launcher: toolkit (the default) starts the script through sagemaker-training, the toolkit inside "
        "AWS's Deep Learning Containers: the job's hyperparameters name the program and its archive, and the "
        "image's entry point must read them. An image without the toolkit (an NGC image, a team's own CUDA "
        "image) starts its own entry point instead, and the job fails or trains nothing. A registry image that "
        "is not a DLC may have installed the toolkit; its inside cannot be read here, so that is a warning."
    ),
    fix="Set launcher: drivers on the job (the SageMaker SDK v3's contract: it needs only Python in the "
    "image), build the image FROM a DLC, or `pip install sagemaker-training` in its Dockerfile.",
)
def toolkit_needs_dlc(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, why in _toolkit_jobs_without_toolkit(ctx, "error"):
        yield Finding(("jobs", name, "launcher"), f"images.{job.image}: {why}; set launcher: drivers")


def _toolkit_jobs_without_toolkit(ctx: RuleContext, severity: str) -> Iterator[tuple[str, JobSpec, str]]:
    """(job, spec, why) for each toolkit-contract job whose image's verdict has this severity."""
    for name, job in ctx.spec.jobs.items():
        image = ctx.spec.images.get(job.image)
        if not launch_contract(job).image_needs_toolkit or image is None:
            continue
        verdict = toolkit_verdict(image, ctx.root)
        if verdict is not None and verdict[0] == severity:
            yield name, job, verdict[1]


@rule(
    "toolkit-registry-image",
    "warning",
    "a job under the toolkit contract runs on a registry image that is not a DLC",
    why=(
        "launcher: toolkit (the default) needs sagemaker-training, the toolkit inside AWS's Deep Learning "
        "Containers, to read the program and its archive from the hyperparameters. A team's own registry "
        "image may have installed it, but its inside cannot be read here; without it the job starts the "
        "image's own entry point and trains nothing."
    ),
    fix="If the image does not install sagemaker-training, set launcher: drivers on the job (the SageMaker "
    "SDK v3's contract: it needs only Python in the image).",
)
def toolkit_registry_image(ctx: RuleContext) -> Iterator[Finding]:
    for name, job, why in _toolkit_jobs_without_toolkit(ctx, "warning"):
        yield Finding(
            ("jobs", name, "image"),
            f"images.{job.image}: {why}; unless it installs sagemaker-training, set launcher: drivers",
        )


def _drivers_jobs(ctx: RuleContext) -> Iterator[tuple[str, JobSpec]]:
    return ((n, j) for n, j in ctx.spec.jobs.items() if launch_contract(j).runs_sdk_drivers)


@rule(
    "drivers-distribution",
    "error",
    "a job under the drivers contract uses a distribution the SDK v3's drivers launch",
    why=(
        "ModelTrainer's drivers launch the script alone, under torchrun (Torchrun, with SMP v2 as "
        "Torchrun(smp=SMP(...))) or under mpirun (MPI). SMDDP's smddprun, SMP v1 and TensorFlow's "
        "MultiWorkerMirroredStrategy and parameter servers are started by the toolkit inside AWS's "
        "containers; under the drivers nothing would start them."
    ),
    fix="Use torch_distributed (SMDDP runs as a torch.distributed backend inside it: "
    "dist.init_process_group('smddp')), mpi, or smp version 2; or set launcher: toolkit on a DLC image.",
)
def drivers_distribution(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in _drivers_jobs(ctx):
        dist = job.distribution
        if dist is None:
            continue
        if dist.kind not in DRIVERS_KINDS or (dist.smp is not None and dist.smp.version == 1):
            kind = "smp version 1" if dist.kind == "smp" else dist.kind
            yield Finding(
                ("jobs", name, "distribution"),
                f"{kind} has no driver in the SDK v3 (allowed: {', '.join(DRIVERS_KINDS)} with smp version 2)",
            )
        elif dist.smp is not None:
            unknown = sorted(set(dist.smp.parameters) - set(SMP_FIELDS))
            if unknown:
                yield Finding(
                    ("jobs", name, "distribution", "smp", "parameters"),
                    f"{', '.join(unknown)}: not a field of the SDK v3's SMP (allowed: {', '.join(SMP_FIELDS)})",
                )


@rule(
    "drivers-entry-point",
    "error",
    "a job under the drivers contract has an entry point its driver can run",
    why=(
        "The SDK v3's basic driver runs a .py file with Python or a .sh file with bash, and nothing else; "
        "torchrun and the MPI driver run a Python file."
    ),
    fix="Point entry_point at a .py file (or a .sh file for a job without a distribution).",
)
def drivers_entry_point(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in _drivers_jobs(ctx):
        allowed = (".py",) if job.distribution is not None else (".py", ".sh")
        if not job.entry_point.endswith(allowed):
            yield Finding(
                ("jobs", name, "entry_point"),
                f"'{job.entry_point}': the drivers run {' or '.join(allowed)} files here",
            )


# sagemaker-training's own test of a name (process.py, _SAFE_ENTRY_POINT, and no '.' or '..' part):
# under the toolkit a name it refuses fails the job; under the drivers the same characters are the
# ones the basic driver's `sh -c "chmod +x NAME && ./NAME"` and the exported SM_ENTRY_SCRIPT='NAME'
# read as themselves.
ENTRY_POINT_NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._+-]*(?:/[A-Za-z0-9._+-]+)*")
_ENTRY_POINT_CHARACTER = re.compile(r"[A-Za-z0-9._+/-]")


def entry_point_problem(name: str) -> str | None:
    """Why `name` is not a plain relative path of plain file names (None: it is)."""
    if ENTRY_POINT_NAME.fullmatch(name) is None:
        bad = sorted({c for c in name if not _ENTRY_POINT_CHARACTER.match(c)})
        if bad:
            return "the character(s) " + " ".join(repr(c) for c in bad)
        if name.startswith(("-", "+")):
            return f"a leading '{name[0]}', which a launcher reads as an option"
        return "an empty part ('//' or a trailing '/')"
    if any(part in (".", "..") for part in name.split("/")):
        return "a '.' or '..' part"
    return None


def suggested_entry_point(name: str) -> str:
    """`name` made plain: other characters as '_', no empty or '.' part, no leading '-' or '+'."""
    parts = [re.sub(r"[^A-Za-z0-9._+-]", "_", p) for p in name.split("/") if p not in ("", ".", "..")]
    plain = "/".join(parts).lstrip("-+")
    return plain if ENTRY_POINT_NAME.fullmatch(plain) else "train.py"


@rule(
    "entry-point-name",
    "error",
    "a job's entry_point is a plain file name (or a relative path of plain names)",
    why=(
        "Under the toolkit contract sagemaker-training refuses, when the job starts, an entry point whose "
        "name holds anything but letters, digits, '.', '_', '+', '-' and '/', starts with '-' or '/', or "
        "has a '.' or '..' part: the job fails after its instances started. Under the drivers contract "
        "nothing refuses it: the SDK v3's basic driver runs a .sh file as `sh -c \"chmod +x NAME && "
        "./NAME\"` with the name unquoted, and environment.py exports SM_ENTRY_SCRIPT='NAME' into the file "
        "sm_train.sh sources, so `x;touch y.sh` or `$(...).sh` runs as shell code in the container, and a "
        "quote fails the job. The same names are refused under both contracts, so the local run and the "
        "cloud agree."
    ),
    fix="Rename the script using only letters, digits, '.', '_', '+', '-' and '/' (not first: '-', '+' or "
    "'/'), and set entry_point to that name relative to source_dir, e.g. entry_point: train.py or "
    "bin/train.sh.",
)
def entry_point_name(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        entry = job.entry_point
        if entry.startswith("/") or "\\" in entry or ".." in entry.split("/"):
            continue  # entry-point-in-source-dir says it is not a path inside source_dir
        problem = entry_point_problem(entry)
        if problem is not None:
            plain = suggested_entry_point(entry)
            yield Finding(
                ("jobs", name, "entry_point"),
                f"{entry!r} has {problem}: an entry point is a plain file name (letters, digits, '.', '_', "
                f"'+', '-', '/'), which sagemaker-training refuses otherwise and the drivers' shell would "
                f"read as code; rename the script and set entry_point: {plain}",
            )


@rule(
    "drivers-tuning",
    "error",
    "a tuned job under the drivers contract runs on an image that has AWS's training toolkit",
    why=(
        "CreateHyperParameterTuningJob has no ContainerEntrypoint, so a tuning job's trials cannot start "
        "sm_train.sh: they run the toolkit contract (the SageMaker SDK v3's tuner does the same: it adds "
        "sagemaker_program and sagemaker_submit_directory), which needs AWS's training toolkit in the image."
    ),
    fix="Tune the job on a DLC image (or one built FROM a DLC); the job itself may keep launcher: drivers.",
)
def drivers_tuning(ctx: RuleContext) -> Iterator[Finding]:
    for key, tuning in ctx.spec.tuning.items():
        job = ctx.spec.jobs.get(tuning.job)
        # the trials' own contract, when it is not the job's (a toolkit job's image is judged above)
        trial = None if job is None else launch_contract(job).trial_job(job)
        if job is None or trial is None or not launch_contract(trial).image_needs_toolkit:
            continue
        image = ctx.spec.images.get(job.image)
        verdict = None if image is None else toolkit_verdict(image, ctx.root)
        if verdict is not None:
            yield Finding(
                ("tuning", key, "job"),
                f"'{tuning.job}' runs under launcher: drivers, but its trials run the toolkit contract and "
                f"images.{job.image}: {verdict[1]}",
            )


@rule(
    "drivers-debugger-hook",
    "warning",
    "Debugger's tensor rules under the drivers contract need smdebug in the image",
    why=(
        "Debugger's rules read the tensors the smdebug hook saves during training. AWS's Deep Learning "
        "Containers carry smdebug and the toolkit turns the hook on; under the drivers contract on another "
        "image nothing saves tensors unless the image has smdebug and the script registers its hook, so "
        "the rules find nothing and never fire. The Profiler's system metrics need nothing in the image."
    ),
    fix="pip install smdebug in the image and create the hook in the script "
    "(smdebug.pytorch.Hook.create_from_json_file()), or run the job on a DLC.",
)
def drivers_debugger_hook(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in _drivers_jobs(ctx):
        image = ctx.spec.images.get(job.image)
        if job.debugger is None or image is None or toolkit_verdict(image, ctx.root) is None:
            continue
        yield Finding(
            ("jobs", name, "debugger"),
            f"images.{job.image} is not an AWS Deep Learning Container: the rules read the tensors smdebug "
            "saves, so the image needs smdebug and the script its hook",
        )


_INSTEAD = (
    "write it without ' (the typographic apostrophe \u2019 reads the same), or put the text in a file of source_dir and "
    "pass the file's name"
)


@rule(
    "drivers-shell-values",
    "error",
    "what a job under the drivers contract writes into sm_train.sh's environment reaches it intact",
    why=(
        "The SDK v3's environment.py writes every SM_* variable into /opt/ml/input/sm_training.env as "
        "export NAME='VALUE', unescaped, and sm_train.sh sources that file, in the cloud as locally. A ' in "
        'a value ends the quoted string: `note: "it\'s"` fails the job, and a crafted value runs commands '
        "in the container with the job's role. The values it writes come from the spec: each hyperparameter "
        "(SM_HP_<KEY>, and SM_HPS as JSON, where \\u0027 decodes to ' too), each channel (SM_CHANNEL_<NAME>, "
        "its content_type in SM_INPUT_DATA_CONFIG), the distribution (SM_DISTRIBUTED_CONFIG: MPI options, "
        "SMP parameters), the entry point (SM_ENTRY_SCRIPT: see entry-point-name), and SM_LOG_LEVEL, which "
        "environment.py reads with int() before anything else. A name bash refuses (SM_HP_MODEL.LR, "
        "SM_CHANNEL_MY-DATA: a shell variable holds only letters, digits and '_') fails the job as well, "
        "and a NUL character is dropped."
    ),
    fix="Write values without ' (the typographic apostrophe \u2019, or the text in a file of source_dir whose name is "
    "passed), hyperparameter keys with letters, digits, '_' and '-' only, channel names with letters, "
    "digits and '_' only, and SM_LOG_LEVEL as a logging level number (20 is INFO).",
)
def drivers_shell_values(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in _drivers_jobs(ctx):
        yield from _hyperparameter_findings(name, job)
        for channel, spec in job.channels.items():
            where = ("jobs", name, "channels", channel)
            if SHELL_NAME_TAIL.fullmatch(channel) is None:
                plain = re.sub(r"[^A-Za-z0-9_]", "_", channel)
                yield Finding(
                    where,
                    f"channel {channel!r}: environment.py exports SM_CHANNEL_{channel.upper()}, a name bash "
                    f"refuses (only letters, digits and '_'), and the job fails before the script starts; "
                    f"name the channel {plain}",
                )
            problem = (
                None if spec.content_type is None else exported_text_problem(json.dumps(spec.content_type))
            )
            if problem is not None:
                yield Finding((*where, "content_type"), f"{spec.content_type!r} holds {problem}; {_INSTEAD}")
        yield from _distribution_findings(name, job)
        level = job.environment.get("SM_LOG_LEVEL")
        if level is not None and _not_int(level):
            yield Finding(
                ("jobs", name, "environment", "SM_LOG_LEVEL"),
                f"{level!r}: environment.py reads SM_LOG_LEVEL with int() when it starts, and the job fails "
                "before the script starts; give a logging level number, e.g. 20 (INFO) or 10 (DEBUG)",
            )


def _not_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return True
    return False


def _hyperparameter_findings(name: str, job: JobSpec) -> Iterator[Finding]:
    for key, value in job.hyperparameters.items():
        where = ("jobs", name, "hyperparameters", key)
        variable, texts = hyperparameter_exports(key, safe_serialize(value))
        if HYPERPARAMETER_KEY.fullmatch(key) is None:
            plain = re.sub(r"[^A-Za-z0-9_-]", "_", key) or "value"
            yield Finding(
                where,
                f"key {key!r}: environment.py exports it as {variable}, a name bash refuses (a key holds "
                f"letters, digits, '_' and '-' only), and the job fails before the script starts, or a crafted "
                f"key runs as shell code; name it {plain}",
            )
            continue
        problem = next((p for p in map(exported_text_problem, texts) if p is not None), None)
        if problem is not None:
            yield Finding(
                where,
                f"{value!r}: environment.py writes it into sm_train.sh's environment as {variable}='…' and it "
                f"holds {problem}; {_INSTEAD}",
            )


def _distribution_findings(name: str, job: JobSpec) -> Iterator[Finding]:
    dist = job.distribution
    if dist is None:
        return
    try:
        distributed = drivers_config(job, requirements=False).distributed()
    except ValueError:
        return  # MPI options a shell cannot split: the request's renderer says so
    options = distributed.get("mpi_additional_options") or []
    problem = exported_text_problem(json.dumps(options))
    if dist.mpi is not None and problem is not None:
        yield Finding(
            ("jobs", name, "distribution", "mpi", "custom_mpi_options"),
            f"{dist.mpi.custom_mpi_options!r}: environment.py writes the options into SM_DISTRIBUTED_CONFIG='…' "
            f"and one holds {problem}; {_INSTEAD}",
        )
    smp = distributed.get("smp") or {}
    for key, value in smp.items():
        problem = exported_text_problem(json.dumps(value, default=str))
        if problem is not None:
            yield Finding(
                ("jobs", name, "distribution", "smp", "parameters", key),
                f"{value!r}: environment.py writes SMP's parameters into SM_DISTRIBUTED_CONFIG='…' and this "
                f"one holds {problem}; {_INSTEAD}",
            )
