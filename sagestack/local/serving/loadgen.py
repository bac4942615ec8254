"""A small load generator for the local endpoint: N concurrent keep-alive HTTP/1.1 clients on
asyncio streams (no client library, so the client costs little next to the server it measures).
`sagestack local bench` sweeps with it; bench/serve.py and the serving tests import it from here."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)  # seconds, per successful request
    statuses: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # transport errors and non-200 answers
    bodies: list[tuple[int, bytes]] = field(default_factory=list)  # (request index, answer), when asked
    outcomes: list[tuple[int, int]] = field(default_factory=list)  # (payload index, status), every request
    elapsed: float = 0.0

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def throughput(self) -> float:
        return self.requests / self.elapsed if self.elapsed else 0.0

    def failed(self, good: set[int] | None = None) -> int:
        """Requests answered other than 200; with `good` (indices into the payloads), only theirs."""
        return sum(1 for i, status in self.outcomes if status != 200 and (good is None or i in good))

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


async def _client(
    host: str,
    port: int,
    payloads: list[bytes],
    content_type: str,
    counter: list[int],
    total: int,
    result: LoadResult,
    keep_bodies: bool,
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while counter[0] < total:
            i = counter[0]
            counter[0] += 1
            body = payloads[i % len(payloads)]
            head = (
                f"POST /invocations HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n"
                f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            start = time.perf_counter()
            writer.write(head + body)
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            answer = await reader.readexactly(length)
            elapsed = time.perf_counter() - start
            status = int(status_line.split()[1]) if status_line else 0
            result.statuses[status] = result.statuses.get(status, 0) + 1
            result.outcomes.append((i % len(payloads), status))
            if status == 200:
                result.latencies.append(elapsed)
                if keep_bodies:
                    result.bodies.append((i, answer))
            else:
                result.errors.append(f"{status}: {answer[:200]!r}")
    except (OSError, asyncio.IncompleteReadError) as e:
        result.errors.append(f"transport: {e}")
    finally:
        writer.close()


async def run_load(
    url: str,
    payloads: list[bytes],
    *,
    concurrency: int,
    total: int,
    content_type: str = "application/json",
    keep_bodies: bool = False,
) -> LoadResult:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    result = LoadResult()
    counter = [0]
    start = time.perf_counter()
    await asyncio.gather(
        *(
            _client(host, port, payloads, content_type, counter, total, result, keep_bodies)
            for _ in range(concurrency)
        )
    )
    result.elapsed = time.perf_counter() - start
    return result


def load(url: str, payloads: list[bytes], *, concurrency: int, total: int, **kw: object) -> LoadResult:
    return asyncio.run(run_load(url, payloads, concurrency=concurrency, total=total, **kw))  # type: ignore[arg-type]
