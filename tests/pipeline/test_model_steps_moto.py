"""The compile and register steps the classifier pipeline gains from the example's `digits`
endpoint, executed by moto's Step Functions interpreter against a moto server started here."""

from __future__ import annotations

import json

import pytest

from tests.pipeline.conftest import ROLE
from tests.pipeline.test_training_pipeline_moto import _run

pytestmark = pytest.mark.synth


def test_trained_model_is_compiled_and_registered_for_review(moto, dev_app):
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    output = json.loads(result["output"])
    sm = moto.client("sagemaker")
    (summary,) = sm.list_compilation_jobs()["CompilationJobSummaries"]
    compiled = sm.describe_compilation_job(CompilationJobName=summary["CompilationJobName"])
    # content-addressed: <prefix>-<md5 of the artifact and the compile settings>
    name = compiled["CompilationJobName"]
    assert name.startswith("digits-dev-digits-") and len(name.rsplit("-", 1)[1]) == 32
    assert compiled["InputConfig"] == {
        "S3Uri": output["ModelArtifacts"],
        "DataInputConfig": '{"input0":[1,1,8,8]}',
        "Framework": "PYTORCH",
        "FrameworkVersion": "2.0",
    }
    assert compiled["OutputConfig"]["TargetDevice"] == "ml_c5"
    assert compiled["RoleArn"] == ROLE

    package = sm.describe_model_package(ModelPackageName=output["ModelPackages"]["digits"])
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    spec = package["InferenceSpecification"]
    assert spec["SupportedRealtimeInferenceInstanceTypes"] == [
        "ml.c5.large",
        "ml.c5.xlarge",
        "ml.c5.2xlarge",
        "ml.c5.4xlarge",
        "ml.c5.9xlarge",
        "ml.c5.18xlarge",
    ]
    (container,) = spec["Containers"]
    assert container["ModelDataUrl"] == compiled["ModelArtifacts"]["S3ModelArtifacts"]
    assert container["Image"] == compiled["InferenceImage"]  # what the compilation job reports
    assert container["Environment"]["SAGEMAKER_PROGRAM"] == "inference.py"
    assert output["TrainingJobName"] == package["CustomerMetadataProperties"]["sagestack:training-job"]
    assert output["InstanceType"] == "ml.g4dn.xlarge"  # the training result is still in the output
    assert result["entered"].index("Succeeded") < result["entered"].index("Compile digits")


def test_an_existing_compilation_of_the_same_model_is_followed_not_repeated(moto, dev_app, monkeypatch):
    from moto.sagemaker.models import SageMakerModelBackend

    calls = []
    original = SageMakerModelBackend.create_compilation_job

    def create_twice(self, *args, **kwargs):
        calls.append(kwargs["compilation_job_name"])
        original(self, *args, **kwargs)
        return original(self, *args, **kwargs)  # the second create raises ResourceInUse, as a rerun would

    monkeypatch.setattr(SageMakerModelBackend, "create_compilation_job", create_twice)
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    assert "Compile refused digits?" in result["entered"]
    assert "Describe compilation digits" in result["entered"]
    assert len(moto.client("sagemaker").list_compilation_jobs()["CompilationJobSummaries"]) == 1


def test_a_refused_compilation_fails_with_the_service_reason(moto, dev_app, monkeypatch):
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.models import SageMakerModelBackend

    def refuse(self, *args, **kwargs):
        raise JsonRESTError("ValidationException", "FrameworkVersion 2.0 is not supported for ml_c5 (test)")

    monkeypatch.setattr(SageMakerModelBackend, "create_compilation_job", refuse)
    result = _run(moto, dev_app)
    assert result["status"] == "FAILED"
    assert "Compile refused digits" in result["entered"]
    assert "FrameworkVersion 2.0 is not supported" in (result.get("cause") or "")
    assert (
        moto.client("sagemaker").list_model_packages(ModelPackageGroupName="digits-dev")[
            "ModelPackageSummaryList"
        ]
        == []
    )
