"""What every spec model shares: strict, frozen pydantic models with the SageMaker Python SDK's names."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def exactly_one(model: BaseModel, keys: tuple[str, ...], what: str) -> None:
    given = [k for k in keys if getattr(model, k) is not None]
    if len(given) != 1:
        raise PydanticCustomError(
            "one_of",
            "{what} needs exactly one of {keys}; got {given}",
            {"what": what, "keys": ", ".join(keys), "given": ", ".join(given) or "none"},
        )


class VpcSpec(StrictModel):
    subnets: list[str] = Field(min_length=1, max_length=16)
    security_groups: list[str] = Field(min_length=1, max_length=5)
    egress: bool = Field(
        default=True,
        description="false: the subnets have no route out (no NAT gateway or PyPI mirror), so the "
        "container cannot pip install the source dir's requirements.txt",
    )
