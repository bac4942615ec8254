"""The synthesized tuning state machine under moto's interpreter: the search created from the
synthesized request, the best job recorded in SSM, and a refused start failing with its reason."""

from __future__ import annotations

import json
import time

import pytest

from tests.pipeline.conftest import definition
from tests.support.moto_server import ACCOUNT

pytestmark = pytest.mark.synth


def _run(moto, app) -> dict:
    moto.reset()
    topic = moto.client("sns").create_topic(Name="digits-dev-training")["TopicArn"]
    sfn = moto.client("stepfunctions")
    machine = sfn.create_state_machine(
        name="digits-dev-tune-lr-search",
        definition=definition(app, "digits-dev-tune-lr-search", topic),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.2)
    return described


def test_tuning_pipeline_creates_the_search_and_records_the_best_model(moto, dev_app):
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    output = json.loads(result["output"])
    request = dev_app.stages["dev"].training.tuning_requests["lr-search"]
    name = request["HyperParameterTuningJobName"]
    assert output["TuningJobName"] == name
    sm = moto.client("sagemaker")
    recorded = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
    config = recorded["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Bayesian"
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 20, "MaxParallelTrainingJobs": 4}
    assert config["ParameterRanges"]["ContinuousParameterRanges"][0]["Name"] == "lr"
    # moto answers with a placeholder best job; the pipeline records whatever SageMaker names
    best = recorded["BestTrainingJob"]["TrainingJobName"]
    parameter = moto.client("ssm").get_parameter(Name="/sagestack/digits/dev/tuning/lr-search/best-model")
    stored = json.loads(parameter["Parameter"]["Value"])
    assert stored["TrainingJobName"] == best == output["TrainingJobName"]
    assert stored["ModelArtifacts"].endswith(f"/output/classifier/{best}/output/model.tar.gz")


def test_refused_tuning_job_fails_with_the_reason(moto, dev_app, monkeypatch):
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.models import SageMakerModelBackend

    def refuse(self, *args, **kwargs):
        raise JsonRESTError(
            "ResourceLimitExceeded",
            "The account-level service limit 'ml.g4dn.xlarge for training "
            "job usage' is 1 Instances, with current utilization of 0 Instances and a request delta "
            "of 4 Instances.",
        )

    monkeypatch.setattr(SageMakerModelBackend, "create_hyper_parameter_tuning_job", refuse)
    result = _run(moto, dev_app)
    assert result["status"] == "FAILED"
    assert "ResourceLimitExceeded" in result["error"] + result["cause"]
    assert "request delta of 4 Instances" in result["cause"]
