"""`sagestack render`: the exact requests a pipeline sends, stand-ins named, errors exit 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.core.catalog.service_model import validate_request
from tests.conftest import REPO

runner = CliRunner()


def test_render_a_job_candidate_as_json():
    result = runner.invoke(
        app, ["render", "classifier", "--env", "prod", "--candidate", "1", "--json", "--root", str(REPO)]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    (shown,) = document["requests"]
    assert shown["operation"] == "CreateTrainingJob" and shown["label"].startswith("candidate 1: ")
    request = shown["request"]
    assert request["ResourceConfig"]["InstanceType"] == shown["label"].split(": ")[1]
    validate_request("CreateTrainingJob", request)  # the rendered request is a valid one
    # prod names its account, so the account is no stand-in; the deploy-time resources are
    assert "123456789012" not in shown["stand_ins"]
    assert "sagestack-validation-bucket" in shown["stand_ins"]


def test_render_every_candidate_a_search_and_an_endpoint():
    text = runner.invoke(app, ["render", "classifier", "--env", "dev", "--root", str(REPO)]).output
    assert text.count("# CreateTrainingJob (candidate ") == 2
    assert "#   stand-in '123456789012': the deploying account" in text
    search = json.loads(runner.invoke(app, ["render", "lr-search", "--json", "--root", str(REPO)]).output)
    assert [r["operation"] for r in search["requests"]] == ["CreateHyperParameterTuningJob"]
    endpoint = json.loads(runner.invoke(app, ["render", "digits", "--json", "--root", str(REPO)]).output)
    assert [r["operation"] for r in endpoint["requests"]] == ["CreateCompilationJob", "CreateModelPackage"]


def test_render_errors_exit_2_with_a_suggestion():
    unknown = runner.invoke(app, ["render", "clasifier", "--root", str(REPO)])
    assert unknown.exit_code == 2 and "did you mean 'classifier'?" in unknown.output
    out_of_range = runner.invoke(app, ["render", "classifier", "--candidate", "5", "--root", str(REPO)])
    assert (
        out_of_range.exit_code == 2 and "job 'classifier' has candidates 0..1; got 5" in out_of_range.output
    )
