"""The spec of experiment tracking (`tracking:`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from sagestack.core.model import StrictModel


class MlflowSpec(StrictModel):
    """SageMaker managed MLflow for the environment: a serverless MLflow App (`app: true`), a
    tracking server (the default, kept for existing projects), or one that exists (`server:`)."""

    server: str | None = Field(
        default=None,
        description="an existing tracking server's or MLflow App's ARN to log to "
        "(default: one is created per environment)",
    )
    app: bool = Field(
        default=False,
        description="create a serverless MLflow App instead of a tracking server: no hourly charge "
        "while unused, what SageMaker recommends for new set-ups",
    )
    size: Literal["Small", "Medium", "Large"] = Field(
        default="Small", description="the tracking server's size (an MLflow App has none)"
    )
    version: str | None = Field(
        default=None,
        description="the tracking server's MLflow version (default: SageMaker's newest; an App runs SageMaker's)",
    )
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
                "mlflow-tracking-server/<name> or …:mlflow-app/<id>)",
                {"given": self.server},
            )
        if self.app and self.server is not None:
            raise PydanticCustomError(
                "app",
                "app: true creates an MLflow App, server: names one that exists; keep one of them",
                {},
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
