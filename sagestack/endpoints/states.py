"""The states a pipeline runs after training (or tuning) for each endpoint it feeds: compile the
model (SageMaker Neo, content-addressed: the same trained model and settings follow the same job)
when asked, register it as a model package (PendingManualApproval) — and, for a batch transform
that scores with the model, run the transform at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.states import IN_USE_PATTERNS, SUCCEEDED, PipelineSettings
from sagestack.endpoints.request import (
    ModelStepContext,
    compilation_request,
    compile_digest,
    model_package_request,
    validation_stand_ins,
)
from sagestack.endpoints.resolved import ResolvedEndpoint
from sagestack.transforms.states import TransformStates, transform_states


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
    endpoints: list[ResolvedEndpoint],
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


def _start(ep: ResolvedEndpoint) -> str:
    names = ModelStates(ep.state_key)
    return names.name_compilation if ep.spec.compile else names.register


def _endpoint_states(
    ep: ResolvedEndpoint, ctx: ModelStepContext, settings: PipelineSettings, n: int, result: str, nxt: str
) -> dict[str, Any]:
    s: dict[str, Any] = {}
    if ep.transform is not None:
        # Register the model, then score with it at once.
        s.update(
            transform_states(
                ep.transform,
                ctx.deployment,
                settings,
                package_path=f"{result}.ModelPackageArn",
                input_path=None,
                nxt=nxt,
                n=n,
            )
        )
        nxt = TransformStates(ep.transform.key).name
    if ep.spec.compile is None:
        request = _register_request(ep, ctx, model_data_path="$.ModelArtifacts")
        s[ModelStates(ep.state_key).register] = _register_task(request, result, nxt, ep.key)
        return s
    compiled = f"$.compiled_{n}"
    s.update(_compile_states(ep, ctx, settings, n, compiled))
    s.update(_registered_compiled(ep, ctx, compiled, result, nxt))
    return s


def _compile_states(
    ep: ResolvedEndpoint, ctx: ModelStepContext, settings: PipelineSettings, n: int, compiled: str
) -> dict[str, Any]:
    """Name the compilation job by content, start it (or follow the one of that name), wait for it;
    on completion go to 'Image reported?'. The job's description lands at `compiled`."""
    assert ep.spec.compile is not None
    s: dict[str, Any] = {}
    k = ep.key
    names = ModelStates(ep.state_key)
    stand_in = validation_stand_ins(ep)
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
    s.update(
        asl.poll(
            names,
            asl.Describe(
                "sagemaker:describeCompilationJob",
                {"CompilationJobName.$": name_path},
                result_path=compiled,
                result_selector={"Status.$": "$.CompilationJobStatus", "Detail.$": "$"},
            ),
            status_path=f"{compiled}.Status",
            seconds=settings.poll_seconds,
            endings=asl.ENDINGS_UPPER,
            done=names.image_reported,
            failed=names.notify_compile_failed,
        )
    )
    s[names.notify_compile_failed] = _notify_text(
        settings, f"Compilation for endpoint {k} failed.", names.compile_failed
    )
    s[names.compile_failed] = asl.fail("CompilationJobFailed", cause_path=f"{compiled}.Detail.FailureReason")
    return s


def _registered_compiled(
    ep: ResolvedEndpoint, ctx: ModelStepContext, compiled: str, result: str, nxt: str
) -> dict[str, Any]:
    """Register the compiled model with the image the compilation job reports, else the
    catalog's (or fail, when there is none)."""
    assert ep.spec.compile is not None
    s: dict[str, Any] = {}
    names = ModelStates(ep.state_key)
    if not ep.image_uri:
        target = ep.spec.compile.target_device or "target platform"
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
        s[state] = _register_task(request, result, nxt, ep.key)
    return s


def _register_request(
    ep: ResolvedEndpoint, ctx: ModelStepContext, *, model_data_path: str, image_path: str | None = None
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
