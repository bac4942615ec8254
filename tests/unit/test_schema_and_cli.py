"""The JSON Schema files and the `sagestack` command as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from sagestack.project.schema import schema_texts
from tests.conftest import MINIMAL, REPO


def run_cli(*args: str, cwd=REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagestack.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_committed_schemas_are_current():
    for name, text in schema_texts().items():
        assert (REPO / "schema" / name).read_text() == text, f"run `sagestack schema` to refresh {name}"


def _yaml(path):
    return YAML(typ="safe").load(path.read_text())


def test_example_config_matches_its_schema():
    schema = json.loads((REPO / "schema/sagestack.schema.json").read_text())
    jsonschema.validate(_yaml(REPO / "config/sagestack.yaml"), schema)
    env_schema = json.loads((REPO / "schema/sagestack.env.schema.json").read_text())
    for overlay in (REPO / "config/envs").glob("*.yaml"):
        jsonschema.validate(_yaml(overlay), env_schema)


def test_schema_rejects_unknown_keys():
    schema = json.loads((REPO / "schema/sagestack.schema.json").read_text())
    data = _yaml(REPO / "config/sagestack.yaml")
    data["jobs"]["classifier"]["instance_typo"] = "ml.m5.xlarge"
    with pytest.raises(jsonschema.ValidationError, match="instance_typo"):
        jsonschema.validate(data, schema)


def test_example_config_references_the_schema():
    first = (REPO / "config/sagestack.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schema/sagestack.schema.json"


def test_validate_passes_on_the_example_project():
    result = run_cli("validate")
    assert result.returncode == 0, result.stderr
    verdicts = [line.split(":")[0] for line in result.stdout.splitlines() if not line.startswith(" ")]
    assert verdicts == ["✓ dev", "✓ prod", "✓ staging"]


def test_validate_exits_2_with_every_error_and_no_traceback(project):
    project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.m5.xl").replace("us-east-1", "us-est-1"))
    result = run_cli("validate", "--root", str(project.root))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "config/sagestack.yaml:2:9: error: region: 'us-est-1'" in result.stderr
    assert "config/sagestack.yaml:8:20: error: jobs.classifier.instance_type[0]: 'ml.m5.xl'" in result.stderr


def test_validate_unknown_env_exits_2(project):
    project.spec().env("dev")
    result = run_cli("validate", "--env", "prod", "--root", str(project.root))
    assert (
        result.returncode == 2
        and "no environment 'prod'" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_missing_project_file_is_a_clear_error(tmp_path):
    result = run_cli("validate", "--root", str(tmp_path))
    assert result.returncode == 2
    assert "cannot read config/sagestack.yaml: No such file or directory" in result.stderr


def test_schema_check_detects_stale_files(tmp_path):
    assert run_cli("schema", "--output", str(tmp_path)).returncode == 0
    assert run_cli("schema", "--check", "--output", str(tmp_path)).returncode == 0
    (tmp_path / "sagestack.schema.json").write_text("{}")
    stale = run_cli("schema", "--check", "--output", str(tmp_path))
    assert stale.returncode == 1 and "out of date" in stale.stderr


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys; from typer.testing import CliRunner; from sagestack.cli import app; "
        "CliRunner().invoke(app, ['--help']); "
        "print([m for m in ('aws_cdk', 'torch', 'boto3', 'sagemaker.core', 'pydantic') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_plan_imports_neither_cdk_nor_torch_nor_boto3_offline(tmp_path):
    code = (
        "import sys; from typer.testing import CliRunner; from sagestack.cli import app; "
        "r = CliRunner().invoke(app, ['plan', '--env', 'dev', '--quotas', 'auto']); "
        "assert r.exit_code == 0, r.output; "
        "print([m for m in ('aws_cdk', 'torch', 'boto3', 'sagemaker.core', 'jsii') if m in sys.modules])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = str(tmp_path)  # no ~/.aws: offline, so the snapshot (or nothing) is used
    env.setdefault("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_every_rule_explains_itself():
    """Each rule is declared with its explanation (cdk-nag's NagRules): why it exists, what to do."""
    from sagestack.project.rules import RULES

    for rule_id, r in RULES.items():
        assert len(r.why) > 40 and len(r.fix) > 20, rule_id


def test_a_rule_without_an_explanation_is_not_registered():
    from sagestack.core.rules import RULES, rule

    with pytest.raises(TypeError):
        rule("unexplained", "error", "checks nothing")  # type: ignore[call-arg]
    for why, fix in (("", "Do this."), ("It matters.", " ")):
        with pytest.raises(ValueError, match="needs an explanation"):
            rule("unexplained", "error", "checks nothing", why=why, fix=fix)
    assert "unexplained" not in RULES


def test_rules_explain_prints_why_and_what_to_do_and_suggests_on_a_typo():
    from typer.testing import CliRunner

    from sagestack.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["rules", "--explain", "spot-checkpoint"])
    assert out.exit_code == 0
    assert "Why: A spot job can be interrupted" in out.stdout and "What to do:" in out.stdout
    typo = run_cli("rules", "--explain", "spot-chekpoint")
    assert typo.returncode == 2
    assert "did you mean 'spot-checkpoint'" in typo.stderr


def test_the_repository_cdk_json_sets_the_flags_init_writes():
    import json

    from sagestack.ops.init import RECOMMENDED_CONTEXT

    assert json.loads((REPO / "cdk.json").read_text())["context"] == RECOMMENDED_CONTEXT
