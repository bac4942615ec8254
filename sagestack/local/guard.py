"""The guard each process of a local run starts under: what the run starts ends with it.

`sagestack local train` starts every command as `python guard.py <its pid> -- COMMAND…` in a session
of its own. The guard (Linux):
- is a child subreaper (PR_SET_CHILD_SUBREAPER), so every process the command starts stays below it
  even after its parent dies or it calls setsid (torchrun starts each worker in a session of its
  own): the guard always finds the whole run by walking its own tree;
- asks the kernel to signal it when the CLI dies (PR_SET_PDEATHSIG), and checks the CLI's pid as
  well, so a CLI ended by SIGKILL (which runs no clean-up) still ends the training;
- on SIGTERM / SIGHUP / SIGINT, on the CLI's death, and when the command itself ends, kills every
  process left below it (frozen first, so none can start another while it is being killed), then
  exits as the command did (its code, or the signal that ended it).

It imports nothing but the standard library: it runs as a script, before anything else of the run.
`kill_tree` is also what the CLI uses to kill a run at once (a spot reclaim, Ctrl-C).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.1


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # not Linux: the pid check alone watches the CLI
        return False


def _children() -> dict[int, list[int]]:
    """Every live process's children, from /proc (zombies left out: they are already dead)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def process_tree(root: int) -> list[int]:
    """`root` and all its live descendants."""
    children = _children()
    tree, queue = [], [root]
    while queue:
        pid = queue.pop()
        tree.append(pid)
        queue += children.get(pid, [])
    return tree


def kill_tree(roots: list[int]) -> list[int]:
    """SIGKILL every process below `roots` (and the roots). Each is stopped first and
    the trees walked again until no new process shows up: none can start one that escapes."""
    frozen: list[int] = []
    while True:
        new = [
            pid for root in roots for pid in process_tree(root) if pid not in frozen and pid != os.getpid()
        ]
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        frozen += new
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return frozen


def _reap_all() -> None:
    """Wait for every child (the killed ones; orphans reparented here): nothing left behind."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:  # pragma: no cover (PEP 475 retries)
            continue


def _end_below() -> None:
    kill_tree([os.getpid()])
    _reap_all()


def _exit_as(status: int) -> None:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # ended by a signal: end the same way, so the CLI sees what ended the command
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    sys.exit(code)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: guard.py PARENT_PID -- COMMAND [ARG...]")
    parent, command = int(argv[0]), argv[2:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    stop: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop.append(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, on_signal)
    if os.getppid() != parent:  # the CLI ended before the death signal was armed
        sys.exit(128 + signal.SIGTERM)
    child = subprocess.Popen(command)  # handlers are reset to the defaults in the command
    while not stop and os.getppid() == parent:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # pragma: no cover (the command is our child until reaped)
            break
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
            _end_below()  # whatever the command left running ends with it
            _exit_as(status)
        if pid == 0:
            time.sleep(POLL_SECONDS)
    _end_below()
    sys.exit(128 + (stop[0] if stop else signal.SIGTERM))


if __name__ == "__main__":
    main(sys.argv[1:])
