"""The sagestack spec: models, YAML loading with locations, overlays, rules, JSON Schema."""

from sagestack.spec.errors import Location, SpecError, SpecIssue
from sagestack.spec.loader import LoadedSpec, list_environments, load_project
from sagestack.spec.models import ProjectSpec

__all__ = [
    "LoadedSpec",
    "Location",
    "ProjectSpec",
    "SpecError",
    "SpecIssue",
    "list_environments",
    "load_project",
]
