"""`sagestack local serve` as the SageMaker runtime API: boto3's own sagemaker-runtime client,
pointed at the local server, calls InvokeEndpoint and InvokeEndpointAsync; async results and
failures land where the cloud would put them, and invocations are captured in SageMaker's format."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from sagestack.local.serving.async_inference import AsyncOptions
from sagestack.local.serving.capture import decoded, read_capture
from sagestack.local.serving.serve import BackgroundServer, ServeOptions, runtime_client
from tests.support.digits_model import make_model_dir

BUCKET = "sagestack-local"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("serve")
    model = make_model_dir(base / "model")
    options = ServeOptions(
        port=_port(),
        asynchronous=AsyncOptions(
            endpoint="digits-dev-digits",
            s3_root=base / "s3",
            output_uri=f"s3://{BUCKET}/async/digits/output/",
            failure_uri=f"s3://{BUCKET}/async/digits/failures/",
            notifications=base / "notifications.jsonl",
        ),
        capture_dir=base / "s3" / BUCKET / "capture" / "digits" / "digits-dev-digits",
    )
    with BackgroundServer(model, options) as url:
        client = runtime_client(url)
        yield {"client": client, "base": base, "options": options}


def _wait_for(path: Path, timeout: float = 20) -> bytes:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_bytes()


SAMPLE = json.dumps({"instances": [[[[0.5] * 8] * 8]]}).encode()


def test_async_result_lands_where_the_cloud_puts_it_and_equals_the_real_time_answer(served):
    client, base = served["client"], served["base"]
    source = base / "s3" / BUCKET / "async" / "digits" / "input" / "one.json"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(SAMPLE)
    answer = client.invoke_endpoint_async(
        EndpointName="digits-dev-digits",
        InputLocation=f"s3://{BUCKET}/async/digits/input/one.json",
        ContentType="application/json",
        InferenceId="first-request",
    )
    assert answer["InferenceId"] == "first-request"
    assert answer["OutputLocation"] == f"s3://{BUCKET}/async/digits/output/first-request.out"
    assert answer["FailureLocation"] == f"s3://{BUCKET}/async/digits/failures/first-request-error.out"
    result = _wait_for(base / "s3" / BUCKET / "async/digits/output/first-request.out")
    real_time = client.invoke_endpoint(
        EndpointName="digits-dev-digits", Body=SAMPLE, ContentType="application/json"
    )
    assert json.loads(result) == json.loads(real_time["Body"].read())
    notes = [json.loads(x) for x in (base / "notifications.jsonl").read_text().splitlines()]
    done = next(n for n in notes if n["inferenceId"] == "first-request")
    assert done["invocationStatus"] == "Completed"
    assert done["responseParameters"]["outputLocation"] == answer["OutputLocation"]


def test_a_request_the_model_refuses_writes_the_failure_and_nothing_else(served):
    client, base = served["client"], served["base"]
    bad = base / "s3" / BUCKET / "bad.json"
    bad.write_bytes(b'{"instances": [[1, 2], [3]]}')
    answer = client.invoke_endpoint_async(
        EndpointName="digits-dev-digits",
        InputLocation=f"s3://{BUCKET}/bad.json",
        ContentType="application/json",
    )
    failure = _wait_for(base / "s3" / BUCKET / "async/digits/failures" / f"{answer['InferenceId']}-error.out")
    assert b"rectangular" in failure
    assert not (base / "s3" / BUCKET / "async/digits/output" / f"{answer['InferenceId']}.out").exists()
    missing = client.invoke_endpoint_async(
        EndpointName="digits-dev-digits",
        InputLocation=f"s3://{BUCKET}/nowhere.json",
        ContentType="application/json",
    )
    text = _wait_for(base / "s3" / BUCKET / "async/digits/failures" / f"{missing['InferenceId']}-error.out")
    assert b"does not exist" in text
    notes = [json.loads(x) for x in (base / "notifications.jsonl").read_text().splitlines()]
    failed = next(n for n in notes if n["inferenceId"] == answer["InferenceId"])
    assert failed["invocationStatus"] == "Failed" and "(400)" in failed["failureReason"]


def test_invocations_are_captured_in_sagemakers_format(served):
    client = served["client"]
    capture_root = served["options"].capture_dir
    before = len(list(read_capture(capture_root)))
    body = json.dumps({"instances": [[[[0.25] * 8] * 8]]}).encode()
    response = client.invoke_endpoint(
        EndpointName="digits-dev-digits", Body=body, ContentType="application/json"
    )
    answer = response["Body"].read()
    records = list(read_capture(capture_root))
    assert len(records) == before + 1
    record = records[-1]
    assert record["eventVersion"] == "0" and record["eventMetadata"]["inferenceTime"].endswith("Z")
    data = record["captureData"]
    assert data["endpointInput"]["mode"] == "INPUT" and data["endpointInput"]["encoding"] == "JSON"
    assert decoded(data["endpointInput"]) == body and decoded(data["endpointOutput"]) == answer
    # the cloud's layout: <destination>/<endpoint>/AllTraffic/yyyy/mm/dd/hh/<file>.jsonl
    (path,) = {p.relative_to(capture_root).parts[:1] for p in capture_root.rglob("*.jsonl")}
    assert path == ("AllTraffic",)
    npy = client.invoke_endpoint(
        EndpointName="digits-dev-digits",
        Body=_npy(),
        ContentType="application/x-npy",
        Accept="application/x-npy",
    )
    npy["Body"].read()
    last = list(read_capture(capture_root))[-1]["captureData"]
    assert last["endpointInput"]["encoding"] == "BASE64" and decoded(last["endpointInput"]) == _npy()


def _npy() -> bytes:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, np.full((1, 1, 8, 8), 0.5, dtype=np.float32), allow_pickle=False)
    return buf.getvalue()


# ---------------------------------------------------------------- confined to the local S3 root


def _refused(call) -> str:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as e:
        call()
    error = e.value.response["Error"]
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Code"] == "ValidationError", error
    return str(error["Message"])


def test_an_inference_id_with_a_path_writes_one_file_in_the_output_folder(served):
    """InvokeEndpointAsync allows `../` in an InferenceId (botocore's pattern: printable ASCII):
    it names one percent-encoded file in the output folder, never a path out of it."""
    client, base = served["client"], served["base"]
    source = base / "s3" / BUCKET / "async" / "digits" / "input" / "escape.json"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(SAMPLE)
    escape = "../" * 5 + "escaped"  # from s3/<bucket>/async/digits/output/ to the test's folder
    answer = client.invoke_endpoint_async(
        EndpointName="digits-dev-digits",
        InputLocation=f"s3://{BUCKET}/async/digits/input/escape.json",
        ContentType="application/json",
        InferenceId=escape,
    )
    encoded = "..%2F" * 5 + "escaped"
    assert answer["InferenceId"] == escape
    assert answer["OutputLocation"] == f"s3://{BUCKET}/async/digits/output/{encoded}.out"
    result = _wait_for(base / "s3" / BUCKET / "async" / "digits" / "output" / f"{encoded}.out")
    assert json.loads(result)["predictions"]
    assert not list(base.glob("escaped*")) and not list((base / "s3").glob("escaped*"))


def test_ids_and_locations_the_cloud_would_refuse_are_a_400_at_once(served, tmp_path):
    client, base = served["client"], served["base"]
    outside = tmp_path / "secret.json"
    outside.write_bytes(SAMPLE)
    link = base / "s3" / BUCKET / "link-out.json"
    link.symlink_to(outside)

    def invoke(location: str, **kw: str):
        return lambda: client.invoke_endpoint_async(
            EndpointName="digits-dev-digits", InputLocation=location, ContentType="application/json", **kw
        )

    message = _refused(invoke(f"s3://{BUCKET}/async/digits/input/one.json", InferenceId="x" * 65))
    assert "1 to 64 printable ASCII characters" in message
    assert "not an s3://<bucket>/<key> URI" in _refused(invoke("file:///etc/hostname"))
    assert "not an s3://<bucket>/<key> URI" in _refused(invoke(f"file://{outside}"))
    assert "outside the local S3 root" in _refused(invoke(f"s3://{BUCKET}/../../../secret.json"))
    assert "outside the local S3 root" in _refused(invoke(f"s3://{BUCKET}/link-out.json"))  # symlink
    assert "outside the local S3 root" in _refused(invoke("s3://other-bucket/../" + BUCKET + "/bad.json"))
    notes = (base / "notifications.jsonl").read_text()
    assert "secret.json" not in notes and "hostname" not in notes  # refused, never queued


def test_the_limits_are_botocores():
    """The id and location limits are those of botocore's model of InvokeEndpointAsync."""
    import botocore.session

    from sagestack.local.serving import async_inference
    from sagestack.local.serving.handlers import ClientError

    model = botocore.session.get_session().get_service_model("sagemaker-runtime")
    shapes = model.operation_model("InvokeEndpointAsync").input_shape.members
    inference_id, location = shapes["InferenceId"].metadata, shapes["InputLocation"].metadata
    assert (inference_id["min"], inference_id["max"]) == (1, async_inference.INFERENCE_ID_MAX)
    assert inference_id["pattern"] == r"\A\S[\p{Print}]*\z"  # what INFERENCE_ID spells in Python
    assert location["max"] == async_inference.INPUT_LOCATION_MAX
    assert location["pattern"] == "^(https|s3)://([^/]+)/?(.*)$"
    check = async_inference.check_inference_id
    for good in ("a", "x" * 64, "../../etc/passwd", "id with spaces", "~!@#$%^&*()"):
        assert check(good) == good
    for bad in ("", " leading-space", "x" * 65, "tab\there", "caf\u00e9", "new\nline"):
        with pytest.raises(ClientError):
            check(bad)
