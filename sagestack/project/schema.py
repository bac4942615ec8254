"""JSON Schema of the spec for editors (yaml-language-server) and review."""

from __future__ import annotations

import json
from typing import Any

from sagestack.project.models import ProjectSpec


def project_schema() -> dict[str, Any]:
    schema = ProjectSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    # the user's own top-level keys (project.loader.EXTENSION_PREFIX): anchors to merge from
    schema["patternProperties"] = {"^x-": {"description": "yours: e.g. YAML anchors other entries merge"}}
    schema["title"] = "sagestack project spec (config/sagestack.yaml; config/envs/<env>.yaml overlays it)"
    return schema


def overlay_schema() -> dict[str, Any]:
    """The same shapes with nothing required: an environment overlay sets only what differs."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "required"}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    schema: dict[str, Any] = strip(project_schema())
    schema["properties"].pop("promotion")  # the project file's alone (the loader refuses it here)
    schema["title"] = "sagestack environment overlay (config/envs/<env>.yaml)"
    return schema


SCHEMA_FILES = {
    "sagestack.schema.json": project_schema,
    "sagestack.env.schema.json": overlay_schema,
}


def schema_texts() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2, sort_keys=True) + "\n" for name, fn in SCHEMA_FILES.items()}
