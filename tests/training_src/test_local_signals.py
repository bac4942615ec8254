"""Real processes: whatever signal ends `sagestack local train`, the training ends with it.

The CLI runs as a terminal would start it (a process group of its own); torchrun and its workers
run in sessions of their own, so they are found by what they are (a process whose working folder
is in the run's folder), not by their group or parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.train

DDP = "classifier-spot"  # torchrun, so a launcher and its workers, each in a session of its own
WAIT = 120.0  # the most a bounded wait here waits (the machine may be busy); never a speed goal


def _run_processes(workdir: Path) -> dict[int, str]:
    """pid -> command line of every process whose working folder is inside the run's folder."""
    found = {}
    root = str(workdir.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == root or cwd.startswith(root + "/")):
            found[int(entry.name)] = cmdline
    return found


def _until(check, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


def _checkpoint_files(workdir: Path) -> dict[str, tuple[int, int]]:
    """Every file under the run's folder that a checkpoint write touches: name -> (size, mtime)."""
    return {
        str(p.relative_to(workdir)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in workdir.rglob("*checkpoint*")
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("signum", "to_group"),
    [
        (signal.SIGINT, True),  # Ctrl-C: the terminal signals the foreground process group
        (signal.SIGTERM, False),  # kill PID
        (signal.SIGHUP, True),  # the terminal closed
        (signal.SIGKILL, True),  # kill -9 of the whole group: no clean-up can run in the CLI
    ],
    ids=["SIGINT-group", "SIGTERM", "SIGHUP-group", "SIGKILL-group"],
)
def test_the_run_ends_with_the_command_whatever_signal_ends_it(digits_project, tmp_path, signum, to_group):
    workdir = tmp_path / "run"
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagestack.cli",
            "local",
            "train",
            DDP,
            "--env",
            "dev",
            "--procs",
            "2",
            "--workdir",
            str(workdir),
            "--no-track",
            "--root",
            str(digits_project.root),
            # nothing printed after the start: a process whose output pipe is gone fails only when it prints
            *("--set", "epochs=500", "--set", "checkpoint_every_steps=2"),
            *("--set", "log_every=100000", "--set", "val_every_steps=100000"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # as a shell starts a job: its own process group
    )
    try:
        _until(lambda: list((workdir / "checkpoints").glob("checkpoint-*.pt")), "a first checkpoint")
        running = _run_processes(workdir)
        assert len(running) >= 3, running  # the launcher and two workers (at least)
        if to_group:
            os.killpg(cli.pid, signum)
        else:
            os.kill(cli.pid, signum)
        code = cli.wait(timeout=WAIT)
        _until(lambda: not _run_processes(workdir) or None, f"the run's processes to end: {running}")
        assert not any(_alive(pid) for pid in running), running
        written = _checkpoint_files(workdir)
        time.sleep(1.0)  # had a writer survived, at two steps a checkpoint it would show here
        assert _checkpoint_files(workdir) == written
    finally:
        if cli.poll() is None:
            cli.kill()
        for pid in _run_processes(workdir):
            os.kill(pid, signal.SIGKILL)
    stderr = cli.stderr.read() if cli.stderr else ""
    if signum == signal.SIGKILL:
        assert code == -signal.SIGKILL
    else:
        # the CLI ran its clean-up and said so, then ended as the signal asks
        assert "every process of the run is stopped" in stderr, stderr
        assert code == 128 + signum, (code, stderr)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
