"""What SageMaker offers: instance types, accelerators, prices, DLC images, quota names, API shapes."""

from sagestack.catalog.images import ImageLookupError, dlc_image_uri
from sagestack.catalog.instances import (
    Accelerator,
    InstanceType,
    catalog_version,
    check_instance_type,
    instance_type,
    instance_types_for,
)
from sagestack.catalog.quotas import quota_name
from sagestack.catalog.service_model import RequestValidationError, enum_values, validate_request
from sagestack.catalog.suggest import closest, did_you_mean

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
