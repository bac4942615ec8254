"""The sandbox a simulated host of the drivers contract runs in: AWS's sm_train.sh and drivers, unchanged.

The SDK v3 drivers (sagemaker-train's container_drivers) read and write container paths: /opt/ml,
/etc/hosts (algo-N), /etc/environment (the MPI driver appends to it), /usr/sbin/sshd (the MPI driver
starts it), `nvidia-smi` / `neuron-ls` (environment.py counts the accelerators with them), and
torchrun's fixed port 7777. So each host runs in namespaces of its own (local/drivers/sandbox_init.py):

- one network namespace per run (`Network`), loopback only, which every host of the run joins:
  the fixed ports belong to the run, two runs at once (two test workers) never meet;
- one mount namespace per host: its folder as /opt/ml (the rest of /opt bound back), an /etc/hosts
  mapping algo-1..N (and this machine's name, and localhost) to 127.0.1.1..N, its own copy of
  /etc/environment, a stand-in sshd at /usr/sbin/sshd; every other mount read-only but the run
  folder (and what `writable` adds: a tracking store) and /dev, with a /tmp of the host's own in
  its sandbox folder: the script, or a value that slips through sm_train.sh's quoting, writes
  nothing into the project, the user's home or the system;
- a PATH with stand-ins first (`nvidia-smi` / `neuron-ls` reporting the simulated accelerators,
  `mpirun` starting one host's ranks directly: local/drivers/mpirun.py, `sshd` that waits), then this
  environment's Python (sm_train.sh needs python3 and pip there; torchrun is there).

As root the namespaces are plain (`unshare --net`); as a normal user they live in a user namespace
that maps the user to root (`unshare --user --map-root-user --net`). Every process runs under the
run's guard (local/guard.py), so nothing outlives the run.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from sagestack.local import guard
from sagestack.local.drivers import mpirun, sandbox_init
from sagestack.local.errors import LocalRunError

START_SECONDS = 30.0
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HIDDEN_UNDER = ("/opt/ml",)  # what each host's own folder covers: a run folder there would vanish


def unshare_flags(euid: int | None = None) -> list[str]:
    """The holder's namespaces: a network one, inside a user one unless this is root."""
    root = (os.geteuid() if euid is None else euid) == 0
    return ["--net"] if root else ["--user", "--map-root-user", "--net"]


def _namespace_fix() -> str:
    if os.geteuid() != 0:
        return (
            "allow unprivileged user namespaces (sysctl -w kernel.unprivileged_userns_clone=1; on Ubuntu "
            "also kernel.apparmor_restrict_unprivileged_userns=0), or run as root"
        )
    return "give the container CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN, or --privileged)"


def _refused(reason: str, fix: str) -> LocalRunError:
    return LocalRunError(
        "the drivers contract runs AWS's sm_train.sh and drivers as in the container, each simulated "
        "host in a mount namespace of its own (/opt/ml, /etc/hosts, /etc/environment, /usr/sbin/sshd) "
        f"and the run in a network namespace of its own (torchrun's fixed port 7777), and {reason}; "
        f"to run it here, {fix}; or use launcher: toolkit, which needs no namespace"
    )


class Network:
    """The run's network namespace, held by a process under the run's guard until `close()`."""

    def __init__(self, process: subprocess.Popen[str], holder: int, user: bool) -> None:
        self.process = process
        self.holder = holder  # a pid in the namespace: what the hosts join
        self.user = user  # the namespace lives in a user namespace (not root)

    @classmethod
    def start(cls, timeout: float = START_SECONDS, *, user: bool | None = None) -> Network:
        """Start the holder; a clear LocalRunError when this machine cannot make the namespaces.
        `user`: in a user namespace (default: unless this is root; root may ask for one too)."""
        unshare = shutil.which("unshare")
        if unshare is None:
            raise _refused(
                "util-linux's `unshare` is not on PATH", "install util-linux (apt-get install util-linux)"
            )
        flags = unshare_flags(None if user is None else 1 if user else 0)
        command = [unshare, *flags, "--", sys.executable, sandbox_init.__file__, "--hold"]
        leash = [sys.executable, guard.__file__, str(os.getpid()), "--"]
        process = subprocess.Popen(
            [*leash, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert process.stdout is not None and process.stderr is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        line = process.stdout.readline() if ready else ""
        if not line.endswith("ready\n"):
            guard.kill_tree([process.pid])
            _, error = process.communicate()
            said = (error or line).strip().splitlines()
            raise _refused(
                f"`unshare {' '.join(flags)}` failed: {said[-1] if said else 'no answer'}", _namespace_fix()
            )
        return cls(process, int(line.split()[0]), user="--user" in flags)

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this machine cannot run the drivers sandbox (the error's text), or None."""
        try:
            cls.start().close()
        except LocalRunError as e:
            return str(e)
        return None

    def close(self) -> None:
        guard.kill_tree([self.process.pid])
        self.process.communicate()

    def __enter__(self) -> Network:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def host_address(index: int) -> str:
    """algo-{index+1}'s address in the run's network."""
    return f"127.0.1.{index + 1}"


def hosts_file(host: str, hosts: list[str]) -> str:
    """/etc/hosts on `host`: localhost, every algo-N, and this machine's name as the host itself
    (single-node torchrun resolves it, and waits 300 s for a name that does not resolve)."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    for index, name in enumerate(hosts):
        own = f"\t{socket.gethostname()}" if name == host else ""
        lines.append(f"{host_address(index)}\t{name}{own}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Accelerators:
    """What a simulated host reports: nvidia-smi's GPUs or neuron-ls's Neuron cores."""

    gpus: int = 0
    neuron_cores: int = 0


def _nvidia_smi(gpus: int) -> str:
    if gpus == 0:
        return "#!/bin/sh\necho 'NVIDIA-SMI has failed: no simulated GPU on this host' >&2\nexit 9\n"
    return (
        "#!/bin/sh\ni=0\n"
        f'while [ $i -lt {gpus} ]; do echo "GPU $i: Simulated GPU (UUID: GPU-sagestack-$i)"; '
        "i=$((i+1)); done\n"
    )


def _neuron_ls(cores: int) -> str:
    if cores == 0:
        return "#!/bin/sh\necho 'neuron-ls: no simulated Neuron device on this host' >&2\nexit 1\n"
    return f"#!/bin/sh\necho '{json.dumps([{'neuron_device': 0, 'nc_count': cores}])}'\n"


def stand_ins(accelerators: Accelerators) -> dict[str, str]:
    """The programs a host's PATH starts with (name -> script)."""
    return {
        "nvidia-smi": _nvidia_smi(accelerators.gpus),
        "neuron-ls": _neuron_ls(accelerators.neuron_cores),
        "mpirun": f'#!/bin/sh\nexec {sys.executable} {mpirun.__file__} "$@"\n',  # a script, as sandbox_init
        "sshd": "#!/bin/sh\nexec sleep infinity\n",  # the MPI driver starts it and never stops it
    }


def sandbox_path() -> str:
    """The PATH after the stand-ins: this environment's Python, then the system's."""
    return f"{Path(sys.executable).parent}:{SYSTEM_PATH}"


def check_run_folder(folder: Path) -> None:
    resolved = folder.resolve()
    for covered in HIDDEN_UNDER:
        if resolved == Path(covered) or Path(covered) in resolved.parents:
            raise LocalRunError(
                f"the run folder {resolved} is under {covered}, which the drivers sandbox covers "
                "inside each host; choose a run folder elsewhere (--workdir)"
            )


def prepare_host(
    sandbox_dir: Path,
    *,
    host: str,
    hosts: list[str],
    base: Path,
    environment: dict[str, str],
    accelerators: Accelerators,
    holder: int,
    user: bool,
    cwd: str = "/",
    writable: Sequence[Path] = (),
) -> Path:
    """The host's sandbox files in `sandbox_dir` (its /etc/hosts, /etc/environment copy,
    stand-ins); returns the spec sandbox_init.py reads. `environment` is the whole environment of
    the host's command (PATH is set here). Inside, only `writable` (the run folder; a tracking
    store), the host's folder, its sandbox folder, /dev and a /tmp of its own can be written."""
    check_run_folder(sandbox_dir)
    if sandbox_dir.exists():
        shutil.rmtree(sandbox_dir)
    bin_dir = sandbox_dir / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in stand_ins(accelerators).items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (sandbox_dir / "hosts").write_text(hosts_file(host, hosts))
    etc_environment = Path("/etc/environment")
    (sandbox_dir / "environment").write_text(etc_environment.read_text() if etc_environment.is_file() else "")
    spec = {
        "holder": holder,
        "user": user,
        "stash": str(sandbox_dir / "stash"),
        "cwd": cwd,
        "environment": {**environment, "PATH": f"{bin_dir}:{sandbox_path()}"},
        "writable": [
            *sorted({str(p.resolve()) for p in (*writable, base, sandbox_dir)}),
            "/opt/ml",
            "/etc/environment",
        ],
        "tmp": str(sandbox_dir.resolve() / "tmp"),
        "files": {
            "/opt/ml": str(base),
            "/etc/hosts": str(sandbox_dir / "hosts"),
            "/etc/environment": str(sandbox_dir / "environment"),
            "/usr/sbin/sshd": str(bin_dir / "sshd"),
        },
    }
    spec_file = sandbox_dir / "spec.json"
    spec_file.write_text(json.dumps(spec, indent=1))
    return spec_file


def sandboxed(spec_file: Path, command: list[str]) -> list[str]:
    """The command line that runs `command` in the host's sandbox."""
    return [sys.executable, sandbox_init.__file__, str(spec_file), "--", *command]
