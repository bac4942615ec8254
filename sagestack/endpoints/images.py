"""The inference image of a model sagestack trains: the Deep Learning Container matching the one it
was trained in, for the instance type that serves (or batch-transforms with) it."""

from __future__ import annotations

from sagestack.core.catalog.images import ImageLookupError, dlc_image_uri
from sagestack.foundation.models import DlcImage, ImageSpec


class InferenceImageError(ValueError):
    """sagestack can name no inference image for a model. `dlc` is None when the model trains in an
    image that is no Deep Learning Container (uri: or dockerfile:); otherwise the catalog has no
    inference container of that DLC for the instance type, and the message says why."""

    def __init__(self, message: str, dlc: DlcImage | None) -> None:
        super().__init__(message)
        self.dlc = dlc


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
        raise InferenceImageError(str(e), dlc) from None
