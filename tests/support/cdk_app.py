"""Build a project's CDK app in this process and read its templates."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO


class BuiltApp:
    def __init__(self, root: Path, outdir: Path, envs: list[str] | None = None) -> None:
        from aws_cdk import App

        from sagestack.app.builder import build_app, cdk_json_context, synth_checked

        self.app = App(outdir=str(outdir), context=cdk_json_context(REPO))
        self.stages = {s.plan.env: s for s in build_app(self.app, root, envs)}
        self.assembly = synth_checked(self.app)

    def template(self, env: str):  # type: ignore[no-untyped-def]
        from aws_cdk.assertions import Template

        return Template.from_stack(self.stages[env].foundation)

    def training_template(self, env: str):  # type: ignore[no-untyped-def]
        from aws_cdk.assertions import Template

        return Template.from_stack(self.stages[env].training)

    def assets(self, env: str) -> dict:
        stack = self.stages[env].foundation
        artifact = self.assembly.get_stack_artifact(stack.artifact_id)
        return json.loads(Path(artifact.assembly.directory, f"{stack.artifact_id}.assets.json").read_text())
