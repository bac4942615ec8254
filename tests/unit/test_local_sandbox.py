"""The drivers sandbox's parts, judged by AWS's own drivers where they read them: the stand-in
nvidia-smi / neuron-ls counted by environment.py, the MPI driver's mpirun command read by the local
mpirun (its ranks started for real: two tiny processes), each host's /etc/hosts."""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sagestack.core.drivers import drivers_folder
from sagestack.local.drivers import mpirun
from sagestack.local.drivers.sandbox import (
    Accelerators,
    Network,
    hosts_file,
    prepare_host,
    sandboxed,
    stand_ins,
    unshare_flags,
)
from sagestack.local.errors import LocalRunError


def drivers_module(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    """One of the pinned sagemaker-train's container drivers' modules, imported as the container
    imports it (its folder first on sys.path)."""
    monkeypatch.syspath_prepend(str(drivers_folder()))
    for cached in [m for m in sys.modules if m.split(".")[0] in ("common", "scripts", "distributed_drivers")]:
        monkeypatch.delitem(sys.modules, cached)
    return importlib.import_module(name)


def path_with(tmp_path: Path, accelerators: Accelerators) -> str:
    for name, text in stand_ins(accelerators).items():
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    return f"{tmp_path}:/usr/bin:/bin"


@pytest.mark.parametrize(
    ("accelerators", "gpus", "neurons"),
    [(Accelerators(gpus=3), 3, 0), (Accelerators(neuron_cores=2), 0, 2), (Accelerators(), 0, 0)],
)
def test_environment_py_counts_the_simulated_accelerators(monkeypatch, tmp_path, accelerators, gpus, neurons):
    environment = drivers_module(monkeypatch, "scripts.environment")
    monkeypatch.setenv("PATH", path_with(tmp_path, accelerators))
    assert (environment.num_gpus(), environment.num_neurons()) == (gpus, neurons)


def test_the_mpi_drivers_command_starts_each_rank_with_open_mpis_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("SM_NETWORK_INTERFACE_NAME", "lo")
    monkeypatch.setenv("SM_CURRENT_INSTANCE_TYPE", "ml.g5.12xlarge")
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")
    mpi_utils = drivers_module(monkeypatch, "distributed_drivers.mpi_utils")
    script = tmp_path / "rank.py"
    script.write_text(
        "import os, sys\n"
        "keys = ['OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE', 'OMPI_COMM_WORLD_LOCAL_RANK', "
        "'OMPI_COMM_WORLD_LOCAL_SIZE', 'OMPI_COMM_WORLD_NODE_RANK', 'NCCL_SOCKET_IFNAME', 'FOO']\n"
        "print(' '.join(os.environ.get(k, '-') for k in keys), *sys.argv[1:])\n"
    )
    argv = mpi_utils.get_mpirun_command(
        host_count=1,
        host_list=["algo-1:2"],
        num_processes=2,
        additional_options=["-x", "FOO=1"],
        entry_script_path=str(script),
    )
    assert argv[0] == "mpirun"
    command = mpirun.parse([*argv[1:], "--epochs", "2"], {"PATH": "/usr/bin"})
    assert command.hosts == {"algo-1": 2} and command.processes == 2 and command.tag_output
    assert command.exports == {"NCCL_SOCKET_IFNAME": "lo", "FOO": "1", "PATH": "/usr/bin"}
    assert mpirun.rank_program(command.program) == [sys.executable, str(script), "--epochs", "2"]

    lines: list[str] = []
    monkeypatch.setattr(sys, "stdout", _Lines(lines))
    assert mpirun.run(command, {"SM_CURRENT_HOST": "algo-1", "PATH": "/usr/bin:/bin"}) == 0
    assert sorted(lines) == [
        "[1,0]<stdout>:0 2 0 2 0 lo 1 --epochs 2\n",
        "[1,1]<stdout>:1 2 1 2 0 lo 1 --epochs 2\n",
    ]


class _Lines:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


def test_mpirun_refuses_other_hosts_and_unknown_options_with_the_reason():
    two_hosts = mpirun.parse(["--host", "algo-1,algo-2", "-np", "2", "python", "t.py"], {})
    with pytest.raises(mpirun.MpirunError, match=r"over ssh between the hosts.*--hosts 1"):
        mpirun.run(two_hosts, {"SM_CURRENT_HOST": "algo-1"})
    with pytest.raises(mpirun.MpirunError, match="does not know the option '--hostfile'"):
        mpirun.parse(["--hostfile", "h", "python", "t.py"], {})


def test_each_host_resolves_every_algo_host_and_itself():
    text = hosts_file("algo-2", ["algo-1", "algo-2"])
    entries = {name: line.split()[0] for line in text.splitlines() for name in line.split()[1:]}
    assert entries["algo-1"] == "127.0.1.1" and entries["algo-2"] == "127.0.1.2"
    assert entries[socket.gethostname()] == "127.0.1.2" and entries["localhost"] in ("127.0.0.1", "::1")


def test_a_normal_user_gets_a_user_namespace_and_root_does_not():
    assert unshare_flags(0) == ["--net"]
    assert unshare_flags(1000) == ["--user", "--map-root-user", "--net"]


def test_a_refused_namespace_says_what_was_refused_and_what_to_do(monkeypatch, tmp_path):
    """The probe fails as `unshare` fails where namespaces are not allowed (a stand-in unshare)."""
    (tmp_path / "unshare").write_text(
        "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
    )
    (tmp_path / "unshare").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    fix = "CAP_SYS_ADMIN" if os.geteuid() == 0 else "unprivileged user namespaces"
    with pytest.raises(
        LocalRunError, match=rf"unshare failed: Operation not permitted; to run it here, .*{fix}"
    ):
        Network.start()
    assert Network.unavailable() is not None


PROBE = """\
import json, os, shutil, socket
out = {"opt": sorted(os.listdir("/opt")), "ml": sorted(os.listdir("/opt/ml")), "uid": os.getuid(),
       "sshd": os.access("/usr/sbin/sshd", os.X_OK), "sbin": len(os.listdir("/usr/sbin")),
       "algo-2": socket.gethostbyname("algo-2"), "me": socket.gethostbyname(socket.gethostname()),
       "nvidia-smi": shutil.which("nvidia-smi"), "env": sorted(os.environ)}
with open("/etc/environment", "a") as f:
    f.write("WRITTEN=1\\n")
s = socket.socket()
s.bind(("0.0.0.0", 7777))  # torchrun's fixed port: each run's network has its own
s.listen()
print(json.dumps(out), flush=True)
"""


@pytest.mark.parametrize("user", [False, True], ids=["plain", "user-namespace"])
def test_a_host_sees_its_container_paths_and_nothing_leaks(tmp_path, user):
    """Two runs' hosts at once, each binding port 7777: their own /opt/ml, the rest of /opt and
    /usr/sbin still there, a stand-in sshd, algo-N and this machine's name resolved, writes to
    /etc/environment kept in the host's copy, exactly the given environment."""
    if os.geteuid() != 0 and not user:
        pytest.skip("plain namespaces need root")
    reason = Network.unavailable()
    if reason is not None:
        pytest.skip(reason)
    outside = sorted(os.listdir("/opt"))
    runs = []
    with Network.start(user=user) as first, Network.start(user=user) as second:
        for name, network in (("a", first), ("b", second)):
            base = tmp_path / name / "ml"
            (base / "input").mkdir(parents=True)
            spec = prepare_host(
                tmp_path / name / "sandbox",
                host="algo-1",
                hosts=["algo-1", "algo-2"],
                base=base,
                environment={"TRAINING_JOB_NAME": name},
                accelerators=Accelerators(gpus=1),
                holder=network.holder,
                user=network.user,
            )
            runs.append(
                subprocess.Popen(
                    sandboxed(spec, [sys.executable, "-c", PROBE]), stdout=subprocess.PIPE, text=True
                )
            )
        seen = [json.loads(p.communicate(timeout=60)[0]) for p in runs]
    assert [p.returncode for p in runs] == [0, 0]
    for name, out in zip("ab", seen, strict=True):
        assert out["ml"] == ["input"] and out["opt"] == sorted({*outside, "ml"})
        assert out["sshd"] and out["sbin"] > 1 and out["uid"] == 0
        assert out["algo-2"] == "127.0.1.2" and out["me"] == "127.0.1.1"
        assert out["nvidia-smi"] == str(tmp_path / name / "sandbox" / "bin" / "nvidia-smi")
        assert set(out["env"]) - {"LC_CTYPE"} == {"TRAINING_JOB_NAME", "PATH"}  # LC_CTYPE: Python's own
        assert (tmp_path / name / "sandbox" / "environment").read_text().endswith("WRITTEN=1\n")
    assert "WRITTEN=1" not in Path("/etc/environment").read_text()
    assert sorted(os.listdir("/opt")) == outside and not Path("/opt/ml").exists()


WRITE_PROBE = """
import json, os, sys
targets = json.loads(sys.argv[1])
out = {}
for name, path in targets.items():
    try:
        with open(path, "a") as f:
            f.write("x")
        out[name] = "written"
    except OSError as e:
        out[name] = e.strerror
print(json.dumps(out), flush=True)
"""


@pytest.mark.parametrize("user", [False, True], ids=["plain", "user-namespace"])
def test_a_host_writes_only_into_the_run_folder(tmp_path, user):
    """What runs in a host (the script, or shell code a value smuggled past sm_train.sh's quoting)
    cannot write into the project, the user's home, this environment or the system: every mount is
    read-only but the run folder, the host's /opt/ml and /etc/environment, /dev, and a /tmp and
    /dev/shm of its own."""
    if os.geteuid() != 0 and not user:
        pytest.skip("plain namespaces need root")
    reason = Network.unavailable()
    if reason is not None:
        pytest.skip(reason)
    project = tmp_path / "project"
    run = project / ".sagestack" / "local" / "dev" / "job"  # the default run folder, inside the project
    base = run / "hosts" / "algo-1"
    (base / "input").mkdir(parents=True)
    store = tmp_path / "mlflow"
    store.mkdir()
    marker = f"sagestack-probe-{os.getpid()}-{'user' if user else 'plain'}"
    outside = {
        "project": str(project / "train.py"),
        "home": str(Path.home() / marker),
        "environment": str(Path(sys.prefix) / marker),
        "etc": f"/etc/{marker}",
        "usr": f"/usr/local/{marker}",
        "opt": f"/opt/{marker}",
        "tmp-of-the-machine": str(tmp_path / marker),
    }
    inside = {
        "run": str(run / "notes.txt"),
        "opt-ml": "/opt/ml/model.bin",
        "etc-environment": "/etc/environment",
        "tmp": f"/tmp/{marker}",
        "shm": f"/dev/shm/{marker}",
        "null": "/dev/null",
        "store": str(store / "mlflow.db"),
    }
    # the machine's /opt and /tmp, bound in the sandbox folder to cover them: never written through
    stashes = {f"stash-{n}": str(run / "sandbox" / "algo-1" / "stash" / n / marker) for n in ("0", "tmp")}
    try:
        with Network.start(user=user) as network:
            spec = prepare_host(
                run / "sandbox" / "algo-1",
                host="algo-1",
                hosts=["algo-1"],
                base=base,
                environment={"TRAINING_JOB_NAME": "job"},
                accelerators=Accelerators(),
                holder=network.holder,
                user=network.user,
                writable=[run, store],
            )
            probe = subprocess.run(
                sandboxed(
                    spec, [sys.executable, "-c", WRITE_PROBE, json.dumps({**outside, **inside, **stashes})]
                ),
                capture_output=True,
                text=True,
                timeout=60,
            )
        assert probe.returncode == 0, probe.stderr
        seen = json.loads(probe.stdout)
        assert {k: seen[k] for k in outside} == {k: "Read-only file system" for k in outside}
        assert {k: seen[k] for k in inside} == {k: "written" for k in inside}
        assert not any(Path(p).exists() for p in outside.values())
        assert (base / "model.bin").read_text() == "x" and (run / "notes.txt").read_text() == "x"
        assert (run / "sandbox" / "algo-1" / "tmp" / marker).exists()  # the host's /tmp is its own
        assert not Path(f"/tmp/{marker}").exists() and not Path(f"/dev/shm/{marker}").exists()
    finally:
        for path in [*outside.values(), f"/tmp/{marker}", f"/dev/shm/{marker}"]:
            if Path(path).is_file() and not path.endswith("train.py"):
                Path(path).unlink()
