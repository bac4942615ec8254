"""The states that run a batch transform — make a model of the package (once per package), check
the "<type> for transform job usage" quota of each candidate instance type in turn, start the job
on the first with room (the next on a capacity error), follow it to its end.

The same states run in two places: inline after a pipeline registers the model (`model: {from:
job}`), and in a transform's own state machine for a pinned package (`sagestack run TRANSFORM`),
where the execution input may name another package or input prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.catalog.quotas import quota_name
from sagestack.core.deployment import Deployment
from sagestack.core.layout import S3Layout
from sagestack.core.states import CAPACITY_PATTERNS, IN_USE_PATTERNS, PipelineSettings
from sagestack.transforms.request import ResolvedTransform, model_request, transform_request


@dataclass(frozen=True)
class TransformStates:
    key: str

    @property
    def name(self) -> str:
        return f"Name transform {self.key}"

    @property
    def model(self) -> str:
        return f"Model for transform {self.key}"

    @property
    def model_refused(self) -> str:
        return f"Model refused {self.key}?"

    @property
    def notify_failed(self) -> str:
        return f"Notify transform failed {self.key}"

    @property
    def failed(self) -> str:
        return f"Transform failed {self.key}"

    @property
    def short(self) -> str:
        return f"No transform capacity {self.key}"

    def quota(self, itype: str) -> str:
        return f"Quota transform {self.key} {itype}"

    def enough(self, itype: str) -> str:
        return f"Enough for transform {self.key} {itype}?"

    def create(self, itype: str) -> str:
        return f"Transform {self.key} on {itype}"

    def refused(self, itype: str) -> str:
        return f"Transform refused {self.key} {itype}?"

    @property
    def wait(self) -> str:
        return f"Wait transform {self.key}"

    @property
    def describe(self) -> str:
        return f"Describe transform {self.key}"

    @property
    def status(self) -> str:
        return f"Transform status {self.key}?"

    @property
    def notify_done(self) -> str:
        return f"Notify transformed {self.key}"


def transform_states(
    t: ResolvedTransform,
    deployment: Deployment,
    settings: PipelineSettings,
    *,
    package_path: str,
    input_path: str | None,
    nxt: str | None,
    n: int = 1,
) -> dict[str, asl.State]:
    """The states of one transform, entered at TransformStates(key).name; `nxt` follows success
    (None: succeed). package_path / input_path: where the package ARN and the input prefix are."""
    state = f"$.transform_{n}"  # where the execution keeps this transform's names and results
    return {
        **_model_states(t, deployment, state, package_path),
        **_candidate_states(t, deployment, settings, state, input_path),
        **_follow_states(t, settings, state, nxt),
    }


def _model_states(
    t: ResolvedTransform, deployment: Deployment, state: str, package_path: str
) -> dict[str, asl.State]:
    """Name the model (by package) and the job (by execution); make the model, or reuse it."""
    names = TransformStates(t.key)
    first = names.quota(t.spec.instance_type[0])
    request = model_request(t, deployment, name="stand-in", package="stand-in")
    asl.dynamic(request, ("ModelName",), f"{state}.model")
    asl.dynamic(request, ("PrimaryContainer", "ModelPackageName"), package_path)
    return {
        names.name: {
            "Type": "Pass",
            "Comment": "One model per package (content-addressed); one job per execution",
            "Parameters": {
                "model.$": f"States.Format('{t.prefix}-{{}}', States.Hash({package_path}, 'MD5'))",
                "job.$": f"States.Format('{t.prefix}-{{}}', States.Hash($$.Execution.Id, 'MD5'))",
            },
            "ResultPath": state,
            "Next": names.model,
        },
        names.model: asl.task(
            "sagemaker:createModel",
            request,
            comment="CreateModel from the model package (an existing model of the same package is reused)",
            result_path=f"{state}_model",
            nxt=first,
            catch_=asl.catch(names.model_refused),
        ),
        # SageMaker refuses a second model of the same name: "Cannot create already existing model".
        names.model_refused: asl.choice(
            asl.when(asl.error_matches((*IN_USE_PATTERNS, "*already exist*")), first),
            default=names.notify_failed,
        ),
    }


def _candidate_states(
    t: ResolvedTransform,
    deployment: Deployment,
    settings: PipelineSettings,
    state: str,
    input_path: str | None,
) -> dict[str, asl.State]:
    """For each candidate instance type in turn: its quota, then the job on it; a short quota or a
    capacity error moves to the next candidate, and past the last to "No transform capacity"."""
    names = TransformStates(t.key)
    s: dict[str, asl.State] = {}
    candidates = list(t.spec.instance_type)
    needed = t.spec.instance_count
    codes = settings.quota_codes or {}
    output = S3Layout(deployment.bucket).transform_output(t.key, "{}")
    for i, itype in enumerate(candidates):
        later = names.quota(candidates[i + 1]) if i + 1 < len(candidates) else names.short
        qn = quota_name(itype, "transform")
        s.update(
            asl.quota_check(
                names.quota(itype),
                qn,
                codes.get(qn),
                needed=needed,
                result_path=f"{state}_quota",
                next_checked=names.enough(itype),
                next_unchecked=names.create(itype),
            )
        )
        s[names.enough(itype)] = asl.quota_enough(
            f"{state}_quota", needed, short=later, enough=names.create(itype)
        )
        request = transform_request(
            t, deployment, name="stand-in", model="stand-in", instance_type=itype, input_uri="s3://stand-in/"
        )
        asl.dynamic(request, ("TransformJobName",), f"{state}.job")
        asl.dynamic(request, ("ModelName",), f"{state}.model")
        asl.dynamic(request, ("TransformOutput", "S3OutputPath"), f"States.Format('{output}', {state}.job)")
        if input_path is not None:
            asl.dynamic(request, ("TransformInput", "DataSource", "S3DataSource", "S3Uri"), input_path)
        else:
            request["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"] = t.input_uri(deployment.bucket)
        s[names.create(itype)] = asl.task(
            "sagemaker:createTransformJob",
            request,
            comment=f"CreateTransformJob on {t.spec.instance_count} x {itype}",
            result_path=f"{state}_created",
            nxt=names.wait,
            catch_=asl.catch(names.refused(itype)),
        )
        s[names.refused(itype)] = asl.choice(
            asl.when(asl.error_matches(CAPACITY_PATTERNS), later), default=names.notify_failed
        )
    s[names.short] = asl.fail(
        "TransformCapacity",
        cause=f"No candidate of transform '{t.key}' ({', '.join(candidates)}) had quota or capacity for "
        f"{needed} instance(s); request a quota increase or add a candidate.",
    )
    return s


def _follow_states(
    t: ResolvedTransform, settings: PipelineSettings, state: str, nxt: str | None
) -> dict[str, asl.State]:
    """Follow the job to its end; say how it ended; then `nxt`, or succeed with what it did."""
    names = TransformStates(t.key)
    done = nxt or f"Transformed {t.key}"
    s: dict[str, asl.State] = {
        **asl.poll(
            names,
            asl.Describe(
                "sagemaker:describeTransformJob",
                {"TransformJobName.$": f"{state}.job"},
                result_path=f"{state}_job",
                result_selector={
                    "Status.$": "$.TransformJobStatus",
                    "Output.$": "$.TransformOutput.S3OutputPath",
                    "InstanceType.$": "$.TransformResources.InstanceType",
                },
            ),
            status_path=f"{state}_job.Status",
            seconds=settings.poll_seconds,
            done=names.notify_done,
            failed=names.notify_failed,
        ),
        names.notify_done: asl.notify(
            settings,
            f"sagestack: transform {t.key} completed"[:100],
            {"Message.$": f"States.Format('Transform {t.key} wrote {{}}', {state}_job.Output)"},
            done,
        ),
    }
    if nxt is None:
        s[done] = {
            "Type": "Pass",
            "Parameters": {
                "TransformJobName.$": f"{state}.job",
                "ModelName.$": f"{state}.model",
                "Output.$": f"{state}_job.Output",
                "InstanceType.$": f"{state}_job.InstanceType",
            },
            "End": True,
        }
    s[names.notify_failed] = asl.notify(
        settings,
        f"sagestack: transform {t.key} failed"[:100],
        {"Message": f"Transform {t.key} failed."},
        names.failed,
    )
    s[names.failed] = {
        "Type": "Fail",
        "Error": "TransformFailed",
        "Cause": f"Transform {t.key} failed: see the execution's Describe transform / Model steps for the reason",
    }
    return s


def standalone_definition(
    t: ResolvedTransform, deployment: Deployment, settings: PipelineSettings
) -> dict[str, Any]:
    """A pinned transform's own state machine. Input (optional): {"ModelPackageArn": …, "Input": s3 prefix}."""
    assert t.spec.model_package is not None
    names = TransformStates(t.key)
    states: dict[str, Any] = {
        "Package given?": asl.choice(
            asl.when(asl.is_present("$.ModelPackageArn"), "Input given?"), default="Pinned package"
        ),
        "Pinned package": {
            "Type": "Pass",
            "Result": t.spec.model_package,
            "ResultPath": "$.ModelPackageArn",
            "Next": "Input given?",
        },
        "Input given?": asl.choice(asl.when(asl.is_present("$.Input"), names.name), default="Default input"),
        "Default input": {
            "Type": "Pass",
            "Result": t.input_uri(deployment.bucket),
            "ResultPath": "$.Input",
            "Next": names.name,
        },
    }
    states.update(
        transform_states(
            t, deployment, settings, package_path="$.ModelPackageArn", input_path="$.Input", nxt=None
        )
    )
    return {
        "Comment": f"sagestack: batch transform '{t.key}' with a model package (default: the pinned one)",
        "StartAt": "Package given?",
        "States": states,
    }
