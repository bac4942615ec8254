"""The project: every feature's spec as one file and its overlays, loaded with locations, checked by
the rules, and resolved for one environment (names, images, every rendered request)."""

from sagestack.core.errors import Location, SpecError, SpecIssue
from sagestack.project.environment import ResolvedEnvironment, ResolvedImage, resolve_environment
from sagestack.project.loader import LoadedSpec, list_environments, load_project
from sagestack.project.models import ProjectSpec

__all__ = [
    "LoadedSpec",
    "Location",
    "ProjectSpec",
    "ResolvedEnvironment",
    "ResolvedImage",
    "SpecError",
    "SpecIssue",
    "list_environments",
    "load_project",
    "resolve_environment",
]
