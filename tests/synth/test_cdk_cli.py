"""The real `cdk synth` (Node CLI + app.py) on the example project, then cfn-lint on every template."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

CDK = REPO / "node_modules" / ".bin" / "cdk"


def cdk_synth(cwd: Path, outdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    for credential in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.pop(credential, None)  # synth must not need an account
    return subprocess.run(
        [str(CDK), "synth", "--quiet", "--no-notices", "-o", str(outdir), *extra],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def synthesis(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    if not CDK.exists():
        pytest.fail("node_modules/.bin/cdk is missing: run `make setup` (npm ci)")
    out = tmp_path_factory.mktemp("cdk-cli") / "cdk.out"
    result = cdk_synth(REPO, out)
    assert result.returncode == 0, result.stderr[-3000:]
    return out, result


@pytest.fixture(scope="module")
def synthesized(synthesis) -> Path:
    return synthesis[0]


def test_the_synth_uses_no_deprecated_cdk_api(synthesis):
    # jsii prints "[WARNING] aws-cdk-lib.X is deprecated ..." on the user's every synth
    assert "is deprecated" not in synthesis[1].stderr, synthesis[1].stderr[-3000:]


def test_every_environment_is_synthesized(synthesized):
    stacks = sorted(
        json.loads(p.read_text())["Description"].split(":")[0]
        for p in synthesized.glob("assembly-*/*.template.json")
    )
    assert stacks == [
        f"sagestack digits-{env}" for env in ("dev",) * 3 + ("prod",) * 4 + ("staging",) * 5
    ]  # foundation and training everywhere; serving where a model package is pinned (prod) or the
    # LLM endpoint deploys (staging), with its LLM's optimization pipeline (staging); recommendation
    # everywhere an endpoint with an slo: deploys (digits everywhere, chat in staging)
    names = {
        p.name.split("Foundation")[0]
        .split("Training")[0]
        .split("Serving")[0]
        .split("Optimization")[0]
        .split("Recommendation")[0]
        for p in synthesized.glob("assembly-*/*.template.json")
    }
    assert names == {"dev", "prod", "staging"}


def test_cfn_lint_finds_nothing_in_any_template(synthesized):
    templates = sorted(str(p) for p in synthesized.glob("assembly-*/*.template.json"))
    assert templates
    code, output = cfn_lint([*templates])
    assert code == 0, output


def test_validation_report_has_no_violation(synthesized):
    from sagestack.constructs.nag import unacknowledged_findings

    assert (synthesized / "validation-report.json").exists()
    assert unacknowledged_findings(synthesized) == []


def test_invalid_spec_fails_the_synth_with_its_location(tmp_path):
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO / name, tmp_path / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    spec = tmp_path / "config" / "sagestack.yaml"
    text = spec.read_text().replace("ml.g5.2xlarge", "ml.g5.2xlarg", 1)
    spec.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "ml.g5.2xlarg," in row)
    result = cdk_synth(tmp_path, tmp_path / "cdk.out")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert (
        f"config/sagestack.yaml:{line}:21: jobs.classifier.instance_type[0]: 'ml.g5.2xlarg' is not a SageMaker "
        "training job instance type; did you mean 'ml.g5.2xlarge'?"
    ) in result.stderr


def test_a_short_quota_fails_the_synth_with_the_plan_message(tmp_path):
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO / name, tmp_path / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    quotas = [
        {"QuotaName": "ml.g4dn.xlarge for training job usage", "QuotaCode": "L-G4DN", "Value": 0},
        {"QuotaName": "ml.m5.xlarge for training job usage", "QuotaCode": "L-M5", "Value": 0},
    ]
    (tmp_path / "config/envs/dev.quotas.json").write_text(json.dumps({"quotas": quotas, "usage": {}}))
    result = cdk_synth(tmp_path, tmp_path / "cdk.out", "-c", "sagestack:environments=dev")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "exited with error 3" in result.stderr
    assert (
        "job 'classifier' needs 1 of 'ml.g4dn.xlarge for training job usage' (L-G4DN); the account allows 0"
    ) in result.stderr
    assert "--quota-code L-G4DN --desired-value 1" in result.stderr
    off = cdk_synth(
        tmp_path, tmp_path / "cdk.out.off", "-c", "sagestack:environments=dev", "-c", "sagestack:quotas=off"
    )
    assert off.returncode == 0, off.stderr[-2000:]


def _copy_project(dest: Path) -> Path:
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO / name, dest / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(REPO / folder, dest / folder)
    return dest


def sagestack_synth(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for credential in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.pop(credential, None)
    return subprocess.run(
        [str(Path(sys.executable).parent / "sagestack"), "synth", "--root", str(root), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cdk_synth_exits_1_whatever_the_app_says_and_sagestack_synth_keeps_the_code(tmp_path):
    """The README's exit codes: `cdk synth` turns the app's 2/3/4 into 1; `sagestack synth` keeps them."""
    root = _copy_project(tmp_path)
    spec = root / "config" / "sagestack.yaml"
    spec.write_text(spec.read_text().replace("ml.g5.2xlarge", "ml.g5.2xlarg", 1))
    assert cdk_synth(root, root / "cdk.out").returncode == 1
    invalid = sagestack_synth(root)
    assert invalid.returncode == 2, invalid.stderr[-2000:]
    assert "'ml.g5.2xlarg' is not a SageMaker training job instance type" in invalid.stderr
    assert "Traceback" not in invalid.stderr


def test_sagestack_synth_exit_codes_for_quota_and_lock(tmp_path):
    root = _copy_project(tmp_path)
    ok = sagestack_synth(root, "-c", "sagestack:environments=dev", "-c", "sagestack:locked=true")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert list((root / "cdk.out").glob("assembly-*/*.template.json"))
    spec = root / "config" / "sagestack.yaml"
    spec.write_text(spec.read_text().replace("instance_count: 1", "instance_count: 2", 1))
    locked = sagestack_synth(root, "-c", "sagestack:environments=dev", "-c", "sagestack:locked=true")
    assert locked.returncode == 4, locked.stderr[-2000:]
    quotas = [
        {"QuotaName": "ml.g4dn.xlarge for training job usage", "QuotaCode": "L-G4DN", "Value": 0},
        {"QuotaName": "ml.m5.xlarge for training job usage", "QuotaCode": "L-M5", "Value": 0},
    ]
    (root / "config/envs/dev.quotas.json").write_text(json.dumps({"quotas": quotas, "usage": {}}))
    short = sagestack_synth(root, "-c", "sagestack:environments=dev")
    assert short.returncode == 3, short.stderr[-2000:]


def test_a_hostile_spec_fails_the_synth_with_its_location_not_a_traceback(tmp_path):
    root = _copy_project(tmp_path)
    (root / "config" / "sagestack.yaml").write_bytes(b"project: digits\nregion: caf\xe9\n")
    result = sagestack_synth(root)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "config/sagestack.yaml:2:12: (top level): the file is not UTF-8 (byte 0xe9)" in result.stderr
    assert "Traceback" not in result.stderr
