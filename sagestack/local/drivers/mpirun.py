"""The `mpirun` on a drivers-contract host's PATH (local/drivers/sandbox.py): one host's ranks, started directly.

This machine has no Open MPI and no sshd, and a simulated host needs neither for the ranks it
places itself. AWS's MPI driver (sagemaker-train's mpi_driver.py) builds the command: `mpirun --host
algo-1:N -np N --allow-run-as-root --tag-output -mca … -x NAME[=VALUE] … python -m mpi4py train.py
ARGS`. This reads that command and starts the N ranks as Open MPI would on one host: each with
mpirun's environment, the `-x` exports and Open MPI's per-rank variables (open_mpi_rank_variables, shared
with the toolkit contract's launch), its lines tagged `[1,RANK]<stdout>:` under --tag-output, every rank
killed when one fails (orte_abort_on_non_zero_status). mpi4py's runner is left out, as the toolkit
contract's ranks leave it out: the script is run as `python train.py ARGS`.

Ranks on other hosts would be started over ssh; that is refused here with the reason.

Run as a script by its path (standard library only, like sandbox_init.py and guard.py), so the
host runs this file whatever `sagestack` the host's Python would import.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field

# Open MPI options that take a value (the ones the drivers and SageMaker's docs use)
_VALUED = {"--host", "-H", "-host", "-np", "-n", "--np", "-N", "--map-by", "--bind-to", "--rank-by"}
_FLAGS = {
    "--allow-run-as-root",
    "--tag-output",
    "-tag-output",
    "--oversubscribe",
    "--display-map",
    "--report-bindings",
    "-v",
    "--verbose",
}


def open_mpi_rank_variables(*, host_index: int, local_rank: int, per_host: int, size: int) -> dict[str, str]:
    """What Open MPI gives each rank it places (--map-by slot: host-major) on host `host_index`."""
    return {
        "OMPI_COMM_WORLD_RANK": str(host_index * per_host + local_rank),
        "OMPI_COMM_WORLD_SIZE": str(size),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_host),
        "OMPI_COMM_WORLD_NODE_RANK": str(host_index),
    }


class MpirunError(ValueError):
    pass


@dataclass
class MpirunCommand:
    hosts: dict[str, int] = field(default_factory=dict)  # host -> slots
    processes: int | None = None
    exports: dict[str, str] = field(default_factory=dict)
    mca: dict[str, str] = field(default_factory=dict)
    tag_output: bool = False
    program: list[str] = field(default_factory=list)


def _hosts(value: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for entry in value.split(","):
        name, _, slots = entry.partition(":")
        out[name] = out.get(name, 0) + (int(slots) if slots else 1)
    return out


def parse(argv: list[str], environment: dict[str, str]) -> MpirunCommand:
    """mpirun's options up to the program; the program and its arguments as given."""
    command = MpirunCommand()
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        option = argv[i]
        if option in ("-x",):
            name, eq, value = argv[i + 1].partition("=")
            if eq:
                command.exports[name] = value
            elif name in environment:
                command.exports[name] = environment[name]
            i += 2
        elif option in ("-mca", "--mca"):
            command.mca[argv[i + 1]] = argv[i + 2]
            i += 3
        elif option in _VALUED:
            value = argv[i + 1]
            if option in ("--host", "-H", "-host"):
                command.hosts.update(_hosts(value))
            elif option in ("-np", "-n", "--np"):
                command.processes = int(value)
            i += 2
        elif option in _FLAGS:
            command.tag_output = command.tag_output or option.endswith("tag-output")
            i += 1
        else:
            raise MpirunError(
                f"sagestack's local mpirun does not know the option {option!r} (it knows -x, -mca, "
                f"{', '.join(sorted(_VALUED | _FLAGS))}); run the job with launcher: toolkit, or in the cloud"
            )
    command.program = argv[i:]
    if not command.program:
        raise MpirunError("mpirun: no program to run")
    return command


def rank_program(program: list[str]) -> list[str]:
    """`python -m mpi4py script ARGS` runs as `python script ARGS` (mpi4py's runner left out)."""
    if len(program) >= 4 and program[1:3] == ["-m", "mpi4py"] and not program[3].startswith("-"):
        return [program[0], *program[3:]]
    return program


def _pump(stream: object, tag: str) -> None:
    for line in stream:  # type: ignore[attr-defined]
        sys.stdout.write(f"{tag}{line}")
        sys.stdout.flush()


def run(command: MpirunCommand, environment: dict[str, str]) -> int:
    """Start the ranks, wait for them; the first failing rank's code ends them all."""
    others = [
        h
        for h in command.hosts
        if h not in (os.uname().nodename, "localhost", environment.get("SM_CURRENT_HOST"))
    ]
    if others:
        raise MpirunError(
            f"mpirun was asked to place ranks on {', '.join(others)}: under the drivers contract Open MPI "
            "starts them over ssh between the hosts, which local train does not emulate; run MPI on one "
            "host (--hosts 1), or use launcher: toolkit (its MPI runs on several simulated hosts)"
        )
    size = command.processes or sum(command.hosts.values()) or 1
    program = rank_program(command.program)
    ranks = []
    for rank in range(size):
        env = {
            **environment,
            **command.exports,
            **open_mpi_rank_variables(host_index=0, local_rank=rank, per_host=size, size=size),
        }
        ranks.append(
            subprocess.Popen(
                program,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    pumps = []
    for rank, proc in enumerate(ranks):
        for stream, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            tag = f"[1,{rank}]<{name}>:" if command.tag_output else ""
            pumps.append(threading.Thread(target=_pump, args=(stream, tag), daemon=True))
    for t in pumps:
        t.start()
    code = _wait(ranks)
    for t in pumps:
        t.join(timeout=10)
    return code


def _wait(ranks: list[subprocess.Popen[str]]) -> int:
    pending = list(ranks)
    while pending:
        pid, status = os.wait()
        proc = next((p for p in pending if p.pid == pid), None)
        if proc is None:
            continue
        proc.returncode = os.waitstatus_to_exitcode(status)
        pending.remove(proc)
        if proc.returncode != 0:
            for other in pending:
                other.kill()
                other.wait()
            return proc.returncode if proc.returncode > 0 else 128 - proc.returncode
    return 0


def main(argv: list[str]) -> None:
    environment = dict(os.environ)
    try:
        sys.exit(run(parse(argv, environment), environment))
    except MpirunError as e:
        sys.exit(f"mpirun: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
