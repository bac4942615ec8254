"""Which runner the SageMaker PyTorch container starts on a host, and with what command.

The rules of sagemaker_pytorch_container/training.py and sagemaker_training/runner.py: a runner other
than the plain process runs only when the host's instance group is a distribution group, and then
mpi → pytorch_ddp (SMDDP) → torch_distributed → SMDDP → XLA, in that order; without any, every host
runs `python -- train.py ARGS` on its own. Processes per host: `sagemaker_mpi_num_of_processes_per_host`,
else the GPUs, else the Neuron cores, else 1. `container_command` is what the container runs on the
host (checked against the toolkit by tests/conformance); `local_commands` is how this machine runs
the same world: loopback for `algo-1`, free ports, and the ranks mpirun would start, started directly.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sagestack.core.contract import MASTER_PORT, to_cmd_args
from sagestack.core.tf_contract import (
    MWMS_FLAG,
    PS_FLAG,
    SMDDP_FLAG,
    TENSORFLOW_FRAMEWORK_MODULE,
    readdressed,
    tf_config_for_mwms,
    tf_config_for_ps,
)
from sagestack.local.drivers.mpirun import open_mpi_rank_variables

Runner = Literal["process", "torchrun", "mpi", "smddp", "xla", "mwms", "ps"]

# (runner, the hyperparameter that selects it), in the container's order of precedence
RUNNER_FLAGS: tuple[tuple[Runner, str], ...] = (
    ("mpi", "sagemaker_mpi_enabled"),
    ("smddp", "sagemaker_pytorch_ddp_enabled"),
    ("torchrun", "sagemaker_torch_distributed_enabled"),
    ("smddp", "sagemaker_distributed_dataparallel_enabled"),
    ("xla", "sagemaker_pytorch_xla_multi_worker_enabled"),
)
MPI_RUNNERS = ("mpi", "smddp")
# The TensorFlow container's runners that give the script a TF_CONFIG (sagemaker_tensorflow_container).
TF_CONFIG_RUNNERS = ("mwms", "ps")
# The parameter server the TensorFlow container starts on each host (training._run_ps), on the CPU.
PS_SERVER = """\
import json, os
import tensorflow as tf
config = json.loads(os.environ["TF_CONFIG"])
server = tf.distribute.Server(
    tf.train.ClusterSpec(config["cluster"]), job_name="ps", task_index=config["task"]["index"],
    config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}))
print("parameter server", config["task"]["index"], "serving", flush=True)
server.join()
"""


class LaunchError(ValueError):
    pass


@dataclass(frozen=True)
class Launch:
    runner: Runner
    reason: str  # which hyperparameter chose it, or why none applied
    hosts: tuple[str, ...]
    host_index: int
    processes_per_host: int
    entry_point: str
    args: tuple[str, ...]
    is_master: bool
    entry_type: Literal["program", "package", "command"] = "program"
    mpi_options: str = ""  # sagemaker_mpi_custom_mpi_options
    tf_config: dict[str, Any] | None = None  # the TensorFlow container's TF_CONFIG for the script
    ps_config: dict[str, Any] | None = None  # and for the parameter server it starts beside it
    # sagemaker-training 5.x runs `python -- train.py`; 4.x (the TensorFlow container's) `python train.py`
    end_of_options: bool = True
    interface: str = "eth0"  # the host's network interface (resourceconfig.json), which mpirun exports

    def mpi_exports(self) -> dict[str, str]:
        """What mpirun's `-x NAME=VALUE` flags give every rank (mpi.py MasterRunner)."""
        words = self.mpi_options.split()
        debug = words[words.index("--NCCL_DEBUG") + 1] if "--NCCL_DEBUG" in words[:-1] else "INFO"
        return {"NCCL_MIN_NRINGS": "4", "NCCL_SOCKET_IFNAME": self.interface, "NCCL_DEBUG": debug}

    @property
    def world_size(self) -> int:
        return len(self.hosts) * self.processes_per_host if self.runner != "process" else 1

    def addresses(self) -> list[str]:
        """Every `host:port` the TF_CONFIGs of this host name (to be given local addresses)."""
        return [
            a for c in (self.tf_config, self.ps_config) if c for tasks in c["cluster"].values() for a in tasks
        ]

    def container_command(self, python: str = "python") -> list[str]:
        """The command the toolkit runs on this host (workers of an MPI job run none: mpirun on the
        master starts their ranks over SSH)."""
        if self.runner == "torchrun":
            command = [
                "torchrun",
                "--nnodes",
                str(len(self.hosts)),
                "--nproc_per_node",
                str(self.processes_per_host),
            ]
            if len(self.hosts) > 1:
                command += [
                    "--master_addr",
                    self.hosts[0],
                    "--master_port",
                    str(MASTER_PORT),
                    "--node_rank",
                    str(self.host_index),
                ]
            return [*command, self.entry_point, *self.args]
        if self.runner in MPI_RUNNERS:
            if not self.is_master:
                return []
            per_host = self.processes_per_host
            host_list = list(self.hosts) if per_host == 1 else [f"{h}:{per_host}" for h in self.hosts]
            return [
                "mpirun",
                "--host",
                ",".join(host_list),
                "-np",
                str(per_host * len(self.hosts)),
                *(["smddprun"] if self.runner == "smddp" else []),
                python,
                "-m",
                "mpi4py",
                self.entry_point,
                *self.args,
            ]
        return self._script(python)

    def _script(self, python: str) -> list[str]:
        if self.entry_type == "package":
            module = self.entry_point[:-3] if self.entry_point.endswith(".py") else self.entry_point
            return [python, "-m", module, *self.args]
        if self.entry_type == "command":
            import shlex

            return [
                "/bin/sh",
                "-c",
                f"./{shlex.quote(self.entry_point)} {' '.join(map(shlex.quote, self.args))}",
            ]
        if not self.end_of_options:
            return [python, self.entry_point, *self.args]
        return [python, "--", self.entry_point, *self.args]

    def local_commands(
        self, *, master_port: int, addresses: Mapping[str, str] | None = None
    ) -> list[tuple[list[str], dict[str, str]]]:
        """(command, extra environment) for each process this machine starts for the host; with a
        TF_CONFIG, each `host:port` in it given its local address. A parameter server comes last."""
        python = sys.executable
        if self.runner in TF_CONFIG_RUNNERS:
            assert self.tf_config is not None
            local = {} if addresses is None else addresses
            commands = [(self._script(python), {"TF_CONFIG": json.dumps(readdressed(self.tf_config, local))})]
            if self.ps_config is not None:
                ps_env = {"TF_CONFIG": json.dumps(readdressed(self.ps_config, local))}
                commands.append(([python, "-c", PS_SERVER], ps_env))
            return commands
        if self.runner == "torchrun":
            return [
                (
                    [
                        python,
                        "-m",
                        "torch.distributed.run",
                        "--nnodes",
                        str(len(self.hosts)),
                        "--nproc_per_node",
                        str(self.processes_per_host),
                        "--master_addr",
                        "127.0.0.1",
                        "--master_port",
                        str(master_port),
                        "--node_rank",
                        str(self.host_index),
                        self.entry_point,
                        *self.args,
                    ],
                    {},
                )
            ]
        if self.runner in MPI_RUNNERS:
            # The ranks mpirun would place on this host (--map-by slot: host-major), with the
            # variables Open MPI gives each rank; mpi4py (which only makes an uncaught exception
            # abort every rank) is left out.
            size = self.processes_per_host * len(self.hosts)
            return [
                (
                    [python, self.entry_point, *self.args],
                    {
                        **self.mpi_exports(),
                        **open_mpi_rank_variables(
                            host_index=self.host_index,
                            local_rank=local,
                            per_host=self.processes_per_host,
                            size=size,
                        ),
                    },
                )
                for local in range(self.processes_per_host)
            ]
        if self.runner == "xla":
            raise LaunchError(
                "sagemaker_pytorch_xla_multi_worker_enabled (PyTorch/XLA on Trainium) is not emulated "
                "locally; use distribution: {torch_distributed: {}}"
            )
        return [(self._script(python), {})]

    def describe(self) -> str:
        if self.runner in TF_CONFIG_RUNNERS:
            kind = "MultiWorkerMirroredStrategy" if self.runner == "mwms" else "parameter servers"
            return f"{self.runner} ({self.reason}; {kind}, TF_CONFIG on {len(self.hosts)} host(s))"
        world = f"world size {self.world_size}" if self.runner != "process" else "one process, its own world"
        return f"{self.runner} ({self.reason}; {world})"


def entry_type(code_dir: Path, entry_point: str) -> Literal["program", "package", "command"]:
    """sagemaker_training/_entry_point_type.py: a setup.py makes a package, *.py a program."""
    if (code_dir / "setup.py").exists():
        return "package"
    return "program" if entry_point.endswith(".py") else "command"


def _tensorflow_runner(
    env: Mapping[str, Any],
) -> tuple[Runner, str, dict[str, Any] | None, dict[str, Any] | None]:
    """sagemaker_tensorflow_container.training.train: parameter servers (on more than one host), else
    MultiWorkerMirroredStrategy's TF_CONFIG with the plain process, else MPI, else SMDDP, else the
    process; only on a host of a distribution group."""
    framework = env["additional_framework_parameters"]
    hosts, current = list(env["distribution_hosts"]), env["current_host"]
    if env["current_instance_group"] not in env["distribution_instance_groups"]:
        return "process", "no distribution hyperparameter", None, None
    if framework.get(PS_FLAG, False) and len(env["hosts"]) > 1:
        return (
            "ps",
            f"{PS_FLAG}=true",
            tf_config_for_ps(hosts, current),
            tf_config_for_ps(hosts, current, ps_task=True),
        )
    if framework.get(MWMS_FLAG, False):
        return "mwms", f"{MWMS_FLAG}=true", tf_config_for_mwms(hosts, current), None
    if framework.get("sagemaker_mpi_enabled"):
        return "mpi", "sagemaker_mpi_enabled=true", None, None
    if framework.get(SMDDP_FLAG, False):
        return "smddp", f"{SMDDP_FLAG}=true", None, None
    if framework.get(PS_FLAG, False):
        return "process", f"{PS_FLAG}=true on one host (the container needs more than one)", None, None
    return "process", "no distribution hyperparameter", None, None


def plan_launch(env: Mapping[str, Any], code_dir: Path) -> Launch:
    """The runner, processes and arguments the container would use, from its training environment
    (contract.training_environment): the PyTorch container's rules, or the TensorFlow container's."""
    framework = env["additional_framework_parameters"]
    hosts = tuple(env["hosts"])
    if env["framework_module"] == TENSORFLOW_FRAMEWORK_MODULE:
        tf_runner, tf_reason, tf_config, ps_config = _tensorflow_runner(env)
        default = env["num_gpus"] or env["num_neurons"] or 1  # sagemaker_training/runner.py
        return Launch(
            runner=tf_runner,
            reason=tf_reason,
            hosts=hosts,
            host_index=hosts.index(env["current_host"]),
            processes_per_host=int(framework.get("sagemaker_mpi_num_of_processes_per_host", default))
            if tf_runner in MPI_RUNNERS
            else 1,
            entry_point=str(env["user_entry_point"]),
            args=tuple(to_cmd_args(env["hyperparameters"])),
            is_master=bool(env["is_master"]),
            entry_type=entry_type(code_dir, str(env["user_entry_point"])),
            mpi_options=str(framework.get("sagemaker_mpi_custom_mpi_options") or ""),
            tf_config=tf_config,
            ps_config=ps_config,
            end_of_options=False,
            interface=str(env["network_interface_name"]),
        )
    runner: Runner = "process"
    reason = "no distribution hyperparameter"
    if env["current_instance_group"] in env["distribution_instance_groups"]:
        for candidate, flag in RUNNER_FLAGS:
            if framework.get(flag, False):
                runner, reason = candidate, f"{flag}=true"
                break
    default = env["num_gpus"] or env["num_neurons"] or 1
    per_host = int(framework.get("sagemaker_mpi_num_of_processes_per_host", default))
    entry = str(env["user_entry_point"])
    return Launch(
        runner=runner,
        reason=reason,
        hosts=hosts,
        host_index=hosts.index(env["current_host"]),
        processes_per_host=per_host,
        entry_point=entry,
        args=tuple(to_cmd_args(env["hyperparameters"])),
        is_master=bool(env["is_master"]),
        entry_type=entry_type(code_dir, entry),
        mpi_options=str(
            framework.get("sagemaker_mpi_custom_mpi_options")
            or framework.get("sagemaker_distributed_dataparallel_custom_mpi_options")
            or ""
        ),
        interface=str(env["network_interface_name"]),
    )
