"""AWS's TensorFlow training toolkit is the judge of `sagestack local train` for TensorFlow jobs.

For each layout the job is trained with `sagestack local train`, then `sagemaker-tensorflow-training`
20.5.0 on `sagemaker-training` 4.8.3 (what the TensorFlow DLCs run) is run on a copy of the same
host layout, each host in a network namespace of its own (tests/support/tf_toolkit.py). Both runs
execute the same entry point: a probe that records its arguments and environment, then runs the
Keras script `sagestack init --framework tensorflow` writes (under MPI, tf_probe.py: Horovod cannot be
installed here, so that layout is judged on its launch, environment and files, and trains nothing).
Compared per host: the launched command, TF_CONFIG (local addresses read back as algo-N:port), every
SM_* variable and the others the toolkit exports, the arguments, the working directory, the world
and the final metric, the files in model/ and output/.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.train import LocalTrainResult, run_local_training
from tests.conformance.probed import compared_env, files, probes
from tests.conftest import Project
from tests.support import tf_toolkit

pytestmark = [pytest.mark.conformance, pytest.mark.train]

if (why := tf_toolkit.available()) is not None:
    pytest.skip(why, allow_module_level=True)
pytest.importorskip("tensorflow")

HERE = Path(__file__).parent
THREADS = 1
HYPERPARAMETERS = "{epochs: 2, lr: 0.01, batch_size: 64}"
# Variables outside SM_* that the toolkit, the TensorFlow container or mpirun give the script.
EXPORTED = (
    "CURRENT_HOST",
    "SAGEMAKER_JOB_NAME",
    "SAGEMAKER_REGION",
    "S3_REGION",
    "S3_USE_HTTPS",
    "TF_CPP_MIN_LOG_LEVEL",
    "TRAINING_JOB_NAME",
    "SAGESTACK_CHECKPOINT_DIR",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
    "NCCL_DEBUG",
    "NCCL_MIN_NRINGS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
)
TRAINING_LINE = re.compile(r"training: strategy=(\S+) .*workers=(\d+) replicas=(\d+) global_batch=(\d+)")
VAL_LINE = re.compile(r"val_accuracy=([0-9.]+)")


@dataclass(frozen=True)
class Layout:
    hosts: int
    procs: int
    job: str  # extra YAML for the job
    instance_type: str = "ml.m5.xlarge"
    probe: str = "probe.py"  # records, then runs train.py (the Keras script)


LAYOUTS = {
    "1x1": Layout(1, 1, ""),
    "2x1-multi_worker_mirrored_strategy": Layout(2, 1, "distribution: {multi_worker_mirrored_strategy: {}}"),
    "2x1-parameter_server": Layout(2, 1, "distribution: {parameter_server: {}}"),
    "1x2-horovod": Layout(
        1,
        2,
        "distribution: {mpi: {processes_per_host: 2}}",
        instance_type="ml.g5.12xlarge",
        probe="tf_probe.py",
    ),
}


def tensorflow_project(root: Path, layout: Layout) -> Project:
    project = Project(root)
    code = project.root / "training_src"
    keras = resources.files("sagestack.templates").joinpath("train_keras.py").read_text()
    (code / "train.py").write_text(keras)
    shutil.copyfile(HERE / layout.probe, code / layout.probe)
    job = textwrap.indent(layout.job, "    ")
    project.spec(
        textwrap.dedent(
            f"""\
            project: tfconformance
            region: us-east-1
            images:
              tf: {{dlc: {{framework: tensorflow, version: "2.21", py_version: py312}}}}
            jobs:
              job:
                image: tf
                entry_point: {layout.probe}
                instance_type: {layout.instance_type}
                instance_count: {layout.hosts}
                hyperparameters: {HYPERPARAMETERS}
            """
        )
        + job
        + "\n"
    )
    return project


@dataclass
class Compared:
    local: LocalTrainResult
    toolkit: list[tf_toolkit.TfToolkitHost]
    request: dict


def _run(name: str, tmp_path: Path) -> Compared:
    layout = LAYOUTS[name]
    project = tensorflow_project(tmp_path / "project", layout)
    local = run_local_training(
        project.load(),
        "job",
        LocalTrainOptions(
            hosts=layout.hosts,
            procs=layout.procs,
            workdir=tmp_path / "local",
            threads=THREADS,
            tracking=False,
        ),
    )
    assert local.succeeded, (local.failure, [p.read_text()[-3000:] for p in local.log_files])
    hosts = tf_toolkit.run_tf_toolkit(local.workdir, tmp_path / "toolkit", threads=THREADS)
    for host in hosts:
        assert host.returncode == 0, host.log[-5000:]
    request = json.loads((local.workdir / "request.json").read_text())
    return Compared(local, hosts, request)


@pytest.fixture(scope="module")
def runs() -> dict[str, Compared]:
    return {}


@pytest.fixture(params=list(LAYOUTS))
def compared(request: pytest.FixtureRequest, runs: dict[str, Compared], tmp_path_factory) -> Compared:
    name = request.param
    if name not in runs:
        runs[name] = _run(name, tmp_path_factory.mktemp(name))
    return runs[name]


def _compared_env(
    probe: dict, base: Path, request: dict, tarball: Path | None, addresses: dict[str, str]
) -> dict[str, str]:
    out = compared_env(probe, base, request, tarball, EXPORTED)
    env = probe["env"]
    if "TF_CONFIG" in env:  # the local run's free loopback ports, read back as the container's addresses
        local = {v: k for k, v in addresses.items()}
        config = json.loads(env["TF_CONFIG"])
        config["cluster"] = {
            job: [local.get(a, a) for a in tasks] for job, tasks in config["cluster"].items()
        }
        out["TF_CONFIG"] = json.dumps(config, sort_keys=True)
    return out


def test_the_same_runner_and_command_on_every_host(compared: Compared) -> None:
    for launch, host in zip(compared.local.launches, compared.toolkit, strict=True):
        theirs = host.command()
        if launch.runner == "mpi":
            ours = launch.container_command(python=theirs[theirs.index("-m") - 1])
            assert theirs[:5] == ours[:5]  # the toolkit adds Open MPI's tuning flags after these
            assert theirs[theirs.index("-m") - 1 :] == ours[ours.index("-m") - 1 :]
        else:
            assert theirs == launch.container_command(python=theirs[0]), host.log[-3000:]


def test_the_script_sees_the_same_environment_tf_config_and_arguments(compared: Compared) -> None:
    tarball = compared.toolkit[0].base.parent.parent / "sourcedir.tar.gz"
    for layout, host in zip(compared.local.hosts, compared.toolkit, strict=True):
        ours, theirs = probes(layout.base), probes(host.base)
        assert ours.keys() == theirs.keys() and ours, (ours.keys(), theirs.keys())
        for rank in ours:
            mine = _compared_env(ours[rank], layout.base, compared.request, None, compared.local.addresses)
            judge = _compared_env(theirs[rank], host.base, compared.request, tarball, {})
            assert mine.keys() == judge.keys(), sorted(set(mine) ^ set(judge))
            differing = {k: (mine[k], judge[k]) for k in mine if mine[k] != judge[k]}
            assert not differing, differing
            # sagemaker-training 4.8.3's Environment: 36 properties (5.x adds topology)
            assert len(json.loads(judge["SM_TRAINING_ENV"])) == 36
            assert judge["SM_FRAMEWORK_MODULE"] == "sagemaker_tensorflow_container.training:main"


def test_the_same_world_result_andfiles(compared: Compared) -> None:
    local_logs = [p.read_text() for p in compared.local.log_files]
    their_logs = [h.log for h in compared.toolkit]
    if compared.local.launches[0].runner != "mpi":
        ours = sorted(m.groups() for log in local_logs for m in TRAINING_LINE.finditer(log))
        theirs = sorted(m.groups() for log in their_logs for m in TRAINING_LINE.finditer(log))
        assert ours and ours == theirs
        assert VAL_LINE.findall("\n".join(local_logs))[-1] == VAL_LINE.findall("\n".join(their_logs))[-1]
    for layout, host in zip(compared.local.hosts, compared.toolkit, strict=True):
        assert files(layout.model) == files(host.base / "model"), layout.name
        assert files(layout.output) == files(host.base / "output"), layout.name
        assert (host.base / "output" / "success").exists() and layout.success.exists()


def test_multi_worker_mirrored_strategy_is_one_cluster_and_the_chief_keeps_the_model(runs, tmp_path_factory):
    name = "2x1-multi_worker_mirrored_strategy"
    run = runs.get(name) or runs.setdefault(name, _run(name, tmp_path_factory.mktemp(name)))
    for host in run.toolkit:
        assert "strategy=multi_worker_mirrored" in host.log and "workers=2 replicas=2" in host.log
    assert (run.local.hosts[0].model / "1" / "saved_model.pb").exists()
    assert not (run.local.hosts[1].model / "1").exists()


def test_parameter_servers_run_beside_each_worker_and_end_with_it(runs, tmp_path_factory):
    name = "2x1-parameter_server"
    run = runs.get(name) or runs.setdefault(name, _run(name, tmp_path_factory.mktemp(name)))
    assert [launch.runner for launch in run.local.launches] == ["ps", "ps"]
    ps_logs = sorted(p.name for p in (run.local.workdir / "logs").glob("*-ps.log"))
    assert ps_logs == ["algo-1-ps.log", "algo-2-ps.log"]
    for i, log in enumerate(ps_logs):
        assert f"parameter server {i} serving" in (run.local.workdir / "logs" / log).read_text()
    assert all(h.leftover == [] for h in run.toolkit)
