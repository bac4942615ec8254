"""Ending a gloo process group so that a run that succeeded exits 0.

With DistributedDataParallel on CPU (gloo), the group's worker threads outlive
`destroy_process_group` (DDP's reducer keeps the group), and a worker may still be releasing the
last collective's work when the interpreter finalizes. Releasing it takes the GIL, which a
finalizing interpreter refuses: the thread exits inside a destructor and the whole process aborts
("terminate called without an active exception", SIGABRT, exit -6) after its work was done. Seen in
1 run of ~40 of a 2-process torchrun on a loaded 2-CPU machine; a core's backtrace reads
ProcessGroupGloo::runLoop → ~AsyncAllreduceWork → ~ThreadLocalState → SafePyObject's decref →
take_gil → pthread_exit → std::terminate. So after destroying the group, the process waits (the
GIL released) until gloo's workers have been asleep for a few polls in a row: a worker that
wanted the GIL has had it by then. Bounded, and a no-op where /proc or the threads are absent.
"""

from __future__ import annotations

import os
import time
from typing import Any

GLOO_WORKER = "pt_gloo_runloop"  # the name ProcessGroupGloo gives its worker threads
TASKS = "/proc/self/task"


def end_process_group(dist: Any, timeout: float = 2.0) -> None:
    """Destroy the default group, then let gloo's workers settle (see the module's text)."""
    dist.destroy_process_group()
    settle_gloo_workers(timeout)


def settle_gloo_workers(timeout: float = 2.0, quiet_polls: int = 3, interval: float = 0.02) -> bool:
    """Sleep in `interval` steps until every gloo worker thread was seen asleep `quiet_polls`
    times in a row (True), or `timeout` passed (False). No workers: True at once."""
    deadline = time.monotonic() + timeout
    quiet = 0
    while quiet < quiet_polls:
        states = [_state(tid) for tid in _gloo_workers()]
        if not states:
            return True
        quiet = quiet + 1 if all(s in ("S", "D", None) for s in states) else 0
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def _gloo_workers() -> list[str]:
    try:
        tids = os.listdir(TASKS)
    except OSError:
        return []
    return [tid for tid in tids if _read(f"{TASKS}/{tid}/comm") == GLOO_WORKER]


def _state(tid: str) -> str | None:
    """The thread's scheduler state (R running, S sleeping, ...), None if it has ended."""
    stat = _read(f"{TASKS}/{tid}/stat")
    if stat is None:
        return None
    return stat.rsplit(")", 1)[-1].split()[0]  # the name in parentheses may hold spaces


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
