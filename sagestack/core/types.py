"""Constrained scalar types of the spec, each with an error that says what is allowed."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from sagestack.core.catalog.instances import check_instance_type
from sagestack.core.catalog.service_model import enum_values, sagemaker_regions
from sagestack.core.catalog.suggest import did_you_mean

_DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s)?\s*$")


def parse_duration(value: Any) -> int:
    """'4h', '90m', '1h30m', '2d', '45s' or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise PydanticCustomError("duration", "expected a duration such as '4h', '90m' or 3600 (seconds)")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m and any(m.groups()):
            d, h, mi, s = (int(g) if g else 0 for g in m.groups())
            return ((d * 24 + h) * 60 + mi) * 60 + s
        if value.strip().isdigit():
            return int(value)
    raise PydanticCustomError(
        "duration",
        "'{given}' is not a duration; write e.g. '4h', '90m', '1h30m', '2d' or a number of seconds",
        {"given": value},
    )


Seconds = Annotated[
    int,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1, "description": "seconds"},
                {"type": "string", "pattern": _DURATION.pattern, "description": "e.g. 4h, 90m, 1h30m, 2d"},
            ]
        }
    ),
]

PATH_MAX = 1024  # characters of a path in the spec
NAME_MAX = 255  # bytes of one of its parts (Linux's NAME_MAX)


def check_path(value: Any) -> Any:
    """A path the file system can be asked about: no NUL byte, no part over 255 bytes, at most 1024
    characters (beyond them `Path.is_file()` itself raises, where a rule asks it)."""
    if not isinstance(value, str):
        return value  # the str type says what is wrong
    if "\0" in value:
        raise PydanticCustomError("path", "a path cannot hold a NUL character")
    if len(value) > PATH_MAX:
        raise PydanticCustomError(
            "path",
            "a path of {length} characters; at most {limit}",
            {"length": len(value), "limit": PATH_MAX},
        )
    long = next((part for part in value.split("/") if len(part.encode()) > NAME_MAX), None)
    if long is not None:
        raise PydanticCustomError(
            "path",
            "'{part}…' is a file name of {size} bytes; at most {limit}",
            {"part": long[:40], "size": len(long.encode()), "limit": NAME_MAX},
        )
    return value


ProjectPath = Annotated[str, BeforeValidator(check_path)]


NAME_PATTERN = r"^[a-z][a-z0-9-]*[a-z0-9]$"


def name_validator(max_len: int, what: str) -> BeforeValidator:
    """Names become parts of AWS resource names (job names ≤ 63 chars, lowercase ECR/S3 names)."""

    def check(value: Any) -> Any:
        if not isinstance(value, str) or not re.match(NAME_PATTERN, value) or len(value) > max_len:
            raise PydanticCustomError(
                "name",
                "'{given}' is not a valid {what} name: use 2-{max_len} lowercase letters, digits and "
                "hyphens, starting with a letter (it becomes part of AWS resource names)",
                {"given": value, "what": what, "max_len": max_len},
            )
        return value

    return BeforeValidator(check)


ProjectName = Annotated[
    str, name_validator(20, "project"), Field(json_schema_extra={"pattern": NAME_PATTERN})
]
EntryName = Annotated[str, name_validator(24, "entry"), Field(json_schema_extra={"pattern": NAME_PATTERN})]


def _account(value: Any) -> Any:
    # YAML reads an unquoted 111111111111 as an int and drops leading zeros: say so.
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
        if len(text) != 12:
            raise PydanticCustomError(
                "account",
                'account {given} is not 12 digits; quote account ids in YAML ("012345678901") so '
                "leading zeros are kept",
                {"given": value},
            )
        return text
    if not isinstance(value, str) or not re.fullmatch(r"\d{12}", value):
        raise PydanticCustomError(
            "account", "'{given}' is not an AWS account id (12 digits, quoted)", {"given": value}
        )
    return value


AccountId = Annotated[
    str, BeforeValidator(_account), WithJsonSchema({"type": "string", "pattern": r"^\d{12}$"})
]


def _region(value: Any) -> Any:
    regions = sagemaker_regions()
    if value not in regions:
        raise PydanticCustomError(
            "region",
            "'{given}' is not a region where SageMaker is available{hint}",
            {"given": value, "hint": did_you_mean(str(value), regions)},
        )
    return value


Region = Annotated[
    str, BeforeValidator(_region), WithJsonSchema({"type": "string", "pattern": r"^[a-z]{2}(-[a-z]+)+-\d$"})
]


def _instance_type(usage: str) -> BeforeValidator:
    def check(value: Any) -> Any:
        if not isinstance(value, str):
            raise PydanticCustomError("instance_type", "expected an instance type such as 'ml.g5.xlarge'")
        problem = check_instance_type(value, usage)  # type: ignore[arg-type]
        if problem:
            raise PydanticCustomError("instance_type", problem)
        return value

    return BeforeValidator(check)


TrainingInstanceType = Annotated[
    str,
    _instance_type("training"),
    WithJsonSchema({"type": "string", "pattern": r"^ml\.[a-z0-9-]+\.[a-z0-9]+$"}),
]
TransformInstanceType = Annotated[
    str,
    _instance_type("transform"),
    WithJsonSchema({"type": "string", "pattern": r"^ml\.[a-z0-9-]+\.[a-z0-9]+$"}),
]
ModelPackageArn = Annotated[
    str,
    StringConstraints(pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:model-package/.+$"),
]


def arn_region(arn: str) -> str:
    """The region field of an ARN (arn:partition:service:region:account:resource); "" when the
    string has too few fields to be one."""
    fields = arn.split(":", 5)
    return fields[3] if len(fields) == 6 else ""


HostingInstanceType = Annotated[
    str,
    _instance_type("hosting"),
    WithJsonSchema({"type": "string", "pattern": r"^ml\.[a-z0-9-]+\.[a-z0-9]+$"}),
]


def _cluster_instance_type(value: Any) -> Any:
    allowed = enum_values("ClusterInstanceType")
    if not isinstance(value, str) or value not in allowed:
        raise PydanticCustomError(
            "instance_type",
            "'{given}' is not a SageMaker HyperPod instance type{hint}",
            {"given": value, "hint": did_you_mean(str(value), list(allowed))},
        )
    return value


ClusterInstanceType = Annotated[
    str,
    BeforeValidator(_cluster_instance_type),
    WithJsonSchema({"type": "string", "pattern": r"^ml\.[a-z0-9-]+\.[a-z0-9]+$"}),
]


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _candidates(item: Any) -> Any:
    """One instance type, or a list of candidates in order of preference."""
    return Annotated[
        list[item],
        BeforeValidator(_one_or_many),
        Field(min_length=1, description="one instance type, or candidates in order of preference"),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ],
                "description": "one instance type, or candidates in order of preference",
            }
        ),
    ]


TrainingInstanceCandidates = _candidates(TrainingInstanceType)


def _hyperparameter(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)):
        return value
    raise PydanticCustomError(
        "hyperparameter",
        "a hyperparameter value must be a string, number or boolean (SageMaker passes each as a string); "
        "write a list, a mapping or null as its JSON text in quotes, e.g. '[1, 2]'",
    )


HyperparameterValue = Annotated[
    str | int | float | bool,
    BeforeValidator(_hyperparameter),
    WithJsonSchema({"type": ["string", "number", "integer", "boolean"]}),
]


def _matching(pattern: str, code: str, what: str, example: str) -> BeforeValidator:
    compiled = re.compile(pattern)

    def check(value: Any) -> Any:
        if not isinstance(value, str) or not compiled.match(value):
            raise PydanticCustomError(
                code,
                "'{given}' is not {what}; write e.g. {example}",
                {"given": value, "what": what, "example": example},
            )
        return value

    return BeforeValidator(check)


_EMAIL = r"^[^@\s]+@[^@\s]+\.[^@\s]+$"
_E164 = r"^\+[1-9]\d{1,14}$"
EmailAddress = Annotated[
    str,
    _matching(_EMAIL, "email", "an email address", "ml-team@example.com"),
    WithJsonSchema({"type": "string", "pattern": _EMAIL}),
]
PhoneNumber = Annotated[
    str,
    _matching(
        _E164,
        "phone",
        "an E.164 phone number",
        "'+14155550100' (quoted: YAML reads a bare + number as a number)",
    ),
    WithJsonSchema({"type": "string", "pattern": _E164}),
]

TransformInstanceCandidates = _candidates(TransformInstanceType)


def _pools(item: Any) -> Any:
    """One instance type, or up to five in order of priority (a variant's InstancePools)."""
    return Annotated[
        list[item],
        BeforeValidator(_one_or_many),
        Field(
            min_length=1,
            max_length=5,
            description="one instance type, or up to five in order of priority (InstancePools: "
            "SageMaker places the variant on the first with capacity)",
        ),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "string"},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
                ],
                "description": "one instance type, or up to five in order of priority",
            }
        ),
    ]


HostingInstanceCandidates = _pools(HostingInstanceType)
