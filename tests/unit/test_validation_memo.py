"""validate_request judges a request member by member, each distinct member once
(core/catalog/service_model.py, for synth's speed): what it refuses and how it says so must be what a
full validation refuses and says, whatever it validated before."""

from __future__ import annotations

import copy

import pytest

from sagestack.core.catalog import service_model
from sagestack.core.catalog.service_model import RequestValidationError, validate_request

VALID = {
    "TrainingJobName": "digits-dev-classifier-0",
    "AlgorithmSpecification": {"TrainingImage": "img:latest", "TrainingInputMode": "File"},
    "RoleArn": "arn:aws:iam::123456789012:role/sagestack",
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/output/"},
    "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    "Tags": [{"Key": "sagestack:project", "Value": "digits"}],
    "EnableNetworkIsolation": True,
}


def _changed(**members):
    request = copy.deepcopy(VALID)
    request.update(members)
    return request


def _full_report(request):
    """The message of a validation that remembers nothing."""
    saved = set(service_model._VALID_MEMBERS)
    service_model._VALID_MEMBERS.clear()
    try:
        with pytest.raises(RequestValidationError) as raised:
            validate_request("CreateTrainingJob", request)
        return str(raised.value)
    finally:
        service_model._VALID_MEMBERS.update(saved)


@pytest.mark.parametrize(
    "bad",
    [
        # below the model's minimum, beside the valid 3600 remembered
        _changed(StoppingCondition={"MaxRuntimeInSeconds": 0}),
        # a string where an integer goes: the same text as the valid member, another type
        _changed(ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": "1", "VolumeSizeInGB": 10}),
        # a string where a boolean goes (str() would not tell them apart; repr does)
        _changed(EnableNetworkIsolation="True"),
        # a float where an integer goes
        _changed(ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1.0, "VolumeSizeInGB": 10}),
        # too long a name (at most 63 characters)
        _changed(TrainingJobName="x" * 64),
        # an unknown member, every member valid
        _changed(Unknown="x"),
        # a required member missing, every other member remembered as valid
        {k: v for k, v in VALID.items() if k != "RoleArn"},
        # an enum value the model does not know
        _changed(AlgorithmSpecification={"TrainingImage": "img:latest", "TrainingInputMode": "Files"}),
    ],
)
def test_what_is_remembered_valid_does_not_pass_an_invalid_request(bad):
    validate_request("CreateTrainingJob", VALID)  # every member of VALID remembered as valid
    with pytest.raises(RequestValidationError) as raised:
        validate_request("CreateTrainingJob", bad)
    assert str(raised.value) == _full_report(bad)


def test_a_valid_request_is_remembered_member_by_member():
    service_model._VALID_MEMBERS.clear()
    validate_request("CreateTrainingJob", VALID)
    remembered = {name for _, op, name, _ in service_model._VALID_MEMBERS if op == "CreateTrainingJob"}
    assert remembered == set(VALID)
    # an invalid member is never remembered
    with pytest.raises(RequestValidationError):
        validate_request("CreateTrainingJob", _changed(StoppingCondition={"MaxRuntimeInSeconds": 0}))
    assert not any("'MaxRuntimeInSeconds': 0" in value for *_, value in service_model._VALID_MEMBERS)
