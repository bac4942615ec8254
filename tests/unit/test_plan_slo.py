"""`sagestack plan` names each endpoint's performance target: the example's `digits` (p95 20 ms, p99
50 ms at 100 requests/s; candidates ml.c5.large, ml.c5.xlarge, ml.c5.2xlarge) with the catalog's
on-demand $/h, which serves today, and the commands that measure it and show the verdict — in a pipe
at 80 columns, offline (no AWS call), and the same in --json."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.core.catalog.instances import instance_type
from tests.conftest import REPO


def _piped(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # no credentials, and an endpoint nothing listens on: a call to AWS would fail loudly
    env |= {"COLUMNS": "80", "PYTHONPATH": str(REPO), "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true"}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "sagestack.cli", "plan", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _section(lines: list[str]) -> list[str]:
    """From the section's title to the next section's (Sizing, in the example)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Performance targets (slo:)"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("Sizing", "lock:")))
    return lines[start:end]


def test_plan_shows_digits_target_candidates_prices_and_how_to_measure_in_a_pipe_at_80():
    done = _piped(REPO, "--env", "dev")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    section = [line.rstrip() for line in _section(lines)]
    xlarge, xxlarge = (instance_type(t).price_per_hour for t in ("ml.c5.xlarge", "ml.c5.2xlarge"))
    assert section == [
        "Performance targets (slo:): candidates at on-demand $/h, measured in the cloud",
        "endpoint  candidate             $/h  measured",
        "─────────────────────────────────────────────",
        "digits    ml.c5.large           n/a  yes",
        f"          ml.c5.xlarge (now)  ${xlarge:.2f}  yes",
        f"          ml.c5.2xlarge       ${xxlarge:.2f}  yes",
        "",
        "  digits: target p95 ≤ 20 ms, p99 ≤ 50 ms at 100 requests/s per instance",
        "  digits: n/a: no catalog price for ml.c5.large; the job measures its cost",
        "  digits: measure with `sagestack run digits --env dev --recommend`, then",
        "    `sagestack recommend digits --env dev` shows the verdict",
        "  digits: measured again on each approved version (slo.on_registration)",
        "  chat: target TTFT ≤ 500 ms, ≥ 30 tokens/s per user, 512 tokens in, 128 out",
        "  chat: not deployed in dev (deploy: false): measured where it is deployed",
    ]
    # the commands, pasted, are what `run --recommend` and `recommend` take
    quoted = [part for line in section for part in line.split("`")[1::2]]
    assert quoted == ["sagestack run digits --env dev --recommend", "sagestack recommend digits --env dev"]
    for command in quoted:
        argv = [*shlex.split(command)[1:], "--help"]
        assert CliRunner().invoke(app, argv).exit_code == 0, command


def test_an_llm_target_shows_what_bandwidth_allows_one_user(example_project):
    done = _piped(example_project.root, "--env", "staging")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    section = _section(lines)
    assert section[1].split() == [
        "endpoint",
        "candidate",
        "$/h",
        "measured",
        "bandwidth",
        "bound",
        "per",
        "user",
    ]
    chat = [line.split() for line in section if "ml.g5.2xlarge" in line or "ml.g6.2xlarge" in line]
    assert chat[0][:3] == ["chat", "ml.g5.2xlarge", "(now)"] and chat[0][-6:-4] == ["≤", "300"]
    assert "  chat: measure with `sagestack run chat --env staging --recommend`, then" in section


def test_plan_json_carries_the_section_and_calls_no_aws(monkeypatch):
    from botocore.client import BaseClient

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("plan called AWS")

    monkeypatch.setattr(BaseClient, "_make_api_call", refuse)
    result = CliRunner().invoke(
        app, ["plan", "--env", "dev", "--quotas", "off", "--json", "--root", str(REPO)]
    )
    assert result.exit_code == 0, result.output
    slo = json.loads(result.output)["slo"]
    assert list(slo) == ["digits", "chat"]
    digits = slo["digits"]
    assert digits["slo"] == {
        "p95_ms": 20.0,
        "p99_ms": 50.0,
        "requests_per_second": 100.0,
        "candidates": ["ml.c5.large", "ml.c5.xlarge", "ml.c5.2xlarge"],
        "on_registration": True,  # config/envs/dev.yaml
    }
    assert [(c["instance_type"], c["price_per_hour"], c["serves_now"]) for c in digits["candidates"]] == [
        ("ml.c5.large", None, False),
        ("ml.c5.xlarge", instance_type("ml.c5.xlarge").price_per_hour, True),
        ("ml.c5.2xlarge", instance_type("ml.c5.2xlarge").price_per_hour, False),
    ]
    assert digits["measure"] == "sagestack run digits --env dev --recommend"
    assert digits["job"].startswith("digits-dev-digits-") and digits["job"].endswith("-v<version>")
    assert slo["chat"]["deployed"] is False and slo["chat"]["candidates"] == []


@pytest.mark.parametrize("target", [{"p95_ms": 20}, {"requests_per_second": 50}])
def test_the_target_reads_as_given(target):
    from sagestack.endpoints.models import SloSpec
    from sagestack.ops.report_slo import target_text

    text = target_text(SloSpec.model_validate(target))
    assert (
        text
        == {"p95_ms": "p95 ≤ 20 ms", "requests_per_second": "50 requests/s per instance"}[next(iter(target))]
    )
