"""Batch transforms resolved for one environment: the CreateModel and CreateTransformJob requests,
and the states that run one — make a model of the package (once per package), check the
"<type> for transform job usage" quota of each candidate instance type in turn, start the job on
the first with room (the next on a capacity error), follow it to its end.

The same states run in two places: inline after a pipeline registers the model (`model: {from:
job}`), and in a transform's own state machine for a pinned package (`sagestack run TRANSFORM`),
where the execution input may name another package or input prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.catalog.quotas import quota_name
from sagestack.core.layout import S3Layout
from sagestack.core.names import Names
from sagestack.core.states import CAPACITY_PATTERNS, IN_USE_PATTERNS, PipelineSettings
from sagestack.transforms.models import TransformSpec


@dataclass(frozen=True)
class TransformContext:
    """Deploy-time values (tokens in the template, stand-ins when validating)."""

    role_arn: str
    bucket: str
    kms_key_id: str
    tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TransformPlan:
    key: str
    spec: TransformSpec
    prefix: str  # Names.transform_prefix: models and jobs are '<prefix>-<md5>'

    @staticmethod
    def of(names: Names, key: str, spec: TransformSpec) -> TransformPlan:
        return TransformPlan(key=key, spec=spec, prefix=names.transform_prefix(key))

    def input_uri(self, bucket: str) -> str:
        return self.spec.input or S3Layout(bucket).transform_input(self.key)

    def output_uri(self, bucket: str, job_name: str) -> str:
        return S3Layout(bucket).transform_output(self.key, job_name)


def model_request(t: TransformPlan, ctx: TransformContext, *, name: str, package: str) -> dict[str, Any]:
    request: dict[str, Any] = {
        "ModelName": name,
        "ExecutionRoleArn": ctx.role_arn,
        "PrimaryContainer": {"ModelPackageName": package},
        "EnableNetworkIsolation": True,
    }
    if ctx.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in ctx.tags]
    return request


def transform_request(
    t: TransformPlan, ctx: TransformContext, *, name: str, model: str, instance_type: str, input_uri: str
) -> dict[str, Any]:
    s = t.spec
    data_processing: dict[str, Any] = {"JoinSource": s.join_source}
    if s.input_filter:
        data_processing["InputFilter"] = s.input_filter
    if s.output_filter:
        data_processing["OutputFilter"] = s.output_filter
    output: dict[str, Any] = {
        "S3OutputPath": t.output_uri(ctx.bucket, name),
        "AssembleWith": s.assemble_with,
        "KmsKeyId": ctx.kms_key_id,
    }
    if s.accept:
        output["Accept"] = s.accept
    request: dict[str, Any] = {
        "TransformJobName": name,
        "ModelName": model,
        "BatchStrategy": s.batch_strategy,
        "MaxPayloadInMB": s.max_payload_mb,
        "ModelClientConfig": {
            "InvocationsTimeoutInSeconds": s.invocation_timeout,
            "InvocationsMaxRetries": s.invocation_retries,
        },
        "TransformInput": {
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": input_uri}},
            "ContentType": s.content_type,
            "SplitType": s.split_type,
        },
        "TransformOutput": output,
        "TransformResources": {
            "InstanceType": instance_type,
            "InstanceCount": s.instance_count,
            "VolumeKmsKeyId": ctx.kms_key_id,
        },
        "DataProcessing": data_processing,
    }
    if s.max_concurrent_transforms:
        request["MaxConcurrentTransforms"] = s.max_concurrent_transforms
    if s.environment:
        request["Environment"] = dict(s.environment)
    if ctx.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in ctx.tags]
    return request


STAND_IN_PACKAGE = "arn:aws:sagemaker:us-east-1:123456789012:model-package/sagestack-validation/1"


def stand_in_requests(t: TransformPlan, ctx: TransformContext) -> dict[str, dict[str, Any]]:
    """CreateModel and one CreateTransformJob per candidate, with concrete stand-ins."""
    name = f"{t.prefix}-{'0' * 32}"
    out = {"CreateModel": model_request(t, ctx, name=name, package=t.spec.model_package or STAND_IN_PACKAGE)}
    for itype in t.spec.instance_type:
        out[f"CreateTransformJob {itype}"] = transform_request(
            t, ctx, name=name, model=name, instance_type=itype, input_uri=t.input_uri(ctx.bucket)
        )
    return out


def validate_transform(t: TransformPlan, ctx: TransformContext) -> None:
    from sagestack.core.catalog.service_model import validate_request

    for operation, request in stand_in_requests(t, ctx).items():
        validate_request(operation.split(" ")[0], request)


# ---------------------------------------------------------------- states


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
    t: TransformPlan,
    ctx: TransformContext,
    settings: PipelineSettings,
    *,
    package_path: str,
    input_path: str | None,
    nxt: str | None,
    n: int = 1,
) -> dict[str, asl.State]:
    """The states of one transform, entered at TransformStates(key).name; `nxt` follows success
    (None: succeed). package_path / input_path: where the package ARN and the input prefix are."""
    names = TransformStates(t.key)
    s: dict[str, asl.State] = {}
    state = f"$.transform_{n}"
    candidates = list(t.spec.instance_type)
    needed = t.spec.instance_count
    codes = settings.quota_codes or {}
    s[names.name] = {
        "Type": "Pass",
        "Comment": "One model per package (content-addressed); one job per execution",
        "Parameters": {
            "model.$": f"States.Format('{t.prefix}-{{}}', States.Hash({package_path}, 'MD5'))",
            "job.$": f"States.Format('{t.prefix}-{{}}', States.Hash($$.Execution.Id, 'MD5'))",
        },
        "ResultPath": state,
        "Next": names.model,
    }
    request = model_request(t, ctx, name="stand-in", package="stand-in")
    asl.dynamic(request, ("ModelName",), f"{state}.model")
    asl.dynamic(request, ("PrimaryContainer", "ModelPackageName"), package_path)
    s[names.model] = asl.task(
        "sagemaker:createModel",
        request,
        comment="CreateModel from the model package (an existing model of the same package is reused)",
        result_path=f"{state}_model",
        nxt=names.quota(candidates[0]),
        catch_=asl.catch(names.model_refused),
    )
    # SageMaker refuses a second model of the same name: "Cannot create already existing model".
    s[names.model_refused] = asl.choice(
        asl.when(asl.error_matches((*IN_USE_PATTERNS, "*already exist*")), names.quota(candidates[0])),
        default=names.notify_failed,
    )
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
            t, ctx, name="stand-in", model="stand-in", instance_type=itype, input_uri="s3://stand-in/"
        )
        asl.dynamic(request, ("TransformJobName",), f"{state}.job")
        asl.dynamic(request, ("ModelName",), f"{state}.model")
        output = S3Layout(ctx.bucket).transform_output(t.key, "{}")
        asl.dynamic(request, ("TransformOutput", "S3OutputPath"), f"States.Format('{output}', {state}.job)")
        if input_path is not None:
            asl.dynamic(request, ("TransformInput", "DataSource", "S3DataSource", "S3Uri"), input_path)
        else:
            request["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"] = t.input_uri(ctx.bucket)
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
    s[names.wait] = asl.wait(settings.poll_seconds, names.describe)
    s[names.describe] = asl.task(
        "sagemaker:describeTransformJob",
        {"TransformJobName.$": f"{state}.job"},
        result_selector={
            "Status.$": "$.TransformJobStatus",
            "Output.$": "$.TransformOutput.S3OutputPath",
            "InstanceType.$": "$.TransformResources.InstanceType",
        },
        result_path=f"{state}_job",
        retry_=asl.retry(),
        nxt=names.status,
    )
    status = f"{state}_job.Status"
    s[names.status] = asl.choice(
        asl.when(asl.string_equals(status, "Completed"), names.notify_done),
        asl.when(asl.string_equals(status, "Failed"), names.notify_failed),
        asl.when(asl.string_equals(status, "Stopped"), names.notify_failed),
        default=names.wait,
    )
    done = nxt or f"Transformed {t.key}"
    s[names.notify_done] = asl.notify(
        settings,
        f"sagestack: transform {t.key} completed"[:100],
        {"Message.$": f"States.Format('Transform {t.key} wrote {{}}', {state}_job.Output)"},
        done,
    )
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
    t: TransformPlan, ctx: TransformContext, settings: PipelineSettings
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
            "Result": t.input_uri(ctx.bucket),
            "ResultPath": "$.Input",
            "Next": names.name,
        },
    }
    states.update(
        transform_states(t, ctx, settings, package_path="$.ModelPackageArn", input_path="$.Input", nxt=None)
    )
    return {
        "Comment": f"sagestack: batch transform '{t.key}' with a model package (default: the pinned one)",
        "StartAt": "Package given?",
        "States": states,
    }
