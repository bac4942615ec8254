"""The sweep of an LLM endpoint: its container's continuous batch size (`llm.max_batch_size`, the
sequences served at once) and the users sending at once, against prompts and generations of the
slo's token lengths. Each configuration is the server `sagestack local serve` starts (local/llm's
`model_server`, on a thread), every request streamed through boto3's own
InvokeEndpointWithResponseStream: time to the first part, and one user's tokens per second after it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import ENGINES
from sagestack.local.bench.report import Point, judged, percentile
from sagestack.local.llm.corpus import PARAGRAPHS
from sagestack.local.llm.endpoint import BackgroundLlm, LocalLlm, model_server
from sagestack.local.serving.serve import runtime_client
from sagestack.local.training.processes import free_port


@dataclass(frozen=True)
class Profile:
    """The token lengths sent: the slo's, within what the local model takes."""

    input: int
    output: int
    asked: tuple[int, int]  # the slo's (input, output)

    @property
    def scaled(self) -> bool:
        return (self.input, self.output) != self.asked


def profile(asked: tuple[int, int], max_input: int, max_total: int, *, quick: bool) -> Profile:
    """The slo's lengths, shrunk in proportion where the local model's context is shorter (and
    to a few tokens when quick)."""
    i, o = asked
    if quick:
        i, o = min(i, 32), min(o, 8)
    if i + o > max_total:
        scale = (max_total - 1) / (i + o)
        i, o = max(1, int(i * scale)), max(1, int(o * scale))
    return Profile(min(i, max_input), o, asked)


def prompt_of(tokenizer: Any, tokens: int) -> str:
    """Text of the bundled corpus that is exactly `tokens` tokens long for `tokenizer`."""
    ids: list[int] = []
    while len(ids) < tokens:
        ids += tokenizer.encode(" ".join(PARAGRAPHS) + " ")
    for n in range(tokens, 0, -1):  # decoding may merge tokens: take the longest that re-encodes to fit
        text = tokenizer.decode(ids[:n])
        if len(tokenizer.encode(text)) <= tokens:
            return str(text)
    return "the"


def _body(schema: str, prompt: str, tokens: int) -> str:
    if schema == "openai":
        return json.dumps({"prompt": prompt, "max_tokens": tokens})
    return json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": tokens, "details": True}})


def _generated(schema: str, raw: bytes) -> int:
    """Tokens generated, read from the stream: the closing details (LMI, TGI) or the chunks (OpenAI)."""
    lines = [line.removeprefix(b"data:").strip() for line in raw.split(b"\n")]
    if schema == "openai":
        return sum(1 for line in lines if line and line != b"[DONE]")
    for line in reversed(lines):
        if line:
            details = json.loads(line).get("details") or {}
            return int(details.get("generated_tokens", 0))
    return 0


def _one(client: Any, name: str, schema: str, body: str) -> tuple[float, float, int]:
    """(seconds to the first part, seconds to the end, tokens) of one streamed request."""
    started = time.perf_counter()
    response = client.invoke_endpoint_with_response_stream(
        EndpointName=name, ContentType="application/json", Body=body
    )
    first, raw = None, b""
    for event in response["Body"]:
        part = event.get("PayloadPart")
        if part:
            first = first if first is not None else time.perf_counter() - started
            raw += part["Bytes"]
    end = time.perf_counter() - started
    return first if first is not None else end, end, _generated(schema, raw)


def _tried(client: Any, name: str, schema: str, body: str) -> tuple[float, float, int] | None:
    """One request's figures, or None when the server refused or failed it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return _one(client, name, schema, body)
    except (ClientError, BotoCoreError):
        return None


def configurations(spec_batch: int | None, *, quick: bool) -> list[int]:
    own = spec_batch or 8
    return list(dict.fromkeys([1, own] if quick else [1, 4, own, own * 2]))


def swept(spec: LlmSpec, batch: int) -> LlmSpec:
    """The spec at one point of the sweep: `batch` sequences at once. The container's own variable
    in llm.environment (OPTION_MAX_ROLLING_BATCH_SIZE, …) would win over max_batch_size, as it does
    in the cloud (llm.sizing.max_batch), so the point drops it: each row runs the batch it names."""
    variable = ENGINES[spec.container].batch
    environment = {k: v for k, v in spec.environment.items() if k != variable}
    return spec.model_copy(update={"max_batch_size": batch, "environment": environment})


def sweep(
    llm: LocalLlm,
    batches: list[int],
    users: list[int],
    rounds: int,
    asked: tuple[int, int],
    targets: dict[str, float],
    *,
    quick: bool,
    on_point: Callable[[Point, int, int], None] = lambda *_: None,
) -> tuple[list[Point], Profile]:
    from botocore.config import Config

    points: list[Point] = []
    shape: Profile | None = None
    for batch in batches:
        app = model_server(replace(llm, spec=swept(llm.spec, batch)))
        shape = profile(asked, app.limits.max_input_tokens, app.limits.max_total_tokens, quick=quick)
        body = _body(llm.schema, prompt_of(app.tokenizer, shape.input), shape.output)
        with BackgroundLlm(app, free_port()) as url:
            config = Config(max_pool_connections=max(users) * 2, retries={"max_attempts": 1})
            client = runtime_client(url, config)
            _one(client, llm.name, llm.schema, body)  # warm-up
            for n in users:
                started = time.perf_counter()
                with ThreadPoolExecutor(n) as pool:
                    calls = [
                        pool.submit(_tried, client, llm.name, llm.schema, body) for _ in range(n * rounds)
                    ]
                    tried = [call.result() for call in calls]
                elapsed = time.perf_counter() - started
                runs = [r for r in tried if r is not None]
                rates = [(k - 1) / (end - first) for first, end, k in runs if k > 1 and end > first]
                ends = [end * 1000 for _, end, _ in runs]
                point = Point(
                    configuration=f"batch {batch}",
                    knobs={"max_batch_size": batch, "max_new_tokens": shape.output},
                    clients=n,
                    requests=len(runs),
                    failed=len(tried) - len(runs),
                    requests_per_second=len(runs) / elapsed,
                    p50_ms=percentile(ends, 50),
                    p95_ms=percentile(ends, 95),
                    p99_ms=percentile(ends, 99),
                    ttft_p95_ms=percentile([first * 1000 for first, _, _ in runs], 95),
                    tokens_per_second=percentile(rates, 50) if rates else float("nan"),
                )
                points.append(judged(point, targets))
                on_point(points[-1], len(points), len(batches) * len(users))
    assert shape is not None
    return points, shape
