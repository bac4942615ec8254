"""What SageMaker offers: instance types, accelerators, prices, DLC images, quota names, API shapes."""

from sagestack.core.catalog.images import ImageLookupError, dlc_image_uri
from sagestack.core.catalog.instances import (
    Accelerator,
    InstanceType,
    catalog_version,
    check_instance_type,
    instance_type,
    instance_types_for,
)
from sagestack.core.catalog.quotas import quota_name
from sagestack.core.catalog.service_model import RequestValidationError, enum_values, validate_request
from sagestack.core.catalog.suggest import closest, did_you_mean

__all__ = [
    "Accelerator",
    "ImageLookupError",
    "InstanceType",
    "RequestValidationError",
    "catalog_version",
    "check_instance_type",
    "closest",
    "did_you_mean",
    "dlc_image_uri",
    "enum_values",
    "instance_type",
    "instance_types_for",
    "quota_name",
    "validate_request",
]
