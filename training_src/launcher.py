"""Start train.py the way the SageMaker PyTorch container starts torchrun, when nothing has yet.

Reads the container contract (SM_HOSTS, SM_CURRENT_HOST, SM_NUM_GPUS, SM_NUM_NEURONS,
resourceconfig.json) and runs
  torchrun --nnodes N --nproc_per_node P --master_addr algo-1 --master_port 7777 --node_rank i train.py ARGS
Processes per host: GPUs, else Neuron cores, else 1 (SAGESTACK_NPROC_PER_NODE overrides, as the
local emulator does to simulate several processes on a CPU). If a launcher already started this
process (RANK/WORLD_SIZE set by torchrun, or the DLC's own runner), train.py runs directly.
Self-contained: imports nothing from sagestack.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

MASTER_PORT = 7777  # the SageMaker PyTorch container's rendezvous port


@dataclass(frozen=True)
class Topology:
    hosts: tuple[str, ...]
    current_host: str
    nproc_per_node: int
    master_addr: str
    master_port: int = MASTER_PORT

    @property
    def nnodes(self) -> int:
        return len(self.hosts)

    @property
    def node_rank(self) -> int:
        return self.hosts.index(self.current_host)


def _resource_config() -> dict:
    base = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
    path = base / "input" / "config" / "resourceconfig.json"
    return json.loads(path.read_text()) if path.exists() else {}


def processes_per_host(env: dict[str, str]) -> int:
    for key in ("SAGESTACK_NPROC_PER_NODE", "SM_NUM_GPUS", "SM_NUM_NEURONS"):
        value = int(env.get(key, "0") or 0)
        if value > 0:
            return value
    return 1


def topology_from_env(env: dict[str, str] | None = None) -> Topology:
    env = dict(os.environ if env is None else env)
    config = _resource_config()
    hosts = json.loads(env["SM_HOSTS"]) if "SM_HOSTS" in env else config.get("hosts", ["algo-1"])
    current = env.get("SM_CURRENT_HOST") or config.get("current_host", hosts[0])
    hosts = tuple(sorted(hosts))  # SageMaker numbers hosts algo-1..N; rank follows that order
    return Topology(
        hosts=hosts,
        current_host=current,
        nproc_per_node=processes_per_host(env),
        # Locally, algo-N do not resolve: the emulator points the rendezvous at loopback.
        master_addr=env.get("SAGESTACK_MASTER_ADDR", hosts[0]),
        master_port=int(env.get("SAGESTACK_MASTER_PORT", MASTER_PORT)),
    )


def torchrun_args(topology: Topology, script: str, script_args: list[str]) -> list[str]:
    return [
        "--nnodes",
        str(topology.nnodes),
        "--nproc_per_node",
        str(topology.nproc_per_node),
        "--master_addr",
        topology.master_addr,
        "--master_port",
        str(topology.master_port),
        "--node_rank",
        str(topology.node_rank),
        script,
        *script_args,
    ]


def already_launched(env: dict[str, str] | None = None) -> bool:
    env = dict(os.environ if env is None else env)
    return "RANK" in env and "WORLD_SIZE" in env


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    script = str(Path(__file__).with_name("train.py"))
    if already_launched():
        command = [sys.executable, script, *args]
    else:
        topology = topology_from_env()
        command = [sys.executable, "-m", "torch.distributed.run", *torchrun_args(topology, script, args)]
        print(f"launcher: torchrun {' '.join(command[3:])}", flush=True)
    if os.environ.get("SAGESTACK_LAUNCHER_DRY_RUN"):
        return 0  # print the command only (debugging; the launcher benchmark times exactly this part)
    # Replace this process: signals (a spot reclaim's SIGTERM) reach torchrun and the workers directly.
    os.execv(sys.executable, command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
