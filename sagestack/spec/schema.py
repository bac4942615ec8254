"""JSON Schema of the spec for editors (yaml-language-server) and review."""

from __future__ import annotations

import json
from typing import Any

from sagestack.spec.models import ProjectSpec


def project_schema() -> dict[str, Any]:
    schema = ProjectSpec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "sagestack project spec (config/sagestack.yaml; config/envs/<env>.yaml overlays it)"
    return schema


def schema_text() -> str:
    return json.dumps(project_schema(), indent=2, sort_keys=True) + "\n"
