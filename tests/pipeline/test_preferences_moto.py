"""The InstancePreferences path: candidates whose requests differ only in the instance type become
one job that SageMaker places on the first with capacity. Run by moto's Step Functions interpreter;
moto stores the request as sent, and Describe is given the SelectedInstanceType AWS would report."""

from __future__ import annotations

import json

import pytest

from tests.pipeline.test_training_pipeline_moto import QUOTAS, _jobs, _run
from tests.support.moto_server import jayway_json_paths

pytestmark = pytest.mark.synth

SPEC = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  classifier:
    image: train
    instance_type: [ml.g5.2xlarge, ml.g4dn.2xlarge]
    max_run: 1h
"""


@pytest.fixture(scope="module")
def pref_app(tmp_path_factory):
    from tests.conftest import Project
    from tests.support.cdk_app import BuiltApp

    project = Project(tmp_path_factory.mktemp("pref") / "p")
    project.spec(SPEC).env("dev", "retain_data: false\npipeline: {poll_interval: 1s, backoff: 1s}\n")
    return BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["dev"])


@pytest.fixture
def selects_first_preference(monkeypatch):
    """What AWS adds to Describe on the preference path: the type and count it launched."""
    from moto.sagemaker.models import SageMakerModelBackend

    original = SageMakerModelBackend.describe_training_job

    def describe(self, training_job_name):  # type: ignore[no-untyped-def]
        response = dict(original(self, training_job_name))
        resources = dict(response["ResourceConfig"])
        first = resources["InstancePreferences"][0]
        resources.update(
            SelectedInstanceType=first["InstanceType"], SelectedInstanceCount=first["InstanceCount"]
        )
        response["ResourceConfig"] = resources
        return response

    monkeypatch.setattr(SageMakerModelBackend, "describe_training_job", describe)


def test_the_plan_takes_the_preference_path_and_says_so(pref_app):
    plan = pref_app.stages["dev"].training.job_plans["classifier"]
    assert plan.preferred is not None and plan.launch_path.startswith("InstancePreferences")
    resources = plan.preferred.request["ResourceConfig"]
    assert "InstanceType" not in resources and "EnableManagedSpotTraining" not in plan.preferred.request
    assert [p["InstanceType"] for p in resources["InstancePreferences"]] == [
        "ml.g5.2xlarge",
        "ml.g4dn.2xlarge",
    ]


def test_one_job_with_every_candidate_as_a_preference(moto, pref_app, selects_first_preference):
    result = _run(moto, pref_app)
    assert result["status"] == "SUCCEEDED", result
    (job,) = _jobs(moto).values()
    assert job["TrainingJobName"].endswith("-p")
    assert [p["InstanceType"] for p in job["ResourceConfig"]["InstancePreferences"]] == [
        "ml.g5.2xlarge",
        "ml.g4dn.2xlarge",
    ]
    output = json.loads(result["output"])
    assert output["InstanceType"] == "ml.g5.2xlarge"  # recorded from SelectedInstanceType


def test_a_candidate_whose_quota_is_short_is_not_offered(
    moto, pref_app, selects_first_preference, monkeypatch
):
    from moto.servicequotas.responses import ServiceQuotasResponse
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
        StateTaskService,
    )

    quotas = [
        *QUOTAS[:50],
        {"QuotaCode": "L-G5", "QuotaName": "ml.g5.2xlarge for training job usage", "Value": 0.0},
        {"QuotaCode": "L-G4", "QuotaName": "ml.g4dn.2xlarge for training job usage", "Value": 2.0},
    ]

    def list_service_quotas(self):  # type: ignore[no-untyped-def]
        return json.dumps({"Quotas": quotas})

    monkeypatch.setattr(ServiceQuotasResponse, "list_service_quotas", list_service_quotas, raising=False)
    monkeypatch.setitem(
        StateTaskService._SERVICE_NAME_SFN_TO_BOTO_OVERRIDES, "servicequotas", "service-quotas"
    )
    jayway_json_paths(monkeypatch)
    result = _run(moto, pref_app)
    assert result["status"] == "SUCCEEDED", result
    assert "Skip 1/2" in result["entered"] and "Prefer 2/2" in result["entered"]
    (job,) = _jobs(moto).values()
    assert [p["InstanceType"] for p in job["ResourceConfig"]["InstancePreferences"]] == ["ml.g4dn.2xlarge"]
    assert json.loads(result["output"])["InstanceType"] == "ml.g4dn.2xlarge"
