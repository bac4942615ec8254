"""The drivers contract run locally: the hosts of a request whose AlgorithmSpecification has a
ContainerEntrypoint (the SDK v3 ModelTrainer's), each running that entrypoint — AWS's sm_train.sh,
which runs AWS's environment.py and driver — unchanged, in its sandbox (local/drivers/sandbox.py).

What SageMaker does before the container starts is done here, per host: the config files
(hyperparameters.json: the request's HyperParameters as sent; resourceconfig.json;
inputdataconfig.json with every channel, `code` and `sm_drivers` included), the `code` channel (the
source archive unpacked), the `sm_drivers` channel (the packed drivers' files), the job's own
channels, the checkpoint link. The process gets only what the platform gives a container
(TRAINING_JOB_NAME, TRAINING_JOB_ARN, AWS_REGION, the request's Environment, PATH,
PYTHONUNBUFFERED, OMP_NUM_THREADS): the SM_* variables are environment.py's to make.

`run_driver_hosts` is the part a caller with its own host folders uses (the conformance tier):
it starts the run's network, each host's sandboxed command under the run's guard, follows them, and
returns each host's exit code and log.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.core.contract import (
    HostLayout,
    input_data_config,
    resource_config,
    write_host_config,
)
from sagestack.core.drivers import CODE_CHANNEL, DRIVERS_CHANNEL, hyperparameter_problem, write_drivers
from sagestack.local.drivers.sandbox import Accelerators, Network, check_run_folder, prepare_host, sandboxed
from sagestack.local.errors import LocalRunError
from sagestack.local.training.failure import error_message
from sagestack.local.training.hosts import (
    LOCAL_INTERFACE,
    channel_sources,
    extract_archive,
    lay_out_channels,
    share_checkpoints,
    simulated_devices,
)
from sagestack.local.training.job import LocalRequest, LocalTrainOptions
from sagestack.local.training.processes import Command, Outcome, Processes
from sagestack.project.loader import LoadedSpec


def is_drivers_request(request: Mapping[str, Any]) -> bool:
    """The request runs its own entrypoint (ModelTrainer's sm_train.sh), not the image's toolkit."""
    return "ContainerEntrypoint" in request["AlgorithmSpecification"]


def container_command(request: Mapping[str, Any]) -> list[str]:
    """What the container runs: ContainerEntrypoint + ContainerArguments, as Docker combines them."""
    spec = request["AlgorithmSpecification"]
    return [*spec["ContainerEntrypoint"], *spec.get("ContainerArguments", [])]


@dataclass(frozen=True)
class DriverHost:
    """A simulated host of the drivers contract: its /opt/ml folder and its process environment."""

    layout: HostLayout
    environment: dict[str, str]
    accelerators: Accelerators = field(default_factory=Accelerators)


@dataclass(frozen=True)
class DriversRun:
    """What `run_driver_hosts` ran: each host's command (its log at `.log`) and the outcome
    (`outcome.codes[i]` is host i's exit code)."""

    commands: list[Command]
    outcome: Outcome

    @property
    def codes(self) -> list[int]:
        return self.outcome.codes

    @property
    def logs(self) -> list[Path]:
        return [c.log for c in self.commands]


def platform_environment(local: LocalRequest, *, threads: int) -> dict[str, str]:
    """What the platform gives the container's process: no SM_* (environment.py makes those)."""
    return {
        **{str(k): str(v) for k, v in local.request.get("Environment", {}).items()},
        "TRAINING_JOB_NAME": local.job_name,
        "TRAINING_JOB_ARN": local.job_arn,
        "AWS_REGION": local.deployment.region,
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": str(threads),
        "HOME": os.environ.get("HOME", "/root"),
    }


DRIVER_SCRIPTS = ("torchrun_driver.py", "mpi_driver.py", "basic_script_driver.py")


def driver_script(drivers: Mapping[str, bytes]) -> str | None:
    """The driver the packed sm_train.sh runs (None: a command of its own)."""
    train_script = drivers.get("sm_train.sh", b"").decode(errors="replace")
    return next((d for d in DRIVER_SCRIPTS if d in train_script), None)


def refuse_multi_host_mpi(drivers: Mapping[str, bytes], hosts: int) -> None:
    if hosts > 1 and driver_script(drivers) == "mpi_driver.py":
        raise LocalRunError(
            f"MPI on {hosts} hosts under the drivers contract: AWS's MPI driver starts the other hosts' "
            "ranks with mpirun over ssh between the hosts, which local train does not emulate; run it "
            "on one host here (--hosts 1), or use launcher: toolkit (its MPI runs on several simulated hosts)"
        )


def refuse_unpassable_hyperparameters(hyperparameters: Mapping[str, str]) -> None:
    """What the drivers cannot pass intact (a --set value: the spec's are refused at validate, rule
    drivers-shell-values) is refused before anything starts, as it would fail the job in the cloud."""
    for key, sent in hyperparameters.items():
        problem = hyperparameter_problem(key, sent)
        if problem is not None:
            raise LocalRunError(
                f"hyperparameter {key!r} = {sent!r}: AWS's environment.py writes it unescaped into the file "
                f"sm_train.sh sources, and {problem}; the job would fail (or run the rest as shell code), "
                "in the cloud as here. Write the value without ' (the typographic \u2019 reads the same) "
                "and the key with letters, digits, '_' and '-' only"
            )


def prepare_driver_hosts(
    loaded: LoadedSpec,
    job_key: str,
    local: LocalRequest,
    workdir: Path,
    options: LocalTrainOptions,
    *,
    extra_environment: Mapping[str, str] | None = None,
) -> list[DriverHost]:
    """What SageMaker does before the container starts, once per simulated host, for a job of the
    spec (its channels' local folders)."""
    own = {
        k: v for k, v in input_data_config(local.request).items() if k not in (CODE_CHANNEL, DRIVERS_CHANNEL)
    }
    return lay_out_driver_hosts(
        local,
        workdir,
        options,
        sources=channel_sources(loaded, job_key, own),
        extra_environment=extra_environment,
    )


def lay_out_driver_hosts(
    local: LocalRequest,
    workdir: Path,
    options: LocalTrainOptions,
    *,
    sources: Mapping[str, Path] | None = None,
    extra_environment: Mapping[str, str] | None = None,
) -> list[DriverHost]:
    """Each host's folder under workdir/hosts/<host> (config files, `code` and `sm_drivers`, the
    job's channels from `sources`: channel -> local folder, the checkpoint link to
    workdir/checkpoints) and its process environment; `options` gives hosts, procs and threads."""
    if local.drivers is None:
        raise LocalRunError(
            f"job {local.job_name} is a drivers-contract request (ContainerEntrypoint) but its drivers "
            "channel's files are missing from the local request"
        )
    check_run_folder(workdir)
    request = local.request
    hosts = [f"algo-{i + 1}" for i in range(options.hosts)]
    refuse_multi_host_mpi(local.drivers, len(hosts))
    refuse_unpassable_hyperparameters(request["HyperParameters"])
    instance_type = request["ResourceConfig"]["InstanceType"]
    devices = simulated_devices(instance_type, options.procs)
    data_config = input_data_config(request)
    own = {k: v for k, v in data_config.items() if k not in (CODE_CHANNEL, DRIVERS_CHANNEL)}
    checkpoints = workdir / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    checkpoint_path = (request.get("CheckpointConfig") or {}).get("LocalPath")
    threads = options.threads or max(1, (os.cpu_count() or 1) // (options.hosts * options.procs))
    environment = {**platform_environment(local, threads=threads), **(extra_environment or {})}
    accelerators = Accelerators(gpus=devices.gpus, neuron_cores=devices.neurons)
    out = []
    for index, host in enumerate(hosts):
        layout = HostLayout(host, workdir / "hosts" / host)
        resources = resource_config(host, hosts, instance_type, LOCAL_INTERFACE)
        write_host_config(
            layout, hyperparameters=request["HyperParameters"], resources=resources, data_config=data_config
        )
        extract_archive(local.archive, layout.data / CODE_CHANNEL)
        empty_folder(layout.data / DRIVERS_CHANNEL)
        write_drivers(local.drivers, layout.data / DRIVERS_CHANNEL)
        lay_out_channels(layout, dict(sources or {}), own, index, len(hosts))
        if checkpoint_path:
            share_checkpoints(layout, checkpoint_path, checkpoints)
        out.append(DriverHost(layout, dict(environment), accelerators))
    return out


def empty_folder(folder: Path) -> None:
    """An empty folder at `folder` (an earlier run's files gone)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def run_driver_hosts(
    hosts: Sequence[DriverHost],
    command: list[str],
    run_dir: Path,
    *,
    interrupt_at: int | None = None,
    on_line: Callable[[str, str], None] = lambda host, line: None,
    on_metrics: Callable[[dict[str, float]], None] = lambda _: None,
    definitions: dict[str, str] | None = None,
    writable: Sequence[Path] = (),
) -> DriversRun:
    """Run `command` (the request's ContainerEntrypoint + ContainerArguments) on every host at once,
    each in its sandbox, all in one network of their own; logs in run_dir/logs/<host>.log. Inside,
    only run_dir, the hosts' folders and `writable` (a tracking store) can be written. Raises
    LocalRunError when this machine cannot make the sandbox."""
    names = [h.layout.name for h in hosts]
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    with Network.start() as network:
        commands = []
        for host in hosts:
            spec = prepare_host(
                run_dir / "sandbox" / host.layout.name,
                host=host.layout.name,
                hosts=names,
                base=host.layout.base,
                environment=host.environment,
                accelerators=host.accelerators,
                holder=network.holder,
                user=network.user,
                writable=[run_dir, *writable],
            )
            commands.append(
                Command(
                    argv=sandboxed(spec, command),
                    cwd=host.layout.base,
                    environment={},
                    log=run_dir / "logs" / f"{host.layout.name}.log",
                    host=host.layout.name,
                )
            )
        outcome = Processes(commands).follow(
            interrupt_at=interrupt_at, on_line=on_line, on_metrics=on_metrics, definitions=definitions
        )
    return DriversRun(commands, outcome)


def conclude_driver_hosts(hosts: Sequence[DriverHost], run: DriversRun, command: list[str]) -> str | None:
    """Each host's last word unless the run was interrupted: output/success, or output/failure when
    neither sm_train.sh nor the driver wrote one. Returns the first host's failure."""
    if run.outcome.interrupted_at is None:
        for host, code, log in zip(hosts, run.codes, run.logs, strict=True):
            if code == 0:
                host.layout.success.write_text("")
            elif not host.layout.failure.exists():
                message = error_message(log.read_text(errors="replace")) if log.exists() else ""
                host.layout.failure.write_text(
                    f"AlgorithmError: ExitCode {code}\n{message}\nCommand {json.dumps(command)}"
                )
    for host in hosts:
        if host.layout.failure.exists():
            return host.layout.failure.read_text().split("\n\n", 1)[0].strip()
    return None
