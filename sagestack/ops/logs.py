"""A training job's or an endpoint's CloudWatch logs (`sagestack logs`): every host's stream, each
line with its host, in time order; followed until the job ends, as the SageMaker SDK's
`logs_for_job` does (sagemaker.core.helper.session_helper): read every stream, describe the job, and
once it has ended read the streams one last time, then its final status and metrics.

A target is found by sagestack's names (core/names.py): a job key of the spec (its newest training
job in the environment), a training job's own name (one of this environment's), or an endpoint key.
Whether a name can be one is known from the spec: `check_name` refuses any other before a client
is made (no credentials needed to hear of a typo). boto3 is not imported here: the caller passes
the clients."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sagestack.core.catalog.suggest import could_be
from sagestack.ops.status import Scope, job_of
from sagestack.ops.status_schedules import error_code

TRAINING_GROUP = "/aws/sagemaker/TrainingJobs"
ENDPOINT_GROUP = "/aws/sagemaker/Endpoints/"
ENDED = ("Completed", "Failed", "Stopped")
_STREAM_TIME = re.compile(r"-\d{10}$")  # "<job>/algo-1-1700000000": the host's start, in seconds


class NotFound(LookupError):
    """What the user named is no job or endpoint of this environment (the message says why)."""


@dataclass(frozen=True)
class Target:
    kind: str  # "training" or "endpoint"
    name: str  # the SageMaker name
    entry: str | None  # the spec's key, when known
    group: str  # the CloudWatch log group
    prefix: str  # the streams' common prefix ("" for all of the group)


@dataclass(frozen=True)
class Line:
    timestamp: int  # milliseconds since the epoch, as CloudWatch keeps it
    host: str
    message: str

    def as_json(self) -> dict[str, Any]:
        at = datetime.fromtimestamp(self.timestamp / 1000, UTC)
        return {"time": at.isoformat(timespec="milliseconds"), "host": self.host, "message": self.message}


def newest_job(scope: Scope, sm: Any, key: str) -> str | None:
    """The newest training job of the spec's job `key` in this environment (by name, as status)."""
    listed = sm.list_training_jobs(
        NameContains=scope.names.prefix, SortBy="CreationTime", SortOrder="Descending", MaxResults=100
    )["TrainingJobSummaries"]
    ours = [s for s in listed if job_of(scope, s["TrainingJobName"]) == key]
    return max(ours, key=lambda s: s["CreationTime"])["TrainingJobName"] if ours else None


def what_is(scope: Scope, target: str) -> str | None:
    """What else of the spec `target` names ('a search', 'a cluster', …), or None."""
    kinds = (
        ("a job", scope.jobs),
        ("an endpoint", scope.endpoints),
        ("a search", scope.tuning),
        ("a cluster", scope.clusters),
        ("a training queue", scope.queues),
        ("a pipeline", tuple(scope.pipelines)),
    )
    return next((kind for kind, names in kinds if target in names), None)


def check_name(scope: Scope, target: str) -> None:
    """NotFound, before any AWS call, when `target` is no job or endpoint key of the spec and no
    training job name of one of its jobs in this environment: what it is instead, or the names it
    could be."""
    if target in scope.jobs or target in scope.endpoints or job_of(scope, target) is not None:
        return
    where = f"{scope.names.project}/{scope.names.env}"
    known = (
        f"jobs: {', '.join(scope.jobs) or 'none'}; endpoints: {', '.join(scope.endpoints) or 'none'}; "
        f"or a training job named {scope.names.prefix}-…"
    )
    other = what_is(scope, target)
    if other is not None:
        raise NotFound(
            f"'{target}' is {other} of {where}, not a job or endpoint: `sagestack logs` reads a training "
            f"job's or an endpoint's logs ({known})"
        )
    could = could_be(target, [*scope.jobs, *scope.endpoints])
    raise NotFound(f"'{target}' is no job or endpoint of {where}{could} ({known})")


def resolve(scope: Scope, sm: Any, target: str) -> Target:
    """The job or endpoint `target` names; NotFound (with what exists) when none of this environment."""
    check_name(scope, target)
    env = scope.names.env
    if target in scope.endpoints:
        name = scope.names.endpoint(target)
        return Target("endpoint", name, target, ENDPOINT_GROUP + name, "")
    if target in scope.jobs:
        newest = newest_job(scope, sm, target)
        if newest is None:
            raise NotFound(
                f"job '{target}' has no training job in {env} yet: `sagestack run {target} --env {env}` starts one"
            )
        return Target("training", newest, target, TRAINING_GROUP, newest + "/")
    key = job_of(scope, target)  # a training job of one of the spec's jobs: check_name refused the rest
    try:
        sm.describe_training_job(TrainingJobName=target)
    except Exception as e:
        if error_code(e) != "ValidationException":
            raise
        raise NotFound(f"no training job '{target}' in {scope.region}") from None
    return Target("training", target, key, TRAINING_GROUP, target + "/")


def host_of(stream: str, target: Target) -> str:
    """'algo-1' of '<job>/algo-1-1700000000'; an endpoint's '<variant>/<instance>' as it is."""
    rest = stream[len(target.prefix) :]
    return _STREAM_TIME.sub("", rest) if target.kind == "training" else rest


@dataclass
class Reader:
    """Reads the target's streams forward: each read returns what was written since the last one
    (each stream's nextForwardToken kept), every stream's lines merged in time order."""

    logs: Any
    target: Target
    tokens: dict[str, str | None] = field(default_factory=dict)

    def streams(self) -> list[str]:
        """The target's streams; none while the log group does not exist yet (a job starting)."""
        args: dict[str, Any] = {"logGroupName": self.target.group}
        if self.target.prefix:
            args["logStreamNamePrefix"] = self.target.prefix
        names: list[str] = []
        try:
            for page in self.logs.get_paginator("describe_log_streams").paginate(**args):
                names += [s["logStreamName"] for s in page["logStreams"]]
        except Exception as e:
            if error_code(e) != "ResourceNotFoundException":
                raise
        return sorted(names)

    def read(self) -> list[Line]:
        lines: list[Line] = []
        for stream in self.streams():
            host = host_of(stream, self.target)
            lines += [Line(e["timestamp"], host, e["message"].rstrip("\n")) for e in self._events(stream)]
        return sorted(lines, key=lambda line: line.timestamp)  # stable: a host's own order kept

    def _events(self, stream: str) -> Iterator[dict[str, Any]]:
        token = self.tokens.get(stream)
        while True:
            args: dict[str, Any] = {"logGroupName": self.target.group, "logStreamName": stream}
            args |= {"nextToken": token} if token else {"startFromHead": True}
            answer = self.logs.get_log_events(**args)
            yield from answer["events"]
            following = answer.get("nextForwardToken")
            if not answer["events"] or following in (None, token):
                self.tokens[stream] = following or token
                return
            token = self.tokens[stream] = following


def follow(
    reader: Reader,
    sm: Any,
    on_lines: Callable[[list[Line]], None],
    *,
    poll_seconds: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Print the job's lines as they come until it has ended, then its last ones: the final
    DescribeTrainingJob answer."""
    while True:
        on_lines(reader.read())
        described = sm.describe_training_job(TrainingJobName=reader.target.name)
        if described["TrainingJobStatus"] in ENDED:
            on_lines(reader.read())  # what the hosts wrote while they stopped
            return dict(described)
        sleep(poll_seconds)


def follow_endpoint(
    reader: Reader,
    on_lines: Callable[[list[Line]], None],
    *,
    poll_seconds: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """An endpoint's lines as they come, until Ctrl-C (an endpoint does not end by itself)."""
    while True:
        on_lines(reader.read())
        sleep(poll_seconds)
