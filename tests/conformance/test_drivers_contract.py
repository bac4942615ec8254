"""The drivers contract (`launcher: drivers`): what a local run did agrees with the cloud request.

Under the drivers contract AWS's own sm_train.sh and drivers (the pinned sagemaker-train's, shipped
in the request's sm_drivers channel) are the implementation: `sagestack local train` runs them
unchanged on each simulated host (local/training/drivers_contract.py). So the judge here is the CreateTrainingJob
request sagestack renders for the cloud for the same job (project/requests.render_training, valid
against botocore) and its sm_drivers channel (training/launcher.pack_job_drivers): per layout, the
world size is InstanceCount x processes per host (the simulated accelerators, or the request's
process_count_per_node under MPI), the command each host's driver logged ("Executing command: …")
is the one the request's distribution, entry script and hyperparameters (in order) imply, the
entry point (drivers_probe.py, as train.py) sees the request's hyperparameters as arguments and in
SM_HPS, the request's channels in SM_CHANNELS, its host in SM_CURRENT_HOST, the simulated
accelerators in SM_NUM_GPUS; each host holds the request's channels (sm_drivers byte for byte, a
sharded channel of the job's own split between the hosts); the script leaves its files in its own
host's model/ and output/; a failing rank fails the job with output/failure.

One run per layout (module-scoped), checked many ways.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sagestack.core.catalog import validate_request
from sagestack.core.drivers import CONTAINER_CODE, DISTRIBUTED_JSON, SOURCE_CODE_JSON
from sagestack.core.sourcedir import pack_source_dir
from sagestack.local.drivers.sandbox import Network
from sagestack.local.errors import LocalRunError
from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.train import LocalTrainResult, run_local_training
from sagestack.project.environment import resolve_environment
from sagestack.project.requests import render_training
from sagestack.training.launcher import pack_job_drivers
from tests.conformance.probed import files, probes
from tests.conftest import Project

pytestmark = [pytest.mark.conformance, pytest.mark.train]

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1"  # a team's own image, no toolkit
# each kind of value a hyperparameter takes (safe_serialize writes strings unquoted)
HYPERPARAMETERS = "{epochs: 2, arch: resnet, lr: 0.001, amp: true, seed: -1}"
TORCHRUN = "distribution: {torch_distributed: {}}"
EXECUTING = re.compile(r"^Executing command: (.*)$", re.MULTILINE)
PYTHON = r"\S*/python3?"
SHARDS = 4  # the files of a layout's train channel  # the image's python (here: this environment's, first on the host's PATH)


@dataclass(frozen=True)
class Layout:
    hosts: int
    procs: int  # simulated accelerators per host (nvidia-smi's GPUs)
    instance_type: str
    driver: str  # the driver the request's sm_train.sh runs: basic, torchrun, mpi
    job: str = ""  # extra YAML for the job
    hyperparameters: str = HYPERPARAMETERS


LAYOUTS = {
    "1x1-basic": Layout(1, 1, "ml.g5.2xlarge", "basic"),
    "1x2-torchrun": Layout(1, 2, "ml.g5.12xlarge", "torchrun", TORCHRUN),
    # with a channel of the job's own, sharded between the hosts
    "2x1-torchrun": Layout(
        2,
        1,
        "ml.g5.2xlarge",
        "torchrun",
        f"{TORCHRUN}\nchannels:\n"
        "  train: {key_prefix: data/train, local_path: data/train, distribution: ShardedByS3Key}",
    ),
    "1x2-mpi": Layout(1, 2, "ml.g5.12xlarge", "mpi", "distribution: {mpi: {processes_per_host: 2}}"),
}
# rank 1 of a one-host torchrun world stops with an error (on several hosts the other hosts' ranks
# would wait for it until gloo's timeout: a local run ends when every host has ended)
FAILING = Layout(1, 2, "ml.g5.12xlarge", "torchrun", TORCHRUN, "{epochs: 2, fail_rank: 1}")
DRIVER_SCRIPTS = {
    "basic": "basic_script_driver.py",
    "torchrun": "torchrun_driver.py",
    "mpi": "mpi_driver.py",
}


@dataclass
class Run:
    layout: Layout
    request: dict[str, Any]  # the cloud request sagestack renders for the job
    drivers: dict[str, bytes]  # its sm_drivers channel's files
    source_files: tuple[str, ...]  # its code channel's files
    local: LocalTrainResult

    def expected_world(self) -> int:
        return self.request["ResourceConfig"]["InstanceCount"] * self.per_host()

    def per_host(self) -> int:
        """What the driver starts per host: one script, or the distribution's count, or one
        process per accelerator (common/utils.get_process_count's fallback)."""
        if self.layout.driver == "basic":
            return 1
        distributed = json.loads(self.drivers[DISTRIBUTED_JSON])
        return int(distributed.get("process_count_per_node") or self.layout.procs)

    def entry_script(self) -> str:
        return str(json.loads(self.drivers[SOURCE_CODE_JSON])["entry_script"])

    def arguments(self) -> list[str]:
        """The request's hyperparameters as the script's arguments, in the request's order."""
        return [x for key, value in self.request["HyperParameters"].items() for x in (f"--{key}", value)]

    def host_logs(self) -> list[str]:
        return [p.read_text(errors="replace") for p in self.local.log_files]


def write_project(root: Path, layout: Layout) -> Project:
    project = Project(root)
    shutil.copyfile(Path(__file__).with_name("drivers_probe.py"), root / "training_src" / "train.py")
    if "data/train" in layout.job:
        for part in range(SHARDS):
            project.write(f"data/train/part-{part}.csv", f"{part}\n")
    extra = "".join(f"    {line}\n" for line in layout.job.splitlines())
    project.spec(
        textwrap.dedent(
            f"""\
            project: conformance
            region: us-east-1
            images:
              own: {{uri: {IMAGE}}}
            jobs:
              job:
                image: own
                launcher: drivers
                instance_type: {layout.instance_type}
                instance_count: {layout.hosts}
                hyperparameters: {layout.hyperparameters}
            """
        )
        + extra
    )
    return project.env("dev")


def run_layout(layout: Layout, tmp: Path) -> Run:
    project = write_project(tmp / "project", layout)
    loaded = project.load("dev")
    rendered = render_training(resolve_environment(loaded), project.root).jobs["job"]
    job = loaded.spec.jobs["job"]
    source = pack_source_dir(project.root / job.source_dir)
    local = run_local_training(
        loaded,
        "job",
        LocalTrainOptions(hosts=layout.hosts, procs=layout.procs, workdir=tmp / "local", threads=1),
    )
    return Run(
        layout,
        rendered.candidates[0].request,
        dict(pack_job_drivers(job, source.files).files),
        source.files,
        local,
    )


@pytest.fixture(scope="module")
def sandbox() -> None:
    """The runs need the sandbox's namespaces (as root, or unprivileged user namespaces)."""
    try:
        Network.start().close()
    except LocalRunError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module", params=list(LAYOUTS))
def run(request: pytest.FixtureRequest, sandbox: None, tmp_path_factory: pytest.TempPathFactory) -> Run:
    done = run_layout(LAYOUTS[request.param], tmp_path_factory.mktemp(request.param))
    assert done.local.succeeded, (done.local.failure, [log[-3000:] for log in done.host_logs()])
    return done


@pytest.fixture(scope="module")
def failed(sandbox: None, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_layout(FAILING, tmp_path_factory.mktemp("1x2-torchrun-rank-fails"))


def test_the_cloud_request_is_valid_and_is_what_ran(run: Run) -> None:
    validate_request("CreateTrainingJob", run.request)
    ran = json.loads((run.local.workdir / "request.json").read_text())
    same = ("ContainerEntrypoint", "ContainerArguments")
    assert {k: ran["AlgorithmSpecification"][k] for k in same} == {
        k: run.request["AlgorithmSpecification"][k] for k in same
    }
    assert list(ran["HyperParameters"].items()) == list(run.request["HyperParameters"].items())
    assert [c["ChannelName"] for c in ran["InputDataConfig"]] == [
        c["ChannelName"] for c in run.request["InputDataConfig"]
    ]
    assert ran["ResourceConfig"]["InstanceType"] == run.request["ResourceConfig"]["InstanceType"]
    assert run.request["ResourceConfig"]["InstanceCount"] == len(run.local.hosts) == run.layout.hosts
    # each host got the cloud request's sm_drivers channel byte for byte, and its code (what
    # Python compiled while they ran aside)
    assert DRIVER_SCRIPTS[run.layout.driver].encode() in run.drivers["sm_train.sh"]
    for host in run.local.hosts:
        assert channel_files(host.data / "sm_drivers") == run.drivers, host.name
        assert set(channel_files(host.data / "code")) == set(run.source_files), host.name
    check_own_channels(run)


def check_own_channels(run: Run) -> None:
    """The job's own channels on each host: the same files, or each host its share when sharded."""
    own = [c for c in run.request["InputDataConfig"] if c["ChannelName"] not in ("code", "sm_drivers")]
    assert bool(own) == ("channels:" in run.layout.job)
    for channel in own:
        name = channel["ChannelName"]
        shares = [set(channel_files(host.data / name)) for host in run.local.hosts]
        assert set().union(*shares) == {f"part-{i}.csv" for i in range(SHARDS)}, shares
        if channel["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "ShardedByS3Key":
            assert all(shares) and sum(map(len, shares)) == SHARDS, shares  # each host its own share
        else:
            assert all(share == shares[0] for share in shares), shares


def channel_files(channel: Path) -> dict[str, bytes]:
    return {
        p.relative_to(channel).as_posix(): p.read_bytes()
        for p in channel.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def expected_command(run: Run, host_index: int) -> tuple[str, str]:
    """The start and the end of the command a host's driver runs, as a regular expression each."""
    entry, args = run.entry_script(), " ".join(run.arguments())
    if run.layout.driver == "basic":
        return PYTHON, re.escape(f" {entry} {args}")
    if run.layout.driver == "torchrun":
        hosts = run.request["ResourceConfig"]["InstanceCount"]
        head = f"torchrun --nnodes={hosts} --nproc_per_node={run.per_host()}"
        if hosts > 1:
            head += f" --master_addr=algo-1 --master_port=7777 --node_rank={host_index}"
        return re.escape(f"{head} {entry} {args}"), ""
    per_host = run.per_host()
    return (
        re.escape(f"mpirun --host algo-1:{per_host} -np {per_host} "),
        f" {PYTHON} -m mpi4py {re.escape(f'{entry} {args}')}",
    )


def test_each_driver_ran_the_command_the_request_implies(run: Run) -> None:
    for index, log in enumerate(run.host_logs()):
        executed = EXECUTING.findall(log)
        assert len(executed) == 1, log[-3000:]
        head, tail = expected_command(run, index)
        assert re.match(head, executed[0]) and re.search(f"{tail}$", executed[0]), (executed[0], head, tail)
        # the driver sm_train.sh ran is the one the request's channel names
        assert f"distributed_drivers/{DRIVER_SCRIPTS[run.layout.driver]}" in log


def rank_records(run: Run) -> dict[str, list[dict[str, Any]]]:
    """Each host's probe records (every rank the host ran)."""
    return {host.name: list(probes(host.base).values()) for host in run.local.hosts}


def test_the_world_is_instance_count_times_processes_per_host(run: Run) -> None:
    world = run.expected_world()
    records = rank_records(run)
    ranks = sorted(r["rank"] for rs in records.values() for r in rs)
    assert ranks == list(range(world)), records.keys()
    for index, (host, rs) in enumerate(records.items()):
        assert len(rs) == run.per_host(), host
        for r in rs:
            env = r["env"]
            assert r["world"] == world
            if run.layout.driver == "torchrun":
                assert env["WORLD_SIZE"] == str(world) and env["GROUP_RANK"] == str(index)
                assert env["LOCAL_WORLD_SIZE"] == str(run.per_host())
                assert int(env["RANK"]) == index * run.per_host() + int(env["LOCAL_RANK"])
                # the ranks formed one gloo world: each added rank+1
                assert r["met"] == {"size": world, "rank_sum": world * (world + 1) // 2}
                if run.layout.hosts > 1:
                    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("algo-1", "7777")
            elif run.layout.driver == "mpi":
                assert env["OMPI_COMM_WORLD_SIZE"] == str(world)
                assert env["OMPI_COMM_WORLD_LOCAL_SIZE"] == str(run.per_host())
                assert env["OMPI_COMM_WORLD_LOCAL_RANK"] == env["OMPI_COMM_WORLD_RANK"]  # one host
                assert "RANK" not in env and "WORLD_SIZE" not in env
            else:
                assert not {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK"} & env.keys()


def decoded(value: str) -> Any:
    """A hyperparameter's value as environment.py reads it back (JSON, else the string)."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def test_the_script_sees_the_request_in_its_arguments_and_sm_environment(run: Run) -> None:
    request = run.request
    hps = {k: decoded(v) for k, v in request["HyperParameters"].items()}
    channels = [c["ChannelName"] for c in request["InputDataConfig"]]
    hosts = [f"algo-{i + 1}" for i in range(request["ResourceConfig"]["InstanceCount"])]
    for index, (host, rs) in enumerate(rank_records(run).items()):
        for r in rs:
            env = r["env"]
            assert r["argv"] == run.arguments()
            assert r["cwd"] == CONTAINER_CODE
            assert json.loads(env["SM_HPS"]) == hps
            assert list(json.loads(env["SM_HPS"])) == list(request["HyperParameters"])
            for key, value in hps.items():
                assert decoded(env[f"SM_HP_{key.upper()}"]) == value
            assert json.loads(env["SM_CHANNELS"]) == channels
            assert {
                name: (c["TrainingInputMode"], c["S3DistributionType"])
                for name, c in json.loads(env["SM_INPUT_DATA_CONFIG"]).items()
            } == {
                c["ChannelName"]: (
                    c.get("InputMode", request["AlgorithmSpecification"]["TrainingInputMode"]),
                    c["DataSource"]["S3DataSource"]["S3DataDistributionType"],
                )
                for c in request["InputDataConfig"]
            }
            for channel in channels:
                assert env[f"SM_CHANNEL_{channel.upper()}"] == f"/opt/ml/input/data/{channel}"
            assert json.loads(env["SM_HOSTS"]) == hosts and env["SM_HOST_COUNT"] == str(len(hosts))
            assert (env["SM_CURRENT_HOST"], env["SM_CURRENT_HOST_RANK"]) == (host, str(index))
            assert env["SM_CURRENT_INSTANCE_TYPE"] == request["ResourceConfig"]["InstanceType"]
            assert (env["SM_MODEL_DIR"], env["SM_OUTPUT_DATA_DIR"]) == (
                "/opt/ml/model",
                "/opt/ml/output/data",
            )
            assert env["SM_NUM_GPUS"] == str(run.layout.procs)
            assert env["SM_ENTRY_SCRIPT"] == run.entry_script()
            distributed = json.loads(run.drivers[DISTRIBUTED_JSON])
            assert json.loads(env.get("SM_DISTRIBUTED_CONFIG", "{}")) == distributed
            assert env["TRAINING_JOB_NAME"] == json.loads(env["SM_TRAINING_ENV"])["job_name"]


def test_files_land_in_each_hosts_model_and_output(run: Run) -> None:
    for index, (host, layout) in enumerate(zip(rank_records(run), run.local.hosts, strict=True)):
        ranks = sorted(r["rank"] for r in rank_records(run)[host])
        assert files(layout.output) == {"success", *(f"data/probe-{rank}.json" for rank in ranks)}, host
        # the world's rank 0 (on algo-1) writes the model; the other hosts' model/ stays empty
        assert files(layout.model) == ({"model.json"} if index == 0 else set()), host
    model = json.loads((run.local.hosts[0].model / "model.json").read_text())
    assert model == {"world": run.expected_world(), "argv": run.arguments()}
    assert files(run.local.model_dir) == {"model.json"}  # algo-1's model, kept in the run folder


def test_a_failing_rank_fails_the_job_with_output_failure(failed: Run) -> None:
    local, (host,) = failed.local, failed.local.hosts
    assert not local.succeeded and local.exit_code != 0
    assert not host.success.exists()
    # AWS's driver wrote output/failure: the launched command failed, with the command
    failure = host.failure.read_text()
    assert "CalledProcessError" in failure and "'--fail_rank', '1'" in failure, failure
    assert local.failure is not None and "CalledProcessError" in local.failure
    log = failed.host_logs()[0]
    assert "probe: rank 1 fails as asked" in log
    head, _ = expected_command(failed, 0)
    assert re.match(head, EXECUTING.findall(log)[0])
    # rank 1 recorded itself before it failed; rank 0 was ended, its model never written
    assert "probe-1.json" in {p.name for p in (host.output / "data").iterdir()}
    assert not (host.model / "model.json").exists()
