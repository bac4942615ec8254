"""The oracle of the drivers launch contract: ModelTrainer renders what sagestack renders.

For each job of CASES (one host; torchrun 1x4 and 2x1; MPI 1x2 with options; SMP v2; spot with
checkpoints and a data channel; Debugger, TensorBoard and metrics; a VPC with network isolation and
an environment; requirements.txt; instance candidates; hyperparameters of every JSON type), the
CreateTrainingJob request sagestack renders under `launcher: drivers` is compared FIELD BY FIELD with
what the pinned sagemaker-train's `ModelTrainer._create_training_job_args(boto3=True)` produces for
the same inputs (the same role, bucket, image, instances, distribution, spot, checkpoint, network,
hyperparameters and code), the `sm_drivers` channel's files with ModelTrainer's temp drivers folder
and the `code` channel's with what ModelTrainer uploads, file by file. Every difference must be in
DIFFERENCES (field path -> why) and be exactly what that entry says (its check); any other difference
fails, and so does an entry that no job shows. Debugger has no ModelTrainer counterpart: its fields
are listed, the rest of that job is compared.

ModelTrainer runs offline (tests/support/model_trainer.py): its S3 uploads go to a local moto server,
and the one call it makes to IAM (`SimulatePrincipalPolicy`, in
`sagemaker.train.defaults.TrainDefaults.get_role`, which moto lacks) is patched to return the role
it is given. Nothing else of the SDK is changed. Both sides' requests are checked against botocore's
model as well.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sagestack.core.catalog import validate_request
from sagestack.core.catalog.instances import instance_type as catalog_instance
from sagestack.core.deployment import Deployment
from sagestack.core.layout import S3Layout
from sagestack.core.sourcedir import pack_source_dir
from sagestack.project import load_project
from sagestack.project.environment import resolve_environment
from sagestack.project.requests import EnvironmentRequests, render_training, stand_in_deployment
from sagestack.training.launch_files import job_launch_files
from sagestack.training.models import JobSpec
from tests.support.model_trainer import (
    MISSING,
    Check,
    Difference,
    ModelTrainerOracle,
    TrainerRendering,
    compare,
    flatten,
    flatten_files,
    folder_files,
)
from tests.support.moto_server import running_moto

pytestmark = pytest.mark.conformance

PROJECT = "oracle"
ENV = "dev"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1"
SUBNETS = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
SECURITY_GROUPS = ["sg-0123456789abcdef0"]
TRAIN_DATA = "s3://team-datasets/digits/train/"
METRICS = {"train:loss": r"loss=([0-9.e-]+)", "validation:accuracy": r"val_acc=([0-9.]+)"}
ENVIRONMENT = {"NCCL_DEBUG": "INFO", "MY_FLAG": "1"}
MPI_OPTIONS = ["-x", "NCCL_DEBUG=INFO", "--verbose"]
SMP_V2 = {"hybrid_shard_degree": 8, "sm_activation_offloading": True, "tensor_parallel_degree": 2}
# Hyperparameters of every JSON type. A spec's value is a string, number or boolean; ModelTrainer
# also takes null, arrays and objects, which it sends as their JSON text (safe_serialize), and a spec
# writes that text as a string: the request is the same.
HYPERPARAMETERS: dict[str, Any] = {
    "epochs": 3,
    "negative": -2,
    "lr": 0.001,
    "tiny": 1e-07,
    "name": "resnet",
    "spaced": "a b  c",
    "number_as_text": "5",
    "true_as_text": "true",
    "empty": "",
    "flag": True,
    "off": False,
}
JSON_VALUES: dict[str, Any] = {
    "none": None,
    "layers": [64, 32],
    "optimizer": {"name": "adamw", "betas": [0.9, 0.99]},
}
SPEC_HYPERPARAMETERS = {**HYPERPARAMETERS, **{k: json.dumps(v) for k, v in JSON_VALUES.items()}}
TRAINER_HYPERPARAMETERS = {**HYPERPARAMETERS, **JSON_VALUES}

TrainerInputs = Callable[[ModelTrainerOracle, Path], dict[str, Any]]


@dataclass(frozen=True)
class Case:
    job: dict[str, Any]  # the job's spec (launcher: drivers and the image are added)
    trainer: TrainerInputs  # ModelTrainer's keyword arguments for the same inputs


def _compute(o: ModelTrainerOracle, itype: str, count: int = 1, **kw: Any) -> Any:
    return o.configs.Compute(instance_type=itype, instance_count=count, **kw)


def _source(o: ModelTrainerOracle, src: Path, **kw: Any) -> Any:
    return o.configs.SourceCode(source_dir=str(src), entry_script="train.py", **kw)


def _stopping(o: ModelTrainerOracle, run: int, wait: int | None = None) -> Any:
    return o.configs.StoppingCondition(max_runtime_in_seconds=run, max_wait_time_in_seconds=wait)


CASES: dict[str, Case] = {
    # defaults left to each side (the one case where the max run is not given)
    "single": Case(
        {"instance_type": "ml.g5.2xlarge"},
        lambda o, src: {"compute": _compute(o, "ml.g5.2xlarge"), "source_code": _source(o, src)},
    ),
    # with a warm pool and a bigger volume
    "torchrun-1x4": Case(
        {
            "instance_type": "ml.g5.12xlarge",
            "max_run": 3600,
            "distribution": {"torch_distributed": {}},
            "keep_alive": 600,
            "volume_size_gb": 200,
        },
        lambda o, src: {
            "compute": _compute(o, "ml.g5.12xlarge", keep_alive_period_in_seconds=600, volume_size_in_gb=200),
            "source_code": _source(o, src),
            "distributed": o.distributed.Torchrun(),
            "stopping_condition": _stopping(o, 3600),
        },
    ),
    # with a bound on the time waiting for capacity
    "torchrun-2x1": Case(
        {
            "instance_type": "ml.g5.2xlarge",
            "instance_count": 2,
            "max_run": 3600,
            "max_pending_time": 1800,
            "distribution": {"torch_distributed": {}},
        },
        lambda o, src: {
            "compute": _compute(o, "ml.g5.2xlarge", 2),
            "source_code": _source(o, src),
            "distributed": o.distributed.Torchrun(),
            "stopping_condition": o.configs.StoppingCondition(
                max_runtime_in_seconds=3600, max_pending_time_in_seconds=1800
            ),
        },
    ),
    "mpi-1x2": Case(
        {
            "instance_type": "ml.g5.12xlarge",
            "max_run": 3600,
            "distribution": {"mpi": {"processes_per_host": 2, "custom_mpi_options": " ".join(MPI_OPTIONS)}},
        },
        lambda o, src: {
            "compute": _compute(o, "ml.g5.12xlarge"),
            "source_code": _source(o, src),
            "distributed": o.distributed.MPI(process_count_per_node=2, mpi_additional_options=MPI_OPTIONS),
            "stopping_condition": _stopping(o, 3600),
        },
    ),
    "smp-v2": Case(
        {
            "instance_type": "ml.p4d.24xlarge",
            "instance_count": 2,
            "max_run": 3600,
            "distribution": {"smp": {"version": 2, "parameters": SMP_V2}},
        },
        lambda o, src: {
            "compute": _compute(o, "ml.p4d.24xlarge", 2),
            "source_code": _source(o, src),
            "distributed": o.distributed.Torchrun(smp=o.distributed.SMP(**SMP_V2)),
            "stopping_condition": _stopping(o, 3600),
        },
    ),
    "spot": Case(
        {
            "instance_type": "ml.g5.12xlarge",
            "instance_count": 2,
            "max_run": 3600,
            "max_wait": 7200,
            "use_spot_instances": True,
            "checkpoint": {"every_steps": 50},
            "distribution": {"torch_distributed": {}},
            "channels": {"train": {"s3_uri": TRAIN_DATA}},
        },
        lambda o, src: {
            "compute": _compute(o, "ml.g5.12xlarge", 2, enable_managed_spot_training=True),
            "source_code": _source(o, src),
            "distributed": o.distributed.Torchrun(),
            "stopping_condition": _stopping(o, 3600, 7200),
            "checkpoint_config": o.configs.CheckpointConfig(),
            "input_data_config": [o.configs.InputData(channel_name="train", data_source=TRAIN_DATA)],
        },
    ),
    # ModelTrainer has no Debugger: the rest of the job is compared, Debugger's fields are listed
    "debugger": Case(
        {
            "instance_type": "ml.g5.2xlarge",
            "max_run": 3600,
            "tensorboard": True,
            "metric_definitions": METRICS,
            "debugger": {"rules": [{"rule": "loss_not_decreasing"}, {"rule": "vanishing_gradient"}]},
        },
        lambda o, src: {
            "compute": _compute(o, "ml.g5.2xlarge"),
            "source_code": _source(o, src),
            "stopping_condition": _stopping(o, 3600),
            "post": lambda t: t.with_tensorboard_output_config(
                o.configs.TensorBoardOutputConfig()
            ).with_metric_definitions(
                [o.shapes.MetricDefinition(name=k, regex=v) for k, v in METRICS.items()]
            ),
        },
    ),
    "vpc": Case(
        {
            "instance_type": "ml.g5.2xlarge",
            "max_run": 3600,
            "vpc": {"subnets": SUBNETS, "security_groups": SECURITY_GROUPS},
            "network_isolation": True,
            "environment": ENVIRONMENT,
            "entry_point": "run.sh",  # a shell entry point: the basic driver runs it with bash
        },
        lambda o, src: {
            "compute": _compute(o, "ml.g5.2xlarge"),
            "source_code": o.configs.SourceCode(source_dir=str(src), entry_script="run.sh"),
            "stopping_condition": _stopping(o, 3600),
            "networking": o.configs.Networking(
                subnets=SUBNETS, security_group_ids=SECURITY_GROUPS, enable_network_isolation=True
            ),
            "environment": ENVIRONMENT,
        },
    ),
    "requirements": Case(
        # the code has a requirements.txt: sagestack installs it, as the toolkit would; ModelTrainer
        # installs the file SourceCode names
        {"instance_type": "ml.g5.2xlarge", "max_run": 3600, "source_dir": "training_src_req"},
        lambda o, src: {
            "compute": _compute(o, "ml.g5.2xlarge"),
            "source_code": _source(o, src, requirements="requirements.txt"),
            "stopping_condition": _stopping(o, 3600),
        },
    ),
    # instance candidates: sagestack's one job with InstancePreferences, ModelTrainer's Compute with
    # instance_preferences (a count on each)
    "candidates": Case(
        {"instance_type": ["ml.g5.2xlarge", "ml.g5.4xlarge"], "max_run": 3600},
        lambda o, src: {
            "compute": o.configs.Compute(
                instance_preferences=[
                    o.shapes.InstancePreference(instance_type=t, instance_count=1)
                    for t in ("ml.g5.2xlarge", "ml.g5.4xlarge")
                ]
            ),
            "source_code": _source(o, src),
            "stopping_condition": _stopping(o, 3600),
        },
    ),
    # a CPU type without instance storage: the volume's KMS key is sent
    "hyperparameters": Case(
        {
            "instance_type": "ml.m5.xlarge",
            "max_run": 3600,
            "hyperparameters": SPEC_HYPERPARAMETERS,
            "entry_point": "pkg/main.py",  # an entry point in a subfolder of the code
        },
        lambda o, src: {
            "compute": _compute(o, "ml.m5.xlarge"),
            "source_code": o.configs.SourceCode(source_dir=str(src), entry_script="pkg/main.py"),
            "stopping_condition": _stopping(o, 3600),
            "hyperparameters": TRAINER_HYPERPARAMETERS,
        },
    ),
}


@dataclass(frozen=True)
class Pair:
    """One job as both sides render it."""

    key: str
    job: JobSpec
    digest: str
    ours: dict[str, Any]
    theirs: TrainerRendering
    deployment: Deployment
    source: Path  # the job's source folder on this machine
    preferred: bool  # ours is the one job with InstancePreferences over the candidates
    our_drivers: dict[str, bytes]
    our_code: dict[str, bytes]

    @property
    def their_name(self) -> str:
        return str(self.theirs.request["TrainingJobName"])

    def sides(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """What is compared, flattened to field paths: sagestack's, ModelTrainer's."""
        return {
            "request": (flatten(self.ours), flatten(self.theirs.request)),
            "sm_drivers": (
                flatten_files(self.our_drivers, "sm_drivers"),
                flatten_files(self.theirs.drivers, "sm_drivers"),
            ),
            "code": (
                flatten_files(self.our_code, "code", json_fields=False),
                flatten_files(self.theirs.channel_files["code"], "code", json_fields=False),
            ),
        }

    def their_uri(self, suffix: str) -> str:
        """ModelTrainer's default S3 layout: s3://<bucket>/<base job name>/<job name>/<suffix>."""
        return f"s3://{self.deployment.bucket}/{self.theirs.base_job_name}/{self.their_name}/{suffix}"


def _absent(check: Check[Pair]) -> Check[Pair]:
    """ModelTrainer sends nothing there, and sagestack's value passes `check`."""
    return lambda p, ours, theirs, path: theirs == MISSING and check(p, ours, theirs, path)


def _layout(p: Pair) -> S3Layout:
    return p.deployment.s3


def _launch_files(channel: str) -> Check[Pair]:
    def check(p: Pair, ours: Any, theirs: Any, path: str) -> bool:
        return bool(
            ours == f"{_layout(p).launch_files()}{channel}/" and theirs == p.their_uri(f"input/{channel}")
        )

    return check


def _tags(p: Pair, ours: Any, theirs: Any, path: str) -> bool:
    expected = {**dict(p.deployment.tags), "sagestack:job": p.key, "sagestack:spec-hash": p.digest}
    return {t["Key"]: t["Value"] for t in ours} == expected and len(ours) == len(expected)


def _efa(p: Pair) -> bool:
    return p.job.instance_count > 1 and catalog_instance(p.job.instance_type[0]).efa


def _compiled(p: Pair, ours: Any, theirs: Any, path: str) -> bool:
    """A bytecode cache of the installed package, whose source both sides carry alike."""
    source = re.fullmatch(r"sm_drivers/((?:.*/)?)__pycache__/(\w+)\.cpython-\d+\.pyc", path)
    return (
        ours == MISSING
        and source is not None
        and isinstance(theirs, bytes)
        and theirs.startswith(importlib.util.MAGIC_NUMBER)
        and f"{source[1]}{source[2]}.py" in p.our_drivers
    )


def _dotfile(p: Pair, ours: Any, theirs: Any, path: str) -> bool:
    """A dotfile of the source folder, which ModelTrainer uploads as it is."""
    relative = path.removeprefix("code/")
    return (
        ours == MISSING
        and Path(relative).name.startswith(".")
        and theirs == (p.source / relative).read_bytes()
    )


def _rule_names(p: Pair, ours: Any, theirs: Any, path: str) -> bool:
    assert p.job.debugger is not None
    expected = ["".join(w.title() for w in r.rule.split("_")) for r in p.job.debugger.rules]
    return [r["RuleConfigurationName"] for r in ours] == expected


# field path (fnmatch pattern) -> why sagestack's value differs from ModelTrainer's, and its check
DIFFERENCES: dict[str, Difference[Pair]] = {
    "TrainingJobName": Difference(
        "content-addressed: <project>-<env>-<job>-<hash8>-<candidate, or p for one job with "
        "InstancePreferences> (the same spec, code and image give the same name); ModelTrainer's is "
        "<base job name>-<timestamp>",
        lambda p, ours, theirs, path: (
            ours == f"{PROJECT}-{ENV}-{p.key}-{p.digest[:8]}-{'p' if p.preferred else 0}"
            and re.fullmatch(rf"{re.escape(p.key)}-\d{{14}}", theirs) is not None
        ),
    ),
    "InputDataConfig[code].DataSource.S3DataSource.S3Uri": Difference(
        "content-addressed: code/jobs/<hash of the launch files>/code/ in the artifact bucket (the hash "
        "is a stand-in until synth); ModelTrainer uploads to <base job name>/<job name>/input/code",
        _launch_files("code"),
    ),
    "InputDataConfig[sm_drivers].DataSource.S3DataSource.S3Uri": Difference(
        "content-addressed: code/jobs/<hash of the launch files>/sm_drivers/ (as the code channel)",
        _launch_files("sm_drivers"),
    ),
    "OutputDataConfig.S3OutputPath": Difference(
        "sagestack's bucket layout: output/<job>/; ModelTrainer's default is <bucket>/<base job name>",
        lambda p, ours, theirs, path: (
            ours == _layout(p).output(p.key)
            and theirs == f"s3://{p.deployment.bucket}/{p.theirs.base_job_name}"
        ),
    ),
    "CheckpointConfig.S3Uri": Difference(
        "content-addressed: checkpoints/<job>/<hash>/ (a resumed spot job finds the checkpoints of the "
        "same spec); ModelTrainer's default is <base job name>/<job name>/checkpoints",
        lambda p, ours, theirs, path: (
            ours == _layout(p).checkpoints(p.key, p.digest) and theirs == p.their_uri("checkpoints")
        ),
    ),
    "TensorBoardOutputConfig.S3OutputPath": Difference(
        "content-addressed: tensorboard/<job>/<hash>/; ModelTrainer's default is <bucket>/<base job name>",
        lambda p, ours, theirs, path: (
            ours == _layout(p).tensorboard(p.key, p.digest)
            and theirs == f"s3://{p.deployment.bucket}/{p.theirs.base_job_name}"
        ),
    ),
    "OutputDataConfig.KmsKeyId": Difference(
        "sagestack encrypts the job's output with the project's KMS key",
        _absent(lambda p, ours, theirs, path: ours == p.deployment.kms_key_id),
    ),
    "ResourceConfig.VolumeKmsKeyId": Difference(
        "sagestack encrypts the ML volume with the project's KMS key on types without instance storage",
        _absent(
            lambda p, ours, theirs, path: (
                ours == p.deployment.kms_key_id
                and not catalog_instance(p.job.instance_type[0]).has_instance_storage
            )
        ),
    ),
    "EnableInterContainerTrafficEncryption": Difference(
        "sagestack encrypts the traffic between hosts of a multi-host job (and says false for one host)",
        _absent(lambda p, ours, theirs, path: ours is (p.job.instance_count > 1)),
    ),
    "EnableNetworkIsolation": Difference(
        "sagestack sends the service's default (false) explicitly",
        _absent(lambda p, ours, theirs, path: ours is False and not p.job.network_isolation),
    ),
    "EnableManagedSpotTraining": Difference(
        "sagestack sends the service's default (false) explicitly",
        _absent(lambda p, ours, theirs, path: ours is False and not p.job.use_spot_instances),
    ),
    "RetryStrategy.MaximumRetryAttempts": Difference(
        "sagestack always sends the job's retry_attempts (default 1)",
        _absent(lambda p, ours, theirs, path: ours == p.job.retry_attempts),
    ),
    "Tags": Difference(
        "sagestack tags every job with the environment's tags, the job's key and its content hash",
        _absent(_tags),
    ),
    "StoppingCondition.MaxRuntimeInSeconds": Difference(
        "the defaults differ when the spec sets no max_run: sagestack's 24 hours, ModelTrainer's 1 hour",
        lambda p, ours, theirs, path: (
            "max_run" not in p.job.model_fields_set
            and ours == JobSpec.model_fields["max_run"].default
            and theirs == p.theirs.defaults["DEFAULT_MAX_RUNTIME_IN_SECONDS"]
        ),
    ),
    "Environment.SAGESTACK_CHECKPOINT_DIR": Difference(
        "where CheckpointConfig.LocalPath is, for training_src/train.py (nothing in the container says it)",
        _absent(
            lambda p, ours, theirs, path: p.job.checkpoint is not None and ours == p.job.checkpoint.local_path
        ),
    ),
    "HyperParameters.checkpoint_every_steps": Difference(
        "the spec's checkpoint interval, passed to the script as an argument",
        _absent(
            lambda p, ours, theirs, path: (
                p.job.checkpoint is not None and ours == str(p.job.checkpoint.every_steps)
            )
        ),
    ),
    "HyperParameters.checkpoint_keep_last": Difference(
        "the spec's checkpoint retention, passed to the script as an argument",
        _absent(
            lambda p, ours, theirs, path: (
                p.job.checkpoint is not None and ours == str(p.job.checkpoint.keep_last)
            )
        ),
    ),
    "Environment.FI_PROVIDER": Difference(
        "sagestack turns EFA on for multi-host jobs on EFA-capable types",
        _absent(lambda p, ours, theirs, path: ours == "efa" and _efa(p)),
    ),
    "Environment.FI_EFA_USE_DEVICE_RDMA": Difference(
        "and GPUDirect RDMA where the type has it",
        _absent(
            lambda p, ours, theirs, path: (
                ours == "1" and _efa(p) and catalog_instance(p.job.instance_type[0]).gpudirect_rdma
            )
        ),
    ),
    "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": Difference(
        "sagestack turns SageMaker's metric time series on for a job with metric definitions (as the SDK "
        "v2's estimator does)",
        _absent(lambda p, ours, theirs, path: ours is True and bool(p.job.metric_definitions)),
    ),
    "InputDataConfig[train].InputMode": Difference(
        "sagestack leaves a data channel's InputMode unset unless the spec sets one (the channel takes "
        "the job's TrainingInputMode); ModelTrainer writes File on every channel it makes from an S3 URI",
        lambda p, ours, theirs, path: (
            ours == MISSING and p.job.channels["train"].input_mode is None and theirs == "File"
        ),
    ),
    "DebugHookConfig": Difference(
        "ModelTrainer has no Debugger: sagestack's hook writes to debugger/<job>/",
        _absent(
            lambda p, ours, theirs, path: (
                p.job.debugger is not None and ours["S3OutputPath"] == _layout(p).debugger(p.key)
            )
        ),
    ),
    "DebugRuleConfigurations": Difference(
        "ModelTrainer has no Debugger: sagestack sends the spec's rules", _absent(_rule_names)
    ),
    "sm_drivers/*__pycache__/*.pyc": Difference(
        "ModelTrainer copies the installed package's bytecode caches with its sources; sagestack packs "
        "the sources (the caches exist only where Python has compiled the package)",
        _compiled,
        seen=False,
    ),
    "sm_drivers/sourcecode.json:source_dir": Difference(
        "ModelTrainer records the source folder's path on the machine it ran on; sagestack its path in "
        "the project (the drivers never read it)",
        lambda p, ours, theirs, path: ours == p.job.source_dir and theirs == str(p.source),
    ),
    "code/.*": Difference(
        "sagestack's code leaves out every dotfile (core/sourcedir); ModelTrainer only .env, .git, "
        ".DS_Store, .cache and .ipynb_checkpoints",
        _dotfile,
    ),
}


# ---------------------------------------------------------------------------------------------------
# Both sides, rendered once for the module.


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with every case as a job on a team's own image."""
    root = tmp_path_factory.mktemp("oracle")
    for folder in ("training_src", "training_src_req"):
        src = root / folder
        (src / "pkg" / "__pycache__").mkdir(parents=True)
        (src / "train.py").write_text("from pkg.util import X\nprint('train', X)\n")
        (src / "pkg" / "__init__.py").write_text("")
        (src / "pkg" / "util.py").write_text("X = 1\n")
        (src / "pkg" / "main.py").write_text("import sys\nprint(sys.argv)\n")
        (src / "run.sh").write_text('#!/bin/bash\nexec python train.py "$@"\n')
        (src / "pkg" / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"\0compiled")
        (src / ".settings.json").write_text('{"local": true}\n')  # a dotfile: only ModelTrainer uploads it
    (root / "training_src_req" / "requirements.txt").write_text("numpy\n")
    jobs = {key: {"image": "own", "launcher": "drivers", **case.job} for key, case in CASES.items()}
    spec = {"project": PROJECT, "region": "us-east-1", "images": {"own": {"uri": IMAGE}}, "jobs": jobs}
    (root / "config" / "envs").mkdir(parents=True)
    (root / "config" / "sagestack.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (root / "config" / "envs" / f"{ENV}.yaml").write_text("{}\n")
    return root


@pytest.fixture(scope="module")
def rendered(root: Path) -> tuple[EnvironmentRequests, Deployment]:
    plan = resolve_environment(load_project(root, ENV))
    return render_training(plan, root), stand_in_deployment(plan)


@pytest.fixture(scope="module")
def trainer(root: Path, rendered: tuple[EnvironmentRequests, Deployment]) -> dict[str, TrainerRendering]:
    """ModelTrainer's rendering of every case, with the deployment's role and bucket (one moto
    server, one import of the SDK, for the whole module)."""
    out, deployment = rendered
    with running_moto() as server:
        oracle = ModelTrainerOracle(server.url, role_arn=deployment.role_arn, bucket=deployment.bucket)
        return {
            key: oracle.render(
                base_job_name=key,
                training_image=IMAGE,
                **case.trainer(oracle, root / out.jobs[key].job.source_dir),
            )
            for key, case in CASES.items()
        }


@pytest.fixture(scope="module")
def pairs(
    root: Path,
    rendered: tuple[EnvironmentRequests, Deployment],
    trainer: dict[str, TrainerRendering],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Pair]:
    """Each job as both sides render it; sagestack's channels as its launch files lay them out (the
    folder the constructs upload: code/ unpacked from the source archive, sm_drivers/ packed)."""
    out, deployment = rendered
    pairs = {}
    for key in CASES:
        job = out.jobs[key]
        source = root / job.job.source_dir
        folder = tmp_path_factory.mktemp(f"launch-{key}")
        job_launch_files(job.job, pack_source_dir(source)).write(folder)
        pairs[key] = Pair(
            key=key,
            job=job.job,
            digest=job.digest,
            ours=job.preferred.request if job.preferred is not None else job.candidates[0].request,
            preferred=job.preferred is not None,
            theirs=trainer[key],
            deployment=deployment,
            source=source,
            our_drivers=folder_files(folder / "sm_drivers"),
            our_code=folder_files(folder / "code"),
        )
    return pairs


# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("side", ["request", "sm_drivers", "code"])
@pytest.mark.parametrize("key", CASES)
def test_sagestack_renders_what_model_trainer_renders_but_for_the_listed_differences(
    key: str, side: str, pairs: dict[str, Pair]
) -> None:
    """The request field by field, the sm_drivers channel's files (sm_train.sh, distributed.json,
    sourcecode.json, every driver, install_requirements.py) and the code channel's, file by file."""
    pair = pairs[key]
    ours, theirs = pair.sides()[side]
    assert ours and theirs
    problems, _ = compare(pair, DIFFERENCES, ours, theirs)
    assert not problems, "\n".join(problems)


def test_every_rendered_request_is_valid_against_botocore(pairs: dict[str, Pair]) -> None:
    for pair in pairs.values():
        validate_request("CreateTrainingJob", pair.ours)
        validate_request("CreateTrainingJob", pair.theirs.request)  # the oracle's own output, as a check


def test_every_listed_difference_is_shown_by_some_job(pairs: dict[str, Pair]) -> None:
    shown: set[str] = set()
    for pair in pairs.values():
        for ours, theirs in pair.sides().values():
            shown |= compare(pair, DIFFERENCES, ours, theirs)[1]
    assert {k for k, d in DIFFERENCES.items() if d.seen} - shown == set()


def test_the_comparison_fails_on_an_unlisted_difference_and_on_a_listed_one_that_is_not_its_reason(
    pairs: dict[str, Pair],
) -> None:
    pair = pairs["single"]
    ours, theirs = pair.sides()["request"]
    assert compare(pair, DIFFERENCES, ours, theirs)[0] == []
    changed = {
        **ours,
        "AlgorithmSpecification.ContainerArguments": ["-c", "sm_train.sh"],
        "RetryStrategy.MaximumRetryAttempts": 2,
        "OutputDataConfig.KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/other",
    }
    del changed["InputDataConfig[sm_drivers].InputMode"]
    problems = compare(pair, DIFFERENCES, changed, theirs)[0]
    assert [p.split(":")[0] for p in problems] == [
        "AlgorithmSpecification.ContainerArguments",
        "InputDataConfig[sm_drivers].InputMode",
        "OutputDataConfig.KmsKeyId",
        "RetryStrategy.MaximumRetryAttempts",
    ]
    assert (
        "(not listed)" in problems[0] and "is not what the entry 'OutputDataConfig.KmsKeyId'" in problems[2]
    )


def test_a_spec_writes_null_arrays_and_objects_as_their_json_text() -> None:
    """What the hyperparameters job relies on: a spec refuses the JSON value itself, with the reason."""
    with pytest.raises(ValueError, match="a hyperparameter value must be a string, number or boolean"):
        JobSpec.model_validate(
            {"image": "own", "instance_type": "ml.m5.xlarge", "hyperparameters": {"layers": [64, 32]}}
        )
