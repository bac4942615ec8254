"""The processes of a local run: started as the container starts them, followed, and killed as one.

Each command runs under a guard (local/guard.py) in a session of its own, with its output in a log;
its lines are followed as they come (the job's metrics read from them as SageMaker reads them:
local/training/metric_series.py, and the step of a `metrics:` line at which `interrupt_at`
kills every process at once, the way a spot reclaim ends an instance). The run ends with the
command, whatever ends it: Ctrl-C, SIGTERM and SIGHUP are turned into `Stopped` while the run is
followed, which kills every process of the run (the guard's tree: torchrun's workers included, in
sessions of their own) before the CLI exits; if the CLI dies without clean-up (SIGKILL), each guard
sees it and ends its own tree.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sagestack.local import guard
from sagestack.local.training.metric_series import MetricSeries, parse_metrics_line

# Variables of a launcher that started this process; the local hosts must not inherit them.
_STALE = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
)


def ephemeral_ports(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> range:
    """The ports the kernel hands out by itself (outgoing connections, bind to port 0)."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def free_port(attempts: int = 64) -> int:
    """A free port for the run's rendezvous (torchrun's --master_port), taken from below the
    kernel's ephemeral range: the launcher binds it a few seconds later, and in those seconds any
    process on the machine (another run's gloo connections, say) could be given an ephemeral port
    by the kernel — never one outside that range. Falls back to a kernel-chosen port when the
    ephemeral range leaves no room below it."""
    ephemeral = ephemeral_ports()
    below = range(max(10000, ephemeral.start - 20000), ephemeral.start)
    rng = random.SystemRandom()
    for port in rng.sample(below, min(attempts, len(below))) if len(below) > 0 else ():
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WAIT_POLL_SECONDS = 0.1  # how often the run looks for a process that has ended


class Stopped(KeyboardInterrupt):
    """A signal ended the run; every process of it was killed first. A KeyboardInterrupt, so what
    handles Ctrl-C (pytest, click) handles SIGTERM and SIGHUP alike."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # what a shell reports for a command a signal ended


@contextlib.contextmanager
def stopping_signals_raise() -> Iterator[None]:
    """While the run is followed, SIGINT / SIGTERM / SIGHUP raise `Stopped` in the main thread (so
    the clean-up runs) instead of ending the CLI there and then. The first one wins: the others are
    ignored while the run is killed. Off the main thread, Python cannot take signals: nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        for other in STOPPING_SIGNALS:
            signal.signal(other, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {s: signal.signal(s, stop) for s in STOPPING_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@dataclass(frozen=True)
class Command:
    """One process to start: a host's script or launcher, or one rank of an MPI host."""

    argv: list[str]
    cwd: Path
    environment: dict[str, str]  # on top of this process's (less a launcher's variables)
    log: Path  # its output; the log's name (algo-1, algo-1-0) labels its lines
    host: str = ""  # the host it runs on (the metrics' Host dimension); default: the label
    # serves the others (a parameter server): not waited for, ended once the others have ended
    service: bool = False

    @property
    def label(self) -> str:
        return self.log.stem

    @property
    def host_name(self) -> str:
        return self.host or self.label


@dataclass(frozen=True)
class Outcome:
    codes: list[int]  # each process's exit code, in the order started (0 for a service ended here)
    metrics: list[dict[str, float]]  # every `metrics:` line's values, in the order read
    series: MetricSeries  # the job's metric definitions read from every line of every host
    interrupted_at: int | None  # the step at which every process was killed
    failed: int | None = None  # the process that failed first (the others were then stopped)

    @property
    def exit_code(self) -> int:
        """The run's: the first failure's code (SageMaker fails the job when any host fails), else 0."""
        return 0 if self.failed is None else self.codes[self.failed]


class Processes:
    """The commands, started at once: `follow()` them to the end."""

    def __init__(self, commands: list[Command]) -> None:
        base = {k: v for k, v in os.environ.items() if k not in _STALE}
        self.commands = commands
        leash = [sys.executable, guard.__file__, str(os.getpid()), "--"]
        self.processes = [
            subprocess.Popen(
                [*leash, *c.argv],
                cwd=c.cwd,
                env={**base, **c.environment},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                # its own session: a terminal's signals reach the CLI, which ends the run as one
                start_new_session=True,
            )
            for c in commands
        ]

    def kill(self) -> None:
        """Every process of the run, at once (torchrun starts each worker in a session of its own:
        each guard's tree holds them all)."""
        guard.kill_tree([p.pid for p in self.processes])

    def follow(
        self,
        *,
        interrupt_at: int | None,
        on_line: Callable[[str, str], None],
        on_metrics: Callable[[dict[str, float]], None],
        definitions: dict[str, str] | None = None,
    ) -> Outcome:
        """Every line to its log and to `on_line`; what it gives (the job's metric `definitions`
        it matches, a `metrics:` line's values) to `on_metrics`; all killed once a metrics line
        reaches step `interrupt_at` (or on Ctrl-C)."""
        metrics: list[dict[str, float]] = []
        series = MetricSeries(definitions or {})
        interrupted: list[int] = []
        lock = threading.Lock()

        def pump(command: Command, proc: subprocess.Popen[str]) -> None:
            assert proc.stdout is not None
            with command.log.open("w") as log:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    text = line.rstrip("\n")
                    on_line(command.label, text)
                    with lock:
                        values = series.read(command.host_name, text, time.time())
                        if not values:
                            continue
                        own = parse_metrics_line(text)
                        if own:
                            metrics.append(own)
                        on_metrics(values)
                        step = own.get("step")
                        if (
                            interrupt_at is not None
                            and not interrupted
                            and step is not None
                            and step >= interrupt_at
                        ):
                            interrupted.append(int(step))
                            self.kill()

        pumps = [
            threading.Thread(target=pump, args=(c, p), daemon=True)
            for c, p in zip(self.commands, self.processes, strict=True)
        ]
        for t in pumps:
            t.start()
        with stopping_signals_raise():  # still ignoring a second signal while the run is killed
            try:
                codes, failed = self._wait()
                services = [p for c, p in zip(self.commands, self.processes, strict=True) if c.service]
                if services:
                    guard.kill_tree([p.pid for p in services])
                    for p in services:
                        p.wait()
            except BaseException as e:
                self.kill()
                if isinstance(e, KeyboardInterrupt) and not isinstance(e, Stopped):
                    raise Stopped(signal.SIGINT) from None
                raise
        for t in pumps:
            t.join(timeout=10)
        return Outcome(codes, metrics, series, interrupted[0] if interrupted else None, failed)

    def _wait(self) -> tuple[list[int], int | None]:
        """Every process's exit code; on the first failure the rest are stopped, as SageMaker stops a
        job's other hosts when one fails (a rank waiting for a dead peer would otherwise wait out its
        collective's timeout). Services count 0."""
        codes = [0] * len(self.processes)
        pending = [i for i, c in enumerate(self.commands) if not c.service]
        failed: int | None = None
        while pending:
            for i in list(pending):
                code = self.processes[i].poll()
                if code is None:
                    continue
                codes[i] = code
                pending.remove(i)
                if code != 0 and failed is None:
                    failed = i
                    self.kill()
            if pending:
                time.sleep(WAIT_POLL_SECONDS)
        return codes, failed
