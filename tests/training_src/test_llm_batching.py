"""The local LLM server's continuous batching (local/llm/batcher.py): requests that arrive together,
or while others run, share one forward pass a step, and under greedy decoding each gets exactly
the tokens it gets alone — which is what `model.generate` makes of its prompt, the outside judge.
Prompts of different lengths (left padding, each sequence's own positions), a request that joins
a batch already running, seeded sampling, the batch limit the container's own variable sets."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.config import Config

from sagestack.local.llm.batcher import Batcher, Outcome
from sagestack.local.llm.endpoint import BackgroundLlm
from sagestack.local.llm.protocol import Generation, Limits
from sagestack.local.llm.server import LlmModelServer
from sagestack.local.llm.weights import build_weights, load_weights
from sagestack.local.serving.serve import runtime_client
from tests.support.moto_server import free_port

pytestmark = pytest.mark.train

PROMPTS = (
    "The endpoint serves",
    "A",
    "Spot training saves money when the script",
    "The plan checks every quota before anything is deployed: the instance types of",
    "Quantization",
    "Data parallel training copies the model to every GPU. Each process",
)
NEW = 40


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    return build_weights(tmp_path_factory.mktemp("llm") / "weights")


@pytest.fixture(scope="module")
def loaded(weights):
    return load_weights(weights)


class Collector:
    """The engine's items, by request."""

    def __init__(self) -> None:
        self.items: dict[object, list] = {}
        self.ended = threading.Condition()

    def __call__(self, items) -> None:
        with self.ended:
            for sink, item in items:
                self.items.setdefault(sink, []).append(item)
            self.ended.notify_all()

    def end(self, sink, timeout: float = 60) -> Outcome:
        with self.ended:
            assert self.ended.wait_for(
                lambda: any(isinstance(i, Outcome | BaseException) for i in self.items.get(sink, [])), timeout
            ), f"request {sink} did not end"
        (end,) = [i for i in self.items[sink] if isinstance(i, Outcome | BaseException)]
        assert isinstance(end, Outcome), end
        return end


def _generation(tokenizer, prompt: str, new: int = NEW, **params) -> Generation:
    return Generation("text", tokenizer.encode(prompt), new, **params)


def _run(loaded, requests: list[Generation], *, max_batch_size: int = 8) -> tuple[list[Outcome], Batcher]:
    """Every request submitted at once (they arrive together); their ends, in order."""
    model, tokenizer = loaded
    collect = Collector()
    engine = Batcher(model, tokenizer, collect, max_batch_size=max_batch_size)
    try:
        for i, g in enumerate(requests):
            engine.submit(g, i, threading.Event(), streamed=True)
        return [collect.end(i) for i in range(len(requests))], engine
    finally:
        engine.close()


def _generate(loaded, prompt: str, new: int = NEW) -> str:
    """model.generate's greedy continuation of `prompt` (stopping at EOS, as the server does)."""
    import torch

    model, tokenizer = loaded
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=new,
            do_sample=False,
            pad_token_id=tokenizer.eos_token_id,
        )
    return tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def test_prompts_of_different_lengths_batched_get_what_each_gets_alone_and_what_generate_makes(loaded):
    _, tokenizer = loaded
    alone = [_run(loaded, [_generation(tokenizer, p)])[0][0] for p in PROMPTS]
    together, engine = _run(loaded, [_generation(tokenizer, p) for p in PROMPTS])
    assert engine.stats.widest == len(PROMPTS)  # they did share forward passes
    assert engine.stats.steps < sum(o.tokens for o in together)
    lengths = [len(tokenizer.encode(p)) for p in PROMPTS]
    assert 4 <= len(set(lengths)) < len(lengths)  # several lengths, and two prefilled in one pass
    assert [o.text for o in together] == [o.text for o in alone]
    assert [(o.tokens, o.finish) for o in together] == [(o.tokens, o.finish) for o in alone]
    assert [o.text for o in alone] == [_generate(loaded, p) for p in PROMPTS]
    assert {o.finish for o in alone} == {"length", "eos_token"}  # sequences that leave early, too


def test_the_streamed_tokens_are_the_answer_and_decode_as_the_whole(loaded):
    _, tokenizer = loaded
    model, _ = loaded
    collect = Collector()
    engine = Batcher(model, tokenizer, collect)
    try:
        for i, p in enumerate(PROMPTS):
            engine.submit(_generation(tokenizer, p), i, threading.Event(), streamed=True)
        for i in range(len(PROMPTS)):
            end = collect.end(i)
            tokens = [item[0] for item in collect.items[i] if isinstance(item, tuple)]
            assert len(tokens) == end.tokens
            assert "".join(t.text for t in tokens) == end.text
            assert tokenizer.decode([t.id for t in tokens], skip_special_tokens=True) == end.text
            assert all(t.logprob <= 0 for t in tokens)
    finally:
        engine.close()


def test_a_request_that_joins_a_running_batch_gets_what_it_gets_alone(loaded):
    """Continuous batching: the newcomer's prompt is prefilled and its cache merged into the batch's
    at a step boundary, while the others go on."""
    model, tokenizer = loaded
    long, late = PROMPTS[3], PROMPTS[1]
    collect = Collector()
    engine = Batcher(model, tokenizer, collect)
    try:
        engine.submit(_generation(tokenizer, long, 120), "long", threading.Event(), streamed=True)
        deadline = time.monotonic() + 30
        while len(collect.items.get("long", [])) < 10 and time.monotonic() < deadline:
            time.sleep(0.001)
        engine.submit(_generation(tokenizer, late), "late", threading.Event(), streamed=True)
        late_end, long_end = collect.end("late"), collect.end("long")
        assert engine.stats.widest == 2
        first_late = next(i for i, x in enumerate(collect.items["late"]) if isinstance(x, tuple))
        assert first_late == 0 and len(collect.items["long"]) > late_end.tokens  # it joined mid-way
    finally:
        engine.close()
    assert late_end.text == _generate(loaded, late)
    assert long_end.text == _generate(loaded, long, 120)


def test_seeded_sampling_is_the_same_alone_and_batched(loaded):
    _, tokenizer = loaded
    sampled = {"do_sample": True, "temperature": 3.0, "top_k": 50, "seed": 7}
    alone = _run(loaded, [_generation(tokenizer, PROMPTS[0], **sampled)])[0][0]
    together, _ = _run(
        loaded,
        [_generation(tokenizer, p) for p in PROMPTS[1:4]] + [_generation(tokenizer, PROMPTS[0], **sampled)],
    )
    assert together[-1].text == alone.text
    assert alone.text != _generate(loaded, PROMPTS[0])  # it did sample


def test_at_most_max_batch_size_sequences_run_and_the_others_wait_their_turn(loaded):
    _, tokenizer = loaded
    ends, engine = _run(loaded, [_generation(tokenizer, p) for p in PROMPTS], max_batch_size=2)
    assert engine.stats.widest == 2
    assert [o.text for o in ends] == [_generate(loaded, p) for p in PROMPTS]


def test_eight_clients_over_http_share_forward_passes_and_get_their_own_answers(loaded):
    model, tokenizer = loaded
    app = LlmModelServer(model=model, tokenizer=tokenizer, schema="tgi", limits=Limits(64, 128))
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(8)]
    with BackgroundLlm(app, free_port()) as url:
        client = runtime_client(url, Config(max_pool_connections=8, retries={"max_attempts": 1}))
        barrier = threading.Barrier(8)

        def ask(prompt: str) -> str:
            body = json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": NEW}})
            barrier.wait()
            answer = client.invoke_endpoint(EndpointName="e", Body=body)["Body"].read()
            return json.loads(answer)[0]["generated_text"]

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, prompts))
    assert answers == [_generate(loaded, p) for p in prompts]
    assert app.stats.widest > 1  # arriving together, they were batched
    assert app.stats.steps < app.stats.generated


def test_the_batch_limit_is_the_containers_variable_else_max_batch_size(weights):
    from sagestack.llm.models import LlmSpec
    from sagestack.llm.sizing import max_batch
    from sagestack.local.llm.endpoint import DEFAULT_BATCH, LocalLlm, model_server

    def spec(**fields) -> LlmSpec:
        return LlmSpec.model_validate(
            {"container": "djl-lmi", "weights": {"s3": "m/"}, "parameters": 1e5, **fields}
        )

    assert max_batch(spec()) == (None, "max_batch_size unset")
    assert max_batch(spec(max_batch_size=4)) == (4, "max_batch_size")
    lmi = spec(max_batch_size=4, environment={"OPTION_MAX_ROLLING_BATCH_SIZE": "16"})
    assert max_batch(lmi) == (16, "OPTION_MAX_ROLLING_BATCH_SIZE")
    tgi = spec(container="huggingface-llm", environment={"MAX_CONCURRENT_REQUESTS": "3"})
    assert max_batch(tgi) == (3, "MAX_CONCURRENT_REQUESTS")
    vllm = spec(container="vllm", max_batch_size=2, environment={"SM_VLLM_MAX_NUM_SEQS": "none"})
    assert max_batch(vllm) == (2, "max_batch_size")  # not a number: the spec's field counts
    served = LocalLlm("chat", "chat", lmi, weights, "lmi")
    assert model_server(served).max_batch_size == 16  # what the container would run
    assert model_server(LocalLlm("chat", "chat", spec(), weights, "lmi")).max_batch_size == DEFAULT_BATCH
