"""Small builders of Amazon States Language states, shared by every pipeline (training, tuning,
model steps, transforms, Model Monitor's baseline, LLM optimization): a task on an aws-sdk
integration, its retry and catch, a choice, a wait, a fail that carries the cause, the loop that
follows a SageMaker job to its end (`poll`), and a notification that can never change a pipeline's
outcome.

Pure data (dicts); a construct serializes the definition with tokens for the role, bucket, topic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

SDK = "arn:aws:states:::aws-sdk:"
# Error names differ: Step Functions on AWS says SageMaker.ResourceLimitExceededException, a local
# interpreter may say sagemaker.ResourceLimitExceededException; the Cause carries the service's own
# code and text. Match both, case-sensitively, as ErrorEquals would.
CAPACITY_PATTERNS = ("*ResourceLimitExceeded*", "*CapacityError*", "*InsufficientCapacity*")
IN_USE_PATTERNS = ("*ResourceInUse*",)
CAUGHT = "$.error"  # where a Catch stores the error it caught
# A training (or tuning) pipeline's last state: its output carries TrainingJobName and ModelArtifacts,
# so model steps follow it.
SUCCEEDED = "Succeeded"


@dataclass(frozen=True)
class PipelineSettings:
    poll_seconds: int = 60
    backoff_seconds: int = 120
    topic_arn: str | None = None
    quota_codes: dict[str, str] | None = None  # quota name -> code (from a quota snapshot)


State = dict[str, Any]


def retry(*, interval: int = 5, attempts: int = 3, backoff: float = 2) -> list[dict[str, Any]]:
    """Retry any error: for reads that a throttle or a blip may fail."""
    return [
        {
            "ErrorEquals": ["States.ALL"],
            "IntervalSeconds": interval,
            "MaxAttempts": attempts,
            "BackoffRate": backoff,
        }
    ]


def catch(nxt: str, result_path: str = CAUGHT) -> list[dict[str, Any]]:
    """Catch any error, keep it at result_path and go on to `nxt`."""
    return [{"ErrorEquals": ["States.ALL"], "ResultPath": result_path, "Next": nxt}]


def task(
    action: str,
    parameters: dict[str, Any],
    *,
    nxt: str,
    result_path: str,
    result_selector: dict[str, Any] | None = None,
    retry_: list[dict[str, Any]] | None = None,
    catch_: list[dict[str, Any]] | None = None,
    comment: str | None = None,
) -> State:
    """A call of an aws-sdk integration, e.g. task('sagemaker:createTrainingJob', request, …)."""
    state: State = {"Type": "Task"}
    if comment is not None:
        state["Comment"] = comment
    state.update({"Resource": f"{SDK}{action}", "Parameters": parameters})
    if result_selector is not None:
        state["ResultSelector"] = result_selector
    state["ResultPath"] = result_path
    if retry_ is not None:
        state["Retry"] = retry_
    state["Next"] = nxt
    if catch_ is not None:
        state["Catch"] = catch_
    return state


def dynamic(request: dict[str, Any], path: tuple[str, ...], json_path: str) -> None:
    """Replace request[path] with a JSONPath reference ('Key.$': json_path), a value of the run."""
    node = request
    for part in path[:-1]:
        node = node[part]
    node.pop(path[-1], None)
    node[f"{path[-1]}.$"] = json_path


def formatted(text: str, *paths: str) -> str:
    """States.Format(text, *paths): `text` with '{}' where each value goes, its other characters
    escaped as an intrinsic function's string literal needs them (a backslash before \\ ' { })."""
    parts = [re.sub(r"([\\'{}])", r"\\\1", part) for part in text.split("{}")]
    return f"States.Format('{'{}'.join(parts)}'{''.join(f', {p}' for p in paths)})"


def choice(*choices: dict[str, Any], default: str) -> State:
    return {"Type": "Choice", "Choices": list(choices), "Default": default}


def when(condition: dict[str, Any], nxt: str) -> dict[str, Any]:
    """One branch of a Choice: a condition (string_equals, matches_any, …) and where it goes."""
    return {**condition, "Next": nxt}


def string_equals(variable: str, value: str) -> dict[str, Any]:
    return {"Variable": variable, "StringEquals": value}


def all_of(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"And": list(conditions)}


def is_present(variable: str) -> dict[str, Any]:
    return {"Variable": variable, "IsPresent": True}


def is_string(variable: str) -> dict[str, Any]:
    return {"Variable": variable, "IsString": True}


def matches_any(variable: str, patterns: tuple[str, ...]) -> dict[str, Any]:
    return {"Or": [{"Variable": variable, "StringMatches": p} for p in patterns]}


def error_matches(patterns: tuple[str, ...]) -> dict[str, Any]:
    """The caught error's name or cause matches one of the patterns (either may be absent)."""
    return {
        "Or": [
            all_of(
                is_present(f"{CAUGHT}.{field}"),
                is_string(f"{CAUGHT}.{field}"),
                matches_any(f"{CAUGHT}.{field}", patterns),
            )
            for field in ("Error", "Cause")
        ]
    }


def wait(seconds: int, nxt: str) -> State:
    return {"Type": "Wait", "Seconds": seconds, "Next": nxt}


class PollNames(Protocol):
    """The names of a polling loop's three states (a pipeline's own names, e.g. 'Wait 1/2')."""

    @property
    def wait(self) -> str: ...

    @property
    def describe(self) -> str: ...

    @property
    def status(self) -> str: ...


@dataclass(frozen=True)
class PollStates:
    """PollNames spelt out, for a pipeline with one loop ('Wait', 'Describe', 'Status?')."""

    wait: str
    describe: str
    status: str


@dataclass(frozen=True)
class Describe:
    """The read a polling loop repeats: an aws-sdk Describe call, what it keeps, and where."""

    action: str  # e.g. 'sagemaker:describeTrainingJob'
    parameters: dict[str, Any]
    result_path: str
    result_selector: dict[str, Any] | None = None


# SageMaker's words for a job's end: most jobs say them so; compilation and optimization jobs shout.
ENDINGS = ("Completed", "Failed", "Stopped")
ENDINGS_UPPER = ("COMPLETED", "FAILED", "STOPPED")


def poll(
    names: PollNames,
    describe: Describe,
    *,
    status_path: str,
    seconds: int,
    done: str,
    failed: str,
    stopped: str | None = None,
    endings: tuple[str, str, str] = ENDINGS,
    before_done: Sequence[dict[str, Any]] = (),
    before_failed: Sequence[dict[str, Any]] = (),
) -> dict[str, State]:
    """Follow a job to its end: Wait `seconds` -> Describe (retried: a read) -> a Choice on the status
    at status_path: `done` when it completed, `failed` when it failed, `stopped` (default: `failed`)
    when it was stopped, and anything else waits again. before_done / before_failed: branches tried
    just before the plain completed / failed ones (a search that completed without a best job; a
    failure for capacity, which backs off)."""
    completed, failed_word, stopped_word = endings
    return {
        names.wait: wait(seconds, names.describe),
        names.describe: task(
            describe.action,
            describe.parameters,
            result_selector=describe.result_selector,
            result_path=describe.result_path,
            retry_=retry(),
            nxt=names.status,
        ),
        names.status: choice(
            *before_done,
            when(string_equals(status_path, completed), done),
            *before_failed,
            when(string_equals(status_path, failed_word), failed),
            when(string_equals(status_path, stopped_word), stopped or failed),
            default=names.wait,
        ),
    }


def fail(error: str, *, cause: str | None = None, cause_path: str | None = None) -> State:
    """A Fail that says why: a fixed cause, or one read from the state (CausePath)."""
    state: State = {"Type": "Fail", "Error": error}
    if cause is not None:
        state["Cause"] = cause
    if cause_path is not None:
        state["CausePath"] = cause_path
    return state


def fail_with_caught_error() -> State:
    """A Fail with the error a Catch stored (the service's own name and message)."""
    return {"Type": "Fail", "ErrorPath": f"{CAUGHT}.Error", "CausePath": f"{CAUGHT}.Cause"}


def notify(settings: PipelineSettings, subject: str, message: dict[str, str], nxt: str) -> State:
    """An SNS publish to the pipeline's topic (a Pass when there is none). `message` is
    {"Message": text} or {"Message.$": intrinsic}. A lost notification must not change the outcome."""
    if settings.topic_arn is None:
        return {"Type": "Pass", "Next": nxt}
    return task(
        "sns:publish",
        {"TopicArn": settings.topic_arn, "Subject": subject, **message},
        # Not ResultPath null: CDK's JSON rendering drops null values.
        result_path="$.notification",
        catch_=catch(nxt, "$.notification_error"),
        nxt=nxt,
    )


def notify_outcome(
    settings: PipelineSettings, verb: str, name_path: str | None, nxt: str, kind: str = "Training"
) -> dict[str, Any]:
    """'Training job <name> succeeded.' (or the tuning pipeline's words) to the topic."""
    message = (
        {"Message.$": f"States.Format('{kind} job {{}} {verb}.', {name_path})"}
        if name_path
        else {"Message": f"A {kind.lower()} job {verb} by SageMaker; see the execution's error."}
    )
    return notify(settings, f"sagestack: {kind.lower()} {verb}", message, nxt)


QUOTAS_PAGE = 100  # ListServiceQuotas' largest page


def quota_check(
    entry: str,
    name: str,
    code: str | None,
    *,
    needed: int,
    result_path: str,
    next_checked: str,
    next_unchecked: str,
) -> dict[str, State]:
    """The states that read quota `name` into result_path ({"Value", "Name"}) and go to
    next_checked; or record why it was not checked and go to next_unchecked.

    With a code (a quota snapshot names it): one GetServiceQuota. Without one: the quota is found by
    its name — ListServiceQuotas page by page, each page filtered to the quota of that name, so a
    fresh project is checked at run time too. An unreachable quota service proceeds: the create
    call is the final judge."""
    if code is not None:
        return {
            entry: task(
                "servicequotas:getServiceQuota",
                {"ServiceCode": "sagemaker", "QuotaCode": code},
                comment=f"GetServiceQuota '{name}' ({code}): {needed} needed at once",
                result_selector={"Value.$": "$.Quota.Value", "Name.$": "$.Quota.QuotaName"},
                result_path=result_path,
                nxt=next_checked,
                catch_=catch(next_unchecked, f"{result_path}_error"),
            )
        }
    page = f"{result_path}_page"
    found, next_page, not_found, unreachable = (
        f"{entry}: found?",
        f"{entry}: next page",
        f"{entry}: not found",
        f"{entry}: not checked",
    )
    # Only the match and the next page's token are kept ($..NextToken is [] on the last page).
    selector = {"Match.$": f"$.Quotas[?(@.QuotaName == '{name}')]", "Token.$": "$..NextToken"}

    def lookup(parameters: dict[str, Any], comment: str | None = None) -> State:
        return task(
            "servicequotas:listServiceQuotas",
            {"ServiceCode": "sagemaker", "MaxResults": QUOTAS_PAGE, **parameters},
            comment=comment,
            result_selector=selector,
            result_path=page,
            retry_=retry(interval=2, attempts=3),
            nxt=found,
            catch_=catch(unreachable, f"{result_path}_error"),
        )

    def note(text: str) -> State:
        return {
            "Type": "Pass",
            "Result": {"checked": False, "quota": name, "needed": needed, "note": text},
            "ResultPath": result_path,
            "Next": next_unchecked,
        }

    return {
        entry: lookup(
            {}, f"Find quota '{name}' by name ({needed} needed at once; no snapshot names its code)"
        ),
        found: choice(
            when(is_present(f"{page}.Match[0]"), f"{entry}: value"),
            when(is_present(f"{page}.Token[0]"), next_page),
            default=not_found,
        ),
        # The quota found ({QuotaName, QuotaCode, Value, …}) where GetServiceQuota's {Value, Name} goes.
        f"{entry}: value": {
            "Type": "Pass",
            "InputPath": f"{page}.Match[0]",
            "ResultPath": result_path,
            "Next": next_checked,
        },
        next_page: lookup({"NextToken.$": f"{page}.Token[0]"}),
        not_found: note(f"this account's Service Quotas list no quota named '{name}'"),
        unreachable: note("the Service Quotas API did not answer; the create call is the judge"),
    }


def quota_enough(result_path: str, needed: int, *, short: str, enough: str) -> State:
    """Go to `short` when the quota read at result_path allows fewer than `needed` instances."""
    return choice(
        {"Variable": f"{result_path}.Value", "NumericLessThan": needed, "Next": short}, default=enough
    )
