"""botocore's SageMaker service model: enums for the spec, and request validation at synth.

botocore ships the exact API shapes offline; validating against them means a request sagestack
renders is one SageMaker accepts (shape, types, enums, lengths, patterns), before anything is paid.
"""

from __future__ import annotations

import re
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


def endpoint_data() -> dict[str, Any]:
    """botocore's offline endpoint data, the file `Loader().load_data('endpoints')` reads (the
    customer's ~/.aws/models first, then botocore's own data; `.json`, then `.json.gz`), read
    without importing botocore.loaders: that import (urllib3, http.client, xml) costs ~80 ms, and
    every synth checks the spec's region, while a synth with no request to validate needs nothing
    else of botocore. Where the file is not found so, botocore's Loader looks (and says why not)."""
    import gzip
    import json
    import os
    from importlib.util import find_spec

    spec = find_spec("botocore")  # finds the package without importing it
    if spec is not None and spec.origin is not None:
        builtin = os.path.join(os.path.dirname(spec.origin), "data")
        for folder in (os.path.expanduser(os.path.join("~", ".aws", "models")), builtin):
            for ext, opener in ((".json", open), (".json.gz", gzip.open)):
                path = os.path.join(folder, f"endpoints{ext}")
                if os.path.isfile(path):
                    with opener(path, "rb") as f:
                        data: dict[str, Any] = json.loads(f.read().decode("utf-8"))
                        return data
    loaded: dict[str, Any] = _loader().load_data("endpoints")
    return loaded


@cache
def sagemaker_regions() -> tuple[str, ...]:
    """Regions where SageMaker has an endpoint, from botocore's offline endpoint data (the same
    answer as Session.get_available_regions('sagemaker') for every partition, without building a
    botocore session, which costs ~0.25 s)."""
    data = endpoint_data()
    regions: list[str] = []
    for partition in data["partitions"]:
        pattern = re.compile(partition["regionRegex"])
        endpoints = partition["services"].get("api.sagemaker", {}).get("endpoints", {})  # endpoint prefix
        regions += [name for name in endpoints if pattern.match(name) and name in partition["regions"]]
    return tuple(sorted(regions))


class RequestValidationError(ValueError):
    """A rendered request that the service model rejects."""


def validate_request(operation: str, params: dict[str, Any], service: str = "sagemaker") -> None:
    """Raise RequestValidationError (with every problem found) unless `params` is a valid input
    for `operation` (e.g. 'CreateTrainingJob').

    botocore's own ParamValidator checks required members, unknown keys, types and minimums; the
    service enforces more (maximum lengths and values, enums, patterns), so those are checked here
    too, from the same model."""
    from botocore.validate import ParamValidator

    op = service_model(service).operation_model(operation)
    if _valid_member_by_member(service, operation, op.input_shape, params):
        return
    problems: list[str] = []
    report = ParamValidator().validate(params, op.input_shape)
    if report.has_errors():
        problems.append(report.generate_report())
    _check_constraints(params, op.input_shape, "", problems)
    if problems:
        raise RequestValidationError(f"{service}:{operation} request is invalid:\n" + "\n".join(problems))


# Top-level members of requests found valid: (service, operation, member, repr of its value). The
# jobs of a project repeat most of their requests (image, channels, output, stopping condition, the
# tags), and each instance candidate repeats its job's, so synth validates each distinct member once
# (bench/synth.py: three CreateTrainingJob validations per job were a third of a job's Python time).
_VALID_MEMBERS: set[tuple[str, str, str, str]] = set()


def _valid_member_by_member(service: str, operation: str, shape: Any, params: Any) -> bool:
    """Whether `params` is valid, judged as the full validation judges a structure — every required
    member present, no unknown one, each member valid — with each member validated once per distinct
    value (its repr tells apart what botocore does: 1 / 1.0 / True, a tuple / a list, int / str keys).
    False when anything is wrong: validate_request then validates in full, for its report."""
    from botocore.validate import ParamValidator

    if not isinstance(params, dict) or shape.type_name != "structure" or shape.is_tagged_union:
        return False
    members = shape.members
    required = shape.metadata.get("required", [])
    if any(k not in members for k in params) or any(r not in params for r in required):
        return False
    for name, value in params.items():
        key = (service, operation, name, repr(value))
        if key in _VALID_MEMBERS:
            continue
        problems: list[str] = []
        _check_constraints(value, members[name], name, problems)
        if problems or ParamValidator().validate(value, members[name]).has_errors():
            return False
        _VALID_MEMBERS.add(key)
    return True


def _check_constraints(value: Any, shape: Any, path: str, problems: list[str]) -> None:
    meta = shape.metadata
    name = path or "request"
    if shape.type_name == "structure" and isinstance(value, dict):
        for key, member in shape.members.items():
            if key in value:
                _check_constraints(value[key], member, f"{path}.{key}" if path else key, problems)
    elif shape.type_name == "list" and isinstance(value, list):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{name}: {len(value)} items, at most {meta['max']} allowed")
        for i, item in enumerate(value):
            _check_constraints(item, shape.member, f"{path}[{i}]", problems)
    elif shape.type_name == "map" and isinstance(value, dict):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{name}: {len(value)} entries, at most {meta['max']} allowed")
        for k, v in value.items():
            _check_constraints(k, shape.key, f"{path} key {k!r}", problems)
            _check_constraints(v, shape.value, f"{path}[{k!r}]", problems)
    elif shape.type_name == "string" and isinstance(value, str):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{name}: {len(value)} characters, at most {meta['max']} allowed")
        if shape.enum and value not in shape.enum:
            problems.append(f"{name}: {value!r} is not one of {', '.join(shape.enum)}")
        pattern = _pattern(meta.get("pattern"))
        if pattern is not None and not pattern.fullmatch(value):
            problems.append(f"{name}: {value!r} does not match the pattern {meta['pattern']}")
    elif shape.type_name in ("integer", "long", "float", "double") and isinstance(value, (int, float)):
        if "max" in meta and value > meta["max"]:
            problems.append(f"{name}: {value} is above the maximum {meta['max']}")
        if "min" in meta and value < meta["min"]:
            problems.append(f"{name}: {value} is below the minimum {meta['min']}")


@cache
def _pattern(text: str | None) -> re.Pattern[str] | None:
    """AWS model patterns are Java regexes; the few Python cannot compile are not checked."""
    if not text:
        return None
    try:
        return re.compile(text, re.DOTALL)
    except re.error:
        return None
