#!/usr/bin/env python3
"""Local LLM serving against the same model driven directly, measured in one run.

- direct: `model.generate` (greedy, the model's KV cache) of N new tokens for one prompt, in this
  process: tokens/s — the baseline;
- served, 1 client and 8 concurrent clients, buffered (InvokeEndpoint) and streamed
  (InvokeEndpointWithResponseStream, boto3's own client reading the event stream): tokens/s over
  all clients, time to first token (streamed: the first PayloadPart; buffered: the whole answer),
  and each figure's ratio to direct generation.

The model is the one `sagestack local serve` makes when a project has no weights (a small GPT-2
trained on bundled text), served in the LMI schema on a thread of this process (the same server
`local serve` runs). --smoke: a few tokens, one repeat (the tests run it so the bench cannot rot;
its figures mean nothing).
Usage: python bench/llm_serve.py [--tokens N] [--repeats R] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def direct(model, tokenizer, prompt: str, tokens: int) -> float:
    """Seconds for model.generate to make `tokens` new tokens."""
    import torch

    ids = tokenizer(prompt, return_tensors="pt").input_ids
    started = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=False,
            pad_token_id=tokenizer.eos_token_id,
        )
    assert out.shape[1] - ids.shape[1] == tokens
    return time.perf_counter() - started


def served(client, prompt: str, tokens: int, stream: bool) -> tuple[float, int]:
    """(seconds to the first token, tokens generated) of one request."""
    body = json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": tokens, "details": True}})
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.tokens, args.repeats = 4, 1

    from botocore.config import Config

    from sagestack.local.llm.endpoint import BackgroundLlm
    from sagestack.local.llm.protocol import Limits
    from sagestack.local.llm.server import LlmModelServer
    from sagestack.local.llm.weights import build_weights, load_weights
    from sagestack.local.serving.serve import runtime_client
    from sagestack.local.training.processes import free_port

    prompt = "The endpoint serves"
    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer = load_weights(build_weights(Path(tmp) / "weights"))
    direct_s = statistics.median(direct(model, tokenizer, prompt, args.tokens) for _ in range(args.repeats))
    base = args.tokens / direct_s
    print(f"direct model.generate: {base:,.0f} tokens/s ({args.tokens} tokens in {direct_s * 1000:.0f} ms)")
    app = LlmModelServer(
        model=model, tokenizer=tokenizer, schema="lmi", limits=Limits(256, 512), max_batch_size=8
    )
    with BackgroundLlm(app, free_port()) as url:
        client = runtime_client(url, Config(max_pool_connections=16, retries={"max_attempts": 1}))
        served(client, prompt, 2, True)  # warm the connection pool
        print(f"{'clients':>7} {'mode':<9} {'tokens/s':>9} {'x direct':>9} {'first token p50':>16}")
        for clients in (1, 8):
            for stream in (False, True):
                rates, firsts = [], []
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    with ThreadPoolExecutor(clients) as pool:
                        results = list(
                            pool.map(
                                served, *zip(*[(client, prompt, args.tokens, stream)] * clients, strict=True)
                            )
                        )
                    rates.append(sum(n for _, n in results) / (time.perf_counter() - started))
                    firsts += [f for f, _ in results]
                rate = statistics.median(rates)
                mode = "streamed" if stream else "buffered"
                print(
                    f"{clients:>7} {mode:<9} {rate:>9,.0f} {rate / base:>8.2f}x "
                    f"{statistics.median(firsts) * 1000:>13.0f} ms"
                )


if __name__ == "__main__":
    main()
