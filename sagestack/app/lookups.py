"""Context lookups a synth left unresolved, in words, with the commands that resolve each.

In a stack with an account, some CDK constructs ask the account for a fact: a new VPC without named
zones asks for the region's Availability Zones. `cdk synth` looks such facts up with credentials and
keeps them in cdk.context.json; until then the template holds CDK's stand-in (`dummy1a`), which
fails the deploy. The cloud assembly's manifest lists each missing fact (`missing`: its key,
provider and props); this names the environment, the stacks and the fact, and how to fill it: with
credentials (`npx cdk synth`), or offline, by writing the key into cdk.context.json.
Environments without an account never look anything up (their templates use Fn::GetAZs).
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import App

from sagestack.app.stage import EnvironmentStage

PROVIDER_ERROR = "$providerError"  # what the CDK CLI stores for a lookup that failed
WIDTH = 80

# provider -> (the fact in words, the shape of its value in cdk.context.json), from the props
_FACTS: dict[str, tuple[str, str]] = {
    "availability-zones": (
        "the Availability Zones of account {account} in {region}",
        '["{region}a", "{region}b", "{region}c"]',
    ),
    "ssm": ("SSM parameter {parameterName} of account {account} in {region}", '"<its value>"'),
    "ami": ("an AMI of account {account} in {region}", '"ami-0123456789abcdef0"'),
}


def _fact(provider: str, props: dict[str, Any]) -> tuple[str, str]:
    words, shape = _FACTS.get(
        provider, (f"a {provider} lookup in account {{account}}, {{region}}", "the value `cdk synth` writes")
    )
    fields = {"account": "?", "region": "?", "parameterName": "?", **props}
    return words.format(**fields), shape.format(**fields)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _where(outdir: Path, key: str, dummy: object) -> dict[str, list[str]]:
    """environment -> the stacks whose templates hold the lookup's stand-in value."""
    stand_ins = [json.dumps(s) for s in _strings(dummy)]
    found: dict[str, list[str]] = {}
    for manifest in sorted(outdir.glob("assembly-*/manifest.json")):
        data = json.loads(manifest.read_text())
        if not any(m.get("key") == key for m in data.get("missing", [])):
            continue
        stacks = found.setdefault(manifest.parent.name.removeprefix("assembly-"), [])
        for artifact in data.get("artifacts", {}).values():
            template = artifact.get("properties", {}).get("templateFile")
            if artifact.get("type") != "aws:cloudformation:stack" or not template:
                continue
            text = (manifest.parent / template).read_text()
            if any(s in text for s in stand_ins):
                stacks.append(artifact["properties"].get("stackName", template))
    return found


def _zone_hints(stages: Sequence[EnvironmentStage], env: str, region: str) -> list[str]:
    """The spec's clusters of `env` that leave their zone to the lookup."""
    for stage in stages:
        if stage.plan.env == env:
            return [
                f"clusters.{name}.availability_zone: {region}a"
                for name, cluster in stage.plan.spec.clusters.items()
                if cluster.availability_zone is None
            ]
    return []


def _wrap(text: str, first: str = "  ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent="  ", break_on_hyphens=False)


def unresolved_lookups(app: App, outdir: Path, stages: Sequence[EnvironmentStage]) -> list[str]:
    """The report of every context lookup the synth at `outdir` left unresolved (no lines when
    there is none). Under the CDK CLI a lookup not yet tried gets one line: the CLI tries it next
    with its credentials and runs the app again; one it tried and failed gets the whole report."""
    manifest = outdir / "manifest.json"
    missing: list[dict[str, Any]] = (
        json.loads(manifest.read_text()).get("missing", []) if manifest.exists() else []
    )
    under_cli = "CDK_CLI_VERSION" in os.environ
    lines: list[str] = []
    for entry in missing:
        key, props = entry["key"], entry.get("props", {})
        what, shape = _fact(entry.get("provider", "?"), props)
        value = app.node.try_get_context(key)
        if under_cli and not (isinstance(value, dict) and PROVIDER_ERROR in value):
            lines.append(f"note: cdk looks up {what} next, with this run's credentials")
            continue
        account = props.get("account", "?")
        for env, stacks in _where(outdir, key, props.get("dummyValue")).items():
            held = (
                f" (stack {', '.join(stacks)} holds CDK's stand-in for it: not deployable)" if stacks else ""
            )
            lines += _wrap(f"warning: {env}: unresolved context lookup: {what}{held}.", first="")
            lines += _wrap(
                f"With credentials for account {account}, cdk looks it up and writes cdk.context.json "
                "(commit it):"
            )
            lines += [f"    npx cdk synth -c sagestack:environments={env} --profile <profile>"]
            lines += _wrap("Offline, add the entry to cdk.context.json (a JSON object) with the real values:")
            lines += [f"    key:   {key}", f"    value: {shape}"]
            if entry.get("provider") == "availability-zones":
                hints = _zone_hints(stages, env, str(props.get("region", "?")))
                if hints:
                    lines += _wrap("Or name the zone in the spec, which needs no lookup:")
                    lines += [f"    {hint}" for hint in hints]
    return lines
