"""`sagestack local serve` of an LLM endpoint, judged by boto3's own sagemaker-runtime client:
InvokeEndpoint and InvokeEndpointWithResponseStream (botocore's event-stream parser reads the
frames) over real HTTP, in the LMI, TGI and OpenAI-style schemas, and the client's mistakes as the
containers answer them — never a 500."""

from __future__ import annotations

import json
import socket
import time

import pytest
from botocore.config import Config
from botocore.eventstream import EventStreamBuffer

from sagestack.local.llm.endpoint import BackgroundLlm
from sagestack.local.llm.protocol import Limits
from sagestack.local.llm.response_stream import model_stream_error, payload_part
from sagestack.local.llm.server import LlmModelServer
from sagestack.local.llm.weights import build_weights, has_weights, load_weights
from sagestack.local.serving.serve import runtime_client
from tests.support.moto_server import free_port

pytestmark = pytest.mark.train


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llm") / "models" / "chat"
    build_weights(folder)
    return folder


@pytest.fixture(scope="module")
def loaded(weights):
    return load_weights(weights)


def _server(loaded, schema, **limits):
    model, tokenizer = loaded
    return LlmModelServer(
        model=model,
        tokenizer=tokenizer,
        schema=schema,
        limits=Limits(limits.get("max_input", 64), limits.get("max_total", 128)),
        name="digits-staging-chat",
    )


@pytest.fixture(scope="module", params=["lmi", "tgi", "openai"])
def served(request, loaded):
    app = _server(loaded, request.param)
    with BackgroundLlm(app, free_port()) as url:
        yield request.param, url, app


def _runtime(url):
    return runtime_client(url, Config(retries={"max_attempts": 1}))


def _request(schema, prompt="The endpoint serves", **params):
    if schema == "openai":
        return {"prompt": prompt, "max_tokens": 12, **params}
    return {"inputs": prompt, "parameters": {"max_new_tokens": 12, **params}}


def test_weights_are_made_here_and_load_as_the_containers_files(weights):
    assert has_weights(weights)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (weights / name).is_file()
    # that a second build makes the same bytes: the CLI test below (it builds them again, for a project)


def test_invoke_endpoint_answers_in_the_containers_schema(served):
    schema, url, _ = served
    response = _runtime(url).invoke_endpoint(
        EndpointName="digits-staging-chat", ContentType="application/json", Body=json.dumps(_request(schema))
    )
    answer = json.loads(response["Body"].read())
    text = {"lmi": lambda a: a["generated_text"], "tgi": lambda a: a[0]["generated_text"]}.get(
        schema, lambda a: a["choices"][0]["text"]
    )(answer)
    assert isinstance(text, str) and text.strip()
    # greedy decoding: the model trained on the bundled text continues it
    assert "model" in text or "instance" in text


def test_the_stream_is_parsed_by_boto3_and_equals_the_buffered_answer(served):
    schema, url, _ = served
    client = _runtime(url)
    body = json.dumps(_request(schema))
    buffered = client.invoke_endpoint(EndpointName="e", ContentType="application/json", Body=body)[
        "Body"
    ].read()
    response = client.invoke_endpoint_with_response_stream(
        EndpointName="e", ContentType="application/json", Body=body
    )
    parts = [event["PayloadPart"]["Bytes"] for event in response["Body"]]
    assert len(parts) > 3  # token by token, not one buffered answer
    streamed = b"".join(parts).decode()
    if schema == "lmi":
        lines = [json.loads(line) for line in streamed.splitlines()]
        assert lines[-1]["generated_text"] == json.loads(buffered)["generated_text"]
        assert "".join(line["token"]["text"] for line in lines[:-1]) == lines[-1]["generated_text"]
        assert response["ContentType"] == "application/jsonlines"
    else:
        events = [e.removeprefix("data:").strip() for e in streamed.split("\n\n") if e.strip()]
        assert response["ContentType"] == "text/event-stream"
        if schema == "tgi":
            final = json.loads(events[-1])
            assert final["generated_text"] == json.loads(buffered)[0]["generated_text"]
        else:
            assert events[-1] == "[DONE]"
            text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
            assert text == json.loads(buffered)["choices"][0]["text"]


def test_chat_messages_are_answered_and_streamed(served):
    _, url, _ = served
    client = _runtime(url)
    chat = {"messages": [{"role": "user", "content": "What does spot training need?"}], "max_tokens": 10}
    answer = json.loads(client.invoke_endpoint(EndpointName="e", Body=json.dumps(chat))["Body"].read())
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["role"] == "assistant"
    assert answer["usage"]["completion_tokens"] == 10 and answer["choices"][0]["finish_reason"] == "length"
    stream = client.invoke_endpoint_with_response_stream(EndpointName="e", Body=json.dumps(chat))
    text = b"".join(e["PayloadPart"]["Bytes"] for e in stream["Body"]).decode()
    chunks = [
        json.loads(e.removeprefix("data:")) for e in text.split("\n\n") if e.strip() and "[DONE]" not in e
    ]
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert content == answer["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not JSON"),
        (b'{"inputs": 42}', "must be a string"),
        (b'{"inputs": ""}', "cannot be empty"),
        (json.dumps({"inputs": "word " * 200}).encode(), "must have less than 64 tokens"),
        (json.dumps({"inputs": "hi", "parameters": {"max_new_tokens": 500}}).encode(), "must be <= 128"),
        (json.dumps({"inputs": "hi", "parameters": {"temperature": 0}}).encode(), "strictly positive"),
        (json.dumps({"inputs": "hi", "parameters": {"top_p": "high"}}).encode(), "must be a number"),
        (json.dumps({"messages": [{"role": "robot", "content": "hi"}]}).encode(), "role"),
    ],
)
def test_a_clients_mistake_is_the_containers_4xx_and_the_runtimes_model_error(loaded, body, words):
    for schema in ("lmi", "tgi"):
        app = _server(loaded, schema)
        with BackgroundLlm(app, free_port()) as url:
            import urllib.error
            import urllib.request

            request = urllib.request.Request(
                f"{url}/invocations", data=body, headers={"Content-Type": "application/json"}
            )
            with pytest.raises(urllib.error.HTTPError) as direct:
                urllib.request.urlopen(request, timeout=30)
            assert 400 <= direct.value.code < 500, (schema, direct.value.code)
            assert words in direct.value.read().decode()
            client = _runtime(url)
            with pytest.raises(client.exceptions.ModelError) as e:
                client.invoke_endpoint(EndpointName="e", ContentType="application/json", Body=body)
            assert e.value.response["OriginalStatusCode"] == direct.value.code
            assert words in e.value.response["OriginalMessage"]


def test_a_client_that_leaves_mid_stream_stops_its_generation(loaded):
    app = _server(loaded, "lmi", max_total=500, max_input=64)
    with BackgroundLlm(app, free_port()) as url:
        host, port = url.removeprefix("http://").split(":")
        body = json.dumps(
            {"inputs": "The endpoint", "parameters": {"max_new_tokens": 400}, "stream": True}
        ).encode()
        with socket.create_connection((host, int(port))) as s:
            s.sendall(
                b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            s.recv(4096)  # the first tokens came
        deadline = time.monotonic() + 30
        while app.stats.cancelled == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert app.stats.cancelled == 1
        assert app.stats.generated < 400


def test_eight_clients_at_once_are_all_answered(loaded):
    from concurrent.futures import ThreadPoolExecutor

    app = _server(loaded, "tgi")
    with BackgroundLlm(app, free_port()) as url:
        client = _runtime(url)

        def ask(i):
            body = json.dumps({"inputs": f"Request {i}: the plan", "parameters": {"max_new_tokens": 8}})
            return json.loads(client.invoke_endpoint(EndpointName="e", Body=body)["Body"].read())

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(8)))
    assert all(a[0]["generated_text"] for a in answers)


def test_the_frames_are_what_botocores_parser_reads():
    buffer = EventStreamBuffer()
    buffer.add_data(payload_part(b'{"token": 1}\n') + payload_part(b"") + model_stream_error("boom"))
    messages = list(buffer)
    assert [m.headers[":message-type"] for m in messages] == ["event", "event", "exception"]
    assert [m.headers.get(":event-type") for m in messages[:2]] == ["PayloadPart", "PayloadPart"]
    assert messages[2].headers[":exception-type"] == "ModelStreamError"
    assert messages[0].payload == b'{"token": 1}\n' and messages[1].payload == b""
    assert json.loads(messages[2].payload) == {"Message": "boom", "ErrorCode": "StreamBroken"}


# Hostile bodies (issue 37): each is the client's mistake, so the container's 4xx on its own route,
# streamed or not, and the runtime's ModelError on its two — never a 500, never a 200 that ends empty.
# {prompt} is the family's prompt member; each case answered 500 (or 200 and 0 bytes) before.
DEEP = 2_000
HOSTILE = {
    "seed 2^64": ('{{"{prompt}": "hi", {params}"seed": 18446744073709551616{close}}}', "`seed` must be"),
    "seed of 400 digits": (
        '{{"{prompt}": "hi", {params}"seed": ' + "9" * 400 + "{close}}}",
        "`seed` must be",
    ),
    "temperature 1e999 (inf)": ('{{"{prompt}": "hi", {params}"temperature": 1e999{close}}}', "`temperature`"),
    "temperature Infinity": ('{{"{prompt}": "hi", {params}"temperature": Infinity{close}}}', "`temperature`"),
    "temperature of 400 digits": (
        '{{"{prompt}": "hi", {params}"temperature": ' + "9" * 400 + "{close}}}",
        "`temperature`",
    ),
    "nested 2,000 deep": ("[" * DEEP + "]" * DEEP, "nests deeper"),
    "parameters nested 2,000 deep": (
        '{{"{prompt}": "hi", {params}"top_k": ' + "[" * DEEP + "]" * DEEP + "{close}}}",
        "nests deeper",
    ),
    "a role that is a list": ('{{"messages": [{{"role": [], "content": "hi"}}]}}', "role must be"),
}


def _hostile(schema, case, stream=False):
    text, _ = HOSTILE[case]
    prompt = "prompt" if schema == "openai" else "inputs"
    params, close = ("", "") if schema == "openai" else ('"parameters": {', "}")
    body = text.format(prompt=prompt, params=params, close=close) if "{" in text[:2] else text
    if stream and body.startswith("{"):
        body = body[:-1] + ', "stream": true}'
    return body.encode()


def _post(url, path, body):
    """Raw HTTP, as a container's client sees it: (status, the whole body, read to its end)."""
    import http.client

    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_body_is_the_clients_4xx_on_every_route_streamed_or_not(served, case):
    schema, url, _ = served
    words = HOSTILE[case][1]
    for stream in (False, True):
        status, text = _post(url, "/invocations", _hostile(schema, case, stream))
        assert 400 <= status < 500 and words in text, (schema, stream, status, text[:300])
    client = _runtime(url)
    body = _hostile(schema, case)
    for invoke in (client.invoke_endpoint, client.invoke_endpoint_with_response_stream):
        with pytest.raises(client.exceptions.ModelError) as e:
            invoke(EndpointName="e", ContentType="application/json", Body=body)
        assert 400 <= e.value.response["OriginalStatusCode"] < 500
        assert words in e.value.response["OriginalMessage"], e.value.response


def test_the_sampling_bounds_are_the_familys_and_named_in_the_message(served):
    """TGI refuses temperature <= 0 and top_p outside (0, 1), its seed a u64; vLLM (OpenAI-style)
    takes temperature 0 as greedy and top_p 1.0, its seed an int64; LMI takes TGI's temperature
    and vLLM's top_p. A refusal names the parameter, what is allowed and what was given."""
    schema, url, _ = served
    client = _runtime(url)

    def body(params):
        if schema == "openai":
            return json.dumps({"prompt": "hi", "max_tokens": 2, **params})
        return json.dumps({"inputs": "hi", "parameters": {"max_new_tokens": 2, **params}})

    u64 = "`seed` must be an integer from 0 to 18446744073709551615 (u64). Given: -1"
    refused = {
        "tgi": [
            ({"top_p": 1.0}, "`top_p` must be > 0.0 and < 1.0. Given: 1.0"),
            ({"temperature": 0}, "`temperature` must be strictly positive. Given: 0"),
            ({"seed": -1}, u64),
        ],
        "lmi": [
            ({"temperature": 0}, "`temperature` must be strictly positive. Given: 0"),
            ({"seed": -1}, u64),
        ],
        "openai": [
            ({"seed": 2**63}, "`seed` must be an integer from -9223372036854775808 to 9223372036854775807"),
            ({"temperature": -0.5}, "`temperature` must be non-negative (0 is greedy decoding). Given: -0.5"),
        ],
    }[schema]
    for params, words in refused:
        with pytest.raises(client.exceptions.ModelError) as e:
            client.invoke_endpoint(EndpointName="e", Body=body(params))
        assert words in e.value.response["OriginalMessage"], e.value.response
    accepted = {"tgi": {"top_p": 0.99}, "lmi": {"top_p": 1.0}, "openai": {"temperature": 0, "top_p": 1.0}}
    answer = client.invoke_endpoint(EndpointName="e", Body=body(accepted[schema]))
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200


def _text(schema, answer):
    answer = json.loads(answer)
    return {"lmi": lambda a: a["generated_text"], "tgi": lambda a: a[0]["generated_text"]}.get(
        schema, lambda a: a["choices"][0]["text"]
    )(answer)


def test_extreme_sampling_parameters_sample_the_most_likely_token_never_nan(served):
    """temperature 1e-50 and top_p 1e-300 are in every family's range: sampling at them is the
    greedy answer (before, float32 made them NaN, and torch.multinomial a 500); the largest seed
    each family takes is a seed."""
    schema, url, _ = served
    client = _runtime(url)
    seed = 2**63 - 1 if schema == "openai" else 2**64 - 1
    greedy = _text(
        schema, client.invoke_endpoint(EndpointName="e", Body=json.dumps(_request(schema)))["Body"].read()
    )
    for params in ({"temperature": 1e-50}, {"top_p": 1e-300}, {"temperature": 1e-300, "top_k": 1}):
        body = json.dumps(_request(schema, do_sample=True, seed=seed, **params))
        answer = client.invoke_endpoint(EndpointName="e", Body=body)["Body"].read()
        assert _text(schema, answer) == greedy, params
        status, streamed = _post(url, "/invocations", _hostile_free_stream(schema, body))
        assert status == 200 and streamed.strip(), (params, status)


def _hostile_free_stream(schema, body):
    request = json.loads(body)
    request["stream"] = True
    return json.dumps(request).encode()


class _FailingModel:
    """The served model, failing at its `fail_at`-th forward pass (as a GPU fault would)."""

    def __init__(self, model, fail_at):
        self.model, self.fail_at, self.calls = model, fail_at, 0

    def __call__(self, **kwargs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.model(**kwargs)


@pytest.mark.parametrize("fail_at", [1, 4])
def test_a_model_that_fails_is_the_containers_500_and_mid_stream_the_runtimes_stream_error(loaded, fail_at):
    """The model's own fault at the first token is a status (the container's 500, the runtime's
    ModelError with OriginalStatusCode 500) since no 200 went out yet; after streaming began, the
    container ends its stream with its error chunk and the runtime with the ModelStreamError
    exception, which boto3's client raises."""
    from botocore.exceptions import EventStreamError

    model, tokenizer = loaded
    app = _server((_FailingModel(model, fail_at), tokenizer), "tgi")
    body = json.dumps({"inputs": "The endpoint", "parameters": {"max_new_tokens": 8}})
    with BackgroundLlm(app, free_port()) as url:
        client = _runtime(url)
        if fail_at == 1:
            with pytest.raises(client.exceptions.ModelError) as e:
                client.invoke_endpoint_with_response_stream(EndpointName="e", Body=body)
            assert e.value.response["OriginalStatusCode"] == 500
            app.model.calls = 0
            status, text = _post(url, "/invocations", _hostile_free_stream("tgi", body))
            assert status == 500 and "illegal memory access" in json.loads(text)["error"]
            return
        response = client.invoke_endpoint_with_response_stream(EndpointName="e", Body=body)
        parts = []
        with pytest.raises(EventStreamError) as e:
            for event in response["Body"]:
                parts.append(event["PayloadPart"]["Bytes"])
        assert e.value.response["Error"]["Code"] == "ModelStreamError"
        assert "illegal memory access" in e.value.response["Error"]["Message"]
        assert len(parts) == fail_at - 1  # the tokens made before the fault came first
        app.model.calls = 0
        status, text = _post(url, "/invocations", _hostile_free_stream("tgi", body))
        events = [json.loads(e.removeprefix("data:")) for e in text.split("\n\n") if e.strip()]
        assert status == 200 and len(events) == fail_at
        assert events[-1]["error_type"] == "generation" and "illegal memory access" in events[-1]["error"]


def test_the_cli_makes_the_weights_deterministically_then_streams_an_answer_and_says_why_it_cannot(
    digits_project, weights
):
    """`sagestack local serve chat --env staging --prompt …` as make demo runs it: the example's
    LLM component has no weights here, so they are made where weights.s3 lies locally — the same
    bytes as the module's own build (seeded: the same files every time)."""
    from typer.testing import CliRunner

    from sagestack.cli import app

    root = str(digits_project.root)
    port = free_port()
    args = ["local", "serve", "chat", "--env", "staging", "--root", root, "--port", str(port)]
    done = CliRunner().invoke(app, [*args, "--prompt", "What does spot training need?", "--max-tokens", "8"])
    assert done.exit_code == 0, done.output
    made = digits_project.root / ".sagestack/local/staging/s3/sagestack-local/models/chat"
    assert has_weights(made)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (made / name).read_bytes() == (weights / name).read_bytes(), name
    assert "invoke_endpoint_with_response_stream(digits-staging-chat)" in done.output
    answer = done.output.split("What does spot training need?")[-1].strip()
    assert answer  # the streamed tokens, printed as they came
    with socket.socket() as busy:  # the port is taken: a message, exit 1, no traceback
        busy.bind(("127.0.0.1", port))
        busy.listen()
        taken = CliRunner().invoke(app, [*args, "--prompt", "hi"])
    assert taken.exit_code == 1 and "did not start" in taken.output, taken.output
    port = free_port()  # a prompt over the limits: the container's message, exit 1, no traceback
    args[args.index("--port") + 1] = str(port)
    long = CliRunner().invoke(app, [*args, "--prompt", "word " * 2000])
    assert long.exit_code == 1 and "ModelError: " in long.output, long.output
    assert "tokens" in long.output and "Traceback" not in long.output
    unknown = CliRunner().invoke(app, ["local", "serve", "chat/none", "--env", "staging", "--root", root])
    assert unknown.exit_code == 2 and "chat/chat" in unknown.output
