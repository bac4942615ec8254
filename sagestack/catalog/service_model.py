"""botocore's SageMaker service model: enums for the spec, and request validation at synth.

botocore ships the exact API shapes offline; validating against them means a request sagestack
renders is one SageMaker accepts (shape, types, enums, lengths, patterns), before anything is paid.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _loader() -> Any:
    from botocore.loaders import Loader

    return Loader()


@cache
def raw_model(service: str = "sagemaker") -> dict[str, Any]:
    model: dict[str, Any] = _loader().load_service_model(service, "service-2")
    return model


@cache
def enum_values(shape: str, service: str = "sagemaker") -> tuple[str, ...]:
    """The values of an enum shape, e.g. enum_values('TrainingInstanceType')."""
    return tuple(raw_model(service)["shapes"][shape]["enum"])


@cache
def service_model(service: str = "sagemaker") -> Any:
    from botocore.model import ServiceModel

    return ServiceModel(raw_model(service), service_name=service)


@cache
def sagemaker_regions() -> tuple[str, ...]:
    """Regions where SageMaker has an endpoint, from botocore's offline endpoint data (the same
    answer as Session.get_available_regions('sagemaker') for every partition, without building a
    botocore session, which costs ~0.25 s)."""
    import re

    data = _loader().load_data("endpoints")
    regions: list[str] = []
    for partition in data["partitions"]:
        pattern = re.compile(partition["regionRegex"])
        endpoints = partition["services"].get("api.sagemaker", {}).get("endpoints", {})  # endpoint prefix
        regions += [name for name in endpoints if pattern.match(name) and name in partition["regions"]]
    return tuple(sorted(regions))


class RequestValidationError(ValueError):
    """A rendered request that the service model rejects."""


def validate_request(operation: str, params: dict[str, Any], service: str = "sagemaker") -> None:
    """Raise RequestValidationError (with every problem botocore finds) unless `params` is a
    valid input for `operation` (e.g. 'CreateTrainingJob')."""
    from botocore.validate import ParamValidator

    op = service_model(service).operation_model(operation)
    report = ParamValidator().validate(params, op.input_shape)
    if report.has_errors():
        raise RequestValidationError(f"{service}:{operation} request is invalid:\n{report.generate_report()}")
