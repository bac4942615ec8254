"""The spec's foundation: images, the artifact bucket, the pipelines' polling."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from sagestack.core.model import StrictModel, exactly_one
from sagestack.core.types import (
    ProjectPath,
    Seconds,
)


class DlcImage(StrictModel):
    """An AWS Deep Learning Container, resolved per instance type (cpu / gpu / neuronx) and region."""

    framework: Literal["pytorch", "tensorflow", "huggingface"] = "pytorch"
    version: str = Field(description="framework version, e.g. '2.5'")
    py_version: str = Field(pattern=r"^py3\d+$", description="e.g. py311")


class DockerfileImage(StrictModel):
    directory: ProjectPath = Field(description="folder holding the Dockerfile, relative to the project root")
    build_args: dict[str, str] = Field(default_factory=dict)
    target: str | None = None


def _string_shorthand(schema: dict[str, Any]) -> None:
    """The schema also offers the string shorthand the before-validator expands."""
    schema["anyOf"].insert(1, {"type": "string"})


class ImageSpec(StrictModel):
    """Exactly one of: dlc, dockerfile, uri."""

    dlc: DlcImage | None = None
    # A string is shorthand for {directory: …}; the before-validator expands it, so code sees a model
    # (and a bad folder is one error, not a second "not a string" from a str branch of a union).
    dockerfile: DockerfileImage | None = Field(
        default=None, title="Dockerfile", json_schema_extra=_string_shorthand
    )
    uri: str | None = Field(default=None, pattern=r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/.+")

    @model_validator(mode="before")
    @classmethod
    def _dockerfile_shorthand(cls, data: Any) -> Any:
        # `dockerfile: containers/training` is shorthand for `dockerfile: {directory: …}`.
        if isinstance(data, dict) and isinstance(data.get("dockerfile"), str):
            data = {**data, "dockerfile": {"directory": data["dockerfile"]}}
        return data

    @property
    def dockerfile_spec(self) -> DockerfileImage | None:
        """`dockerfile` as a model (the before-validator has expanded the string shorthand)."""
        return self.dockerfile if isinstance(self.dockerfile, DockerfileImage) else None

    @model_validator(mode="after")
    def _one_source(self) -> ImageSpec:
        exactly_one(self, ("dlc", "dockerfile", "uri"), "an image")
        return self


class BucketSpec(StrictModel):
    noncurrent_checkpoint_days: int = Field(default=30, ge=1, description="expire old checkpoint versions")
    abort_incomplete_upload_days: int = Field(default=7, ge=1)


class PipelineSpec(StrictModel):
    """How the training pipelines poll and retry (Step Functions)."""

    poll_interval: Seconds = Field(default=60, ge=1, le=3600, description="DescribeTrainingJob polling")
    backoff: Seconds = Field(default=120, ge=0, le=86400, description="wait before trying the next candidate")
    log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653] = (
        90
    )
