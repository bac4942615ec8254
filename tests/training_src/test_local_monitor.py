"""`sagestack local monitor`: a baseline from the training data, then captured requests checked
against it with the analyzer's check names — same data passes, shifted data drifts, a wrong shape
or type is its own violation."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np

from sagestack.local.serving.capture import CaptureWriter, capture_record
from sagestack.local.serving.monitor import (
    Dataset,
    captured_dataset,
    constraints,
    read_dataset,
    statistics,
    violations,
)


def _digits() -> np.ndarray:
    """The digits, shuffled (the dataset's halves come from different writers and differ)."""
    from sklearn.datasets import load_digits

    x, _ = load_digits(return_X_y=True)
    return (x / 16.0)[np.random.default_rng(0).permutation(len(x))]


def _baseline(tmp_path, rows: np.ndarray):
    path = tmp_path / "train.csv"
    path.write_text("".join(",".join(f"{v:.4f}" for v in r) + "\n" for r in rows))
    data = read_dataset(path, "csv", header=False)
    stats = statistics(data)
    return stats, constraints(stats)


def _capture(tmp_path, rows: np.ndarray, per_request: int = 4, folder=None):
    folder = folder or tmp_path / "capture"
    writer = CaptureWriter(folder, 100)
    for i in range(0, len(rows), per_request):
        body = json.dumps({"instances": rows[i : i + per_request].reshape(-1, 1, 8, 8).tolist()}).encode()
        writer.capture(body, "application/json", b'{"predictions": []}', "application/json")
    return captured_dataset(folder)


def test_baseline_statistics_and_constraints_have_the_analyzers_shape(tmp_path):
    stats, limits = _baseline(tmp_path, _digits()[:400])
    assert stats["dataset"]["item_count"] == 400 and len(stats["features"]) == 64
    pixel = stats["features"][36]
    assert pixel["name"] == "_c36" and pixel["inferred_type"] == "Fractional"
    numeric = pixel["numerical_statistics"]
    assert numeric["common"] == {"num_present": 400, "num_missing": 0}
    assert 0 <= numeric["min"] <= numeric["mean"] <= numeric["max"] <= 1
    assert sum(b["count"] for b in numeric["distribution"]["kll"]["buckets"]) == 400
    assert limits["features"][36] == {
        "name": "_c36",
        "inferred_type": "Fractional",
        "completeness": 1.0,
        "num_constraints": {"is_non_negative": True},
    }
    assert limits["monitoring_config"]["distribution_constraints"]["comparison_threshold"] == 0.1


def test_captured_requests_like_the_training_data_raise_no_violation(tmp_path):
    x = _digits()
    stats, limits = _baseline(tmp_path, x[:800])
    current = _capture(tmp_path, x[800:1600])
    assert len(current.rows) == 800 and len(current.rows[0]) == 64
    assert violations(stats, limits, current) == []


def test_brighter_images_drift_from_the_baseline(tmp_path):
    x = _digits()
    stats, limits = _baseline(tmp_path, x[:800])
    found = violations(stats, limits, _capture(tmp_path, np.clip(x[800:1200] + 0.4, 0, 1)))
    drifted = {v["feature_name"] for v in found if v["constraint_check_type"] == "baseline_drift_check"}
    assert {"_c36", "_c27"} <= drifted
    assert all(v["description"].startswith("Baseline drift distance: ") for v in found)


def test_a_wrong_shape_or_type_is_its_own_violation(tmp_path):
    stats, limits = _baseline(tmp_path, _digits()[:200])
    narrow = Dataset([f"_c{i}" for i in range(60)], [[0.5] * 60 for _ in range(10)])
    missing = [
        v for v in violations(stats, limits, narrow) if v["constraint_check_type"] == "missing_column_check"
    ]
    assert [v["feature_name"] for v in missing] == ["_c60", "_c61", "_c62", "_c63"]
    wide = Dataset([f"_c{i}" for i in range(65)], [[0.5] * 65 for _ in range(10)])
    assert any(v["constraint_check_type"] == "extra_column_check" for v in violations(stats, limits, wide))
    typed = Dataset([f"_c{i}" for i in range(64)], [["dark"] + [0.5] * 63 for _ in range(10)])
    (check,) = [v for v in violations(stats, limits, typed) if v["feature_name"] == "_c0"]
    assert check["constraint_check_type"] == "data_type_check"
    holes = Dataset([f"_c{i}" for i in range(64)], [[None] + [0.0] * 63, [0.0] * 64])
    assert any(
        v["constraint_check_type"] == "completeness_check" and v["feature_name"] == "_c0"
        for v in violations(stats, limits, holes)
    )


def test_capture_records_carry_sagemakers_fields(tmp_path):
    record = capture_record(
        b"1,2,3",
        "text/csv",
        b"\x00\x01",
        "application/octet-stream",
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert record["captureData"]["endpointInput"] == {
        "observedContentType": "text/csv",
        "mode": "INPUT",
        "data": "1,2,3",
        "encoding": "CSV",
    }
    assert record["captureData"]["endpointOutput"]["encoding"] == "BASE64"
    assert record["eventMetadata"]["inferenceTime"] == "2026-01-02T03:04:05.000Z"


def test_sampling_keeps_about_the_given_share(tmp_path):
    writer = CaptureWriter(tmp_path / "c", 20, seed=7)
    for _ in range(1000):
        writer.capture(b"[]", "application/json", b"[]", "application/json")
    assert 150 < writer.written < 250


def test_the_cli_writes_baseline_and_report_for_what_local_serve_captured(tmp_path):
    import shutil

    from tests.conftest import REPO
    from tests.unit.test_schema_and_cli import run_cli

    root = tmp_path / "p"
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "training_src", root / "training_src")
    shutil.copytree(REPO / "containers", root / "containers")
    nothing = run_cli(
        "local", "monitor", "digits", "--env", "dev", "--sample-baseline", "300", "--root", str(root)
    )
    assert nothing.returncode == 1 and "nothing captured" in nothing.stdout + nothing.stderr
    capture = root / ".sagestack/local/dev/s3/sagestack-local/capture/digits/digits-dev-digits"
    _capture(tmp_path, np.clip(_digits()[:200] + 0.5, 0, 1), folder=capture)  # what `local serve` writes
    done = run_cli(
        "local", "monitor", "digits", "--env", "dev", "--sample-baseline", "300", "--root", str(root)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "CompletedWithViolations" in done.stdout
    base = root / ".sagestack/local/dev/monitoring/digits"
    assert json.loads((base / "baseline/constraints.json").read_text())["features"][0]["name"] == "_c0"
    (report,) = (base / "reports").iterdir()
    found = json.loads((report / "constraint_violations.json").read_text())["violations"]
    assert any(v["constraint_check_type"] == "baseline_drift_check" for v in found)
