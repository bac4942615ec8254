"""Dynamic batching with TorchServe's meaning, for `sagestack local serve`.

Each of `workers` takes up to `max_batch` waiting requests (never more than MAX_ROWS samples),
waiting at most `max_delay_ms` for the batch to fill, and runs one predict_fn for them on a thread
of its own; without the endpoint's `batching:` one request per forward pass, as the container does
by default.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sagestack.local.serving.handlers import Handlers

MAX_ROWS = 16384  # samples per forward pass, as training_src/inference.py's handler slices them


@dataclass
class Pending:
    """A decoded request waiting for a worker, and where its prediction goes."""

    data: Any
    rows: int
    future: asyncio.Future[Any]


@dataclass
class BatchStats:
    batches: int = 0
    requests: int = 0
    largest: int = 0
    sizes: dict[int, int] = field(default_factory=dict)


def _set_threads(threads: int) -> None:
    """torch's threads for the calling (predict) thread: each worker's forward passes use this many."""
    import torch

    torch.set_num_threads(max(1, threads))


class Batcher:
    """Queues decoded requests; each of `workers` takes up to max_batch of them (waiting at most
    max_delay_ms for a batch to fill) and runs predict_fn once for them, on a thread of its own."""

    def __init__(
        self,
        handlers: Handlers,
        *,
        max_batch: int = 1,
        max_delay_ms: float = 0.0,
        workers: int = 1,
        threads: int | None = None,
    ) -> None:
        self.handlers = handlers
        self.max_batch = max(1, max_batch)
        self.max_delay = max(0.0, max_delay_ms) / 1000
        self.workers = max(1, workers)
        self.stats = BatchStats()
        self._queue: asyncio.Queue[Pending] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._carry: list[Pending] = []  # a request too big for the batch it came to leads the next one
        self._pool = ThreadPoolExecutor(
            max_workers=self.workers,
            thread_name_prefix="predict",
            initializer=functools.partial(_set_threads, threads) if threads else None,
        )

    def start(self) -> None:
        self._queue = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()) for _ in range(self.workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._pool.shutdown(wait=False)

    async def predict(self, data: Any) -> Any:
        assert self._queue is not None, "start() the batcher first"
        rows = int(data.shape[0]) if hasattr(data, "shape") and len(data.shape) > 0 else 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue.put(Pending(data, rows, future))
        return await future

    async def _run(self) -> None:
        """One worker: TorchServe's batch aggregation (the first request, then up to max_batch - 1
        more until the delay since the first has passed), then one predict_fn."""
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            first = self._carry.pop() if self._carry else await queue.get()
            batch, rows = [first], first.rows
            deadline = loop.time() + self.max_delay
            while len(batch) < self.max_batch:
                if queue.empty():
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(queue.get(), remaining)
                    except TimeoutError:
                        break
                else:
                    item = queue.get_nowait()
                if rows + item.rows > MAX_ROWS:
                    self._carry.append(item)  # too many samples to join this batch: it leads the next
                    break
                batch.append(item)
                rows += item.rows
            await self._execute(loop, batch)

    async def _execute(self, loop: asyncio.AbstractEventLoop, batch: list[Pending]) -> None:
        self.stats.batches += 1
        self.stats.requests += len(batch)
        total = sum(p.rows for p in batch)
        self.stats.largest = max(self.stats.largest, total)
        self.stats.sizes[total] = self.stats.sizes.get(total, 0) + 1
        try:
            results = await loop.run_in_executor(self._pool, self._predict_batch, batch)
        except Exception as e:  # the model's own fault: every request of the batch gets it
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(e)
            return
        for p, r in zip(batch, results, strict=True):
            if not p.future.done():
                p.future.set_result(r)

    def _predict_batch(self, batch: list[Pending]) -> list[Any]:
        h = self.handlers
        if len(batch) == 1:
            return [h.predict_fn(batch[0].data, h.model)]
        import torch

        joined = torch.cat([p.data for p in batch])
        out = h.predict_fn(joined, h.model)
        return list(torch.split(out, [p.rows for p in batch]))


def batching_options(batching: Any, cpus: int) -> dict[str, Any]:
    """ServeOptions' batching, from an endpoint's `batching:` (a BatchingSpec or None), as the
    container would run on a machine of `cpus` CPUs: without it one request per forward pass and a
    worker per CPU (TorchServe's default), with it its size, delay, workers and threads."""
    if batching is None:
        return {"max_batch": 1, "max_delay_ms": 0.0, "workers": max(1, cpus), "threads": 1}
    return {
        "max_batch": batching.max_batch_size,
        "max_delay_ms": float(batching.max_delay_ms),
        "workers": batching.workers or max(1, cpus),
        "threads": batching.threads_per_worker,
    }
