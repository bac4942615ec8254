"""The CLI's conventions, as users of cdk, aws, git and ruff expect them: --version, -h, shell
completion, --json wherever a table is printed, --help that reads well at 80 columns with examples
that work as printed, each spec error once with a source excerpt, and a CLI typo as a CLI error."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.conftest import MINIMAL, REPO

SAGESTACK = Path(sys.executable).parent / "sagestack"


def run_cli(*args: str, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "COLUMNS": "80", "TERM": "dumb", **env}
    return subprocess.run(
        [sys.executable, "-m", "sagestack.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )


def every_command() -> list[list[str]]:
    """The path of every command and group: [], ['validate'], ['local', 'train'], …"""
    from typer.main import get_command

    from sagestack.cli import app

    found: list[list[str]] = []

    def walk(cmd, path):  # type: ignore[no-untyped-def]
        found.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(get_command(app), [])
    return found


def help_text(path: list[str]) -> str:
    from typer.testing import CliRunner

    from sagestack.cli import app

    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"}, prog_name="sagestack")
    assert result.exit_code == 0, (path, result.output)
    return result.output


# ---------------------------------------------------------------- 1. --version, -h, completion


def test_version_names_sagestack_and_the_cdk_and_botocore_it_runs_with():
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert line.startswith(f"sagestack {version('sagestack')} ")
    assert f"aws-cdk-lib {version('aws-cdk-lib')}" in line
    assert f"botocore {version('botocore')}" in line
    assert f"Python {sys.version_info.major}.{sys.version_info.minor}" in line


def test_h_is_help_on_every_command():
    paths = every_command()
    assert ["local", "train"] in paths and ["capacity", "offerings"] in paths
    for path in paths:
        assert "Usage: sagestack" in help_text(path), path


def test_show_completion_prints_a_bash_script_for_the_sagestack_command():
    result = subprocess.run(
        [str(SAGESTACK), "--show-completion", "bash"],
        capture_output=True,
        text=True,
        env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "complete " in result.stdout and "sagestack" in result.stdout
    assert "_SAGESTACK_COMPLETE=complete_bash" in result.stdout


def test_help_and_version_import_nothing_heavy():
    """`sagestack --help` stays fast: no cloud SDK, CDK, torch or pydantic at start-up."""
    heavy = ("aws_cdk", "jsii", "torch", "boto3", "botocore", "sagemaker", "pydantic", "rich")
    for args in (["--help"], ["--version"], ["-h"]):
        code = (
            "import sys; from typer.testing import CliRunner; from sagestack.cli import app; "
            f"CliRunner().invoke(app, {args!r}); print([m for m in {heavy!r} if m in sys.modules])"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
        )
        assert out.stdout.strip() == "[]", args
    # a command's help: typer itself reads its parameters with pydantic, nothing more
    code = (
        "import sys; from typer.testing import CliRunner; from sagestack.cli import app; "
        "CliRunner().invoke(app, ['local', 'train', '-h']); "
        f"print([m for m in {heavy[:-2]!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- 3. --help at 80 columns


def test_every_help_reads_well_at_80_columns():
    for path in every_command():
        text = help_text(path)
        where = " ".join(["sagestack", *path])
        assert all(len(line) <= 80 for line in text.splitlines()), where
        cut = [x for x in text.splitlines() if re.search(r"\w(…|\.\.\.)$", x.rstrip())]
        assert not cut, (where, cut)
        assert not re.search(r"<bool>|BOOLEAN|<list\[", text), where
        assert "Examples:" in text, where
    train = help_text(["local", "train"])
    assert ".sagestack/local/<env>/<job>" in train  # the default, whole
    assert "--fresh " in train and "--fresh <" not in train
    serve = help_text(["local", "serve"])
    assert "[default: 8080]" in serve  # a default is never split over two lines
    assert "--to ENV" in help_text(["promote"]) and "--env ENV" in help_text(["run"])


def test_no_word_of_a_commands_help_is_cut_at_80_columns():
    """Each word of each command's summary appears whole in `sagestack --help`."""
    from typer.main import get_command

    from sagestack.cli import app

    text = help_text([])
    words = set(text.split())
    for name, cmd in get_command(app).commands.items():  # type: ignore[attr-defined]
        summary = cmd.short_help or (cmd.help or "").split("\n\n")[0]
        missing = [w for w in summary.split() if w not in words]
        assert not missing, (name, missing)


def examples() -> list[tuple[list[str], str]]:
    from sagestack.cli.examples import EXAMPLES

    return [(path, line) for path, entry in EXAMPLES.items() for line, _ in entry.rows]


def test_every_command_has_examples_whose_options_exist():
    """Each printed example parses as the command it is shown under (options and arguments exist)."""
    from typer.main import get_command

    from sagestack.cli import app
    from sagestack.cli.examples import EXAMPLES

    root = get_command(app)
    assert {" ".join(p) for p in every_command()} <= set(EXAMPLES)
    paths = every_command()
    groups = {" ".join(p) for p in paths if any(q[: len(p)] == p and len(q) > len(p) for q in paths)}
    for key, line in examples():
        words = shlex.split(line)
        assert words[0] == "sagestack", line
        cmd, args, names = root, words[1:], ["sagestack"]
        while hasattr(cmd, "commands") and args and args[0] in cmd.commands:  # type: ignore[attr-defined]
            names.append(args[0])
            cmd, args = cmd.commands[args[0]], args[1:]  # type: ignore[attr-defined]
        shown_under = " ".join(names[1:])
        assert shown_under == key or (key in groups and shown_under.startswith(key)), (key, line)
        if "-h" in args:  # help: the option exists (inherited from the root's settings)
            assert "-h" in root.context_settings["help_option_names"], line
        elif not hasattr(cmd, "commands"):
            cmd.make_context(names[-1], list(args), resilient_parsing=False)


@pytest.mark.parametrize(
    "line",
    [
        "sagestack validate",
        "sagestack validate --env dev --json",
        "sagestack rules",
        "sagestack rules --explain image-reference",
        "sagestack render classifier --env dev",
        "sagestack plan --env dev --quotas off",
    ],
)
def test_offline_examples_work_as_printed_on_the_example_project(line):
    from sagestack.cli.examples import EXAMPLES

    assert line in {row[0] for entry in EXAMPLES.values() for row in entry.rows}
    result = run_cli(*shlex.split(line)[1:])
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- 4. rules at 80 columns


def test_rules_table_fits_80_columns_without_cutting_a_word():
    from sagestack.project.rules import RULES

    result = run_cli("rules")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert re.search(r"\brule\b.*\bseverity\b.*\bchecks\b", " ".join(lines[:2]))  # the headers
    words = set(result.stdout.split())
    for r in RULES.values():
        assert r.id in words
        assert all(w in words for w in r.summary.split()), r.id


# ---------------------------------------------------------------- 2. --json


def test_rules_json_is_every_rule_with_why_and_fix():
    from sagestack.project.rules import RULES

    result = run_cli("rules", "--json")
    assert result.returncode == 0
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == list(RULES)
    assert set(rows[0]) == {"id", "severity", "summary", "why", "fix"}


def test_validate_json_on_the_example_project():
    result = run_cli("validate", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    envs = {e["environment"]: e for e in doc["environments"]}
    assert set(envs) == {"dev", "staging", "prod"} and doc["ok"] is True
    assert envs["dev"]["ok"] and envs["dev"]["counts"]["jobs"] >= 1 and envs["dev"]["errors"] == []


def test_validate_json_gives_located_errors_on_stdout_and_exit_2(project):
    project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.m5.xlarg")).env("dev").env("prod")
    result = run_cli("validate", "--json", "--root", str(project.root))
    assert result.returncode == 2 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    issues = doc["issues"]
    assert len(issues) == 1  # once, though two environments load it
    issue = issues[0]
    assert issue == {
        "file": "config/sagestack.yaml",
        "line": 8,
        "column": 20,
        "key": "jobs.classifier.instance_type[0]",
        "severity": "error",
        "message": issue["message"],
        "suggestion": "ml.m5.xlarge",
        "rule": None,
        "environments": ["dev", "prod"],
    }
    assert "ml.m5.xlarg" in issue["message"]


def test_a_spec_error_is_json_on_stdout_for_plan_too(project):
    project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.m5.xlarg")).env("dev")
    result = run_cli("plan", "--env", "dev", "--json", "--root", str(project.root))
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["issues"][0]["line"] == 8


def test_check_json_without_credentials(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), AWS_EC2_METADATA_DISABLED="true", COLUMNS="80")
    result = subprocess.run(
        [sys.executable, "-m", "sagestack.cli", "check", "--env", "dev", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["credentials"]["ok"] is False and checks["quotas"]["ok"] is None
    assert doc["environment"] == "dev" and doc["ok"] is False


# ---------------------------------------------------------------- 5. each error once, with an excerpt


def test_validate_reports_a_project_file_error_once_naming_the_environments(project):
    project.spec(MINIMAL.replace("ml.m5.xlarge", "[ml.m5.xlarg]")).env("dev").env("staging").env("prod")
    result = run_cli("validate", "--root", str(project.root))
    assert result.returncode == 2
    err = result.stderr
    head = "config/sagestack.yaml:8:21: error: jobs.classifier.instance_type[0]:"
    assert err.count(head) == 1, err
    line = next(x for x in err.splitlines() if x.startswith(head))
    assert line.endswith("(in dev, prod, staging)")
    lines = err.splitlines()
    at = lines.index(line)
    assert lines[at + 1 : at + 4] == [
        "  |",
        "8 |     instance_type: [ml.m5.xlarg]",
        "  |                     ^^^^^^^^^^^",
    ]


def test_an_overlay_error_names_its_one_environment(project):
    project.spec().env("dev").env("prod", "region: us-est-1\n")
    result = run_cli("validate", "--root", str(project.root))
    assert result.returncode == 2
    assert "config/envs/prod.yaml:1:9: error: region: " in result.stderr
    assert "(in prod)" in result.stderr and "(in dev" not in result.stderr
    assert "1 | region: us-est-1\n  |         ^^^^^^^^" in result.stderr


def test_every_command_prints_spec_errors_with_the_excerpt(project):
    project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.m5.xlarg")).env("dev")
    result = run_cli("plan", "--env", "dev", "--root", str(project.root))
    assert result.returncode == 2
    assert "config/sagestack.yaml:8:20: error: jobs.classifier.instance_type[0]:" in result.stderr
    assert "8 |     instance_type: ml.m5.xlarg\n  |                    ^^^^^^^^^^^" in result.stderr


def test_the_excerpt_underlines_a_quoted_value_and_a_key():
    from sagestack.core.errors import Location, SpecIssue, source_excerpt

    text = 'a:\n  b: "x y" # c\n  kee: 1\n'
    quoted = SpecIssue("m", ("a", "b"), Location("f.yaml", 2, 6))
    assert source_excerpt(quoted, text)[-1] == "  |      ^^^^^"
    key = SpecIssue("m", ("a", "kee"), Location("f.yaml", 3, 3))
    assert source_excerpt(key, text)[-1] == "  |   ^^^"
    assert source_excerpt(SpecIssue("m", (), Location("f.yaml", 9, 1)), text) == []


# ---------------------------------------------------------------- 6. a CLI typo is a CLI error


@pytest.mark.parametrize("command", [["validate"], ["plan"], ["render", "classifier"]])
def test_an_env_typo_is_a_cli_error(command):
    result = run_cli(*command, "--env", "dve")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "sagestack: --env dve: no environment 'dve' (did you mean 'dev'?); config/envs/ has dev, prod, "
        "staging"
    )


def test_capacity_offerings_json_is_the_offerings_sagemaker_returned(project, monkeypatch):
    """SearchTrainingPlanOfferings answered by botocore's Stubber (request and response checked
    against SageMaker's service model); --json prints the rows, the table's source, on stdout."""
    import datetime

    import boto3
    from botocore.stub import Stubber
    from typer.testing import CliRunner

    from sagestack.cli import app
    from sagestack.ops import account

    project.spec(MINIMAL.replace("ml.m5.xlarge", "[ml.p5.48xlarge, ml.m5.xlarge]")).env("dev")
    client = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    stubber = Stubber(client)
    start = datetime.datetime(2027, 1, 15, 8, tzinfo=datetime.UTC)
    stubber.add_response(
        "search_training_plan_offerings",
        {
            "TrainingPlanOfferings": [
                {
                    "TrainingPlanOfferingId": "tpo-1",
                    "TargetResources": ["training-job"],
                    "DurationHours": 24,
                    "UpfrontFee": "2400",
                    "CurrencyCode": "USD",
                    "ReservedCapacityOfferings": [
                        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "StartTime": start}
                    ],
                }
            ]
        },
        {
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 1,
            "DurationHours": 24,
            "TargetResources": ["training-job"],
        },
    )
    real = account.training_plan_offerings
    monkeypatch.setattr(account, "training_plan_offerings", lambda *a, **k: real(*a, **k, client=client))
    with stubber:
        result = CliRunner().invoke(
            app, ["capacity", "offerings", "classifier", "--json", "--root", str(project.root)]
        )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["unoffered"] == ["ml.m5.xlarge"] and doc["environment"] == "dev"
    (row,) = doc["offerings"]
    assert row["OfferingId"] == "tpo-1" and row["InstanceType"] == "ml.p5.48xlarge"
    assert row["StartTime"].startswith("2027-01-15T08:00")


def test_in_a_terminal_a_long_error_wraps_at_spaces_and_in_a_pipe_stays_one_line(project):
    """An 80-column terminal would cut the headline mid-word: it is wrapped at spaces there; a pipe
    (an editor, a CI log) gets the one `file:line:col: error: …` line."""
    import pty

    project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.m5.xlarg")).env("dev")
    args = [sys.executable, "-m", "sagestack.cli", "validate", "--root", str(project.root)]
    env = {**os.environ, "COLUMNS": "80", "LINES": "24"}
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(args, stdout=secondary, stderr=secondary, env=env, cwd=REPO)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert proc.wait(timeout=120) == 2
    screen = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode()).replace("\r\n", "\n")
    lines = screen.splitlines()
    assert all(len(line) <= 80 for line in lines), screen
    first = next(i for i, line in enumerate(lines) if line.startswith("config/sagestack.yaml:8:20: error: "))
    assert lines[first + 1].startswith("    ")  # the message goes on, indented
    words = " ".join(lines[first:]).split()
    assert "'ml.m5.xlarg'" in words and "'ml.m5.xlarge'?" in words  # no word cut
    piped = run_cli("validate", "--root", str(project.root))
    assert any(
        line.startswith("config/sagestack.yaml:8:20: error: ") and line.endswith("(in dev)")
        for line in piped.stderr.splitlines()
    )


def test_local_monitor_json_is_the_report_it_writes(tmp_path):
    """`local monitor --json`: the verdict and the violations (the table's rows), stdout alone."""
    import shutil

    from tests.training_src.test_local_monitor import _capture, _digits

    root = tmp_path / "p"
    for part in ("config", "training_src", "containers"):
        shutil.copytree(REPO / part, root / part)
    capture = root / ".sagestack/local/dev/s3/sagestack-local/capture/digits/digits-dev-digits"
    _capture(tmp_path, _digits()[:200] * 0.0 + 1.0, folder=capture)
    args = ["local", "monitor", "digits", "--env", "dev", "--sample-baseline", "300", "--json"]
    result = run_cli(*args, "--root", str(root))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["status"] == "CompletedWithViolations" and doc["baseline"]["records"] == 300
    assert doc["captured"]["records"] == 200 and doc["violations"]
    written = json.loads((Path(doc["captured"]["report"]) / "constraint_violations.json").read_text())
    assert written["violations"] == doc["violations"]


def test_local_serve_predict_json_is_the_answers(tmp_path):
    """`local serve --predict N --json`: the model served with the SageMaker contract, N samples
    sent, each answer a row of one JSON document on stdout."""
    import socket

    from tests.support.digits_model import make_model_dir

    model = make_model_dir(tmp_path / "model")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [
        "local",
        "serve",
        "digits",
        "--model",
        str(model),
        "--port",
        str(port),
        "--predict",
        "3",
        "--json",
    ]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["url"] == f"http://127.0.0.1:{port}/invocations"
    assert [r["sample"] for r in doc["predictions"]] == [0, 1, 2]
    assert all(0 <= r["predicted"] <= 9 and 0 <= r["probability"] <= 1 for r in doc["predictions"])


def test_quota_snapshot_json_is_the_table_of_quotas_the_spec_uses(project, monkeypatch):
    """The account read from a moto server (STS, SageMaker's usage); ListServiceQuotas, which moto
    lacks, answered by botocore's Stubber (checked against the service's model)."""
    import boto3
    from botocore.stub import Stubber
    from typer.testing import CliRunner

    from sagestack.cli import app
    from sagestack.core.catalog.quotas import quota_name
    from sagestack.ops import account
    from tests.support.moto_server import ACCOUNT, running_moto

    project.spec().env("dev")
    name = quota_name("ml.m5.xlarge", "training")
    quotas = boto3.client(
        "service-quotas", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
    )
    stubber = Stubber(quotas)
    listed = {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": "L-M5", "Value": 4.0}
    stubber.add_response(
        "list_service_quotas", {"Quotas": [listed]}, {"ServiceCode": "sagemaker", "MaxResults": 100}
    )
    real = account.list_quotas
    monkeypatch.setattr(account, "list_quotas", lambda region, client=None: real(region, client=quotas))
    with running_moto() as moto:
        for key, value in {
            "AWS_ENDPOINT_URL": moto.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }.items():
            monkeypatch.setenv(key, value)
        with stubber:
            result = CliRunner().invoke(app, ["quota", "snapshot", "--json", "--root", str(project.root)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["environment"] == "dev" and doc["file"].endswith("config/envs/dev.quotas.json")
    assert {"quota": name, "code": "L-M5", "value": 4.0, "in_use": 0} in doc["quotas"]
    saved = json.loads((project.root / "config/envs/dev.quotas.json").read_text())
    assert saved["account"] == ACCOUNT and saved["quotas"][0]["QuotaCode"] == "L-M5"
