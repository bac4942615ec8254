"""The spec of an endpoint's Model Monitor schedule (`endpoints.<key>.monitor`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sagestack.core.model import StrictModel
from sagestack.core.types import (
    Seconds,
)


class MonitorSpec(StrictModel):
    """Model Monitor data quality: a baseline job on the training data, then a schedule that
    compares captured requests with it; violations become CloudWatch metrics and an alarm."""

    baseline_data: str | None = Field(
        default=None,
        pattern=r"^s3://[a-z0-9.-]{3,63}(/.*)?$",
        description="the training data (CSV or JSON Lines, one record per line) the baseline is computed "
        "on; default: s3://<bucket>/monitoring/<endpoint>/baseline-data/",
    )
    dataset_format: Literal["csv", "json"] = "csv"
    csv_header: bool = Field(default=True, description="the baseline CSV's first line names the features")
    schedule: str = Field(
        default="cron(0 * ? * * *)",
        pattern=r"^cron\(.+\)$|^NOW$",
        description="ScheduleExpression: hourly by default",
    )
    instance_type: str = Field(default="ml.m5.xlarge", pattern=r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
    max_runtime: Seconds = Field(default=1800, ge=60, le=86400)
    alarm_features: list[str] = Field(
        default_factory=list,
        max_length=10,
        description="alarm when any of these features drifts from the baseline (feature_baseline_drift_<name>)",
    )
    drift_threshold: float = Field(
        default=0.1, gt=0, le=1, description="the baseline distance above which a feature has drifted"
    )
