"""Values read from CDK objects through jsii once per object.

Every property read or static call on a CDK object is a round trip to the node process: a few
hundredths of a millisecond on a quiet machine, milliseconds on a busy one, where each answer waits
for the other process to be scheduled. On the spec path the pipelines of an environment share their
stack, role, topic, key, bucket and durations, and asked each of them the same questions once per
job (bench/synth.py measured 36 round trips per training job). What is read here cannot change once
the object exists — a construct's path, stack and stage, a token's string, a Duration's seconds — so
the first answer is kept, for as long as the object lives.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from aws_cdk import Duration, Stack, Stage
from aws_cdk import aws_iam as iam
from constructs import IConstruct

T = TypeVar("T")

_READ: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _once(obj: Any, what: str, read: Callable[[], T]) -> T:
    answers = _READ.setdefault(obj, {})
    if what not in answers:
        answers[what] = read()
    return answers[what]  # type: ignore[no-any-return]


def attribute(obj: Any, name: str) -> Any:
    """`getattr(obj, name)` for a property that never changes (an ARN, a name, a token's string)."""
    return _once(obj, f"attribute:{name}", lambda: getattr(obj, name))


def path_of(construct: IConstruct) -> str:
    """`construct.node.path`."""
    return _once(construct, "path", lambda: construct.node.path)


def stack_of(scope: IConstruct) -> Stack:
    """`Stack.of(scope)`."""
    return _once(scope, "stack", lambda: Stack.of(scope))


def stage_of(scope: IConstruct) -> Stage | None:
    """`Stage.of(scope)`."""
    return _once(scope, "stage", lambda: Stage.of(scope))


def seconds(duration: Duration) -> float:
    """`duration.to_seconds()`."""
    return _once(duration, "seconds", duration.to_seconds)


def five_minutes() -> Duration:
    """One `Duration.minutes(5)` for every metric period that is not given (Durations are immutable)."""
    return _once(Duration, "minutes(5)", lambda: Duration.minutes(5))


def dropped(grantee: iam.IGrantable, intent: str) -> iam.Grant:
    """`iam.Grant.drop(grantee, intent)` — a grant that adds nothing (the statement is held already),
    one per grantee and intent: it holds no statement and nothing changes it, so callers can share it."""
    return _once(grantee, f"dropped:{intent}", lambda: iam.Grant.drop(grantee, intent))
