"""The CDK CLI as `sagestack synth`, `deploy`, `diff` and `destroy` run it: the project's app run
the way the CLI runs it (sagestack's checks and exit codes kept), the cloud assembly's stacks per
environment, and the project's own `cdk` (node_modules/.bin, with the Node LTS package.json pins
first on its PATH, as `npx` gives it) run over that assembly with an environment's stack pattern."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENVS_CONTEXT = "sagestack:environments"  # app/builder.py's: which environments a synth builds
LOCKED_CONTEXT = "sagestack:locked"
APPROVALS = ("never", "any-change", "broadening")  # `cdk deploy --require-approval`


class CdkCliMissing(Exception):
    """No CDK CLI for this project: what to install, in one line."""


@dataclass(frozen=True)
class AssemblyStack:
    """One stack of a synthesized environment: its path in the app (`dev/Foundation`, what a
    stack pattern matches), its CloudFormation name, tags and template."""

    path: str
    name: str
    tags: Mapping[str, str]
    template_file: Path

    def template(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.template_file.read_text())
        return data


def synthesize(root: Path, outdir: Path, context: Mapping[str, str]) -> int:
    """Run the project's app.py as the CDK CLI runs it (the output folder and the -c context in its
    environment): its exit code is sagestack's (2 invalid spec, 3 quota short, 4 lock mismatch, 1
    unacknowledged cdk-nag finding)."""
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(dict(context))}
    return subprocess.call([sys.executable, str(root / "app.py")], cwd=root, env=env)


def environment_context(env: str, *, locked: bool, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The context of one environment's synth: only its stages (no delivery pipeline), and the lock
    enforced when asked (`-c sagestack:locked=true`, as the delivery pipeline's synth)."""
    context = {**(extra or {}), ENVS_CONTEXT: env}
    if locked:
        context[LOCKED_CONTEXT] = "true"
    return context


def assembly_stacks(outdir: Path) -> dict[str, list[AssemblyStack]]:
    """Each environment's stacks, from the cloud assembly's nested manifests (`assembly-<env>/`)."""
    stages: dict[str, list[AssemblyStack]] = {}
    for manifest in sorted(outdir.glob("assembly-*/manifest.json")):
        artifacts = json.loads(manifest.read_text()).get("artifacts", {})
        found = []
        for key, artifact in artifacts.items():
            if artifact.get("type") != "aws:cloudformation:stack":
                continue
            props = artifact.get("properties", {})
            found.append(
                AssemblyStack(
                    path=artifact.get("displayName", key),
                    name=props.get("stackName", key),
                    tags=dict(props.get("tags", {})),
                    template_file=manifest.parent / props["templateFile"],
                )
            )
        stages[manifest.parent.name.removeprefix("assembly-")] = sorted(found, key=lambda s: s.name)
    return stages


def stack_pattern(env: str) -> str:
    """Every stack of an environment's stage, as the CDK CLI selects them (quoted when printed)."""
    return f"{env}/*"


def find_cdk(root: Path) -> tuple[str, dict[str, str]]:
    """The CDK CLI this project pins (`npm install` puts it in node_modules/.bin) and the environment
    to run it in: node_modules/.bin first on the PATH, so the Node LTS package.json pins (the `node`
    package) runs it, as under `npx cdk`; else a `cdk` on the PATH."""
    env = dict(os.environ)
    bins = root / "node_modules" / ".bin"
    local = bins / "cdk"
    if local.exists():
        env["PATH"] = f"{bins}{os.pathsep}{env.get('PATH', '')}"
        return str(local), env
    found = shutil.which("cdk")
    if found:
        return found, env
    how = "run `npm install` in the project (its package.json pins aws-cdk and Node)"
    if not (root / "package.json").exists():
        how = "install it: `npm install aws-cdk` in the project, or `npm install -g aws-cdk`"
    raise CdkCliMissing(f"the CDK CLI is not installed here: {how}")


def cdk_argv(
    cdk: str, action: str, outdir: Path, targets: Sequence[str], options: Sequence[str] = ()
) -> list[str]:
    """`cdk <action> --app <assembly> <targets…>`: the assembly sagestack synthesized and checked is
    what the CLI deploys, diffs or destroys (it does not run the app again)."""
    return [cdk, action, "--app", str(outdir), "--no-notices", *options, *targets]


def run_cdk(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> int:
    """The CDK CLI's exit code, passed through (its output goes straight to the terminal)."""
    return subprocess.call(list(argv), cwd=cwd, env=dict(env))
