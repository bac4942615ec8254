"""Rules about batch transforms: what a transform scores with, and batches its container and
SageMaker accept, found before a transform job is paid for."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.core.types import arn_region
from sagestack.foundation.inference_images import InferenceImageError, inference_image_uri

MAX_TOTAL_PAYLOAD_MB = 100  # MaxConcurrentTransforms x MaxPayloadInMB
JOINABLE = ("application/json", "application/jsonlines", "text/csv")  # DataProcessing.JoinSource


@rule(
    "transform-model-source",
    "error",
    "a transform scores with a registered and/or a pinned model package",
    why=(
        "A batch transform runs a SageMaker model: the one a pipeline trains and registers (model.from), or "
        "a registered package pinned for the environment (model_package), or both (dev trains, prod pins). "
        "Its inference image comes from the job's Deep Learning Container for each candidate instance type."
    ),
    fix=(
        "Give model: {from: <job>} (registered and run by the job's pipeline) "
        "and/or model_package: <ARN> in the project's region (the environment's "
        "pin, run by `sagestack run`; `sagestack promote` writes it)."
    ),
)
def transform_model_source(ctx: RuleContext) -> Iterator[Finding]:
    known = [*ctx.spec.jobs, *ctx.spec.tuning]
    for name, t in ctx.spec.transforms.items():
        path = ("transforms", name)
        if t.model is None and t.model_package is None:
            yield Finding(
                path,
                "nothing to score with: give model: {from: <job or tuning entry>} (its pipeline registers the "
                "model and runs the transform) and/or model_package: <ARN> (the pin; `sagestack run`)",
            )
            continue
        if t.model is not None and t.model.from_ not in known:
            yield Finding(
                (*path, "model", "from"),
                f"'{t.model.from_}' is neither a job nor a tuning entry{did_you_mean(t.model.from_, known)}",
            )
        if t.model_package is not None and arn_region(t.model_package) != ctx.spec.region:
            yield Finding(
                (*path, "model_package"),
                f"the package is in {t.model_package.split(':')[3]}; transforms run in {ctx.spec.region}",
            )
        if t.model is not None and t.model.from_ in known:
            job_key = ctx.spec.job_of(t.model.from_)
            job = ctx.spec.jobs.get(job_key)
            image = ctx.spec.images.get(job.image) if job else None
            if image is None:
                continue
            for itype in t.instance_type:
                try:
                    inference_image_uri(image, region=ctx.spec.region, instance_type=itype)
                except InferenceImageError as e:
                    if e.dlc is None:
                        yield Finding(
                            (*path, "model"),
                            f"job '{job_key}' trains in a non-DLC image, so sagestack cannot name an inference "
                            "image; register the model yourself and pin model_package",
                        )
                        break
                    yield Finding((*path, "instance_type"), f"no inference container for {itype}: {e}")


@rule(
    "transform-payload",
    "error",
    "a transform's batches are what its container and SageMaker accept",
    why=(
        "SageMaker limits a transform instance to 100 MB in flight "
        "(MaxPayloadInMB x MaxConcurrentTransforms) and joins input to "
        "output (JoinSource) only for JSON, JSON Lines and CSV records."
    ),
    fix="Lower max_payload_mb or max_concurrent_transforms; join only JSON, JSON Lines or CSV records.",
)
def transform_payload(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.transforms.items():
        path = ("transforms", name)
        if (
            t.max_concurrent_transforms
            and t.max_payload_mb * t.max_concurrent_transforms > MAX_TOTAL_PAYLOAD_MB
        ):
            yield Finding(
                (*path, "max_payload_mb"),
                f"max_payload_mb {t.max_payload_mb} x max_concurrent_transforms {t.max_concurrent_transforms} "
                f"exceeds SageMaker's {MAX_TOTAL_PAYLOAD_MB} MB per instance",
            )
        if t.join_source == "Input" and t.content_type not in JOINABLE:
            yield Finding(
                (*path, "join_source"),
                f"SageMaker joins input and output for JSON, JSON Lines and CSV records, not {t.content_type}",
            )
        if t.join_source == "Input" and t.accept not in JOINABLE:
            yield Finding(
                (*path, "accept"),
                "joining each record to its output needs a JSON, JSON Lines or CSV response (accept)",
            )
