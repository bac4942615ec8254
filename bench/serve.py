#!/usr/bin/env python3
"""The local endpoint's cost over the bare model, and what dynamic batching buys, measured in one run.

- bare forward: predict_fn on one digits sample, in this process, 1 torch thread (p50 / p99);
- served at batch 1: one client, sequential keep-alive POST /invocations of one sample each, against
  a server in its own process (1 torch thread); overhead = served p50 - bare p50 (goal <= 1 ms);
- throughput under 32 concurrent clients: the same server with dynamic batching (max batch 32)
  against batch-1 serving (max batch 1); ratio (goal >= 3x);
- the cloud's serving stack (AWS's PyTorch inference container: its toolkit, TorchServe on Java,
  the handler; tests/support/torchserve.py) as sagestack configures it — the example endpoint's
  `batching:` rendered by constructs.Batching, inference.py's handle() — against the container's
  default (no batching variables, its own handler), one after the other, alternating, at 32
  clients: throughput ratio (goal >= 3x) and p99 (goal: no worse), and a run where 10 % of the
  requests are malformed JSON (goal: 0 good requests failed).

The model is the example's CNN with seeded random weights (serving cost does not depend on what
the weights learned), traced and packed as `sagestack local compile` does.
--smoke: every measurement once with a few hundred requests (the tests run it so that the benchmark
cannot rot; its figures mean nothing).
Usage: python bench/serve.py [--requests N] [--clients C] [--repeats R] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_model_dir(dest: Path) -> Path:
    import torch

    sys.path.insert(0, str(ROOT / "training_src"))
    from model import build_model  # training_src/model.py

    torch.manual_seed(0)
    model = build_model("cnn", torch.zeros(1, 8, 8), 10).eval()
    traced = torch.jit.freeze(torch.jit.trace(model, torch.zeros(1, 1, 8, 8)).eval())
    (dest / "code").mkdir(parents=True)
    traced.save(str(dest / "model.pt"))
    (dest / "model_info.json").write_text(json.dumps({"input_shape": [1, 1, 8, 8], "num_classes": 10}))
    shutil.copyfile(ROOT / "training_src" / "inference.py", dest / "code" / "inference.py")
    return dest


def bare_forward(model_dir: Path, n: int) -> list[float]:
    import torch

    os.environ["SAGESTACK_SERVE_THREADS"] = "1"
    from sagestack.local.serving.handlers import load_handlers

    h = load_handlers(model_dir)
    x = torch.rand(1, 1, 8, 8)
    for _ in range(200):
        h.predict_fn(x, h.model)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        h.predict_fn(x, h.model)
        times.append(time.perf_counter() - t)
    return times


class Server:
    def __init__(self, model_dir: Path, max_batch: int) -> None:
        self.port = free_port()
        env = {**os.environ, "SAGESTACK_SERVE_THREADS": "1", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sagestack.local.serving.serve",
                str(model_dir),
                "--port",
                str(self.port),
                "--max-batch",
                str(max_batch),
            ],
            env=env,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.1)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def container_stack(
    model_dir: Path, payloads: list[bytes], clients: int, requests: int, repeats: int, warm_up: int
) -> None:
    """The container stack as configured against its default (skipped where it cannot run here)."""
    from tests.support import torchserve

    reason = torchserve.missing()
    if reason:
        print(f"container stack: skipped ({reason})")
        return
    from sagestack.constructs.endpoint_spec import batching_of
    from sagestack.local.serving.loadgen import load
    from sagestack.project import load_project

    spec = load_project(ROOT, "dev").spec.endpoints["digits"].batching
    assert spec is not None, "the example's digits endpoint has batching:"
    cpus = len(os.sched_getaffinity(0))
    # what the endpoint's Model gets, on an instance with this machine's vCPUs
    configured = batching_of(spec).environment(default_workers=cpus)
    probe = torchserve.json_probe((1, 8, 8))
    bad = [b'{"instances": [[[0.1, 0.2]]', b"{not json"]
    mixed = [bad[i % 2] if i % 10 == 0 else p for i, p in enumerate(payloads[:250])]
    good = {i for i, p in enumerate(mixed) if p not in bad}
    results: dict[str, dict[str, list[float]]] = {}
    for r in range(repeats):
        order = [("default", {}), ("sagestack", configured)]
        for name, env in order if r % 2 == 0 else order[::-1]:
            with torchserve.ContainerServer(model_dir, env, probe=probe) as url:
                load(url, payloads, concurrency=clients, total=warm_up)  # warm-up: TorchServe's JIT
                before = cpu_seconds()
                run = load(url, payloads, concurrency=clients, total=requests)
                spent = {k: v - before.get(k, 0.0) for k, v in cpu_seconds().items()}
                assert not run.errors, run.errors[:3]
                faulty = load(url, mixed, concurrency=clients, total=requests)
            figures = results.setdefault(name, {"rate": [], "p99": [], "p50": [], "good_failed": []})
            figures["rate"].append(run.throughput)
            figures["p99"].append(run.percentile(99))
            figures["p50"].append(run.percentile(50))
            figures["good_failed"].append(faulty.failed(good))
            for part, seconds in spent.items():
                figures.setdefault(f"cpu_{part}", []).append(seconds / requests)
    m = statistics.median
    env_text = " ".join(f"{k}={v}" for k, v in configured.items())
    print(
        f"container stack (sagemaker-pytorch-inference + TorchServe), {clients} clients, {requests} requests x {repeats}:"
    )
    print(f"  as sagestack configures it: {env_text}")
    for name in ("default", "sagestack"):
        f = results[name]
        print(
            f"  {name:9s}: {m(f['rate']):.0f} req/s (runs {', '.join(f'{x:.0f}' for x in f['rate'])}), "
            f"p50 {ms(m(f['p50']))}, p99 {ms(m(f['p99']))}; 10 % malformed: "
            f"{int(max(f['good_failed']))} good requests failed (worst run)"
        )
        parts = ", ".join(
            f"{part.removeprefix('cpu_')} {m(v) * 1e6:.0f} us"
            for part, v in f.items()
            if part.startswith("cpu_")
        )
        print(f"             CPU per request: {parts}")
    ratio = m(results["sagestack"]["rate"]) / m(results["default"]["rate"])
    p99_ok = m(results["sagestack"]["p99"]) <= m(results["default"]["p99"])
    good_ok = max(results["sagestack"]["good_failed"]) == 0
    print(
        f"  throughput sagestack / default: {ratio:.2f}x (goal >= 3x: {'met' if ratio >= 3 else 'NOT met'})"
    )
    print(f"  p99 no worse than the default's: {'met' if p99_ok else 'NOT met'}")
    print(f"  0 good requests failed with 10 % malformed: {'met' if good_ok else 'NOT met'}")


def cpu_seconds() -> dict[str, float]:
    """CPU time so far of TorchServe's frontend (Java), its Python workers and this process (the
    clients): where a request's cost goes on a machine whose CPUs they share."""
    import psutil

    totals = {"frontend (Java)": 0.0, "workers (Python)": 0.0}
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        part = (
            "frontend (Java)"
            if "org.pytorch.serve.ModelServer" in cmd
            else "workers (Python)"
            if "model_service_worker" in cmd
            else None
        )
        if part:
            try:
                t = proc.cpu_times()
                totals[part] += t.user + t.system
            except psutil.Error:
                pass
    own = os.times()
    totals["clients"] = own.user + own.system
    return totals


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=4000, help="per throughput run")
    parser.add_argument("--latency-requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="every measurement once, few requests (seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.latency_requests, args.clients, args.repeats = 300, 200, 8, 1
    warm_up = min(300, args.requests)

    import numpy as np

    from sagestack.local.serving.loadgen import load

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(Path(tmp) / "model")
        rng = np.random.default_rng(0)
        payloads = [
            json.dumps({"instances": rng.random((1, 1, 8, 8), dtype=np.float32).tolist()}).encode()
            for _ in range(256)
        ]

        bare = bare_forward(model_dir, args.latency_requests)
        bare_p50, bare_p99 = statistics.median(bare), sorted(bare)[int(0.99 * len(bare))]
        print(f"bare forward (predict_fn, batch 1, 1 thread): p50 {ms(bare_p50)}  p99 {ms(bare_p99)}")

        with Server(model_dir, max_batch=32) as batched_server, Server(model_dir, max_batch=1) as one_server:
            load(batched_server.url, payloads, concurrency=1, total=warm_up)  # warm-up
            single = load(batched_server.url, payloads, concurrency=1, total=args.latency_requests)
            assert not single.errors, single.errors[:3]
            p50, p99 = single.percentile(50), single.percentile(99)
            print(f"served at batch 1 (1 client, keep-alive): p50 {ms(p50)}  p99 {ms(p99)}")
            print(f"  overhead over the bare forward at p50: {ms(p50 - bare_p50)} (goal <= 1 ms)")
            # Throughput: the two servers (idle while the other is measured) alternate, so that the
            # machine's drifting load falls on both alike; medians of --repeats runs each.
            for url in (batched_server.url, one_server.url):
                load(url, payloads, concurrency=args.clients, total=min(500, args.requests))
            rates: dict[str, list[float]] = {"batched": [], "one": []}
            p50s: dict[str, list[float]] = {"batched": [], "one": []}
            for _ in range(args.repeats):
                for name, url in (("batched", batched_server.url), ("one", one_server.url)):
                    run = load(url, payloads, concurrency=args.clients, total=args.requests)
                    assert not run.errors, run.errors[:3]
                    rates[name].append(run.throughput)
                    p50s[name].append(run.percentile(50))
        batched, one = statistics.median(rates["batched"]), statistics.median(rates["one"])
        print(
            f"{args.clients} clients, {args.requests} requests x {args.repeats}: dynamic batching {batched:.0f} req/s "
            f"(p50 {ms(statistics.median(p50s['batched']))}; runs {', '.join(f'{r:.0f}' for r in rates['batched'])}), "
            f"batch-1 serving {one:.0f} req/s (p50 {ms(statistics.median(p50s['one']))}; runs "
            f"{', '.join(f'{r:.0f}' for r in rates['one'])})"
        )
        print(f"  throughput ratio batched / batch-1 (medians): {batched / one:.2f}x (goal >= 3x)")
        print(f"  (machine: {os.cpu_count()} CPUs; server and clients share them)")
        container_warm_up = 300 if args.smoke else 3000
        container_stack(model_dir, payloads, args.clients, args.requests, args.repeats, container_warm_up)


if __name__ == "__main__":
    main()
