"""CloudFormation's create-only properties (a change replaces the resource), as the resource
provider schemas cfn-lint ships say them: the table sagestack's `diff` reads
(sagestack/core/catalog/data/cfn_create_only.json). `python -m tests.support.cfn_schemas` writes it
again after a cfn-lint upgrade; tests/unit/test_deploy_commands.py holds the two equal."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO

TABLE = REPO / "sagestack" / "core" / "catalog" / "data" / "cfn_create_only.json"
REGION = "us-east-1"


def create_only_table() -> dict[str, list[str]]:
    from importlib import resources

    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER  # type: ignore[import-untyped]

    listing = resources.files("cfnlint.data.schemas.providers").joinpath(f"{REGION}.json").read_text()
    table: dict[str, list[str]] = {}
    for type_name in sorted(json.loads(listing)):
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(REGION, type_name).schema
        paths = schema.get("createOnlyProperties") or []
        if paths:
            table[type_name] = sorted(p.removeprefix("/properties/") for p in paths)
    return table


def text(table: dict[str, list[str]]) -> str:
    return json.dumps(table, indent=0, sort_keys=True) + "\n"


if __name__ == "__main__":
    Path(TABLE).write_text(text(create_only_table()))
    print(f"wrote {TABLE}")
