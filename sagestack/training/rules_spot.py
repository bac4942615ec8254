"""The wait a spot job is given: MaxWaitTimeInSeconds when the spec sets no max_wait.

Registered after the rules that predate it (project/rules.py keeps their order); the other spot
rules (max_wait against max_run, checkpoints, warm pools) are in rules_job.py."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.training.models import DEFAULT_SPOT_WAIT_FACTOR


def duration(seconds: int) -> str:
    """Seconds as the spec writes a duration: 8h, 1h30m, 2d, 90s."""
    parts, rest = [], seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts) or "0s"


@rule(
    "spot-default-max-wait",
    "warning",
    "a spot job says how long it may wait for spot capacity (max_wait)",
    why=(
        "MaxWaitTimeInSeconds is the run plus the time spent waiting for spot capacity and across "
        "interruptions; equal to MaxRuntimeInSeconds it leaves no time to wait at all. The SageMaker SDK "
        "asks for max_wait with spot; sagestack chooses max_run doubled (at most 28 days) and says so."
    ),
    fix=(
        "Set max_wait (>= max_run) to the longest the result may take, waiting included, e.g. "
        "max_run: 4h with max_wait: 12h; or train on demand."
    ),
)
def spot_default_max_wait(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        wait = job.spot_max_wait
        if wait is None or job.max_wait is not None:
            continue
        if wait == job.max_run:
            yield Finding(
                ("jobs", name, "use_spot_instances"),
                f"spot without max_wait, and max_run is already {duration(job.max_run)}, SageMaker's longest: "
                "the job has no time to wait for spot capacity or across interruptions; lower max_run and "
                "set max_wait above it",
            )
            continue
        capped = " (capped at 28 days)" if wait < DEFAULT_SPOT_WAIT_FACTOR * job.max_run else ""
        yield Finding(
            ("jobs", name, "use_spot_instances"),
            f"spot without max_wait: sagestack renders MaxWaitTimeInSeconds {wait}, max_run "
            f"{duration(job.max_run)} doubled{capped}, so the job may wait up to {duration(wait - job.max_run)} "
            f"for spot capacity; say so with max_wait: {duration(wait)} (or the time you choose, >= max_run)",
        )
