#!/usr/bin/env python3
"""CDK entry point: `cdk synth` builds one stage per environment in config/envs/."""

from __future__ import annotations

import sys
from pathlib import Path

from aws_cdk import App

from sagestack.constructs.nag import unacknowledged_findings
from sagestack.spec import SpecError
from stacks.app_builder import build_app


def main() -> None:
    root = Path(__file__).resolve().parent
    app = App()
    try:
        build_app(app, root)
    except SpecError as e:
        print(e.report(), file=sys.stderr)
        sys.exit(2)
    assembly = app.synth()
    findings = unacknowledged_findings(assembly.directory)
    if findings:
        print("cdk-nag findings without an acknowledgement (fix them, or acknowledge with a reason):",
              file=sys.stderr)
        print("\n".join(f"  {f}" for f in findings), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
