#!/usr/bin/env python3
"""CDK entry point: `cdk synth` builds one stage per environment in config/envs/ (see
sagestack.app.builder.main for the exit codes; `sagestack synth` keeps them, `cdk synth` says 1)."""

from pathlib import Path

from sagestack.app.builder import main

if __name__ == "__main__":
    main(Path(__file__).resolve().parent)
