"""The training pipeline as Amazon States Language: quota check -> create -> poll, per candidate.

aws-sdk service integrations with explicit Describe / Wait / Choice polling (not `.sync`), so each
step handles ResourceLimitExceeded and capacity failures itself (back off, then the next candidate),
and the whole machine runs under a local Step Functions interpreter in tests. Built from the shared
state builders of sagestack.core.states.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.states import (
    CAPACITY_PATTERNS,
    IN_USE_PATTERNS,
    SUCCEEDED,
    PipelineSettings,
    notify_outcome,
)
from sagestack.training.candidates import RenderedCandidate
from sagestack.training.preferences import preference
from sagestack.training.rendered import RenderedJob

NO_CANDIDATE = "No candidate available"


@dataclass(frozen=True)
class CandidateStates:
    """The names of one instance candidate's states ('Create 1/2', 'Describe 1/2', …)."""

    index: int
    count: int

    @property
    def tag(self) -> str:
        return f"{self.index + 1}/{self.count}"

    @property
    def quota(self) -> str:
        return f"Quota {self.tag}" if self.index < self.count else NO_CANDIDATE

    @property
    def quota_enough(self) -> str:
        return f"Quota enough {self.tag}?"

    @property
    def create(self) -> str:
        return f"Create {self.tag}"

    @property
    def create_refused(self) -> str:
        return f"Create refused {self.tag}?"

    @property
    def backoff(self) -> str:
        return f"Back off {self.tag}"

    @property
    def wait(self) -> str:
        return f"Wait {self.tag}"

    @property
    def describe(self) -> str:
        return f"Describe {self.tag}"

    @property
    def status(self) -> str:
        return f"Status {self.tag}?"

    @property
    def result_path(self) -> str:
        return f"$.quota_{self.index + 1}"

    def next(self) -> CandidateStates:
        return CandidateStates(self.index + 1, self.count)


def training_pipeline(plan: RenderedJob, settings: PipelineSettings) -> dict[str, Any]:
    """The state machine definition (a dict; json.dumps it, or Stack.to_json_string with tokens):
    one job with InstancePreferences when the plan has one, else the candidate loop."""
    if plan.preferred is not None:
        return _preference_pipeline(plan, settings)
    states: dict[str, Any] = {}
    count = plan.job.instance_count
    n = len(plan.candidates)
    for c in plan.candidates:
        s = CandidateStates(c.index, n)
        nxt = s.next().quota
        candidate_quota(states, c, s, settings, count, short=nxt, enough=s.create)
        states[s.create] = asl.task(
            "sagemaker:createTrainingJob",
            c.request,
            comment=f"CreateTrainingJob on {count}x {c.instance_type}",
            result_path="$.created",
            nxt=s.wait,
            catch_=asl.catch(s.create_refused),
        )
        states[s.create_refused] = asl.choice(
            asl.when(asl.error_matches(CAPACITY_PATTERNS), s.backoff),
            # Same content hash, same name: this spec's job already exists; follow it.
            asl.when(asl.error_matches(IN_USE_PATTERNS), s.describe),
            default="Notify create failed",
        )
        states[s.backoff] = asl.wait(settings.backoff_seconds, nxt)
        capacity_failure = asl.all_of(
            asl.string_equals(STATUS, "Failed"),
            asl.is_present("$.job.Detail.FailureReason"),
            asl.matches_any("$.job.Detail.FailureReason", CAPACITY_PATTERNS),
        )
        states.update(follow(s, c.name, settings, before_failed=(asl.when(capacity_failure, s.backoff),)))

    states[NO_CANDIDATE] = asl.fail(
        "NoCandidateAvailable",
        cause=(
            f"Every instance candidate of job '{plan.key}' was refused for quota or capacity: "
            + ", ".join(f"{plan.job.instance_count}x {c.instance_type}" for c in plan.candidates)
            + ". Ask for a quota increase, add a candidate, or retry later."
        ),
    )
    outcomes(states, plan, settings, instance_type="$.job.Detail.ResourceConfig.InstanceType")
    return {
        "Comment": f"sagestack training pipeline for job '{plan.key}' ({plan.digest})",
        "StartAt": CandidateStates(0, n).quota,
        "States": states,
    }


def candidate_quota(
    states: dict[str, Any],
    c: RenderedCandidate,
    s: CandidateStates,
    settings: PipelineSettings,
    count: int,
    *,
    short: str,
    enough: str,
) -> None:
    """A candidate's quota check: `short` when it allows fewer than `count` instances, else
    `enough` (also when it could not be checked: the create call judges)."""
    code = (settings.quota_codes or {}).get(c.quota_name)
    states.update(
        asl.quota_check(
            s.quota,
            c.quota_name,
            code,
            needed=count,
            result_path=s.result_path,
            next_checked=s.quota_enough,
            next_unchecked=enough,
        )
    )
    states[s.quota_enough] = asl.quota_enough(s.result_path, count, short=short, enough=enough)


STATUS = "$.job.TrainingJobStatus"


def follow(
    names: asl.PollNames,
    name: str,
    settings: PipelineSettings,
    *,
    before_failed: tuple[dict[str, Any], ...] = (),
) -> dict[str, asl.State]:
    """Follow training job `name`: DescribeTrainingJob into $.job (name, ARN, status and the whole
    answer) until it ends in the notifications of _outcomes."""
    return asl.poll(
        names,
        asl.Describe(
            "sagemaker:describeTrainingJob",
            {"TrainingJobName": name},
            result_path="$.job",
            result_selector={
                "TrainingJobName.$": "$.TrainingJobName",
                "TrainingJobArn.$": "$.TrainingJobArn",
                "TrainingJobStatus.$": "$.TrainingJobStatus",
                "Detail.$": "$",
            },
        ),
        status_path=STATUS,
        seconds=settings.poll_seconds,
        done="Notify succeeded",
        failed="Notify training failed",
        stopped="Notify stopped",
        before_failed=before_failed,
    )


def outcomes(
    states: dict[str, Any], plan: RenderedJob, settings: PipelineSettings, *, instance_type: str
) -> None:
    """The states both paths end in: notifications, the result (with the instance the job ran on),
    and a Fail that says why for every other ending."""
    states["Notify succeeded"] = asl.notify(
        settings,
        "sagestack: training succeeded",
        {
            "Message.$": f"States.Format('Training job {{}} succeeded on {{}}.', $.job.TrainingJobName, {instance_type})"
        },
        SUCCEEDED,
    )
    states[SUCCEEDED] = {
        "Type": "Pass",
        "Parameters": {
            "TrainingJobName.$": "$.job.TrainingJobName",
            "TrainingJobArn.$": "$.job.TrainingJobArn",
            "ModelArtifacts.$": "$.job.Detail.ModelArtifacts.S3ModelArtifacts",
            "TrainingImage.$": "$.job.Detail.AlgorithmSpecification.TrainingImage",
            "InstanceType.$": instance_type,
        },
        "End": True,
    }
    states["Notify training failed"] = notify_outcome(
        settings, "failed", "$.job.TrainingJobName", "Training failed"
    )
    states["Training failed"] = asl.fail("TrainingJobFailed", cause_path="$.job.Detail.FailureReason")
    states["Notify stopped"] = notify_outcome(
        settings, "was stopped", "$.job.TrainingJobName", "Training stopped"
    )
    states["Training stopped"] = asl.fail("TrainingJobStopped", cause="The training job was stopped.")
    states["Notify create failed"] = notify_outcome(settings, "was refused", None, "Create failed")
    states["Create failed"] = asl.fail_with_caught_error()


def _preference_pipeline(plan: RenderedJob, settings: PipelineSettings) -> dict[str, Any]:
    """Quota check per candidate -> one CreateTrainingJob whose InstancePreferences are the
    candidates the quotas allow, in order -> poll. SageMaker launches the first with capacity;
    Describe's SelectedInstanceType says which."""
    assert plan.preferred is not None
    states: dict[str, Any] = {}
    count = plan.job.instance_count
    n = len(plan.candidates)
    for c in plan.candidates:
        s = CandidateStates(c.index, n)
        nxt = s.next().quota if c.index + 1 < n else "Preferences"
        prefer, skip = f"Prefer {s.tag}", f"Skip {s.tag}"
        candidate_quota(states, c, s, settings, count, short=skip, enough=prefer)
        states[prefer] = {
            "Type": "Pass",
            "Result": preference(c, count),
            "ResultPath": f"$.pref_{c.index + 1}",
            "Next": nxt,
        }
        states[skip] = {
            "Type": "Pass",
            "Comment": f"the quota for {count}x {c.instance_type} is short",
            "Result": {"skipped": c.quota_name},
            "ResultPath": f"$.pref_{c.index + 1}",
            "Next": nxt,
        }
    slots = ", ".join(f"$.pref_{i + 1}" for i in range(n))
    states["Preferences"] = {
        "Type": "Pass",
        "Parameters": {"List.$": f"States.Array({slots})"},
        "ResultPath": "$.preferences",
        "Next": "Allowed preferences",
    }
    states["Allowed preferences"] = {
        "Type": "Pass",
        "Comment": "the candidates whose quota allows the job, in order of preference",
        "Parameters": {"List.$": "$.preferences.List[?(@.InstanceType)]"},
        "ResultPath": "$.preferences",
        "Next": "Any preference?",
    }
    states["Any preference?"] = asl.choice(
        asl.when(asl.is_present("$.preferences.List[0]"), "Create"), default=NO_CANDIDATE
    )
    request = json.loads(json.dumps(plan.preferred.request))
    resources = request["ResourceConfig"]
    resources.pop("InstancePreferences")
    resources["InstancePreferences.$"] = "$.preferences.List"
    states["Create"] = asl.task(
        "sagemaker:createTrainingJob",
        request,
        comment=f"CreateTrainingJob on {count}x the first of "
        + ", ".join(c.instance_type for c in plan.candidates)
        + " with capacity (InstancePreferences)",
        result_path="$.created",
        nxt="Wait",
        catch_=asl.catch("Create refused?"),
    )
    states["Create refused?"] = asl.choice(
        # Same content hash, same name: this spec's job already exists; follow it.
        asl.when(asl.error_matches(IN_USE_PATTERNS), "Describe"),
        default="Notify create failed",
    )
    states.update(follow(asl.PollStates("Wait", "Describe", "Status?"), plan.preferred.name, settings))
    states[NO_CANDIDATE] = asl.fail(
        "NoCandidateAvailable",
        cause=(
            f"No instance candidate of job '{plan.key}' has the quota for {count} instances: "
            + ", ".join(c.quota_name for c in plan.candidates)
            + ". Ask for a quota increase or add a candidate."
        ),
    )
    outcomes(states, plan, settings, instance_type="$.job.Detail.ResourceConfig.SelectedInstanceType")
    return {
        "Comment": f"sagestack training pipeline for job '{plan.key}' ({plan.digest}), InstancePreferences",
        "StartAt": CandidateStates(0, n).quota,
        "States": states,
    }
