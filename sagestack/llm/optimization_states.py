"""The states of an LLM's optimization pipeline (`sagestack run <endpoint>`): check the quota of the
instance type the model is optimized for, run CreateOptimizationJob (backing off when SageMaker has
no room, following a job of the same name that exists: the name is the spec's content hash), follow
it to its end, register what it wrote as a model package for review, and say so.

Optimization jobs have no Service Quota of their own in the catalog's snapshot data or in
core/catalog/quotas.py's names (SageMaker lists training, endpoint, transform, processing, cluster
and warm pool usage only), and the job runs the serving container on the instance type it optimizes for: the
check reads '<type> for endpoint usage', the quota that instance type is served under afterwards.
It is a guide, not the judge: the create call's ResourceLimitExceeded is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.catalog.quotas import OPTIMIZATION_USAGE, quota_name
from sagestack.core.deployment import Deployment
from sagestack.core.states import CAPACITY_PATTERNS, IN_USE_PATTERNS, PipelineSettings
from sagestack.llm.optimization_job import ResolvedOptimization, optimization_request, package_request

JOB = "$.job"  # DescribeOptimizationJob's answer


@dataclass(frozen=True)
class OptimizationStates:
    key: str

    @property
    def quota(self) -> str:
        return f"Quota optimize {self.key}"

    @property
    def enough(self) -> str:
        return f"Enough to optimize {self.key}?"

    @property
    def create(self) -> str:
        return f"Optimize {self.key}"

    @property
    def refused(self) -> str:
        return f"Optimize refused {self.key}?"

    @property
    def backoff(self) -> str:
        return f"Back off optimize {self.key}"

    @property
    def wait(self) -> str:
        return f"Wait optimize {self.key}"

    @property
    def describe(self) -> str:
        return f"Describe optimize {self.key}"

    @property
    def status(self) -> str:
        return f"Optimize status {self.key}?"

    @property
    def register(self) -> str:
        return f"Register optimized {self.key}"

    @property
    def notify_done(self) -> str:
        return f"Notify optimized {self.key}"

    @property
    def done(self) -> str:
        return f"Optimized {self.key}"

    @property
    def notify_failed(self) -> str:
        return f"Notify optimize failed {self.key}"

    @property
    def failed_reason(self) -> str:
        return f"Optimize failed with reason {self.key}?"

    @property
    def failed(self) -> str:
        return f"Optimization failed {self.key}"

    @property
    def failed_no_reason(self) -> str:
        return f"Optimization ended {self.key}"

    @property
    def refused_fail(self) -> str:
        return f"Optimization refused {self.key}"

    @property
    def short(self) -> str:
        return f"No quota to optimize {self.key}"


def optimization_definition(
    o: ResolvedOptimization, deployment: Deployment, settings: PipelineSettings, *, env: str, group: str
) -> dict[str, Any]:
    """The pipeline's state machine (its input is ignored: the spec decides the job)."""
    names = OptimizationStates(o.key)
    states = {
        **_create_states(o, deployment, settings, names),
        **_follow_states(o, settings, names),
        **_register_states(o, deployment, settings, names, env=env, group=group),
    }
    return {
        "Comment": f"sagestack: optimize the LLM of '{o.label}' ({o.job_name}) and register it for review",
        "StartAt": names.quota,
        "States": states,
    }


def _create_states(
    o: ResolvedOptimization, deployment: Deployment, settings: PipelineSettings, names: OptimizationStates
) -> dict[str, asl.State]:
    qn = quota_name(o.instance_type, OPTIMIZATION_USAGE)
    s: dict[str, asl.State] = dict(
        asl.quota_check(
            names.quota,
            qn,
            (settings.quota_codes or {}).get(qn),
            needed=1,
            result_path="$.quota",
            next_checked=names.enough,
            next_unchecked=names.create,
        )
    )
    s[names.enough] = asl.quota_enough("$.quota", 1, short=names.short, enough=names.create)
    s[names.create] = asl.task(
        "sagemaker:createOptimizationJob",
        optimization_request(o, deployment),
        comment=f"CreateOptimizationJob for {o.instance_type} (named by the spec's content hash)",
        result_path="$.created",
        nxt=names.wait,
        catch_=asl.catch(names.refused),
    )
    s[names.refused] = asl.choice(
        asl.when(asl.error_matches(CAPACITY_PATTERNS), names.backoff),
        # Same spec, same name: the job exists already (running or done); follow it.
        asl.when(asl.error_matches((*IN_USE_PATTERNS, "*already exist*")), names.describe),
        default=names.notify_failed,
    )
    s[names.backoff] = asl.wait(settings.backoff_seconds, names.quota)
    s[names.short] = asl.fail(
        "OptimizationCapacity",
        cause=f"The account's '{qn}' quota is below 1 instance, which the optimization job of "
        f"'{o.label}' runs on; request an increase or set optimize.instance_type.",
    )
    return s


def _follow_states(
    o: ResolvedOptimization, settings: PipelineSettings, names: OptimizationStates
) -> dict[str, asl.State]:
    reason = f"{JOB}.FailureReason"
    return {
        **asl.poll(
            names,
            asl.Describe("sagemaker:describeOptimizationJob", {"OptimizationJobName": o.job_name}, JOB),
            status_path=f"{JOB}.OptimizationJobStatus",
            seconds=settings.poll_seconds,
            endings=asl.ENDINGS_UPPER,
            done=names.register,
            failed=names.notify_failed,
        ),
        names.notify_failed: asl.notify(
            settings,
            f"sagestack: optimization {o.label} failed"[:100],
            {"Message": f"Optimization job {o.job_name} of '{o.label}' failed; see the execution."},
            names.failed_reason,
        ),
        names.failed_reason: asl.choice(
            asl.when(asl.all_of(asl.is_present(reason), asl.is_string(reason)), names.failed),
            asl.when(asl.is_present(f"{asl.CAUGHT}.Cause"), names.refused_fail),
            default=names.failed_no_reason,
        ),
        names.failed: asl.fail("OptimizationJobFailed", cause_path=reason),
        names.refused_fail: asl.fail_with_caught_error(),
        names.failed_no_reason: asl.fail(
            "OptimizationJobFailed",
            cause=f"Optimization job {o.job_name} ended without completing (stopped, or failed with no "
            "reason given); see DescribeOptimizationJob",
        ),
    }


def _register_states(
    o: ResolvedOptimization,
    deployment: Deployment,
    settings: PipelineSettings,
    names: OptimizationStates,
    *,
    env: str,
    group: str,
) -> dict[str, asl.State]:
    return {
        names.register: asl.task(
            "sagemaker:createModelPackage",
            package_request(o, deployment, env=env, group=group),
            comment=f"CreateModelPackage of the optimized '{o.label}' (PendingManualApproval)",
            result_selector={"ModelPackageArn.$": "$.ModelPackageArn"},
            result_path="$.package",
            retry_=asl.retry(attempts=2),
            nxt=names.notify_done,
        ),
        names.notify_done: asl.notify(
            settings,
            f"sagestack: optimized {o.label}"[:100],
            {
                "Message.$": f"States.Format('Optimized {o.label} registered as {{}} (pending approval)', "
                "$.package.ModelPackageArn)"
            },
            names.done,
        ),
        names.done: {
            "Type": "Pass",
            "Parameters": {
                "OptimizationJobName": o.job_name,
                "ModelPackageArn.$": "$.package.ModelPackageArn",
                "Output": o.output_uri(deployment.bucket),
            },
            "End": True,
        },
    }
