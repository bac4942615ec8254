"""The spec of a batch transform (`transforms:`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sagestack.core.model import ModelSource, StrictModel
from sagestack.core.types import (
    ModelPackageArn,
    Seconds,
    TransformInstanceCandidates,
)


class TransformSpec(StrictModel):
    """A batch transform (CreateTransformJob) over a prefix of the project bucket, with the model a
    pipeline registers (model: from; the transform runs after it) and/or a pinned model package
    (its own pipeline, `sagestack run`)."""

    model: ModelSource | None = Field(
        default=None, description="the pipeline that trains the model registers it and runs the transform"
    )
    model_package: ModelPackageArn | None = Field(
        default=None, description="the model package ARN this environment scores with (the pin)"
    )
    instance_type: TransformInstanceCandidates
    instance_count: int = Field(default=1, ge=1)
    input: str | None = Field(
        default=None,
        pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$",
        description="default: s3://<bucket>/transform/<key>/input/",
    )
    content_type: str = "application/json"
    accept: str | None = "application/json"
    split_type: Literal["None", "Line", "RecordIO", "TFRecord"] = "Line"
    batch_strategy: Literal["MultiRecord", "SingleRecord"] = "MultiRecord"
    max_payload_mb: int = Field(default=6, ge=0, le=100)
    max_concurrent_transforms: int | None = Field(default=None, ge=1)
    assemble_with: Literal["None", "Line"] = "Line"
    join_source: Literal["None", "Input"] = "None"
    input_filter: str | None = Field(default=None, max_length=63, pattern=r"^\$")
    output_filter: str | None = Field(default=None, max_length=63, pattern=r"^\$")
    invocation_timeout: Seconds = Field(default=600, ge=1, le=3600)
    invocation_retries: int = Field(default=3, ge=0, le=3)
    environment: dict[str, str] = Field(default_factory=dict)
