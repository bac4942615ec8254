"""Endpoints resolved for one environment: the CreateCompilationJob and CreateModelPackage requests
a pipeline sends after training (or tuning), the states that send them, and the names, images and
instance types the ServingStack and the local commands use.

Values only known when the pipeline runs (the trained artifact, the compiled artifact, the image
the compilation job reports) are JSONPath references in the state machine; at synth each request
is rendered once more with concrete stand-ins and validated against the service model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sagestack.core import states as asl
from sagestack.core.catalog.instances import instance_types_for
from sagestack.core.catalog.neo import NeoTarget, cloud_target, compiled_image_uri, normalize_version
from sagestack.core.layout import S3Layout
from sagestack.core.names import Names
from sagestack.core.states import IN_USE_PATTERNS, PipelineSettings
from sagestack.endpoints.models import EndpointSpec
from sagestack.training.states import SUCCEEDED
from sagestack.transforms.states import TransformContext, TransformPlan, TransformStates, transform_states

if TYPE_CHECKING:  # the resolved environment is passed in; the project layer builds it
    from sagestack.project.environment import EnvironmentPlan


CONTENT_TYPES = ["application/json", "application/jsonlines", "application/x-npy"]
RESPONSE_TYPES = ["application/json", "application/jsonlines", "application/x-npy"]
STAND_IN_REPORTED_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagestack-validation:reported-by-neo"


@dataclass(frozen=True)
class EndpointPlan:
    key: str
    spec: EndpointSpec
    endpoint_name: str  # <project>-<env>-<key>
    target: NeoTarget | None  # the compile target, when compiled for a cloud device
    image_uri: str  # the catalog's inference image (a compiled model's job reports its own)
    supported_instance_types: tuple[str, ...]

    compile_name_prefix: str  # Names.compilation_prefix: compilation jobs are '<prefix>-<md5>'
    # A batch transform's registration: the package lists transform instance types, and the
    # transform runs right after it is registered.
    transform: TransformPlan | None = None

    @property
    def source(self) -> str | None:
        return self.spec.model.from_ if self.spec.model else None

    @property
    def state_key(self) -> str:
        """The key in state names (an endpoint and a transform may share a key)."""
        return f"{self.key} (transform)" if self.transform else self.key


class EndpointResolutionError(ValueError):
    pass


def _job_of(plan: EnvironmentPlan, source: str) -> str:
    spec = plan.spec
    return spec.tuning[source].job if source in spec.tuning else source


def _inference_image(plan: EnvironmentPlan, what: str, source: str, instance_type: str) -> str:
    """The DLC inference image for the model `source` (a job or search) trains, on `instance_type`."""
    from sagestack.core.catalog.images import ImageLookupError, dlc_image_uri

    job = plan.spec.jobs[_job_of(plan, source)]
    dlc = plan.spec.images[job.image].dlc
    if dlc is None:
        raise EndpointResolutionError(
            f"{what}: job '{job.image}' image is not a Deep Learning Container, so sagestack knows no "
            "inference image for it; add compile: (Neo reports the image) or serve a registered model_package"
        )
    try:
        return dlc_image_uri(
            dlc.framework,
            dlc.version,
            dlc.py_version,
            region=plan.region,
            instance_type=instance_type,
            scope="inference",
        )
    except ImageLookupError as e:
        raise EndpointResolutionError(f"{what}: {e}") from None


def resolve_endpoint(plan: EnvironmentPlan, key: str) -> EndpointPlan:
    """Names, image and instance types of one endpoint (EndpointResolutionError if no image fits)."""
    from sagestack.core.catalog.images import SERVERLESS_INSTANCE_HINT

    ep = plan.spec.endpoints[key]
    inference_image = ""  # served only from a pinned package, which carries its own image
    if ep.model is not None and not (ep.compile and ep.compile.target_device):
        inference_image = _inference_image(
            plan, f"endpoint '{key}'", ep.model.from_, ep.instance_type or SERVERLESS_INSTANCE_HINT
        )
    return endpoint_plan(
        names=plan.names, key=key, spec=ep, region=plan.region, inference_image=inference_image
    )


def endpoint_plan(
    *, names: Names, key: str, spec: EndpointSpec, region: str, inference_image: str = ""
) -> EndpointPlan:
    """An endpoint's names, compile target, image and supported instance types. A compiled model's
    image comes from the Neo catalog (the compilation job reports it too); an uncompiled one is
    served by `inference_image`."""
    from sagestack.core.catalog.images import ImageLookupError

    c = spec.compile
    target = cloud_target(c.target_device) if c and c.target_device else None
    hosting = instance_types_for("hosting")
    if target is not None:
        supported = tuple(t for t in hosting if t.startswith(target.instance_prefix))
    elif spec.instance_type is not None:
        family = spec.instance_type.rsplit(".", 1)[0] + "."
        supported = tuple(t for t in hosting if t.startswith(family))
    else:
        supported = tuple(t for t in hosting if t.startswith("ml.m5."))
    image = inference_image
    if c is not None and target is not None:
        try:
            image = compiled_image_uri(
                c.framework, normalize_version(c.framework, c.framework_version or "", target), target, region
            )
        except ImageLookupError:
            image = ""  # the compilation job reports the image; without one the pipeline fails and says so
    return EndpointPlan(
        key=key,
        spec=spec,
        endpoint_name=names.endpoint(key),
        compile_name_prefix=names.compilation_prefix(key),
        target=target,
        image_uri=image,
        supported_instance_types=supported,
    )


def endpoints_fed_by(plan: EnvironmentPlan, source: str) -> list[EndpointPlan]:
    """The endpoints whose model a job's (or tuning entry's) pipeline registers, then the batch
    transforms it registers a model for and runs."""
    return [
        resolve_endpoint(plan, k)
        for k, ep in plan.spec.endpoints.items()
        if ep.model and ep.model.from_ == source
    ] + [
        resolve_transform_registration(plan, k)
        for k, t in plan.spec.transforms.items()
        if t.model and t.model.from_ == source
    ]


def resolve_transform_registration(plan: EnvironmentPlan, key: str) -> EndpointPlan:
    """What a pipeline registers for a `model: {from: …}` transform: the model as trained, served by
    the job's DLC inference image for the first candidate type, for the transform's types."""
    t = plan.spec.transforms[key]
    assert t.model is not None
    image = _inference_image(plan, f"transform '{key}'", t.model.from_, t.instance_type[0])
    return EndpointPlan(
        key=key,
        spec=EndpointSpec.model_validate({"model": {"from": t.model.from_}}),
        endpoint_name=plan.names.transform_prefix(key),
        target=None,
        image_uri=image,
        supported_instance_types=tuple(t.instance_type),
        compile_name_prefix=plan.names.transform_prefix(key),
        transform=TransformPlan.of(plan.names, key, t),
    )


# ---------------------------------------------------------------- requests


@dataclass(frozen=True)
class ModelStepContext:
    """Deploy-time values (tokens in the template, stand-ins when validating)."""

    region: str
    env: str
    role_arn: str
    bucket: str
    kms_key_id: str
    group_name: str
    tags: tuple[tuple[str, str], ...] = ()
    # Where the model came from, stamped on each package (CustomerMetadataProperties): the job, its
    # content hash and source archive (`lineage_of`), and what the synth adds (the lock's hash).
    lineage: tuple[tuple[str, str], ...] = ()


def lineage_of(job: str, spec_hash: str, source_sha256: str) -> tuple[tuple[str, str], ...]:
    """The package metadata that ties a model to what trained it (`sagestack lineage` reads it)."""
    return (
        ("sagestack:job", job),
        ("sagestack:spec-hash", spec_hash),
        ("sagestack:source-sha256", source_sha256),
    )


# The training job's image as DescribeTrainingJob reports it (a stand-in where it is not yet known).
STAND_IN_TRAINING_IMAGE = "reported-by-the-training-job"


def compile_digest(ep: EndpointPlan) -> str:
    """What the compilation depends on besides the trained artifact (part of the job's name)."""
    c = ep.spec.compile
    assert c is not None
    return hashlib.sha256(json.dumps(c.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:12]


def compilation_request(
    ep: EndpointPlan, ctx: ModelStepContext, *, name: str, model_artifacts: str
) -> dict[str, Any]:
    c = ep.spec.compile
    assert c is not None
    input_config: dict[str, Any] = {
        "S3Uri": model_artifacts,
        "DataInputConfig": json.dumps(c.input_shapes, separators=(",", ":")),
        "Framework": c.framework,
    }
    if c.framework_version:
        input_config["FrameworkVersion"] = c.framework_version
    output: dict[str, Any] = {
        "S3OutputLocation": S3Layout(ctx.bucket).compiled_models(ep.key),
        "KmsKeyId": ctx.kms_key_id,
    }
    if c.target_device:
        output["TargetDevice"] = c.target_device
    else:
        output["TargetPlatform"] = dict(c.target_platform or {})
    if c.compiler_options:
        output["CompilerOptions"] = json.dumps(c.compiler_options, separators=(",", ":"), sort_keys=True)
    request: dict[str, Any] = {
        "CompilationJobName": name,
        "RoleArn": ctx.role_arn,
        "InputConfig": input_config,
        "OutputConfig": output,
        "StoppingCondition": {"MaxRuntimeInSeconds": c.max_runtime},
    }
    if ctx.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in ctx.tags]
    return request


def model_package_request(
    ep: EndpointPlan,
    ctx: ModelStepContext,
    *,
    image: str,
    model_data_url: str,
    training_job: str,
    training_image: str = STAND_IN_TRAINING_IMAGE,
) -> dict[str, Any]:
    c = ep.spec.compile
    container: dict[str, Any] = {
        "Image": image,
        "ModelDataUrl": model_data_url,
        "Environment": {
            "SAGEMAKER_PROGRAM": "inference.py",
            "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
            "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
            "SAGEMAKER_REGION": ctx.region,
        },
    }
    if c is not None:
        container["Framework"] = c.framework
        if c.framework_version:
            container["FrameworkVersion"] = c.framework_version
        container["ModelInput"] = {"DataInputConfig": json.dumps(c.input_shapes, separators=(",", ":"))}
    compiled = f"compiled for {c.target_device or 'a target platform'}" if c else "not compiled"
    what, types = (
        ("batch transform", "SupportedTransformInstanceTypes")
        if ep.transform
        else ("endpoint", "SupportedRealtimeInferenceInstanceTypes")
    )
    request: dict[str, Any] = {
        "ModelPackageGroupName": ctx.group_name,
        "ModelPackageDescription": f"sagestack {ctx.env}: model for {what} '{ep.key}', {compiled}",
        "ModelApprovalStatus": "PendingManualApproval",
        "InferenceSpecification": {
            "Containers": [container],
            "SupportedContentTypes": CONTENT_TYPES,
            "SupportedResponseMIMETypes": RESPONSE_TYPES,
            types: list(ep.supported_instance_types),
        },
        "CustomerMetadataProperties": {
            f"sagestack:{what.replace('batch ', '')}": ep.key,
            "sagestack:environment": ctx.env,
            "sagestack:training-job": training_job,
            "sagestack:training-image": training_image,
            **dict(ctx.lineage),
        },
    }
    if ctx.tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in ctx.tags]
    return request


def validation_stand_ins(ep: EndpointPlan) -> dict[str, str]:
    return {
        "name": f"{ep.compile_name_prefix}-{'0' * 32}",
        "model_artifacts": "s3://sagestack-validation-bucket/models/job/output/model.tar.gz",
        "training_job": "sagestack-validation-job",
        "compiled": "s3://sagestack-validation-bucket/models/compiled/model-ml_c5.tar.gz",
    }


# ---------------------------------------------------------------- states


@dataclass(frozen=True)
class ModelStates:
    """The names of one endpoint's compile and register states ('Compile digits', …)."""

    key: str

    @property
    def name_compilation(self) -> str:
        return f"Name compilation {self.key}"

    @property
    def compile(self) -> str:
        return f"Compile {self.key}"

    @property
    def compile_refused(self) -> str:
        return f"Compile refused {self.key}?"

    @property
    def notify_compile_refused(self) -> str:
        return f"Notify compile refused {self.key}"

    @property
    def compile_refused_fail(self) -> str:
        return f"Compile refused {self.key}"

    @property
    def wait(self) -> str:
        return f"Wait compilation {self.key}"

    @property
    def describe(self) -> str:
        return f"Describe compilation {self.key}"

    @property
    def status(self) -> str:
        return f"Compilation status {self.key}?"

    @property
    def notify_compile_failed(self) -> str:
        return f"Notify compile failed {self.key}"

    @property
    def compile_failed(self) -> str:
        return f"Compile failed {self.key}"

    @property
    def no_image(self) -> str:
        return f"No inference image {self.key}"

    @property
    def image_reported(self) -> str:
        return f"Image reported {self.key}?"

    @property
    def register(self) -> str:
        return f"Register {self.key}"

    @property
    def register_catalog_image(self) -> str:
        return f"Register {self.key} (catalog image)"


def append_model_steps(
    definition: dict[str, Any],
    endpoints: list[EndpointPlan],
    ctx: ModelStepContext,
    settings: PipelineSettings,
) -> dict[str, Any]:
    """Chain compile (when asked) and register steps for each endpoint after the pipeline's
    'Succeeded' state, whose output carries TrainingJobName and ModelArtifacts."""
    if not endpoints:
        return definition
    states: dict[str, Any] = definition["States"]
    done = states[SUCCEEDED]
    done.pop("End", None)
    first = _start(endpoints[0])
    done["Next"] = first
    packages: dict[str, str] = {}
    for i, ep in enumerate(endpoints):
        nxt = _start(endpoints[i + 1]) if i + 1 < len(endpoints) else "Notify registered"
        result = f"$.package_{i + 1}"
        packages[f"{ep.key}.$"] = f"{result}.ModelPackageArn"
        states.update(_endpoint_states(ep, ctx, settings, i + 1, result, nxt))
    states["Notify registered"] = _notify_text(
        settings, "Model packages registered (PendingManualApproval).", "Model registered"
    )
    # The pipeline's own result, plus the registered packages.
    shown = done.get("Parameters") or states.get("Best model", {}).get("Parameters", {})
    fields = {f"{k.removesuffix('.$')}.$": f"$.{k.removesuffix('.$')}" for k in shown}
    states["Model registered"] = {
        "Type": "Pass",
        "Parameters": {**fields, "ModelPackages": packages},
        "End": True,
    }
    return definition


def _start(ep: EndpointPlan) -> str:
    names = ModelStates(ep.state_key)
    return names.name_compilation if ep.spec.compile else names.register


def _endpoint_states(
    ep: EndpointPlan, ctx: ModelStepContext, settings: PipelineSettings, n: int, result: str, nxt: str
) -> dict[str, Any]:
    s: dict[str, Any] = {}
    k = ep.key
    names = ModelStates(ep.state_key)
    stand_in = validation_stand_ins(ep)
    if ep.transform is not None:
        # Register the model, then score with it at once.
        t = ep.transform
        s.update(
            transform_states(
                t,
                TransformContext(
                    role_arn=ctx.role_arn, bucket=ctx.bucket, kms_key_id=ctx.kms_key_id, tags=ctx.tags
                ),
                settings,
                package_path=f"{result}.ModelPackageArn",
                input_path=None,
                nxt=nxt,
                n=n,
            )
        )
        nxt = TransformStates(t.key).name
    if ep.spec.compile is None:
        request = _register_request(ep, ctx, model_data_path="$.ModelArtifacts")
        s[names.register] = _register_task(request, result, nxt, k)
        return s

    compiled = f"$.compiled_{n}"
    name_path = f"$.compilation_{n}.name"
    digest = compile_digest(ep)
    s[names.name_compilation] = {
        "Type": "Pass",
        "Comment": "Content-addressed: the same trained model and compile settings give the same job name",
        "Parameters": {
            "name.$": f"States.Format('{ep.compile_name_prefix}-{{}}', "
            f"States.Hash(States.Format('{{}}|{digest}', $.ModelArtifacts), 'MD5'))"
        },
        "ResultPath": f"$.compilation_{n}",
        "Next": names.compile,
    }
    request = compilation_request(ep, ctx, name=stand_in["name"], model_artifacts=stand_in["model_artifacts"])
    asl.dynamic(request, ("CompilationJobName",), name_path)
    asl.dynamic(request, ("InputConfig", "S3Uri"), "$.ModelArtifacts")
    target = ep.spec.compile.target_device or "target platform"
    s[names.compile] = asl.task(
        "sagemaker:createCompilationJob",
        request,
        comment=f"CreateCompilationJob (SageMaker Neo) for {target}",
        result_path="$.compile_created",
        nxt=names.wait,
        catch_=asl.catch(names.compile_refused),
    )
    # The same name means this model was compiled with these settings already: follow that job.
    s[names.compile_refused] = asl.choice(
        asl.when(asl.error_matches(IN_USE_PATTERNS), names.describe), default=names.notify_compile_refused
    )
    s[names.notify_compile_refused] = _notify_text(
        settings, f"Compilation for endpoint {k} was refused.", names.compile_refused_fail
    )
    s[names.compile_refused_fail] = asl.fail_with_caught_error()
    s[names.wait] = asl.wait(settings.poll_seconds, names.describe)
    s[names.describe] = asl.task(
        "sagemaker:describeCompilationJob",
        {"CompilationJobName.$": name_path},
        result_selector={"Status.$": "$.CompilationJobStatus", "Detail.$": "$"},
        result_path=compiled,
        retry_=asl.retry(),
        nxt=names.status,
    )
    status = f"{compiled}.Status"
    s[names.status] = asl.choice(
        asl.when(asl.string_equals(status, "COMPLETED"), names.image_reported),
        asl.when(asl.string_equals(status, "FAILED"), names.notify_compile_failed),
        asl.when(asl.string_equals(status, "STOPPED"), names.notify_compile_failed),
        default=names.wait,
    )
    s[names.notify_compile_failed] = _notify_text(
        settings, f"Compilation for endpoint {k} failed.", names.compile_failed
    )
    s[names.compile_failed] = asl.fail("CompilationJobFailed", cause_path=f"{compiled}.Detail.FailureReason")
    if not ep.image_uri:
        s[names.no_image] = asl.fail(
            "NoInferenceImage",
            cause=f"The compilation job reported no InferenceImage and sagestack's catalog has none for "
            f"{ep.spec.compile.framework} on {target}; register the model by hand with the right image.",
        )
    image = f"{compiled}.Detail.InferenceImage"
    s[names.image_reported] = asl.choice(
        asl.when(asl.all_of(asl.is_present(image), asl.is_string(image)), names.register),
        default=names.register_catalog_image if ep.image_uri else names.no_image,
    )
    for state, image_path in ((names.register, image), (names.register_catalog_image, None)):
        if image_path is None and not ep.image_uri:
            continue
        request = _register_request(
            ep,
            ctx,
            model_data_path=f"{compiled}.Detail.ModelArtifacts.S3ModelArtifacts",
            image_path=image_path,
        )
        s[state] = _register_task(request, result, nxt, k)
    return s


def _register_request(
    ep: EndpointPlan, ctx: ModelStepContext, *, model_data_path: str, image_path: str | None = None
) -> dict[str, Any]:
    """CreateModelPackage with the run-time values as JSONPath: the model artifact, the training
    job, and (when the compilation job reports one) the image; else the catalog's image."""
    stand_in = validation_stand_ins(ep)
    request = model_package_request(
        ep,
        ctx,
        image=ep.image_uri,
        model_data_url=stand_in["compiled"],
        training_job=stand_in["training_job"],
    )
    container = request["InferenceSpecification"]["Containers"][0]
    if image_path:
        asl.dynamic(container, ("Image",), image_path)
    asl.dynamic(container, ("ModelDataUrl",), model_data_path)
    asl.dynamic(request, ("CustomerMetadataProperties", "sagestack:training-job"), "$.TrainingJobName")
    asl.dynamic(request, ("CustomerMetadataProperties", "sagestack:training-image"), "$.TrainingImage")
    return request


def _register_task(request: dict[str, Any], result: str, nxt: str, key: str) -> dict[str, Any]:
    return asl.task(
        "sagemaker:createModelPackage",
        request,
        comment=f"CreateModelPackage for endpoint '{key}' (PendingManualApproval)",
        result_selector={"ModelPackageArn.$": "$.ModelPackageArn"},
        result_path=result,
        retry_=asl.retry(attempts=2),
        nxt=nxt,
    )


def _notify_text(settings: PipelineSettings, text: str, nxt: str) -> dict[str, Any]:
    return asl.notify(settings, f"sagestack: {text[:80]}", {"Message": text}, nxt)


def stand_in_model_requests(ep: EndpointPlan, ctx: ModelStepContext) -> dict[str, dict[str, Any]]:
    """This endpoint's CreateCompilationJob (when compiled) and CreateModelPackage requests with
    concrete stand-ins for the run-time values: what validation and the lock look at."""
    stand_in = validation_stand_ins(ep)
    requests: dict[str, dict[str, Any]] = {}
    if ep.spec.compile is not None:
        requests["CreateCompilationJob"] = compilation_request(
            ep, ctx, name=stand_in["name"], model_artifacts=stand_in["model_artifacts"]
        )
    requests["CreateModelPackage"] = model_package_request(
        ep,
        ctx,
        image=ep.image_uri or STAND_IN_REPORTED_IMAGE,  # none in the catalog: the compilation job reports it
        model_data_url=stand_in["compiled"],
        training_job=stand_in["training_job"],
    )
    return requests


def validate_model_requests(ep: EndpointPlan, ctx: ModelStepContext) -> None:
    """Validate this endpoint's requests against the service model (ValueError listing every problem)."""
    from sagestack.core.catalog.service_model import validate_request

    for operation, request in stand_in_model_requests(ep, ctx).items():
        validate_request(operation, request)
