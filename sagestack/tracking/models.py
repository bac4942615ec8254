"""The spec of experiment tracking (`tracking:`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from sagestack.core.model import StrictModel


class MlflowSpec(StrictModel):
    """A SageMaker managed MLflow tracking server for the environment (or one that exists)."""

    server: str | None = Field(
        default=None,
        description="an existing tracking server's ARN to log to (default: one is created per environment)",
    )
    size: Literal["Small", "Medium", "Large"] = "Small"
    version: str | None = Field(default=None, description="MLflow version (default: SageMaker's newest)")
    automatic_model_registration: bool = False
    maintenance_window: str | None = Field(
        default=None, description="weekly start, e.g. Sun:02:00 (default: SageMaker's choice)"
    )

    @model_validator(mode="after")
    def _server(self) -> MlflowSpec:
        if self.server is not None and not re.match(
            r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:mlflow-(tracking-server|app)/.+$", self.server
        ):
            raise PydanticCustomError(
                "server",
                "'{given}' is not a SageMaker MLflow ARN (arn:aws:sagemaker:<region>:<account>:"
                "mlflow-tracking-server/<name>)",
                {"given": self.server},
            )
        if self.maintenance_window is not None and not re.match(
            r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun):([01]\d|2[0-3]):[0-5]\d$", self.maintenance_window
        ):
            raise PydanticCustomError(
                "maintenance_window",
                "'{given}' is not a weekly start; write e.g. Sun:02:00",
                {"given": self.maintenance_window},
            )
        return self


class TrackingSpec(StrictModel):
    """Experiment tracking: every training job logs parameters, metrics per step and its model."""

    mlflow: MlflowSpec | None = None
