"""Rules about experiment tracking: a job that logs to SageMaker's MLflow has the client to do so."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagestack.core.rules import Finding, RuleContext, rule

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.-]+)")


@rule(
    "tracking-requirements",
    "warning",
    "a job that logs to SageMaker's MLflow installs mlflow and its plugin",
    why=(
        "SageMaker's MLflow is reached through the MLflow client and the sagemaker-mlflow plugin "
        "(it signs requests and resolves the tracking server ARN). The DLC training images have "
        "neither; the container installs the source folder's requirements.txt before train.py runs."
    ),
    fix="Add mlflow (or mlflow-skinny) and sagemaker-mlflow, pinned, to <source_dir>/requirements.txt.",
)
def tracking_requirements(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.spec.tracking.mlflow is None:
        return
    for name, job in ctx.spec.jobs.items():
        path = ctx.root / job.source_dir / "requirements.txt"
        listed = set()
        if path.exists():
            listed = {
                m.group(1).lower().replace("_", "-")
                for line in path.read_text().splitlines()
                if (m := _REQUIREMENT.match(line)) and not line.lstrip().startswith("#")
            }
        missing = [
            p for p in ("mlflow", "sagemaker-mlflow") if p not in listed and f"{p}-skinny" not in listed
        ]
        if missing:
            yield Finding(
                ("jobs", name, "source_dir"),
                f"tracking.mlflow is on but {job.source_dir}/requirements.txt does not list "
                f"{' and '.join(missing)}: the training container has no MLflow client, so the job would "
                "log nothing (train.py goes on without it); add them",
            )
