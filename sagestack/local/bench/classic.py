"""The sweep of a classic endpoint: the knobs the cloud's container takes (batching's batch size
and delay, TorchServe's workers) as `python -m sagestack.local.serving.serve` takes them, each
configuration served in a process of its own (so the load generator does not share its
interpreter) and measured by local/serving/loadgen.py at a few client counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.local.bench.report import Point, judged
from sagestack.local.errors import LocalRunError
from sagestack.local.serving.loadgen import load
from sagestack.local.training.processes import free_port


@dataclass(frozen=True)
class Configuration:
    max_batch: int
    max_delay_ms: float
    workers: int

    @property
    def name(self) -> str:
        if self.max_batch == 1:
            return f"no batching, {self.workers} worker{'s' if self.workers > 1 else ''}"
        return (
            f"batch {self.max_batch}, delay {self.max_delay_ms:g} ms, "
            f"{self.workers} worker{'s' if self.workers > 1 else ''}"
        )

    @property
    def knobs(self) -> dict[str, float]:
        return {"max_batch_size": self.max_batch, "max_delay_ms": self.max_delay_ms, "workers": self.workers}


def configurations(batching: Any, cpus: int, *, quick: bool) -> list[Configuration]:
    """One request per forward pass and the endpoint's own batching first, then (unless quick)
    other batch sizes and worker counts around them."""
    batch = batching.max_batch_size if batching is not None else 16
    delay = float(batching.max_delay_ms) if batching is not None else 5.0
    workers = (batching.workers if batching is not None else None) or cpus
    found = [Configuration(1, 0.0, 1), Configuration(batch, delay, workers)]
    if not quick:
        found += [Configuration(1, 0.0, workers), Configuration(max(2, batch // 4), delay, workers)]
        found += [Configuration(batch, delay, 1), Configuration(batch * 2, delay * 2, workers)]
    return list(dict.fromkeys(found))


def generated_payloads(input_shapes: dict[str, list[int]], count: int = 64) -> list[bytes]:
    """Request bodies of the model's input shape (compile.input_shapes), random values in [0, 1)."""
    import numpy as np

    if len(input_shapes) != 1:
        raise LocalRunError(
            f"the model takes {len(input_shapes)} inputs ({', '.join(input_shapes)}); give the requests "
            "to send with --payload FILE (one JSON request body a line)"
        )
    shape = next(iter(input_shapes.values()))
    rng = np.random.default_rng(0)
    return [json.dumps({"instances": rng.random(shape).round(4).tolist()}).encode() for _ in range(count)]


def payload_file(path: Path) -> list[bytes]:
    """The request bodies of a JSON Lines file (one a line; blank lines skipped)."""
    try:
        lines = [line.strip() for line in path.read_bytes().splitlines()]
    except OSError as e:
        raise LocalRunError(f"--payload {path}: {e.strerror or e}") from None
    bodies = [line for line in lines if line]
    for n, body in enumerate(bodies, 1):
        try:
            json.loads(body)
        except ValueError as e:
            raise LocalRunError(f"--payload {path}: request {n} is not JSON ({e})") from None
    if not bodies:
        raise LocalRunError(f"--payload {path}: no requests in it (one JSON body a line)")
    return bodies


class ServerProcess:
    """`python -m sagestack.local.serving.serve` for one configuration, until the block ends."""

    def __init__(self, model_dir: Path, c: Configuration) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "sagestack.local.serving.serve", str(model_dir)]
        command += ["--port", str(self.port), "--max-batch", str(c.max_batch)]
        command += ["--max-delay-ms", str(c.max_delay_ms), "--workers", str(c.workers), "--threads", "1"]
        self.command = command

    def __enter__(self) -> str:
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1):
                    return self.url
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    said = (self.proc.stderr.read() if self.proc.stderr else b"").decode(errors="replace")
                    raise LocalRunError(f"the model server did not start: {said.strip()[-500:]}") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def sweep(
    model_dir: Path,
    payloads: list[bytes],
    configs: list[Configuration],
    clients: list[int],
    requests: int,
    targets: dict[str, float],
    on_point: Callable[[Point, int, int], None] = lambda *_: None,
) -> list[Point]:
    """Every configuration at every client count: `requests` requests each, after a warm-up."""
    points: list[Point] = []
    total = len(configs) * len(clients)
    for c in configs:
        with ServerProcess(model_dir, c) as url:
            load(url, payloads, concurrency=max(clients), total=min(requests, 50))  # warm-up
            for n in clients:
                run = load(url, payloads, concurrency=n, total=max(requests, n))
                point = Point(
                    configuration=c.name,
                    knobs=c.knobs,
                    clients=n,
                    requests=run.requests,
                    failed=run.failed() + sum(e.startswith("transport") for e in run.errors),
                    requests_per_second=run.throughput,
                    p50_ms=run.percentile(50) * 1000,
                    p95_ms=run.percentile(95) * 1000,
                    p99_ms=run.percentile(99) * 1000,
                )
                points.append(judged(point, targets))
                on_point(points[-1], len(points), total)
    return points
