"""What every spec model shares: strict, frozen pydantic models with the SageMaker Python SDK's names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


M = TypeVar("M", bound=BaseModel)


def spec_of(model: type[M], props: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> M:
    """A spec entry from a construct's typed props (spec keys, values in the spec's units; None: not
    given, so the spec's default) and its `options` (any other key of the entry). The one way a
    construct's props become a spec: validated by the spec's own model, so both doors share its
    defaults, its checks and its error messages."""
    given = {k: v for k, v in props.items() if v is not None}
    twice = sorted(set(given) & set(options or {}))
    if twice:
        raise ValueError(f"{', '.join(twice)}: given both as a prop and in options; give each once")
    return model.model_validate({**given, **(options or {})})


def exactly_one(model: BaseModel, keys: tuple[str, ...], what: str) -> None:
    given = [k for k in keys if getattr(model, k) is not None]
    if len(given) != 1:
        raise PydanticCustomError(
            "one_of",
            "{what} needs exactly one of {keys}; got {given}",
            {"what": what, "keys": ", ".join(keys), "given": ", ".join(given) or "none"},
        )


# `model: {from: …}` of an endpoint or a batch transform: the pipeline that registers its model
# (no docstring: pydantic would put it in the schema).
class ModelSource(StrictModel):
    from_: str = Field(alias="from", description="a job or tuning entry whose (best) model is served")


class VpcSpec(StrictModel):
    subnets: list[str] = Field(min_length=1, max_length=16)
    security_groups: list[str] = Field(min_length=1, max_length=5)
    egress: bool = Field(
        default=True,
        description="false: the subnets have no route out (no NAT gateway or PyPI mirror), so the "
        "container cannot pip install the source dir's requirements.txt",
    )
