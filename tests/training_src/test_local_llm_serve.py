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

from sagestack.local.llm_endpoint import BackgroundLlm
from sagestack.local.llm_protocol import Limits
from sagestack.local.llm_server import LlmModelServer
from sagestack.local.llm_weights import build_weights, has_weights, load_weights
from sagestack.local.response_stream import model_stream_error, payload_part
from sagestack.local.serve import runtime_client
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
    assert [m.headers[":event-type"] for m in messages] == ["PayloadPart", "PayloadPart", "ModelStreamError"]
    assert messages[0].payload == b'{"token": 1}\n' and messages[1].payload == b""
    assert json.loads(messages[2].payload) == {"Message": "boom", "ErrorCode": "ModelStreamError"}


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
    unknown = CliRunner().invoke(app, ["local", "serve", "chat/none", "--env", "staging", "--root", root])
    assert unknown.exit_code == 2 and "chat/chat" in unknown.output
