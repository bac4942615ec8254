"""Rules about the container that serves an endpoint's model when it is not the PyTorch one: the
TensorFlow Serving container of a TensorFlow job (or of the endpoint's image:), whose versions trail
TensorFlow's training releases and which takes none of TorchServe's settings."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.endpoints.rules import served_by_tf_serving, trained_by
from sagestack.foundation.inference_images import version_key


@rule(
    "endpoint-serving-version",
    "warning",
    "a model is served by its training framework's version, or a newer one",
    why=(
        "TensorFlow promises that a newer runtime reads an older SavedModel, not the reverse: a model "
        "exported by TensorFlow 2.21 may use ops or attributes TensorFlow Serving 2.20 does not know, "
        "and then the endpoint fails to load it (its /ping never answers 200)."
    ),
    fix=(
        "Serve with the training version when an inference container exists for it, or train with the "
        "serving version; else test the served model (`sagestack local serve` loads it with this machine's "
        "TensorFlow, not the container's)."
    ),
)
def endpoint_serving_version(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        trained = trained_by(ctx, ep)
        serving = ctx.spec.images.get(ep.image) if ep.image else None
        training = ctx.spec.images.get(trained[1].image) if trained else None
        if not (serving and serving.dlc and training and training.dlc):
            continue
        if version_key(serving.dlc.version) < version_key(training.dlc.version):
            yield Finding(
                ("endpoints", name, "image"),
                f"images.{ep.image} serves {serving.dlc.framework} {serving.dlc.version}, older than the "
                f"{training.dlc.version} job '{trained[0] if trained else ''}' trains with: the model must "
                "not use anything newer (TensorFlow reads older SavedModels, not newer ones)",
            )


@rule(
    "endpoint-tf-batching",
    "error",
    "batching: is the PyTorch container's (TorchServe); a TensorFlow Serving endpoint takes none",
    why=(
        "batching: renders SAGEMAKER_TS_* variables and a TorchServe handler; the TensorFlow Serving "
        "container ignores them (it batches with its own SAGEMAKER_TFS_ENABLE_BATCHING, which sagestack "
        "does not render), so the endpoint would silently answer one request per forward pass."
    ),
    fix="Remove batching: from the endpoint of a TensorFlow model.",
)
def endpoint_tf_batching(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        if ep.batching is not None and served_by_tf_serving(ctx, ep):
            yield Finding(
                ("endpoints", name, "batching"),
                "the model is served by TensorFlow Serving (a tensorflow DLC), which takes no batching: "
                "(TorchServe's settings); remove it",
            )
