#!/usr/bin/env python3
"""Local LLM serving against the same model driven directly, measured in one run.

- direct: `model.generate` (greedy, the model's KV cache) of N new tokens for one prompt, in this
  process: tokens/s — the baseline — and its time to the first token (generate of one token);
- served, 1 client and 8 concurrent clients, buffered (InvokeEndpoint) and streamed
  (InvokeEndpointWithResponseStream, boto3's own client reading the event stream): tokens/s over
  all clients, time to first token (streamed: the first PayloadPart; buffered: the whole answer),
  and each figure's ratio to direct generation. Goals (issue 41): >= 0.9x for one client, buffered
  and streamed; > 1.0x for eight (the server batches them: continuous batching).

The model is the one `sagestack local serve` makes when a project has no weights (a small GPT-2
trained on bundled text), served in the LMI schema by the same server `local serve` runs, in a
process of its own (`python -m sagestack.local.llm.endpoint`), as a client meets it. Both sides
run --threads torch threads. Each repeat measures direct generation and then every served case, so
the ratios compare figures taken moments apart; medians of the repeats are printed, with the load
the machine had (on a busy machine the wall-clock figures are inflated, the ratios less so).
--smoke: a model trained for a few steps, a few tokens, one repeat (the tests run it so the bench
cannot rot; its figures mean nothing).
Usage: python bench/llm_serve.py [--tokens N] [--repeats R] [--threads T] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPT = "The endpoint serves"
CASES = [(1, False), (1, True), (8, False), (8, True)]  # (clients, streamed)


def direct(model, tokenizer, tokens: int) -> tuple[float, int]:
    """(seconds, tokens) of model.generate making at most `tokens` new tokens (it stops at EOS, as
    the server does: both make the same tokens)."""
    import torch

    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    started = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=tokens,
            do_sample=False,
            pad_token_id=tokenizer.eos_token_id,
        )
    return time.perf_counter() - started, out.shape[1] - ids.shape[1]


def served(client, tokens: int, stream: bool) -> tuple[float, int]:
    """(seconds to the first token, tokens generated) of one request."""
    body = json.dumps({"inputs": PROMPT, "parameters": {"max_new_tokens": tokens, "details": True}})
    started = time.perf_counter()
    if not stream:
        raw = client.invoke_endpoint(EndpointName="bench", ContentType="application/json", Body=body)[
            "Body"
        ].read()
        return time.perf_counter() - started, json.loads(raw)["details"]["generated_tokens"]
    first, parts = None, 0
    response = client.invoke_endpoint_with_response_stream(
        EndpointName="bench", ContentType="application/json", Body=body
    )
    for event in response["Body"]:
        if event.get("PayloadPart"):
            first = first if first is not None else time.perf_counter() - started
            parts += 1
    return first or 0.0, parts - 1  # the last part carries the whole text, not a token


def round_of(pool: ThreadPoolExecutor, client, clients: int, tokens: int, stream: bool) -> tuple[float, list]:
    """(tokens/s over all clients, each request's (first token, tokens)) of `clients` at once."""
    started = time.perf_counter()
    results = list(pool.map(lambda _: served(client, tokens, stream), range(clients)))
    return sum(n for _, n in results) / (time.perf_counter() - started), results


class Server:
    """The LLM server in a process of its own."""

    def __init__(self, weights: Path, threads: int, max_batch: int) -> None:
        from sagestack.local.training.processes import free_port

        self.port = free_port()
        cmd = [sys.executable, "-m", "sagestack.local.llm.endpoint", str(weights), "--schema", "lmi"]
        cmd += ["--port", str(self.port), "--threads", str(threads), "--max-batch", str(max_batch)]
        self.proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.proc.kill()
                    raise SystemExit("the LLM server did not start") from None
                time.sleep(0.1)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def machine() -> str:
    load = os.getloadavg()
    cpus = os.cpu_count() or 1
    busy = "busy: wall-clock figures are inflated" if load[0] > cpus / 2 else "quiet"
    return f"{cpus} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({busy})"


def cpu_seconds(pid: int) -> float | None:
    """CPU time of process `pid` so far, its threads' that ended included (Linux's /proc/PID/stat,
    in clock ticks: summed over the rounds it is a fair figure, one round alone is coarse); None
    where the kernel does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Figures:
    direct_rates: list[float] = field(default_factory=list)
    direct_firsts: list[float] = field(default_factory=list)
    direct_cpu: list[float] = field(default_factory=list)  # seconds a token
    made: set[int] = field(default_factory=set)
    rates: dict[tuple[int, bool], list[tuple[float, float]]] = field(default_factory=dict)
    firsts: dict[tuple[int, bool], list[float]] = field(default_factory=dict)
    counts: dict[tuple[int, bool], list[int]] = field(default_factory=dict)
    cpu: dict[tuple[int, bool], list[tuple[float, int]]] = field(default_factory=dict)  # (seconds, tokens)


def measure(model, tokenizer, server: Server, tokens: int, repeats: int) -> Figures:
    """Direct generation, then every served case, `repeats` times over."""
    from botocore.config import Config

    from sagestack.local.serving.serve import runtime_client

    f = Figures()
    client = runtime_client(server.url, Config(max_pool_connections=16, retries={"max_attempts": 1}))
    with ThreadPoolExecutor(8) as pool:
        direct(model, tokenizer, 2)  # warm
        for clients, stream in CASES:  # warm the connections (and the server's first batch)
            round_of(pool, client, clients, 2, stream)
        for _ in range(repeats):
            cpu = time.thread_time()
            seconds, n = direct(model, tokenizer, tokens)
            f.direct_cpu.append((time.thread_time() - cpu) / n)
            f.direct_rates.append(n / seconds)
            f.made.add(n)
            f.direct_firsts.append(direct(model, tokenizer, 1)[0])
            for case in CASES:
                before = cpu_seconds(server.proc.pid)
                rate, results = round_of(pool, client, case[0], tokens, case[1])
                after = cpu_seconds(server.proc.pid)
                made = sum(n for _, n in results)
                if before is not None and after is not None:
                    f.cpu.setdefault(case, []).append((after - before, made))
                f.rates.setdefault(case, []).append((rate, rate / f.direct_rates[-1]))
                f.firsts.setdefault(case, []).extend(first for first, _ in results)
                f.counts.setdefault(case, []).extend(n for _, n in results)
    return f


def report(f: Figures, tokens: int, repeats: int) -> None:
    med = statistics.median
    made = "/".join(map(str, sorted(f.made)))
    print(
        f"direct model.generate: {med(f.direct_rates):,.0f} tokens/s, first token "
        f"{med(f.direct_firsts) * 1000:.1f} ms, CPU {med(f.direct_cpu) * 1e6:,.0f} us a token"
    )
    print(f"  ({made} tokens of at most {tokens} a request, as served; medians of {repeats} rounds)")
    print(f"{'clients':>7} {'mode':<9}{'tokens/s':>9}{'x direct':>9}{'1st token':>11}{'CPU/token':>11}  goal")
    for case in CASES:
        clients, stream = case
        rate = med(r for r, _ in f.rates[case])
        ratio = med(x for _, x in f.rates[case])  # each against its own round's direct generation
        met = ratio >= 0.9 if clients == 1 else ratio > 1.0
        spent = f.cpu.get(case)  # over every round: the clock's ticks are coarse for one
        cpu = (
            f"{sum(s for s, _ in spent) / sum(n for _, n in spent) * 1e6:>7,.0f} us"
            if spent
            else f"{'-':>10}"
        )
        print(
            f"{clients:>7} {'streamed' if stream else 'buffered':<9}{rate:>9,.0f}{ratio:>8.2f}x"
            f"{med(f.firsts[case]) * 1000:>8.1f} ms {cpu}  {'>= 0.9' if clients == 1 else '> 1.0'}"
            f" {'met' if met else 'NOT met'}"
        )
    print("1st token: streamed, the first PayloadPart; buffered, the whole answer.")
    print("CPU/token: the server process's CPU time over the tokens it made, every round")
    print("together; direct's is generate's. It moves far less than tokens/s with the load.")
    if {n for case in CASES for n in f.counts[case]} != f.made:
        raise SystemExit(f"served and direct made different token counts: {f.counts} vs {f.made}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads, direct and served alike")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.tokens, args.repeats = 4, 1

    import torch

    from sagestack.local.llm.weights import WeightsRecipe, build_weights, load_weights

    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; {args.threads} torch thread(s) a side")
    with tempfile.TemporaryDirectory() as tmp:
        weights = build_weights(Path(tmp) / "weights", WeightsRecipe(steps=5) if args.smoke else None)
        model, tokenizer = load_weights(weights)
        with Server(weights, args.threads, max_batch=8) as server:
            figures = measure(model, tokenizer, server, args.tokens, args.repeats)
    report(figures, args.tokens, args.repeats)
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
