"""One synth reads each config file once: the project file, every overlay, lock and quota snapshot
(the builder's ProjectFiles hands the loaded documents, locks and quota codes down to the stacks)."""

from __future__ import annotations

import builtins
import io
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.synth

ENVS = ("dev", "prod", "staging")


class _Forgetful(dict[Any, Any]):
    """A parse memo that never keeps anything, so every YAML parse reads its file again."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


def test_one_synth_reads_each_config_file_once(example_project, tmp_path, monkeypatch):
    from aws_cdk import App

    from sagestack.app.builder import LOCKED_CONTEXT, build_app, cdk_json_context, synth_checked
    from sagestack.core import yamldoc
    from sagestack.ops.lock import lock_document, write_lock
    from sagestack.project import load_project, resolve_environment
    from sagestack.project.requests import render_environment

    root = example_project.root
    shutil.rmtree(root / "training_src")
    shutil.copytree(REPO / "training_src", root / "training_src")
    # A quota snapshot per environment (so the quota check and both stacks' quota codes read one),
    # and locks that match (so a locked synth reads and checks them too).
    quota = {"QuotaName": "ml.m5.xlarge for transform job usage", "QuotaCode": "L-TEST", "Value": 10}
    for env in ENVS:
        (root / f"config/envs/{env}.quotas.json").write_text(json.dumps({"quotas": [quota], "usage": {}}))
        plan = resolve_environment(load_project(root, env))
        write_lock(root, env, lock_document(plan, render_environment(plan, root, validate=False)))

    config = (root / "config").resolve()
    reads: Counter[str] = Counter()

    def counted(original: Any) -> Any:
        def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
            resolved = Path(path).resolve() if isinstance(path, (str, Path)) else None
            if resolved is not None and resolved.is_relative_to(config):
                reads[str(resolved.relative_to(root.resolve()))] += 1
            return original(path, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(yamldoc, "_PARSED", _Forgetful())
    # Every file read ends in io.open (Path.read_bytes, read_text and open call it) or open().
    monkeypatch.setattr(io, "open", counted(io.open))
    monkeypatch.setattr(builtins, "open", counted(builtins.open))

    context = {**cdk_json_context(REPO), LOCKED_CONTEXT: "true", "sagestack:digests": "offline"}
    app = App(outdir=str(tmp_path / "cdk.out"), context=context)
    build_app(app, root)
    synth_checked(app)

    expected = {"config/sagestack.yaml"} | {
        f"config/envs/{env}.{kind}" for env in ENVS for kind in ("yaml", "lock.json", "quotas.json")
    }
    assert set(reads) == expected, f"config files read: {sorted(reads)}"
    twice = {path: n for path, n in reads.items() if n > 1}
    assert not twice, f"read more than once in one synth: {twice}"
