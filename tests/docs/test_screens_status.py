"""The `sagestack status` screen the command-line guide shows is what the command prints today: the
guide's block against the screen of the status tests' account (a moto server with a finished, a
running and a failed job, an InService and a Failed endpoint, an execution, a schedule), the clock's
readings (the time of the read, of a stack, of a run, the next run) left out of the comparison."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from sagestack.cli import app
from tests.docs.site import REPO
from tests.support.moto_server import ACCOUNT, REGION
from tests.unit.test_status import aws, components, moto

__all__ = ["aws", "components", "moto"]

GUIDE = REPO / "docs" / "guide" / "cli.md"
CLOCK = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d\b|\b\d\d-\d\d \d\d:\d\d\b|\b\d\d:\d\d\b")


def shown(section: str) -> str:
    """The first ```text block under the guide's `## <section>` heading."""
    text = GUIDE.read_text()
    start = text.index(f"\n## {section}")
    block = re.compile(r"^```text\n(.*?)^```", re.S | re.M).search(text, start)
    assert block, section
    return block[1].rstrip()


def test_the_guides_status_screen_is_what_status_prints(aws, components) -> None:
    from moto.sagemaker.models import sagemaker_backends

    # moto's tuning job names its best trial "FakeTrainingJobName": the guide shows one of the search's
    search = sagemaker_backends[ACCOUNT][REGION].hyper_parameter_tuning_jobs["digits-lr-search-1a2b3c4d"]
    search.best_training_job = {
        **search.best_training_job,
        "TrainingJobName": "digits-lr-search-1a2b3c4d-003-5c9e1f3a",
        "FinalHyperParameterTuningJobObjectiveMetric": {"MetricName": "val_accuracy", "Value": 0.9812},
    }
    done = CliRunner().invoke(app, ["status", "--env", "dev", "--root", str(aws.root)], env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.output
    printed = done.output.rstrip()
    guide = shown("What runs now: `sagestack status`")
    assert CLOCK.sub("<clock>", guide) == CLOCK.sub("<clock>", printed), (
        "docs/guide/cli.md's status screen differs from what `sagestack status` prints now; "
        f"paste this:\n{printed}"
    )
