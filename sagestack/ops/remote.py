"""Start and follow a deployed pipeline (Step Functions) with boto3. No CDK here."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class PipelineNotFound(LookupError):
    pass


@dataclass(frozen=True)
class ExecutionResult:
    arn: str
    status: str
    output: str | None
    error: str | None
    cause: str | None
    states: tuple[str, ...]


def state_machine_arn(sfn: Any, name: str) -> str:
    for page in sfn.get_paginator("list_state_machines").paginate():
        for machine in page["stateMachines"]:
            if machine["name"] == name:
                return str(machine["stateMachineArn"])
    raise PipelineNotFound(name)


def start_execution(
    sfn: Any, machine_arn: str, *, prefix: str = "run", input: dict[str, Any] | None = None
) -> str:
    name = f"{prefix}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
    return str(
        sfn.start_execution(stateMachineArn=machine_arn, name=name, input=json.dumps(input or {}))[
            "executionArn"
        ]
    )


def _entered_states(sfn: Any, execution_arn: str) -> list[str]:
    events: list[dict[str, Any]] = []
    for page in sfn.get_paginator("get_execution_history").paginate(executionArn=execution_arn):
        events += page["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]


def follow(
    sfn: Any,
    execution_arn: str,
    *,
    poll_seconds: float = 5.0,
    timeout_seconds: float | None = None,
    on_state: Callable[[str], None] = lambda _: None,
    on_poll: Callable[[], None] = lambda: None,
    sleep: Callable[[float], None] = time.sleep,
) -> ExecutionResult:
    """Poll until the execution ends (or the timeout passes), reporting each state as it is entered;
    `on_poll` after each poll's states (`run` prints its training job's new log lines there)."""
    seen = 0
    started = time.monotonic()
    while True:
        described = sfn.describe_execution(executionArn=execution_arn)
        states = _entered_states(sfn, execution_arn)
        for state in states[seen:]:
            on_state(state)
        seen = len(states)
        on_poll()
        status = described["status"]
        timed_out = timeout_seconds is not None and time.monotonic() - started > timeout_seconds
        if status != "RUNNING" or timed_out:
            return ExecutionResult(
                arn=execution_arn,
                status=status,
                output=described.get("output"),
                error=described.get("error"),
                cause=described.get("cause"),
                states=tuple(states),
            )
        sleep(poll_seconds)
