"""The inference image of a model sagestack trains: the Deep Learning Container matching the one it
was trained in (or the DLC the endpoint's `image:` names), for the instance type that serves (or
batch-transforms with) it.

A TensorFlow model is served by the TensorFlow Serving container (`tensorflow-inference`), whose
releases trail the training ones: sagemaker-core's catalog has TensorFlow training 2.21 but
inference only up to 2.20. There is no silent mapping: a training version without an inference
container is an error naming the inference versions that exist, and the endpoint's `image:` names
the serving DLC; a serving version older than the training one is a warning (rule
endpoint-serving-version), since TensorFlow promises only that a newer runtime reads an older
SavedModel."""

from __future__ import annotations

from functools import cache

from sagestack.core.catalog.images import ImageLookupError, dlc_image_uri
from sagestack.foundation.models import DlcImage, ImageSpec


class InferenceImageError(ValueError):
    """sagestack can name no inference image for a model. `dlc` is None when the model trains in an
    image that is no Deep Learning Container (uri: or dockerfile:); otherwise the catalog has no
    inference container of that DLC for the instance type, and the message says why."""

    def __init__(self, message: str, dlc: DlcImage | None) -> None:
        super().__init__(message)
        self.dlc = dlc


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


@cache
def inference_versions(framework: str) -> tuple[str, ...]:
    """The framework's inference DLC versions in sagemaker-core's catalog (major.minor, oldest first)."""
    from sagemaker.core import image_uris  # heavy: only when an image is missing

    try:
        listed = image_uris.list_versions(framework, "inference")
    except (ValueError, KeyError):
        return ()
    short = {".".join(v.split(".")[:2]) for v in listed}
    return tuple(sorted(short, key=version_key))


def serving_suggestion(dlc: DlcImage) -> str:
    """What to write when `dlc` has no inference container: the newest older one, as an image."""
    older = [v for v in inference_versions(dlc.framework) if version_key(v) < version_key(dlc.version)]
    if not older:
        return ""
    return (
        f"; serve it with an older one: add images: {{serve: {{dlc: {{framework: {dlc.framework}, "
        f'version: "{older[-1]}", py_version: {dlc.py_version}}}}}}} and the endpoint\'s image: serve'
    )


def inference_image_uri(image: ImageSpec, *, region: str, instance_type: str) -> str:
    """The DLC inference image for a model trained in `image`, on `instance_type` in `region`
    (InferenceImageError if there is none)."""
    dlc = image.dlc
    if dlc is None:
        raise InferenceImageError(
            "the training image is not a Deep Learning Container, so sagestack knows no inference image for it",
            None,
        )
    try:
        return dlc_image_uri(
            dlc.framework,
            dlc.version,
            dlc.py_version,
            region=region,
            instance_type=instance_type,
            scope="inference",
        )
    except ImageLookupError as e:
        versions = inference_versions(dlc.framework)
        if (
            versions
            and dlc.version not in versions
            and not dlc.version.startswith(tuple(f"{v}." for v in versions))
        ):
            shown = ", ".join(versions[-4:])
            raise InferenceImageError(
                f"{dlc.framework} inference containers go up to {versions[-1]} (… {shown}) in "
                f"sagemaker-core's catalog{serving_suggestion(dlc)}",
                dlc,
            ) from None
        raise InferenceImageError(str(e), dlc) from None
