"""training_src/process_group.py: after the gloo group is destroyed, the process waits until gloo's
worker threads have been asleep for a few polls in a row (a worker releasing the last collective's
work during interpreter shutdown aborted 1 finished run in ~40). Threads named as gloo names its
workers stand in for them here: one that keeps running, one that sleeps; and the real group of a
2-process DDP run under torchrun, which must end with exit 0 on every rank with its workers settled."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import sys
import threading
import time

import pytest

from sagestack.local.training.processes import free_port
from tests.training_src.conftest import SRC, load

pg = load("process_group")
PR_SET_NAME = 15


def _named_thread(busy: bool, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, pg.GLOO_WORKER.encode(), 0, 0, 0)
        block = b"x" * 4_000_000
        while not stop.is_set():
            if busy:  # running, the GIL released (hashlib hashes a large block without it)
                hashlib.sha256(block).digest()
            else:
                stop.wait(0.5)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while len(pg._gloo_workers()) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    return thread


def _gone() -> None:
    """A joined thread's task lingers in /proc for a moment: the next test starts without it."""
    deadline = time.monotonic() + 5
    while pg._gloo_workers() and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.skipif(not os.path.isdir(pg.TASKS), reason="Linux's /proc is where the workers are read")
@pytest.mark.parametrize("busy", [True, False], ids=["busy", "asleep"])
def test_settle_waits_for_a_busy_worker_and_not_for_a_sleeping_one(busy):
    stop = threading.Event()
    thread = _named_thread(busy, stop)
    try:
        assert len(pg._gloo_workers()) == 1
        started = time.monotonic()
        settled = pg.settle_gloo_workers(timeout=0.5, quiet_polls=3, interval=0.02)
        waited = time.monotonic() - started
    finally:
        stop.set()
        thread.join()
        _gone()
    if busy:
        assert settled is False and waited >= 0.5
    else:
        assert settled is True and waited < 0.5


def test_no_workers_no_wait():
    assert pg._gloo_workers() == []
    assert pg.settle_gloo_workers(timeout=5) is True


PROBE = """
import os, sys, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
sys.path.insert(0, sys.argv[1])
from process_group import end_process_group, _gloo_workers, _state
dist.init_process_group("gloo")
model = DistributedDataParallel(torch.nn.Linear(4, 2))
model(torch.randn(8, 4)).sum().backward()
dist.barrier()
alive = len(_gloo_workers())
end_process_group(dist)
states = sorted({_state(t) for t in _gloo_workers()} - {None})
with open(os.path.join(sys.argv[2], f"rank{os.environ['RANK']}.txt"), "w") as out:
    out.write(f"workers {alive} states {states}")
"""


def test_a_ddp_run_ends_every_rank_with_exit_0_and_its_workers_asleep(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(free_port()),
            str(probe),
            str(SRC),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # each rank's own file: the two ranks' prints shared one pipe and ran into one line once
    seen = [(tmp_path / f"rank{rank}.txt").read_text() for rank in (0, 1)]
    # DDP keeps the group past destroy_process_group: its workers are alive, and asleep at exit
    assert seen == ["workers 2 states ['S']"] * 2, done.stdout + done.stderr
