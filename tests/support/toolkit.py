"""Run AWS's own training toolkit on a copy of the host layout `sagestack local train` made.

Each simulated host runs the `train` console script of `sagemaker-training` with
SAGEMAKER_TRAINING_MODULE=sagemaker_pytorch_container.training:main, exactly what the PyTorch DLC
runs, in a private mount namespace of its own (`unshare -m`, root only) where
- the host's folder is bind-mounted at the real /opt/ml (so container paths such as a custom
  CheckpointConfig.LocalPath mean what they mean in SageMaker),
- /etc/hosts says algo-1, algo-2, … are 127.0.0.1 (the toolkit waits until they resolve).
What SageMaker's platform does and the machine lacks is stood in for, and nothing else:
- `sagemaker_submit_directory` points at the job's sourcedir.tar.gz on disk instead of S3
  (the toolkit's files.py takes a local tarball);
- `nvidia-smi` / `neuron-ls` report as many devices as the simulated host has;
- for MPI, `mpirun` starts the ranks itself (Open MPI is not installed; `python -m mpi4py` is run
  as `python`) and records its arguments, and `/usr/sbin/sshd` is a no-op (the master starts it).
The machine is untouched: every mount lives and dies with the namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

TRAIN = Path(sys.executable).parent / "train"

NAMESPACE_SCRIPT = r"""
set -eu
host_dir=$1; hosts_file=$2; shim_sshd=$3
scratch=$(mktemp -d)
mount --bind "$hosts_file" /etc/hosts
mkdir "$scratch/opt"
mount --bind /opt "$scratch/opt"
mount -t tmpfs tmpfs /opt
for entry in "$scratch"/opt/*; do
  [ -e "$entry" ] || continue
  name=$(basename "$entry")
  if [ -d "$entry" ]; then mkdir "/opt/$name"; else touch "/opt/$name"; fi
  mount --bind "$entry" "/opt/$name"
done
mkdir /opt/ml
mount --bind "$host_dir" /opt/ml
if [ -n "$shim_sshd" ]; then
  mount -t tmpfs tmpfs /usr/sbin
  cp "$shim_sshd" /usr/sbin/sshd
  chmod +x /usr/sbin/sshd
fi
exec "$TOOLKIT_TRAIN"
"""

MPIRUN_SHIM = r'''#!PYTHON
"""Stand-in for Open MPI's mpirun on one host: records its arguments, then starts -np ranks of the
command with the variables Open MPI gives each rank (exported -x NAME[=VALUE] included)."""
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["SAGESTACK_MPIRUN_LOG"], "w") as f:
    json.dump(args, f)
env, np_, hosts, i = dict(os.environ), 1, "", 0
while i < len(args):
    a = args[i]
    if a == "-np":
        np_ = int(args[i + 1]); i += 2
    elif a == "--host":
        hosts = args[i + 1]; i += 2
    elif a == "-x":
        name, _, value = args[i + 1].partition("=")
        if value:
            env[name] = value
        i += 2
    elif a in ("-mca", "--mca"):
        i += 3
    elif a in ("-bind-to", "-map-by"):
        i += 2
    elif a.startswith("-"):
        i += 1
    else:
        break
command = args[i:]
if command[1:3] == ["-m", "mpi4py"]:
    command = [command[0]] + command[3:]
per_host = np_ // max(1, len(hosts.split(",")))
if len(hosts.split(",")) != 1:
    sys.exit("this mpirun stand-in runs one host only")
procs = []
for rank in range(np_):
    rank_env = dict(env, OMPI_COMM_WORLD_RANK=str(rank), OMPI_COMM_WORLD_SIZE=str(np_),
                    OMPI_COMM_WORLD_LOCAL_RANK=str(rank), OMPI_COMM_WORLD_LOCAL_SIZE=str(np_),
                    OMPI_COMM_WORLD_NODE_RANK="0")
    procs.append(subprocess.Popen(command, env=rank_env))
sys.exit(max(p.wait() for p in procs))
'''


@dataclass
class ToolkitHost:
    name: str
    base: Path  # what was /opt/ml
    log: str
    returncode: int

    def command(self) -> list[str]:
        """The command the toolkit logged under 'Invoking script with the following command:'."""
        lines = self.log.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Invoking script with the following command:"):
                return next(x for x in lines[i + 1 :] if x.strip()).split()
        return []


def available() -> str | None:
    """Why the toolkit tier cannot run here, or None."""
    if not TRAIN.exists():
        return "sagemaker-training is not installed (make setup installs it)"
    if os.geteuid() != 0:
        return "the toolkit runs in a private mount namespace (unshare -m), which needs root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    return None


def write_shims(folder: Path, *, gpus: int, neurons: int, python: str = sys.executable) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if gpus:
        smi = folder / "nvidia-smi"
        listing = "\n".join(f"GPU {i}: NVIDIA A10G (UUID: GPU-simulated-{i})" for i in range(gpus))
        smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{listing}\nEOF\n")
        smi.chmod(0o755)
    if neurons:
        ls = folder / "neuron-ls"
        ls.write_text(f"#!/bin/sh\necho '[{{\"nc_count\": {neurons}}}]'\n")
        ls.chmod(0o755)
    mpirun = folder / "mpirun"
    mpirun.write_text(MPIRUN_SHIM.replace("PYTHON", python, 1))
    mpirun.chmod(0o755)
    sshd = folder / "sshd"
    sshd.write_text("#!/bin/sh\nexit 0\n")
    sshd.chmod(0o755)
    return folder


def run_toolkit(local_workdir: Path, dest: Path, *, threads: int, timeout: float = 300) -> list[ToolkitHost]:
    """Copy each simulated host of a finished `sagestack local train` (its config and channels; code,
    model and output fresh), run the toolkit on every host at once, and return what each did."""
    request = json.loads((local_workdir / "request.json").read_text())
    dest.mkdir(parents=True)
    tarball = dest / "sourcedir.tar.gz"
    shutil.copyfile(local_workdir / "sourcedir.tar.gz", tarball)
    checkpoints = dest / "checkpoints"
    checkpoints.mkdir()
    hosts = sorted(p.name for p in (local_workdir / "hosts").iterdir())
    hosts_file = dest / "etc-hosts"
    hosts_file.write_text(Path("/etc/hosts").read_text() + "\n127.0.0.1 " + " ".join(hosts) + "\n")
    local_env = local_probe_env(local_workdir, hosts[0])
    shims = write_shims(
        dest / "shims",
        gpus=int(local_env.get("SM_NUM_GPUS", "0")),
        neurons=int(local_env.get("SM_NUM_NEURONS", "0")),
    )
    script = dest / "namespace.sh"
    script.write_text(textwrap.dedent(NAMESPACE_SCRIPT))
    mpi = "sagemaker_mpi_enabled" in request["HyperParameters"]
    procs = []
    bases = []
    for host in hosts:
        base = copy_host(local_workdir / "hosts" / host, dest / "hosts" / host, request, tarball, checkpoints)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_"))},
            **request.get("Environment", {}),
            "TRAINING_JOB_NAME": request["TrainingJobName"],
            "TRAINING_JOB_ARN": local_env["TRAINING_JOB_ARN"],
            "AWS_REGION": local_env["AWS_REGION"],
            "SAGEMAKER_TRAINING_MODULE": "sagemaker_pytorch_container.training:main",
            "TOOLKIT_TRAIN": str(TRAIN),
            # the container's PATH has its Python's scripts (torchrun) first
            "PATH": os.pathsep.join([str(shims), str(TRAIN.parent), os.environ["PATH"]]),
            "OMP_NUM_THREADS": str(threads),
            "PYTHONUNBUFFERED": "1",
            "SAGESTACK_MPIRUN_LOG": str(dest / f"mpirun-{host}.json"),
        }
        for stale in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH"):
            env.pop(stale, None)
        procs.append(
            subprocess.Popen(
                [
                    "unshare",
                    "-m",
                    "--propagation",
                    "private",
                    "bash",
                    str(script),
                    str(base),
                    str(hosts_file),
                    str(shims / "sshd") if mpi else "",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        bases.append(base)
    results = []
    for host, base, proc in zip(hosts, bases, procs, strict=True):
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        results.append(ToolkitHost(host, base, out, proc.returncode))
    return results


def copy_host(source: Path, base: Path, request: dict, tarball: Path, checkpoints: Path) -> Path:
    """A host's /opt/ml for the toolkit: its config and channels copied, code/model/output fresh,
    sagemaker_submit_directory pointing at the tarball on disk, a custom checkpoint path linked to
    the folder SageMaker would sync."""
    shutil.copytree(source / "input", base / "input", symlinks=True)
    for folder in ("code", "model", "output"):
        (base / folder).mkdir(parents=True)
    hps_path = base / "input" / "config" / "hyperparameters.json"
    hps = json.loads(hps_path.read_text())
    hps["sagemaker_submit_directory"] = json.dumps(str(tarball))
    hps_path.write_text(json.dumps(hps))
    local_path = (request.get("CheckpointConfig") or {}).get("LocalPath")
    if local_path:
        inside = base / Path(local_path).relative_to("/opt/ml")
        inside.parent.mkdir(parents=True, exist_ok=True)
        inside.symlink_to(checkpoints, target_is_directory=True)
    return base


def local_probe_env(workdir: Path, host: str) -> dict[str, str]:
    """The environment the local run's first probe on `host` recorded ({} when there is none)."""
    probes = sorted((workdir / "hosts" / host / "output" / "data").glob("probe-*.json"))
    return json.loads(probes[0].read_text())["env"] if probes else {}
