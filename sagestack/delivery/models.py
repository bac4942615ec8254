"""The spec of the delivery pipeline (`delivery:`)."""

from __future__ import annotations

import re

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from sagestack.core.model import StrictModel, exactly_one
from sagestack.core.types import (
    AccountId,
    Region,
)

_CONNECTION_ARN = re.compile(
    r"^arn:aws[a-z-]*:(codeconnections|codestar-connections):[a-z0-9-]+:\d{12}:connection/[\w-]+$"
)


class DeliverySourceSpec(StrictModel):
    """Where the delivery pipeline takes the repository from: a CodeConnections connection to
    GitHub / GitLab / Bitbucket, or a zip in S3."""

    connection: str | None = Field(
        default=None, description="a CodeConnections (CodeStar Connections) ARN, e.g. to GitHub"
    )
    repository: str | None = Field(default=None, description="owner/name, with connection")
    branch: str = Field(default="main", description="with connection")
    bucket: str | None = Field(default=None, description="an S3 bucket (versioned) holding the source zip")
    key: str | None = Field(default=None, description="the zip's key, with bucket")

    @model_validator(mode="after")
    def _kind(self) -> DeliverySourceSpec:
        exactly_one(self, ("connection", "bucket"), "delivery.source")
        if self.connection is not None:
            if not _CONNECTION_ARN.match(self.connection):
                raise PydanticCustomError(
                    "connection",
                    "'{given}' is not a CodeConnections ARN (arn:aws:codeconnections:<region>:<account>:"
                    "connection/<id>); create one in the console (Developer Tools > Connections)",
                    {"given": self.connection},
                )
            if not self.repository or "/" not in self.repository:
                raise PydanticCustomError(
                    "repository", "a connection source needs repository: owner/name", {}
                )
        if self.bucket is not None and not self.key:
            raise PydanticCustomError("key", "an S3 source needs key: (the zip's object key)", {})
        return self


class DeliverySpec(StrictModel):
    """A CDK Pipelines stack in a tooling account that deploys every environment, in order: a
    promotion is a reviewed commit the pipeline deploys."""

    account: AccountId = Field(description="the tooling account the pipeline runs in")
    region: Region | None = Field(default=None, description="default: the project's region")
    source: DeliverySourceSpec
    environments: list[str] = Field(
        min_length=1, description="the environments it deploys, in order (e.g. [dev, staging, prod])"
    )
    approval: list[str] = Field(
        default_factory=lambda: ["prod"], description="environments deployed only after a manual approval"
    )
    install: list[str] = Field(
        default_factory=lambda: [
            "pip install --extra-index-url https://download.pytorch.org/whl/cpu -e '.[train,dev]'",
            "npm ci",
        ],
        description="the synth step's install commands",
    )
    tests: list[str] = Field(
        default_factory=lambda: ["python -m pytest -q -m 'not synth and not e2e and not train' tests/unit"],
        description="the fast test tiers the synth step runs before `cdk synth`",
    )
    pipeline_name: str | None = Field(default=None, description="default: <project>-delivery")
