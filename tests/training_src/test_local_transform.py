"""`sagestack local transform`: CreateTransformJob's split, batching, filters, join and assembly,
run with training_src/inference.py's own handlers on a real (untrained) digits model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sagestack.local.serving.handlers import load_handlers
from sagestack.local.serving.transform import TransformError, json_path, run_transform
from sagestack.transforms.models import TransformSpec
from tests.support.digits_model import make_model_dir

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"


@pytest.fixture(scope="module")
def handlers(tmp_path_factory):
    return load_handlers(make_model_dir(tmp_path_factory.mktemp("m") / "model"))


def _spec(**kw) -> TransformSpec:
    return TransformSpec.model_validate({"model_package": PIN, "instance_type": "ml.m5.xlarge", **kw})


def _records(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"id": f"r{i}", "features": rng.random((1, 8, 8)).round(4).tolist()} for i in range(n)]


def _write(folder, name: str, records: list) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_json_path_subset_as_sagemaker_documents_it():
    record = {"id": 7, "features": [1, 2, 3], "SageMakerOutput": {"label": 3}}
    assert json_path("$", record) is record
    assert json_path("$.features", record) == [1, 2, 3]
    assert json_path("$['id','SageMakerOutput']", record) == {"id": 7, "SageMakerOutput": {"label": 3}}
    assert json_path("$[1:]", ["id", "a", "b"]) == ["a", "b"]
    assert json_path("$[0,2:]", ["id", "a", "b", "c"]) == ["id", "b", "c"]
    with pytest.raises(TransformError, match="no field 'nope'"):
        json_path("$.nope", record)


def test_multirecord_join_and_output_filter_give_one_joined_line_per_record(handlers, tmp_path):
    records = _records(25)
    _write(tmp_path / "in" / "day1", "a.jsonl", records)
    spec = _spec(
        content_type="application/jsonlines",
        accept="application/jsonlines",
        input_filter="$.features",
        join_source="Input",
        output_filter="$['id','SageMakerOutput']",
    )
    result = run_transform(handlers, spec, tmp_path / "in", tmp_path / "out")
    (f,) = result.files
    assert f.error is None and f.records == 25 and f.requests == 1  # all records fit one 6 MB payload
    lines = [json.loads(x) for x in (tmp_path / "out" / "day1" / "a.jsonl.out").read_text().splitlines()]
    assert [x["id"] for x in lines] == [r["id"] for r in records]
    assert set(lines[0]) == {"id", "SageMakerOutput"}
    # the joined output is the model's own answer for that record alone
    alone = handlers.output_fn(
        handlers.predict_fn(
            handlers.input_fn(json.dumps(records[3]["features"]), "application/json"), handlers.model
        ),
        "application/jsonlines",
    )[0]
    assert lines[3]["SageMakerOutput"] == json.loads(alone)


def test_single_record_sends_one_request_per_record_and_payload_bounds_batches(handlers, tmp_path):
    _write(tmp_path / "in", "a.jsonl", [r["features"] for r in _records(6)])
    single = run_transform(
        handlers,
        _spec(content_type="application/jsonlines", batch_strategy="SingleRecord"),
        tmp_path / "in",
        tmp_path / "o1",
    )
    assert single.files[0].requests == 6
    # without a join, each response is assembled by line: one JSON Lines block per request
    assert len((tmp_path / "o1" / "a.jsonl.out").read_text().splitlines()) == 6
    tiny = run_transform(
        handlers,
        _spec(content_type="application/jsonlines", max_payload_mb=0),
        tmp_path / "in",
        tmp_path / "o2",
    )
    assert tiny.files[0].requests == 1  # 0: no limit (chunked), as SageMaker reads it


def test_split_none_sends_the_whole_file_and_json_answers_once(handlers, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "batch.json").write_text(
        json.dumps({"instances": [r["features"] for r in _records(4)]})
    )
    result = run_transform(
        handlers,
        _spec(split_type="None", batch_strategy="SingleRecord", assemble_with="None"),
        tmp_path / "in",
        tmp_path / "out",
    )
    answer = json.loads((tmp_path / "out" / "batch.json.out").read_text())
    assert result.files[0].requests == 1 and len(answer["predictions"]) == 4


def test_a_file_the_model_refuses_fails_alone_with_the_models_status(handlers, tmp_path):
    _write(tmp_path / "in", "good.jsonl", _records(3))
    _write(tmp_path / "in", "bad.jsonl", [{"id": "x", "features": [[1, 2], [3]]}])
    result = run_transform(
        handlers,
        _spec(
            content_type="application/jsonlines", accept="application/jsonlines", input_filter="$.features"
        ),
        tmp_path / "in",
        tmp_path / "out",
    )
    (failed,) = result.failed
    assert failed.source.name == "bad.jsonl" and failed.error.startswith("the model answered 400")
    assert (tmp_path / "out" / "good.jsonl.out").exists() and not (
        tmp_path / "out" / "bad.jsonl.out"
    ).exists()


def test_joining_a_batch_answer_that_is_not_one_line_per_record_fails_the_file(handlers, tmp_path):
    _write(tmp_path / "in", "a.jsonl", _records(3))
    result = run_transform(
        handlers,
        _spec(
            content_type="application/jsonlines",
            accept="application/json",
            input_filter="$.features",
            join_source="Input",
        ),
        tmp_path / "in",
        tmp_path / "out",
    )
    assert "3 record(s) sent, 1 output line(s) returned" in result.failed[0].error


def test_the_cli_scores_the_trained_model_of_the_source_job(tmp_path):
    """`local transform --sample` against a project whose job was 'trained' (the model folder)."""
    import shutil

    from tests.conftest import REPO
    from tests.unit.test_schema_and_cli import run_cli

    root = tmp_path / "p"
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "training_src", root / "training_src")
    shutil.copytree(REPO / "containers", root / "containers")
    make_model_dir(root / ".sagestack/local/dev/classifier/model")
    done = run_cli("local", "transform", "score", "--env", "dev", "--sample", "12", "--root", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    out = root / ".sagestack/local/dev/transform/score/output/digits.jsonl.out"
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["id"] for x in lines] == list(range(12))
    assert all(0 <= x["SageMakerOutput"]["label"] <= 9 for x in lines)
    missing = run_cli("local", "transform", "nope", "--env", "dev", "--root", str(root))
    assert missing.returncode == 2 and "score" in missing.stderr + missing.stdout


def test_transform_outputs_are_private_whatever_the_umask(handlers, tmp_path):
    import os
    import stat

    _write(tmp_path / "in", "a.jsonl", [r["features"] for r in _records(3)])
    previous = os.umask(0o022)
    try:
        spec = _spec(content_type="application/jsonlines", accept="application/jsonlines")
        result = run_transform(handlers, spec, tmp_path / "in", tmp_path / "out" / "day1")
    finally:
        os.umask(previous)
    (f,) = result.files
    assert f.error is None and f.output is not None
    assert stat.S_IMODE(f.output.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "out" / "day1").stat().st_mode) == 0o700
