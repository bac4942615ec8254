"""Where a project keeps its files: the project spec, one overlay per environment, their locks."""

from __future__ import annotations

from pathlib import Path

PROJECT_FILE = "config/sagestack.yaml"
ENV_DIR = "config/envs"


def list_environments(root: Path) -> list[str]:
    """The environments of a project: one overlay each in config/envs/."""
    env_dir = root / ENV_DIR
    if not env_dir.is_dir():
        return []
    return sorted(p.stem for p in env_dir.glob("*.yaml"))
