"""The states of an endpoint's recommendation pipeline (`sagestack run <endpoint> --recommend`): check
the endpoint-usage quota of every candidate the job deploys, find the model package a classic
endpoint serves (its pin, else the group's newest approved), run the recommendation job (backing
off when SageMaker has no room, following a job of the same name that exists: the name is the
target's content hash and, for a package found here, its version — rendered by the run, so a newly
approved version gets a job of its own), follow it to its end and hand its Describe answer on as
the execution's output, with the job's name and the package it measured — `sagestack recommend`
reads the verdict from it. A target no candidate meets is a verdict the job reports, not a failure
of the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.catalog.quotas import quota_name
from sagestack.core.deployment import Deployment
from sagestack.core.states import CAPACITY_PATTERNS, IN_USE_PATTERNS, PipelineSettings
from sagestack.endpoints.recommend import (
    ResolvedRecommendation,
    ai_candidates,
    ai_recommendation_request,
    inference_recommendations_request,
)

JOB = "$.job"  # the Describe answer
PACKAGE = "$.package"  # the package found: {Arn, Version, JobName}
JOB_NAME = f"{PACKAGE}.JobName"
# What an approval event's detail must carry ("SageMaker Model Package State Change", EventBridge)
_EVENT_KEYS = ("ModelPackageArn", "ModelPackageGroupName", "ModelApprovalStatus")


@dataclass(frozen=True)
class RecommendStates:
    key: str

    def quota(self, i: int) -> str:
        return f"Quota recommend {self.key} {i + 1}"

    def enough(self, i: int) -> str:
        return f"Enough to recommend {self.key} {i + 1}?"

    @property
    def find_package(self) -> str:
        return f"Find package {self.key}"

    @property
    def from_event(self) -> str:
        return f"Approved package given {self.key}?"

    @property
    def event_package(self) -> str:
        return f"Package approved {self.key}"

    @property
    def found_package(self) -> str:
        return f"Package found {self.key}?"

    @property
    def no_package(self) -> str:
        return f"No package to measure {self.key}"

    @property
    def create(self) -> str:
        return f"Recommend {self.key}"

    @property
    def refused(self) -> str:
        return f"Recommend refused {self.key}?"

    @property
    def backoff(self) -> str:
        return f"Back off recommend {self.key}"

    @property
    def wait(self) -> str:
        return f"Wait recommend {self.key}"

    @property
    def describe(self) -> str:
        return f"Describe recommend {self.key}"

    @property
    def status(self) -> str:
        return f"Recommend status {self.key}?"

    @property
    def notify_done(self) -> str:
        return f"Notify recommended {self.key}"

    @property
    def done(self) -> str:
        return f"Recommended {self.key}"

    @property
    def results(self) -> str:
        return f"Recommendations of {self.key}?"

    @property
    def none(self) -> str:
        return f"No recommendation for {self.key}"

    @property
    def notify_failed(self) -> str:
        return f"Notify recommend failed {self.key}"

    @property
    def failed_reason(self) -> str:
        return f"Recommend failed with reason {self.key}?"

    @property
    def failed(self) -> str:
        return f"Recommendation failed {self.key}"

    @property
    def failed_no_reason(self) -> str:
        return f"Recommendation ended {self.key}"

    @property
    def refused_fail(self) -> str:
        return f"Recommendation refused {self.key}"

    def short(self, i: int) -> str:
        return f"No quota to recommend {self.key} {i + 1}"


@dataclass(frozen=True)
class Api:
    create: str
    describe: str
    name_key: str
    status_key: str
    results: str  # where the Describe answer lists what was measured

    @property
    def operation(self) -> str:
        """The API's own name, e.g. CreateAIRecommendationJob."""
        action = self.create.split(":")[1]
        return action[0].upper() + action[1:]


AI = Api("sagemaker:createAIRecommendationJob", "sagemaker:describeAIRecommendationJob",
         "AIRecommendationJobName", "AIRecommendationJobStatus", "Recommendations")  # fmt: skip
IR = Api("sagemaker:createInferenceRecommendationsJob", "sagemaker:describeInferenceRecommendationsJob",
         "JobName", "Status", "InferenceRecommendations")  # fmt: skip


def api_of(r: ResolvedRecommendation) -> Api:
    return AI if r.llm is not None else IR


def measured(r: ResolvedRecommendation) -> list[str]:
    """The candidates the job deploys (an AI recommendation job measures botocore's GPU types only)."""
    return ai_candidates(r) if r.llm is not None else list(r.candidates)


def recommendation_request(
    r: ResolvedRecommendation, deployment: Deployment, *, workload_arn: str, mlflow_arn: str | None
) -> dict[str, Any]:
    if r.llm is not None:
        return ai_recommendation_request(r, deployment, workload_arn=workload_arn, mlflow_arn=mlflow_arn)
    request = inference_recommendations_request(r, deployment)
    if r.finds_package:  # the package the environment serves, and so the name, found at run time
        asl.dynamic(request, ("InputConfig", "ModelPackageVersionArn"), f"{PACKAGE}.Arn")
        asl.dynamic(request, ("JobName",), JOB_NAME)
    return request


def _named(key: str, r: ResolvedRecommendation) -> dict[str, str]:
    """{key: the job's name}: the spec's, or the one the run rendered (key.$)."""
    return {f"{key}.$": JOB_NAME} if r.finds_package else {key: r.job_name()}


def _label(r: ResolvedRecommendation) -> str:
    """The endpoint in a message: quoted in a fixed text; in one the run renders, named without the
    quote an intrinsic function must escape (moto's interpreter, which runs the tests, reads the
    escape differently from Step Functions)."""
    return f"endpoint {r.endpoint}" if r.finds_package else f"'{r.endpoint}'"


def _message(key: str, r: ResolvedRecommendation, text: str) -> dict[str, str]:
    """{key: text}, the job's name where `text` says '{}' (rendered by the run when it found the
    package)."""
    if r.finds_package:
        return {f"{key}.$": asl.formatted(text, JOB_NAME)}
    return {key: text.replace("{}", r.job_name())}


def recommendation_definition(
    r: ResolvedRecommendation,
    deployment: Deployment,
    settings: PipelineSettings,
    *,
    group: str,
    workload_arn: str,
    mlflow_arn: str | None = None,
) -> dict[str, Any]:
    """The pipeline's state machine. The spec decides the job; its input is ignored, except that an
    endpoint measured on registration takes the package an approval event names (the event
    EventBridge delivers as the input: see _package_states)."""
    names = RecommendStates(r.endpoint)
    types = measured(r)
    first_after_quota = names.create
    if r.finds_package:
        first_after_quota = names.from_event if r.on_registration else names.find_package
    states: dict[str, asl.State] = {}
    for i, t in enumerate(types):
        qn = quota_name(t, "endpoint")
        nxt = names.quota(i + 1) if i + 1 < len(types) else first_after_quota
        states.update(
            asl.quota_check(
                names.quota(i),
                qn,
                (settings.quota_codes or {}).get(qn),
                needed=1,
                result_path=f"$.quota{i + 1}",
                next_checked=names.enough(i),
                next_unchecked=nxt,
            )
        )
        states[names.enough(i)] = asl.quota_enough(f"$.quota{i + 1}", 1, short=names.short(i), enough=nxt)
        states[names.short(i)] = asl.fail(
            "RecommendationCapacity",
            cause=f"The account's '{qn}' quota is below 1 instance; the recommendation job of "
            f"'{r.endpoint}' deploys each candidate on one. Request an increase or drop {t} from "
            "slo.candidates.",
        )
    if r.finds_package:
        states.update(_package_states(r, names, group))
    states.update(_create_states(r, deployment, settings, names, workload_arn, mlflow_arn, types))
    states.update(_follow_states(r, settings, names))
    return {
        "Comment": f"sagestack: measure '{r.endpoint}''s candidates against its slo ({r.job_label})",
        "StartAt": names.quota(0),
        "States": states,
    }


def _keep(r: ResolvedRecommendation, input_path: str, nxt: str) -> asl.State:
    """{Arn, Version, JobName} of the package at `input_path` (a ModelPackageSummary, or an approval
    event's detail: both name it ModelPackageArn) into $.package."""
    # The version is the ARN's last part ('…:model-package/<group>/<version>'; a group's name has no
    # '/'): a string, which States.Format takes everywhere (ModelPackageVersion is a number).
    version = "States.ArrayGetItem(States.StringSplit($.ModelPackageArn, '/'), 2)"
    return {
        "Type": "Pass",
        "InputPath": input_path,
        "Parameters": {
            "Arn.$": "$.ModelPackageArn",
            "Version.$": version,
            # The job that measures this version: a new approval, a new job; the same, followed.
            "JobName.$": asl.formatted(r.job_name("{}"), version),
        },
        "ResultPath": PACKAGE,
        "Next": nxt,
    }


def _event_states(names: RecommendStates, group: str) -> dict[str, asl.State]:
    """Started by the group's approval event (EventBridge hands the whole event over as the input):
    measure the version it approved, not whatever is newest when the execution gets here (a later
    approval starts its own execution). Any other input finds the newest approved version."""
    detail = "$.detail"
    return {
        names.from_event: asl.choice(
            asl.when(
                asl.all_of(
                    # present first: a comparison of a missing path fails the execution
                    *(asl.is_present(f"{detail}.{k}") for k in _EVENT_KEYS),
                    asl.string_equals(f"{detail}.ModelPackageGroupName", group),
                    asl.string_equals(f"{detail}.ModelApprovalStatus", "Approved"),
                ),
                names.event_package,
            ),
            default=names.find_package,
        ),
    }


def _package_states(r: ResolvedRecommendation, names: RecommendStates, group: str) -> dict[str, asl.State]:
    return {
        **(_event_states(names, group) if r.on_registration else {}),
        **({names.event_package: _keep(r, "$.detail", names.create)} if r.on_registration else {}),
        names.find_package: asl.task(
            "sagemaker:listModelPackages",
            {
                "ModelPackageGroupName": group,
                "ModelApprovalStatus": "Approved",
                "SortBy": "CreationTime",
                "SortOrder": "Descending",
                "MaxResults": 1,
            },
            comment="The newest approved package of the group: what this environment serves unpinned",
            result_selector={"Found.$": "$.ModelPackageSummaryList"},
            result_path=PACKAGE,
            retry_=asl.retry(),
            nxt=names.found_package,
        ),
        names.found_package: asl.choice(
            {
                "Variable": f"{PACKAGE}.Found[0].ModelPackageArn",
                "IsPresent": True,
                "Next": f"{names.found_package} keep",
            },
            default=names.no_package,
        ),
        f"{names.found_package} keep": _keep(r, f"{PACKAGE}.Found[0]", names.create),
        names.no_package: asl.fail(
            "NoModelPackage",
            cause=f"Model package group '{group}' holds no approved package: run the training pipeline "
            "and approve its package, or pin model_package in the environment's overlay",
        ),
    }


def _create_states(
    r: ResolvedRecommendation,
    deployment: Deployment,
    settings: PipelineSettings,
    names: RecommendStates,
    workload_arn: str,
    mlflow_arn: str | None,
    types: list[str],
) -> dict[str, asl.State]:
    api = api_of(r)
    return {
        names.create: asl.task(
            api.create,
            recommendation_request(r, deployment, workload_arn=workload_arn, mlflow_arn=mlflow_arn),
            comment=f"{api.operation} for {', '.join(types)} (named by the target's content hash"
            + (" and the package's version)" if r.finds_package else ")"),
            result_path="$.created",
            nxt=names.wait,
            catch_=asl.catch(names.refused),
        ),
        names.refused: asl.choice(
            asl.when(asl.error_matches(CAPACITY_PATTERNS), names.backoff),
            # Same target and model, same name: the job exists already (running or done); follow it.
            asl.when(asl.error_matches((*IN_USE_PATTERNS, "*already exist*")), names.describe),
            default=names.notify_failed,
        ),
        names.backoff: asl.wait(settings.backoff_seconds, names.quota(0)),
    }


def _output(r: ResolvedRecommendation, api: Api, results: str | None) -> asl.State:
    """The execution's output: the job, the candidates, and what the answer measured."""
    params: dict[str, Any] = {
        **_named("JobName", r),
        "Endpoint": r.endpoint,
        "Kind": r.kind,
        "Candidates": measured(r),
    }
    if r.finds_package:  # what was measured, so a reader can tell whether it is still served
        params.update({"ModelPackage.$": f"{PACKAGE}.Arn", "ModelPackageVersion.$": f"{PACKAGE}.Version"})
    elif r.model_package is not None:
        params["ModelPackage"] = r.model_package
    if results is None:
        params[api.results] = []
    else:
        params[f"{api.results}.$"] = results
    return {"Type": "Pass", "Parameters": params, "End": True}


def _follow_states(
    r: ResolvedRecommendation, settings: PipelineSettings, names: RecommendStates
) -> dict[str, asl.State]:
    api = api_of(r)
    reason = f"{JOB}.FailureReason"
    return {
        **asl.poll(
            names,
            asl.Describe(api.describe, _named(api.name_key, r), JOB),
            status_path=f"{JOB}.{api.status_key}",
            seconds=settings.poll_seconds,
            endings=("COMPLETED", "FAILED", "STOPPED") if api is IR else asl.ENDINGS,
            done=names.notify_done,
            failed=names.notify_failed,
        ),
        names.notify_done: asl.notify(
            settings,
            f"sagestack: recommended {r.endpoint}"[:100],
            _message(
                "Message",
                r,
                f"Recommendation job {{}} of {_label(r)} completed: `sagestack recommend "
                f"{r.endpoint} --env {r.names.env}` shows the verdict.",
            ),
            names.results,
        ),
        # The verdict's inputs only (the answer's timestamps are not JSON); a job that completed
        # without a recommendation (no candidate met the threshold) is a verdict too, not an error.
        names.results: asl.choice(
            asl.when(asl.is_present(f"{JOB}.{api.results}"), names.done), default=names.none
        ),
        names.done: _output(r, api, f"{JOB}.{api.results}"),
        names.none: _output(r, api, None),
        names.notify_failed: asl.notify(
            settings,
            f"sagestack: recommendation {r.endpoint} failed"[:100],
            _message("Message", r, f"Recommendation job {{}} of {_label(r)} failed; see the execution."),
            names.failed_reason,
        ),
        names.failed_reason: asl.choice(
            asl.when(asl.all_of(asl.is_present(reason), asl.is_string(reason)), names.failed),
            asl.when(asl.is_present(f"{asl.CAUGHT}.Cause"), names.refused_fail),
            default=names.failed_no_reason,
        ),
        names.failed: asl.fail("RecommendationJobFailed", cause_path=reason),
        names.refused_fail: asl.fail_with_caught_error(),
        names.failed_no_reason: _failed_no_reason(r),
    }


def _failed_no_reason(r: ResolvedRecommendation) -> asl.State:
    text = (
        "Recommendation job {} ended without completing (stopped, or failed with no reason given); see "
        "its Describe call"
    )
    if r.finds_package:  # a Fail takes a rendered cause as CausePath
        return asl.fail("RecommendationJobFailed", cause_path=asl.formatted(text, JOB_NAME))
    return asl.fail("RecommendationJobFailed", cause=text.replace("{}", r.job_name()))
