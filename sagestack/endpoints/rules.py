"""Rules about endpoints: what is served, where it is compiled for, and how it scales must agree
before a compilation job runs or an endpoint is paid for."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagestack.core.catalog.images import SERVERLESS_INSTANCE_HINT
from sagestack.core.catalog.neo import cloud_target, cloud_targets, framework_versions, target_for_family
from sagestack.core.catalog.service_model import enum_values
from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.names import Names
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.core.types import arn_region
from sagestack.endpoints.models import EndpointSpec
from sagestack.foundation.inference_images import InferenceImageError, inference_image_uri
from sagestack.training.models import JobSpec

ENDPOINT_NAME_MAX = 63  # EndpointName / EndpointConfigName


def _endpoints(ctx: RuleContext) -> Iterator[tuple[str, EndpointSpec]]:
    yield from ctx.spec.endpoints.items()


def trained_by(ctx: RuleContext, ep: EndpointSpec) -> tuple[str, JobSpec] | None:
    """The job (key and spec) whose model the endpoint serves, through a tuning entry if need be;
    None when it serves a pinned package or names no job (endpoint-model-source reports that)."""
    if ep.model is None:
        return None
    key = ctx.spec.job_of(ep.model.from_)
    job = ctx.spec.jobs.get(key)
    return (key, job) if job is not None else None


def served_by_tf_serving(ctx: RuleContext, ep: EndpointSpec) -> bool:
    """Whether an uncompiled model of the project is served by the TensorFlow Serving container."""
    trained = trained_by(ctx, ep)
    key = ep.image or (trained[1].image if trained else None)
    image = ctx.spec.images.get(key) if key and ep.compile is None else None
    return image is not None and image.dlc is not None and image.dlc.framework == "tensorflow"


def _family(instance: str) -> str:
    return instance.split(".")[1]


@rule(
    "endpoint-model-source",
    "error",
    "an endpoint's model comes from a job or tuning entry of the project",
    why=(
        "The pipeline that trains model.from registers the endpoint's "
        "model; a source outside the project would never produce a package."
    ),
    fix="Name a job or tuning entry of this project in model.from.",
)
def endpoint_model_source(ctx: RuleContext) -> Iterator[Finding]:
    known = [*ctx.spec.jobs, *ctx.spec.tuning]
    for name, ep in _endpoints(ctx):
        if ep.model is None:
            if ep.model_package is None and not ep.components and ep.llm is None:
                yield Finding(
                    ("endpoints", name),
                    "nothing to serve: give model: {from: <job or tuning entry>} (a pipeline registers it) "
                    "and/or model_package: <ARN> (the package this environment serves)",
                )
            continue
        if ep.model.from_ not in known:
            yield Finding(
                ("endpoints", name, "model", "from"),
                f"'{ep.model.from_}' is neither a job nor a tuning entry{did_you_mean(ep.model.from_, known)} "
                f"(defined: {', '.join(known) or 'none'})",
            )


@rule(
    "endpoint-capacity",
    "error",
    "exactly one of instance_type or serverless; serverless takes no extras",
    why=(
        "A production variant is either an instance fleet (instance_type) or serverless; SageMaker "
        "refuses both or neither, and serverless takes no autoscaling, data capture or volume key."
    ),
    fix="Keep exactly one of instance_type and serverless:, and drop the extras serverless does not take.",
)
def endpoint_capacity(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        path = ("endpoints", name)
        if (ep.primary_instance_type is None) == (ep.serverless is None):
            yield Finding(
                path,
                "give exactly one of instance_type (a fleet of instances) or serverless "
                "({memory_mb, max_concurrency})",
            )
            continue
        if ep.serverless is None:
            continue
        if ep.autoscaling is not None:
            yield Finding(
                (*path, "autoscaling"),
                "serverless endpoints scale themselves (max_concurrency); remove autoscaling or use instance_type",
            )
        if ep.data_capture is not None:
            yield Finding(
                (*path, "data_capture"),
                "SageMaker does not capture data from serverless endpoints; remove data_capture or use instance_type",
            )
        target = cloud_target(ep.compile.target_device) if ep.compile and ep.compile.target_device else None
        if target is not None and target.processor != "cpu":
            yield Finding(
                (*path, "compile", "target_device"),
                f"serverless endpoints run on CPUs only; compile for a CPU target such as ml_c5, not "
                f"{target.device}",
            )


@rule(
    "endpoint-compile-target",
    "error",
    "a compile target is one known TargetDevice or TargetPlatform",
    why=(
        "CreateCompilationJob needs a TargetDevice Neo knows or a TargetPlatform (Os, "
        "Arch, Accelerator); an unknown one fails the compile step after training."
    ),
    fix="Use one of the suggested target_device values, or target_platform: {os, arch, accelerator}.",
)
def endpoint_compile_target(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        c = ep.compile
        if c is None:
            continue
        # botocore's service model is read only where something compiles (cached after the first)
        devices = enum_values("TargetDevice")
        platform_enums = {
            "Os": enum_values("TargetPlatformOs"),
            "Arch": enum_values("TargetPlatformArch"),
            "Accelerator": enum_values("TargetPlatformAccelerator"),
        }
        path = ("endpoints", name, "compile")
        if (c.target_device is None) == (c.target_platform is None):
            yield Finding(
                path, "give exactly one of target_device (e.g. ml_c5) or target_platform ({Os, Arch})"
            )
            continue
        if c.target_device is not None:
            if c.target_device not in devices:
                yield Finding(
                    (*path, "target_device"),
                    f"'{c.target_device}' is not a Neo TargetDevice{did_you_mean(c.target_device, devices)}",
                )
            elif cloud_target(c.target_device) is None:
                yield Finding(
                    (*path, "target_device"),
                    f"{c.target_device} is an edge device; an endpoint needs a cloud target: "
                    f"{', '.join(cloud_targets())}",
                )
            continue
        assert c.target_platform is not None
        for key, value in c.target_platform.items():
            allowed = platform_enums.get(key)
            if allowed is None:
                yield Finding(
                    (*path, "target_platform", key),
                    f"unknown key '{key}'{did_you_mean(key, platform_enums)}; allowed: Os, Arch, Accelerator",
                )
            elif value not in allowed:
                yield Finding(
                    (*path, "target_platform", key),
                    f"'{value}' is not a TargetPlatform {key}{did_you_mean(value, allowed)} "
                    f"(allowed: {', '.join(allowed)})",
                )
        for key in ("Os", "Arch"):
            if key not in c.target_platform:
                yield Finding((*path, "target_platform"), f"target_platform needs {key}")


@rule(
    "endpoint-compile-family",
    "error",
    "the endpoint's instance family is the one the model is compiled for",
    why=(
        "A model compiled for one device runs only there: an ml_c5 "
        "artifact on an ml.g4dn endpoint fails to load at deploy time."
    ),
    fix="Make every instance_type the family of target_device (ml_c5 -> ml.c5.*, ml_inf2 -> ml.inf2.*).",
)
def endpoint_compile_family(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        c = ep.compile
        if c is None or c.target_device is None:
            continue
        target = cloud_target(c.target_device)
        if target is None:
            continue
        for i, itype in enumerate(ep.instance_type or ()):
            if itype.startswith(target.instance_prefix):
                continue
            fits = target_for_family(_family(itype))
            hint = (
                f"compile for {fits.device} (target_device: {fits.device})"
                if fits
                else f"Neo has no target for {_family(itype)}"
            )
            at = ("endpoints", name, "instance_type", i)
            yield Finding(
                at if len(ep.instance_type or ()) > 1 else at[:-1],
                f"{itype} cannot run a model compiled for {target.device}, which runs on "
                f"{target.instance_prefix}* instances; use an {target.instance_prefix}* instance_type, or {hint}",
            )


@rule(
    "endpoint-compile-framework",
    "error",
    "Neo supports the framework version for the compile target",
    why="Neo supports a fixed set of framework versions per target; others fail the compilation job.",
    fix="Set compile.framework_version to one the finding lists for the target.",
)
def endpoint_compile_framework(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        c = ep.compile
        if c is None or c.target_device is None:
            continue
        target = cloud_target(c.target_device)
        if target is None:
            continue
        path = ("endpoints", name, "compile", "framework_version")
        versions = framework_versions(c.framework, target)
        if c.framework_version is None:
            if c.framework in ("PYTORCH", "TENSORFLOW", "MXNET"):
                listed = f" ({', '.join(versions)})" if versions else ""
                yield Finding(path, f"{c.framework} compilation needs a framework_version{listed}")
            continue
        if versions is not None and c.framework_version not in versions:
            shown = [v for v in versions if v.count(".") == 1]
            yield Finding(
                path,
                f"Neo does not compile {c.framework} {c.framework_version} for {target.device}; supported: "
                f"{', '.join(shown)}{did_you_mean(c.framework_version, shown)}",
            )


@rule(
    "endpoint-input-shapes",
    "error",
    "input shapes are positive, with a batch dimension first",
    why=(
        "Neo traces the model with DataInputConfig; zero or negative dimensions, or a missing "
        "batch dimension, fail compilation or give a model that rejects real requests."
    ),
    fix="Give each input its full shape, batch first, e.g. {input0: [1, 1, 8, 8]}.",
)
def endpoint_input_shapes(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        if ep.compile is None:
            continue
        for key, shape in ep.compile.input_shapes.items():
            path = ("endpoints", name, "compile", "input_shapes", key)
            if not shape:
                yield Finding(path, "an input shape needs at least a batch dimension, e.g. [1, 1, 8, 8]")
            elif any(d < 1 for d in shape):
                yield Finding(path, f"every dimension must be at least 1, got {shape}")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                yield Finding(
                    path, f"'{key}' is not an input name Neo accepts (letters, digits, _), e.g. input0"
                )


@rule(
    "endpoint-autoscaling",
    "error",
    "autoscaling bounds hold the initial count; instance fleets keep ≥ 1",
    why=(
        "Application Auto Scaling refuses a min above max, and a real-time fleet scaled "
        "to 0 cannot serve (async endpoints queue requests and wake on the backlog); an "
        "initial count outside the bounds is corrected at once, hiding the spec's intent."
    ),
    fix="Keep 1 <= min <= initial_instance_count <= max (min may be 0 for async endpoints and "
    "endpoints of inference components).",
)
def endpoint_autoscaling(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        a = ep.autoscaling
        if a is None or ep.primary_instance_type is None:
            continue
        path = ("endpoints", name, "autoscaling")
        if a.min > a.max:
            yield Finding(path, f"min {a.min} is above max {a.max}")
        if a.min < 1 and ep.async_ is None and not ep.components:
            yield Finding(
                (*path, "min"),
                "a real-time instance endpoint keeps at least 1 instance; async endpoints, serverless ones "
                "and endpoints of inference components scale to zero",
            )
        if not max(a.min, 1) <= ep.initial_instance_count <= a.max:
            yield Finding(
                ("endpoints", name, "initial_instance_count"),
                f"initial_instance_count {ep.initial_instance_count} is outside autoscaling [{a.min}, {a.max}]",
            )


@rule(
    "endpoint-package-region",
    "error",
    "a pinned model package lives in the project's region",
    why="A model package is regional; an endpoint can serve only a package in its own region.",
    fix="Promote (copy) the package to the project's region, or pin one from it.",
)
def endpoint_package_region(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        if ep.model_package is None:
            continue
        region = arn_region(ep.model_package)
        if region != ctx.spec.region:
            yield Finding(
                ("endpoints", name, "model_package"),
                f"the package is in {region} but endpoints are deployed in {ctx.spec.region}; SageMaker "
                f"serves packages of its own region (copy the model to {ctx.spec.region} and register it there)",
            )


@rule(
    "endpoint-name-length",
    "error",
    "'<project>-<env>-<endpoint>' fits SageMaker's 63 characters",
    why="SageMaker endpoint names have at most 63 characters; the name is '<project>-<env>-<endpoint>'.",
    fix="Shorten the project, environment or endpoint key.",
)
def endpoint_name_length(ctx: RuleContext) -> Iterator[Finding]:
    for name in ctx.spec.endpoints:
        full = Names(ctx.spec.project, ctx.env or "env").endpoint(name)
        if len(full) > ENDPOINT_NAME_MAX:
            yield Finding(
                ("endpoints", name),
                f"the endpoint name '{full}' has {len(full)} characters; SageMaker allows {ENDPOINT_NAME_MAX}: "
                "shorten the endpoint key",
            )


@rule(
    "endpoint-inference-image",
    "error",
    "an uncompiled model is served from a Deep Learning Container sagestack can name",
    why=(
        "An uncompiled model is registered with the inference DLC matching its training DLC (or the "
        "DLC the endpoint's image: names, of the same framework); with a uri: or dockerfile: image "
        "sagestack cannot know which serving image fits, and a training version may have no inference "
        "container (TensorFlow's serving releases trail its training ones)."
    ),
    fix=(
        "Add compile: (Neo reports the image), serve a registered model_package you built yourself, or "
        "name a DLC with an inference container in the endpoint's image:."
    ),
)
def endpoint_inference_image(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    for name, ep in _endpoints(ctx):
        if ep.image and (ep.model is None or ep.compile is not None):
            yield Finding(
                ("endpoints", name, "image"),
                "image: names the container serving model: {from: …} as trained; "
                + (
                    "a compiled model is served in the image Neo reports"
                    if ep.model
                    else "a model_package carries its own"
                )
                + ": remove image:",
            )
            continue
        trained = trained_by(ctx, ep) if ep.compile is None else None
        if trained is None or trained[1].image not in spec.images:
            continue  # endpoint-model-source and the job rules report these
        job_key, job = trained
        where: tuple[str, ...] = ("endpoints", name, "image") if ep.image else ("endpoints", name, "model")
        key = ep.image or job.image
        image = spec.images.get(key)
        if image is None:
            yield Finding(where, f"'{key}' is not a key of images:{did_you_mean(key, list(spec.images))}")
            continue
        trained_in = spec.images[job.image].dlc
        if ep.image and image.dlc and trained_in and image.dlc.framework != trained_in.framework:
            yield Finding(
                where,
                f"image '{key}' is a {image.dlc.framework} container, but job '{job_key}' trains with "
                f"{trained_in.framework} (images.{job.image}); its model needs a {trained_in.framework} DLC",
            )
            continue
        itype = ep.primary_instance_type or SERVERLESS_INSTANCE_HINT
        try:
            inference_image_uri(image, region=spec.region, instance_type=itype)
        except InferenceImageError as e:
            if e.dlc is None:
                yield Finding(
                    where,
                    f"{'image' if ep.image else f'job {job_key!r} trains in image'} '{key}', which is not a "
                    "Deep Learning Container, so sagestack cannot name an inference image for its model; "
                    "add compile: (the compilation job reports the image) or serve a registered model_package",
                )
            else:
                yield Finding(
                    where,
                    f"no {e.dlc.framework} {e.dlc.version} inference container for {itype} in {spec.region}: {e}",
                )


_HANDLE = re.compile(r"^def handle\(", re.MULTILINE)


@rule(
    "endpoint-batching-handler",
    "warning",
    "a batching endpoint's model carries the batched handler (inference.py's handle) it names",
    why=(
        "With batching, sagestack points the PyTorch inference container's TorchServe at inference.py's "
        "handle(data, context) (TS_DEFAULT_SERVICE_HANDLER=inference:handle), because the container's "
        "own handler runs input_fn / predict_fn / output_fn once per request and fails a whole batch "
        "for one malformed request. A model whose inference.py has no handle() would not load."
    ),
    fix=(
        "Use training_src/inference.py's handle() (it wraps the module's own "
        "input_fn / predict_fn / output_fn), or set batching.handler: toolkit."
    ),
)
def endpoint_batching_handler(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in _endpoints(ctx):
        trained = trained_by(ctx, ep)
        if (
            ep.batching is None
            or ep.batching.handler != "batched"
            or trained is None
            or served_by_tf_serving(ctx, ep)
        ):
            continue  # endpoint-tf-batching refuses batching: for TensorFlow Serving
        job = trained[1]
        script = ctx.root / job.source_dir / "inference.py"
        text = script.read_text(errors="replace") if script.exists() else ""
        if not _HANDLE.search(text):
            yield Finding(
                ("endpoints", name, "batching", "handler"),
                f"batching.handler is 'batched' but {job.source_dir}/inference.py "
                f"{'defines no handle(data, context)' if text else 'does not exist'}: TorchServe would fail "
                "to load the model; add one (the example's training_src/inference.py has a handle() over its "
                "input_fn / predict_fn / output_fn), or set handler: toolkit to keep the container's handler "
                "(one forward pass per request)",
            )
