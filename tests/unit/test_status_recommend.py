"""`sagestack status` shows each endpoint's latest recommendation against a moto server: the
recommendation pipeline is a state machine of the pipeline's own name whose run ends with the output
the real pipeline leaves (the job's name, kind, candidates, the package measured and Inference
Recommender's answer — tests/pipeline/test_recommendation_moto.py runs the real one); a verdict
recorded, none, a stale one (a version approved since), a run failed since, a read refused, and
how many reads it takes. Screens at 80 columns, --json with the same data."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.cli.status import render
from tests.support.moto_server import ACCOUNT, REGION, running_moto

ROLE = f"arn:aws:iam::{ACCOUNT}:role/pipeline"
MACHINE = "digits-dev-recommend-digits"
GROUP = "digits-dev"
JOB = "digits-dev-digits-0123456789ab-v1"
MEASURED = {  # instance type -> (p95 ms, invocations per minute, $ per inference)
    "ml.c5.large": (18, 6600, 2.0e-6),
    "ml.c5.xlarge": (14, 7800, 2.2e-6),
    "ml.c5.2xlarge": (9, 15000, 2.3e-6),
}


@pytest.fixture(scope="module")
def moto():
    with running_moto() as server:
        yield server


@pytest.fixture
def aws(moto, monkeypatch, example_project):  # type: ignore[no-untyped-def]
    moto.reset()
    for name, value in (
        ("AWS_ENDPOINT_URL", moto.url),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", REGION),
    ):
        monkeypatch.setenv(name, value)
    moto.client("sagemaker").create_model_package_group(ModelPackageGroupName=GROUP)
    return example_project


def _approve(moto) -> str:  # type: ignore[no-untyped-def]
    return moto.client("sagemaker").create_model_package(
        ModelPackageGroupName=GROUP,
        ModelApprovalStatus="Approved",
        InferenceSpecification={
            "Containers": [{"Image": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/x:1"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
    )["ModelPackageArn"]


def recorded_output(package: str, measured: dict[str, tuple[int, int, float]]) -> dict[str, Any]:
    """What the pipeline's last state leaves (recommend_states._output): the verdict's inputs."""
    return {
        "JobName": JOB,
        "Endpoint": "digits",
        "Kind": "classic",
        "Candidates": list(MEASURED),
        "ModelPackage": package,
        "ModelPackageVersion": package.rsplit("/", 1)[-1],
        "InferenceRecommendations": [
            {
                "RecommendationId": f"r{i}",
                "Metrics": {
                    "CostPerHour": cost * per_minute * 60,
                    "CostPerInference": cost,
                    "MaxInvocations": per_minute,
                    "ModelLatency": latency,
                },
                "EndpointConfiguration": {
                    "EndpointName": f"sm-epc-{i}",
                    "VariantName": "AllTraffic",
                    "InstanceType": instance,
                    "InitialInstanceCount": 1,
                },
                "ModelConfiguration": {},
            }
            for i, (instance, (latency, per_minute, cost)) in enumerate(measured.items())
        ],
    }


def _machine(moto, state: dict[str, Any]) -> str:  # type: ignore[no-untyped-def]
    definition = json.dumps({"StartAt": "End", "States": {"End": state}})
    # moto's ASL parser reads no exponent (2e-06): the same number in decimals
    definition = re.sub(r"\d+(\.\d+)?e-\d+", lambda m: f"{float(m.group()):.12f}", definition)
    sfn = moto.client("stepfunctions")
    found = [m for m in sfn.list_state_machines()["stateMachines"] if m["name"] == MACHINE]
    if found:
        sfn.update_state_machine(stateMachineArn=found[0]["stateMachineArn"], definition=definition)
        return str(found[0]["stateMachineArn"])
    return str(sfn.create_state_machine(name=MACHINE, definition=definition, roleArn=ROLE)["stateMachineArn"])


def _run(moto, state: dict[str, Any]) -> str:  # type: ignore[no-untyped-def]
    """One run of the pipeline, ended as `state` ends it: its status."""
    sfn = moto.client("stepfunctions")
    arn = sfn.start_execution(stateMachineArn=_machine(moto, state), name=f"run-{time.monotonic_ns()}")[
        "executionArn"
    ]
    deadline = time.monotonic() + 30
    while (status := sfn.describe_execution(executionArn=arn)["status"]) == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1.1)  # the next run starts a second later (startDate orders them)
    return str(status)


def _measured(moto, package: str, measured: dict[str, tuple[int, int, float]] = MEASURED) -> None:  # type: ignore[no-untyped-def]
    state = {"Type": "Pass", "Result": recorded_output(package, measured), "End": True}
    assert _run(moto, state) == "SUCCEEDED"


def _status(project, *args: str) -> Any:  # type: ignore[no-untyped-def]
    return CliRunner().invoke(
        app, ["status", "--env", "dev", "--root", str(project.root), *args], env={"COLUMNS": "80"}
    )


def _section(output: str) -> list[str]:
    """The recommendations section's lines, each at most 80 columns, no word cut."""
    lines = output.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(line for line in lines if len(line) > 80)
    start = lines.index("recommendations (slo:)")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start + 1 : end]


def _row(project) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    result = _status(project, "--json")
    (row,) = json.loads(result.output)["recommendations"]
    return dict(row)


def test_a_recorded_verdict_in_a_line_with_the_version_it_measured(aws, moto):
    package = _approve(moto)
    _measured(moto, package)
    result = _status(aws)
    section = _section(result.output)
    assert section[0] == "  digits ml.c5.large meets the target: 18 ms, 110 req/s, $0.0020/1k req"
    assert re.fullmatch(
        r"    measured version 1 \d\d:\d\d; table: `sagestack recommend digits --env dev`", section[1]
    ), section
    assert len(section) == 2
    row = _row(aws)
    assert row["state"] == "measured" and row["recommended"] == "ml.c5.large" and row["stale"] is None
    assert row["model_package"] == package and row["model_package_version"] == "1" and row["job"] == JOB
    assert [r["instance_type"] for r in row["rows"]] == list(MEASURED)
    assert row["rows"][0] == {
        "instance_type": "ml.c5.large",
        "latency_ms": 18.0,
        "throughput": 110.0,
        "cost": pytest.approx(0.002),
        "meets": True,
        "shortfalls": [],
    }
    # `recommend --json` carries the same rows (one function makes both)
    doc = json.loads(_status(aws, "--json").output)
    assert render(doc, 80)[1:] == _status(aws).output.splitlines()[1:]


def test_a_target_no_candidate_meets_says_so(aws, moto):
    package = _approve(moto)
    _measured(moto, package, {"ml.c5.large": (48, 2400, 2.0e-6), "ml.c5.xlarge": (35, 4100, 2.1e-6)})
    section = _section(_status(aws).output)
    assert section[0] == "  digits no candidate meets the target (2 of 3 measured)"
    assert _row(aws)["recommended"] is None


def test_never_measured_says_how_to_measure_and_not_deployed_how_to_deploy(aws, moto):
    section = _section(_status(aws).output)
    assert section == ["  digits pipeline not deployed: sagestack deploy --env dev"]
    assert _row(aws)["state"] == "not_deployed"
    _machine(moto, {"Type": "Pass", "End": True})
    section = _section(_status(aws).output)
    assert section == ["  digits never measured", "    measure: sagestack run digits --env dev --recommend"]
    assert _run(moto, {"Type": "Fail", "Error": "RecommendationCapacity", "Cause": "quota"}) == "FAILED"
    section = _section(_status(aws).output)
    assert re.fullmatch(r"  digits never measured \(a run FAILED \d\d:\d\d\)", section[0]), section
    assert section[1] == "    measure: sagestack run digits --env dev --recommend"
    row = _row(aws)
    assert row["state"] == "never_measured" and row["newer_run"]["status"] == "FAILED"
    assert row["measure"] == "sagestack run digits --env dev --recommend"


def test_a_version_approved_since_makes_the_verdict_stale(aws, moto):
    _measured(moto, _approve(moto))
    _approve(moto)  # version 2: served now (the group's newest approved), never measured
    section = _section(_status(aws).output)
    assert section == [
        "  digits ml.c5.large meets the target: 18 ms, 110 req/s, $0.0020/1k req",
        "    stale: it measured model package version 1; version 2 is served now",
        "    measure: sagestack run digits --env dev --recommend",
    ]
    assert _row(aws)["stale"] == "it measured model package version 1; version 2 is served now"


def test_a_run_failed_since_the_verdict_is_named_beside_it(aws, moto):
    _measured(moto, _approve(moto))
    assert _run(moto, {"Type": "Fail", "Error": "RecommendationJobFailed", "Cause": "x"}) == "FAILED"
    section = _section(_status(aws).output)
    assert re.fullmatch(r"    measured version 1 \d\d:\d\d; a run FAILED \d\d:\d\d since", section[1]), (
        section
    )
    assert len(section) == 2
    assert _row(aws)["newer_run"]["status"] == "FAILED"


def test_an_older_success_is_found_past_the_newest_runs(aws, moto):
    _measured(moto, _approve(moto))
    for _ in range(3):  # three failures after it: not among the newest runs listed
        assert _run(moto, {"Type": "Fail", "Error": "E", "Cause": "x"}) == "FAILED"
    row = _row(aws)
    assert row["state"] == "measured" and row["recommended"] == "ml.c5.large"


def test_a_refused_read_is_one_line_and_status_says_it(aws, moto, monkeypatch):
    """DescribeExecution refused (a role without states:DescribeExecution): the endpoint's line says
    so, the rest of the screen stands, no traceback."""
    import boto3
    from botocore.awsrequest import AWSResponse

    _measured(moto, _approve(moto))
    made = boto3.client

    def client(service, *args, **kwargs):  # type: ignore[no-untyped-def]
        c = made(service, *args, **kwargs)
        if service == "stepfunctions":
            refused = {
                "Error": {
                    "Code": "AccessDeniedException",
                    "Message": "not authorized: states:DescribeExecution",
                },
                "ResponseMetadata": {"HTTPStatusCode": 400},
            }
            c.meta.events.register(
                "before-call.sfn.DescribeExecution", lambda **_: (AWSResponse(None, 400, {}, None), refused)
            )
        return c

    monkeypatch.setattr(boto3, "client", client)
    result = _status(aws)
    assert "Traceback" not in result.output
    section = _section(result.output)
    assert " ".join(" ".join(section).split()) == (
        "digits could not read: AccessDeniedException: not authorized: states:DescribeExecution"
    )
    assert "endpoints (last hour)" in result.output  # the rest still read
    assert result.exit_code == 0  # the section says it; `status` read what it could
    row = json.loads(_status(aws, "--json").output)["recommendations"][0]
    assert row["state"] == "error" and row["error"].startswith("AccessDeniedException")


def test_status_reads_each_recommendation_once(aws, moto, monkeypatch):
    """Per endpoint one ListExecutions and one DescribeExecution; one ListStateMachines and one
    ListModelPackages for them all."""
    import boto3

    _measured(moto, _approve(moto))
    calls: Counter[str] = Counter()
    made = boto3.client

    def client(service, *args, **kwargs):  # type: ignore[no-untyped-def]
        c = made(service, *args, **kwargs)
        c.meta.events.register("before-call.*.*", lambda model, **_: calls.update([model.name]))
        return c

    monkeypatch.setattr(boto3, "client", client)
    from sagestack.ops.status import scope_of
    from sagestack.ops.status_recommend import read_recommendations
    from sagestack.ops.status_schedules import kept
    from sagestack.project import load_project, resolve_environment

    scope = scope_of(resolve_environment(load_project(aws.root, "dev")))
    assert list(scope.slos) == ["digits"]
    sfn, sm = client("stepfunctions", region_name=REGION), client("sagemaker", region_name=REGION)
    (row,) = read_recommendations(scope.names, scope.slos, sfn, sm, kept)
    assert row["state"] == "measured"
    assert calls == Counter(
        {"ListStateMachines": 1, "ListExecutions": 1, "DescribeExecution": 1, "ListModelPackages": 1}
    )


def test_an_llm_verdict_reads_in_tokens():
    """chat's row as status's document holds it: time to first token, tokens/s, $ per million tokens."""
    row = {
        "endpoint": "chat", "state": "measured", "kind": "llm", "measured_at": "2026-12-06T09:30:00+00:00",
        "job": "digits-staging-chat-0123456789ab", "model_package_version": None, "stale": None,
        "newer_run": None, "recommended": "ml.g5.2xlarge", "candidates": ["ml.g5.2xlarge", "ml.g6.2xlarge"],
        "rows": [{"instance_type": "ml.g5.2xlarge", "latency_ms": 420.0, "throughput": 34.5, "cost": 3.1,
                  "meets": True, "shortfalls": []}],
        "show": "sagestack recommend chat --env staging",
    }  # fmt: skip
    doc = {"project": "digits", "environment": "staging", "region": REGION, "read_at": "2026-12-06T09:40:00+00:00",
           "recommendations": [row], "errors": [],
           **{k: [] for k in ("stacks", "pipelines", "training_jobs", "tuning_jobs", "endpoints", "clusters",
                              "schedules")}}  # fmt: skip
    lines = render(doc, 80)
    start = lines.index("recommendations (slo:)")
    assert lines[start + 1 : start + 3] == [
        "  chat ml.g5.2xlarge meets the target: TTFT 420 ms, 34.5 tok/s, $3.1000/1M tok",
        "    measured 09:30; table: `sagestack recommend chat --env staging`",
    ]
