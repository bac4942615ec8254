"""`sagestack local serve`'s batching has TorchServe's meaning: a worker takes the first waiting
request, then up to max_batch - 1 more that arrive within max_delay_ms, and runs predict_fn once."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from sagestack.local.serving.batching import MAX_ROWS, Batcher, batching_options
from sagestack.local.serving.handlers import Handlers

pytestmark = pytest.mark.train


class Recorder:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def predict(self, data: torch.Tensor, model: object) -> torch.Tensor:
        with self.lock:
            self.batches.append(int(data.shape[0]))
            self.threads.add(threading.current_thread().name)
        return data * 2


def _batcher(recorder: Recorder, **kw: object) -> Batcher:
    handlers = Handlers(
        model=None, input_fn=lambda b, c: b, predict_fn=recorder.predict, output_fn=lambda p, a: p
    )
    return Batcher(handlers, **kw)  # type: ignore[arg-type]


async def _send(batcher: Batcher, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    batcher.start()
    try:
        return await asyncio.gather(*(batcher.predict(t) for t in tensors))
    finally:
        await batcher.stop()


def test_a_batch_holds_at_most_max_batch_requests_each_answered_with_its_own_rows() -> None:
    recorder = Recorder()
    tensors = [torch.full((1, 3), float(i)) for i in range(7)]
    # a delay long enough that the batches fill on any machine; they fill at once, so it is never waited out
    answers = asyncio.run(_send(_batcher(recorder, max_batch=3, max_delay_ms=5000), tensors))
    assert recorder.batches == [3, 3, 1]
    for t, answer in zip(tensors, answers, strict=True):
        assert torch.equal(answer, t * 2)


def test_without_a_delay_a_lone_request_is_not_held_for_company() -> None:
    recorder = Recorder()
    batcher = _batcher(recorder, max_batch=8, max_delay_ms=0)

    async def one_by_one() -> None:
        batcher.start()
        try:
            for i in range(3):
                await batcher.predict(torch.full((1, 2), float(i)))
        finally:
            await batcher.stop()

    asyncio.run(one_by_one())
    assert recorder.batches == [1, 1, 1]


def test_requests_too_many_rows_to_share_a_forward_pass_lead_the_next_batch() -> None:
    recorder = Recorder()
    tensors = [torch.zeros(MAX_ROWS - 1, 1), torch.zeros(2, 1), torch.zeros(1, 1)]
    asyncio.run(_send(_batcher(recorder, max_batch=8, max_delay_ms=5000), tensors))
    assert recorder.batches == [MAX_ROWS - 1, 3]


def test_workers_run_batches_on_threads_of_their_own() -> None:
    recorder = Recorder()
    tensors = [torch.zeros(1, 1) for _ in range(40)]
    asyncio.run(_send(_batcher(recorder, max_batch=2, max_delay_ms=0, workers=2, threads=1), tensors))
    assert sum(recorder.batches) == 40 and max(recorder.batches) <= 2
    assert all(name.startswith("predict") for name in recorder.threads)


def test_options_follow_the_endpoints_batching_setting() -> None:
    from sagestack.endpoints.models import BatchingSpec

    assert batching_options(None, cpus=4) == {"max_batch": 1, "max_delay_ms": 0.0, "workers": 4, "threads": 1}
    spec = BatchingSpec(max_batch_size=16, max_delay_ms=5)
    assert batching_options(spec, cpus=2) == {
        "max_batch": 16,
        "max_delay_ms": 5.0,
        "workers": 2,
        "threads": 1,
    }
    spec = BatchingSpec(max_batch_size=8, max_delay_ms=0, workers=3, threads_per_worker=2)
    assert batching_options(spec, cpus=2) == {"max_batch": 8, "max_delay_ms": 0.0, "workers": 3, "threads": 2}


FAULTY_MODEL = """
import json
import torch


def model_fn(model_dir):
    return None


def input_fn(body, content_type):
    if json.loads(body) == "hostile":
        raise ValueError("not a toolkit error, so not the client's: a bug in input_fn")
    return torch.zeros(1, 2)


def predict_fn(data, model):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


def test_a_fault_that_is_not_the_clients_is_a_500_from_a_batching_local_serve(tmp_path) -> None:
    """The model's fault (predict_fn) and a bug in the handler (an exception that is not the
    toolkit's) are 500s, as the cloud's rollback alarm must see them; the client's own mistakes
    (a body that is not UTF-8) stay 4xx, every request of a batch answered."""
    import json
    import urllib.error
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    from sagestack.local.serving.serve import BackgroundServer, ServeOptions
    from tests.support.moto_server import free_port

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "inference.py").write_text(FAULTY_MODEL)

    def post(body: bytes) -> tuple[int, str]:
        request = urllib.request.Request(
            f"{url}/invocations", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())["error"]

    options = ServeOptions(port=free_port(), max_batch=4, max_delay_ms=200)
    with BackgroundServer(tmp_path, options) as url, ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post, [b"[1, 2]", b'"hostile"', b"[3, 4]", b"[\xff]"]))
    assert [status for status, _ in answers] == [500, 500, 500, 400]
    assert answers[0][1] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert answers[1][1].startswith("ValueError: not a toolkit error")
    assert answers[3][1].startswith("the body is not UTF-8 text")


def test_the_batched_handler_answers_its_own_and_the_models_faults_with_500() -> None:
    """training_src/inference.py's answer_batch (what `batching:` runs in TorchServe in the cloud):
    a fault of the model or of the handler's own code is a 500, which Invocation5XXErrors and so the
    rollback alarm count; the client's own mistake stays its 4xx. A bug answered as a 4xx would
    hide from the alarm (issue 26, item 19)."""
    import importlib.util

    from tests.conftest import REPO

    spec = importlib.util.spec_from_file_location("inference_500", REPO / "training_src" / "inference.py")
    assert spec and spec.loader
    inference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inference)

    class Broken(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    class Context:
        def __init__(self, n: int) -> None:
            self.request_processor = [self] * n
            self.status: dict[int, int] = {}

        def get_request_properties(self) -> dict[str, str]:
            return {"Content-Type": "application/json", "Accept": "application/json"}

        def set_response_status(self, code: int = 200, phrase: str = "", idx: int = 0) -> None:
            self.status[idx] = code

        def set_response_content_type(self, idx: int, value: str) -> None:
            pass

    def answer(model: torch.nn.Module) -> tuple[list[int], list[bytes]]:
        data = [{"body": bytearray(b"[[0.5, 1.5]]")}, {"body": bytearray(b"[\xff]")}]
        context = Context(len(data))
        bodies = inference.answer_batch(inference.Model(model, None, torch.device("cpu")), data, context)
        return [context.status[i] for i in range(len(data))], bodies

    statuses, bodies = answer(torch.nn.Linear(2, 3))
    assert statuses == [200, 400] and bodies[1].startswith(b"the body is not UTF-8 text")
    statuses, bodies = answer(Broken())  # the model's fault
    assert (
        statuses == [500, 400]
        and bodies[0] == b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    inference.output_fn = lambda prediction, accept: {"predictions": prediction}[
        "labels"
    ]  # the handler's bug
    statuses, bodies = answer(torch.nn.Linear(2, 3))
    assert statuses == [500, 400] and bodies[0] == b"KeyError: 'labels'\n"
