"""Run AWS's TensorFlow training toolkit on a copy of the host layout `sagestack local train` made.

Each simulated host runs the `train` console script of `sagemaker-training` 4.8.3 from .venv-tf
(`make tf-toolkit`) with SAGEMAKER_TRAINING_MODULE=sagemaker_tensorflow_container.training:main
(sagemaker-tensorflow-training 20.5.0), exactly what the TensorFlow DLC runs, in the private mount
namespace of tests/support/toolkit.py (the host's folder at the real /opt/ml, the same shims) and,
unlike the PyTorch tier, in a network namespace of its own (root only): TensorFlow's multi-host
strategies bind fixed ports on every host (MultiWorkerMirroredStrategy's workers serve on
algo-N:8890; with parameter servers the toolkit itself serves `tf.distribute.Server` on algo-N:2223
and the master/worker tasks are algo-N:2222), so the hosts cannot share one loopback.
The network: a "switch" namespace holds a bridge; each host's namespace has one veth onto it with
address 10.231.0.N, and /etc/hosts says algo-N is 10.231.0.N. Every namespace is created under a
name unique to the run and deleted, with every process in it, when the run ends, failed or not;
nothing is created in the machine's own network namespace (the veths are made inside the switch).
What SageMaker's platform does and the machine lacks is stood in for, and nothing else:
- everything tests/support/toolkit.py stands in for (the source tarball on disk, nvidia-smi,
  mpirun and sshd for MPI);
- S3, which the toolkit calls itself: when the `model_dir` hyperparameter is an s3:// URI,
  s3_utils.configure asks S3 for the bucket's location (GetBucketLocation) to set S3_REGION. A moto
  server in the switch namespace (10.231.0.254) holds that bucket, created in the job's region (or
  `bucket_region`); the hosts reach it through AWS_ENDPOINT_URL_S3 with dummy credentials, where
  SageMaker gives the container the job role's credentials and the real S3 endpoint;
- a container's lifetime: when a host's toolkit exits, SageMaker stops its container, and with it
  whatever the toolkit left running. Here every process left in the host's namespace is listed
  (TfToolkitHost.leftover) and killed. (With parameter servers the toolkit serves the ps task from
  its own process and forks a multiprocessing.Process to `server.join()`; with TF 2.21 that fork
  dies of SIGSEGV at once, so in practice nothing is left; the kill is the container's guarantee.)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.toolkit import NAMESPACE_SCRIPT, ToolkitHost, copy_host, local_probe_env, write_shims

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-tf"
TRAIN = VENV / "bin" / "train"
TRAINING_MODULE = "sagemaker_tensorflow_container.training:main"
SUBNET = "10.231.0"
SWITCH_ADDRESS = f"{SUBNET}.254"
S3_PORT = 5000


@dataclass
class TfToolkitHost(ToolkitHost):
    address: str = ""
    # `pid command` of every process still in the host's namespace when its toolkit exited (killed then)
    leftover: list[str] = field(default_factory=list)


def available() -> str | None:
    """Why the TensorFlow toolkit tier cannot run here, or None."""
    if not TRAIN.exists():
        return "AWS's TensorFlow training toolkit is not installed in .venv-tf (make tf-toolkit installs it)"
    if os.geteuid() != 0:
        return "each simulated host runs in network and mount namespaces of its own, which needs root"
    for tool in ("unshare", "ip", "curl"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


class Network:
    """A switch namespace with a bridge, and one namespace per host wired to it by a veth pair."""

    def __init__(self, hosts: list[str]) -> None:
        self.run = secrets.token_hex(3)
        self.switch = f"sgtf-{self.run}-sw"
        self.namespaces = {h: f"sgtf-{self.run}-{i + 1}" for i, h in enumerate(hosts)}
        self.addresses = {h: f"{SUBNET}.{i + 1}" for i, h in enumerate(hosts)}
        self.created: list[str] = []

    def __enter__(self) -> Network:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        self._add(self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "addr", "add", f"{SWITCH_ADDRESS}/24", "dev", "br0")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, (host, ns) in enumerate(self.namespaces.items()):
            self._add(ns)
            port = f"port{i + 1}"
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", port, "master", "br0")
            _ip("-n", self.switch, "link", "set", port, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[host]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def _add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.created.append(ns)

    def hosts_file(self) -> str:
        return "".join(f"{a} {h}\n" for h, a in self.addresses.items())

    def exec(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def processes(self, ns: str) -> list[str]:
        """`pid command` of every process in the namespace."""
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False)
        listed = []
        for pid in out.stdout.split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            listed.append(f"{pid} {cmd}")
        return listed

    def kill(self, ns: str) -> None:
        """Kill every process in the namespace until none is left (a dying parent may fork)."""
        for _ in range(50):
            pids = subprocess.run(
                ["ip", "netns", "pids", ns], capture_output=True, text=True, check=False
            ).stdout.split()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.1)
        raise RuntimeError(f"processes outlive SIGKILL in network namespace {ns}")

    def close(self) -> None:
        for ns in reversed(self.created):
            self.kill(ns)
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        self.created.clear()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


S3_SERVER = r"""
import sys
import boto3
from moto.server import ThreadedMotoServer
address, port, region, buckets = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
server = ThreadedMotoServer(ip_address=address, port=port, verbose=False)
server.start()
s3 = boto3.client("s3", endpoint_url=f"http://{address}:{port}", region_name=region,
                  aws_access_key_id="testing", aws_secret_access_key="testing")
for bucket in buckets:
    extra = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=bucket, **extra)
print("ready", flush=True)
sys.stdin.read()
"""


def _start_s3(network: Network, region: str, buckets: list[str], dest: Path) -> subprocess.Popen[str]:
    """The moto server standing in for S3, in the switch namespace, holding `buckets`."""
    command = [sys.executable, "-c", S3_SERVER, SWITCH_ADDRESS, str(S3_PORT), region, *buckets]
    with (dest / "s3-server.log").open("w") as log:
        proc = subprocess.Popen(
            [*network.exec(network.switch), *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError("the S3 stand-in did not start: " + (dest / "s3-server.log").read_text()[-2000:])
    return proc


def _s3_buckets(bases: list[Path]) -> list[str]:
    buckets = set()
    for base in bases:
        hps = json.loads((base / "input" / "config" / "hyperparameters.json").read_text())
        model_dir = json.loads(hps["model_dir"]) if "model_dir" in hps else None
        if isinstance(model_dir, str) and model_dir.startswith("s3://"):
            buckets.add(model_dir[len("s3://") :].split("/")[0])
    return sorted(buckets)


def _outside_venvs(path: str) -> str:
    """PATH without any virtualenv's bin (the container's PATH has only its own Python)."""
    return os.pathsep.join(p for p in path.split(os.pathsep) if not (Path(p).parent / "pyvenv.cfg").exists())


def run_tf_toolkit(
    local_workdir: Path,
    dest: Path,
    *,
    threads: int,
    timeout: float = 300,
    bucket_region: str | None = None,
) -> list[TfToolkitHost]:
    """Copy each simulated host of a finished `sagestack local train` (its config and channels; code,
    model and output fresh), run the TensorFlow toolkit on every host at once, each in its own
    network namespace, and return what each did."""
    request = json.loads((local_workdir / "request.json").read_text())
    dest.mkdir(parents=True)
    tarball = dest / "sourcedir.tar.gz"
    shutil.copyfile(local_workdir / "sourcedir.tar.gz", tarball)
    checkpoints = dest / "checkpoints"
    checkpoints.mkdir()
    hosts = sorted(p.name for p in (local_workdir / "hosts").iterdir())
    local_env = local_probe_env(local_workdir, hosts[0])
    shims = write_shims(
        dest / "shims",
        gpus=int(local_env.get("SM_NUM_GPUS", "0")),
        neurons=int(local_env.get("SM_NUM_NEURONS", "0")),
        python=str(VENV / "bin" / "python"),
    )
    script = dest / "namespace.sh"
    script.write_text(textwrap.dedent(NAMESPACE_SCRIPT))
    bases = [
        copy_host(local_workdir / "hosts" / h, dest / "hosts" / h, request, tarball, checkpoints)
        for h in hosts
    ]
    hyperparameters = request["HyperParameters"]
    region = local_env.get("AWS_REGION") or json.loads(hyperparameters.get("sagemaker_region", '"us-east-1"'))
    arn = f"arn:aws:sagemaker:{region}:123456789012:training-job/{request['TrainingJobName'].lower()}"
    with Network(hosts) as network:
        hosts_file = dest / "etc-hosts"
        hosts_file.write_text(Path("/etc/hosts").read_text() + "\n" + network.hosts_file())
        buckets = _s3_buckets(bases)
        if buckets:
            _start_s3(network, bucket_region or region, buckets, dest)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_", "AWS_"))},
            **request.get("Environment", {}),
            "TRAINING_JOB_NAME": request["TrainingJobName"],
            "TRAINING_JOB_ARN": local_env.get("TRAINING_JOB_ARN", arn),
            "AWS_REGION": region,
            "SAGEMAKER_TRAINING_MODULE": TRAINING_MODULE,
            "TOOLKIT_TRAIN": str(TRAIN),
            "PATH": os.pathsep.join([str(shims), str(TRAIN.parent), _outside_venvs(os.environ["PATH"])]),
            "OMP_NUM_THREADS": str(threads),
            "PYTHONUNBUFFERED": "1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        if buckets:
            env |= {
                "AWS_ENDPOINT_URL_S3": f"http://{SWITCH_ADDRESS}:{S3_PORT}",
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
            }
        for stale in (
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
            "PYTHONPATH",
            "TF_CONFIG",
        ):
            env.pop(stale, None)
        mpi = "sagemaker_mpi_enabled" in hyperparameters
        return _run_hosts(network, hosts, bases, env, script, hosts_file, shims, mpi, dest, timeout)


def _run_hosts(
    network: Network,
    hosts: list[str],
    bases: list[Path],
    env: dict[str, str],
    script: Path,
    hosts_file: Path,
    shims: Path,
    mpi: bool,
    dest: Path,
    timeout: float,
) -> list[TfToolkitHost]:
    procs, logs = {}, {}
    for host, base in zip(hosts, bases, strict=True):
        logs[host] = dest / f"toolkit-{host}.log"
        command = [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "bash",
            str(script),
            str(base),
            str(hosts_file),
        ]
        with logs[host].open("w") as log:
            procs[host] = subprocess.Popen(
                [*network.exec(network.namespaces[host]), *command, str(shims / "sshd") if mpi else ""],
                env=env | {"SAGESTACK_MPIRUN_LOG": str(dest / f"mpirun-{host}.json")},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
    leftover: dict[str, list[str]] = {}
    deadline = time.monotonic() + timeout
    while len(leftover) < len(hosts):
        for host, proc in procs.items():
            if host not in leftover and proc.poll() is not None:
                # the container stops with its toolkit: list what it left running, then kill it
                leftover[host] = network.processes(network.namespaces[host])
                network.kill(network.namespaces[host])
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the toolkit ran past {timeout}s on "
                + ", ".join(h for h in hosts if h not in leftover)
                + "; logs: "
                + " ".join(str(logs[h]) for h in hosts)
            )
        time.sleep(0.2)
    return [
        TfToolkitHost(
            name=host,
            base=base,
            log=logs[host].read_text(errors="replace"),
            returncode=procs[host].returncode,
            address=network.addresses[host],
            leftover=leftover[host],
        )
        for host, base in zip(hosts, bases, strict=True)
    ]
