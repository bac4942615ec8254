"""`sagestack cost` against a moto server: Cost Explorer's GetCostAndUsage answered by moto with
the results posted to its moto-api (the requests it got read back from it), what runs now from
moto's SageMaker; ListCostAllocationTags, which moto lacks, answered in the client with the request
and the response validated against botocore's model (tests/support/answered.py), as are the
refusals (AccessDenied, DataUnavailable) moto cannot make. The screen is held to 80 columns with
every word whole, --json to the same content."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import requests
from typer.testing import CliRunner

from sagestack.capacity.ledger import SPOT_SAVINGS, price_of
from sagestack.cli import app
from sagestack.cli.cost import render
from sagestack.ops.cost import Period, usage_kind
from tests.support.answered import with_answers
from tests.support.moto_server import ACCOUNT, REGION, running_moto

ROLE = f"arn:aws:iam::{ACCOUNT}:role/r"
RUNNING = "digits-dev-classifier-spot-5e6f7a8b-0"
DONE = "digits-dev-classifier-1a2b3c4d-0"
TAGS = (
    "sagestack:project",
    "sagestack:environment",
    "sagestack:job",
    "sagestack:tuning",
    "sagestack:endpoint",  # the example deploys endpoints, no clusters: no sagestack:cluster
)
ENV = [
    {"Tags": {"Key": "sagestack:project", "Values": ["digits"], "MatchOptions": ["EQUALS"]}},
    {"Tags": {"Key": "sagestack:environment", "Values": ["dev"], "MatchOptions": ["EQUALS"]}},
]
SECOND = "digits-b"  # a second endpoint on digits' instance type (ml.c5.xlarge)


@pytest.fixture(scope="module")
def moto():
    with running_moto() as server:
        _deploy(server)
        yield server


@pytest.fixture
def aws(moto, monkeypatch, example_project):
    from moto.ce.models import ce_backends

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    backend = ce_backends[ACCOUNT]["global"]  # results are kept per request: none from another test
    backend.cost_usage_results.clear()
    backend.cost_usage_results_queue.clear()
    return example_project


def _deploy(moto) -> None:  # type: ignore[no-untyped-def]
    from moto.sagemaker.models import sagemaker_backends

    sm = moto.client("sagemaker")
    for name, spot in ((DONE, False), (RUNNING, True)):
        sm.create_training_job(
            TrainingJobName=name,
            AlgorithmSpecification={
                "TrainingImage": "1.dkr.ecr.us-east-1.amazonaws.com/x:1",
                "TrainingInputMode": "File",
            },
            RoleArn=ROLE,
            OutputDataConfig={"S3OutputPath": "s3://b/o"},
            ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
            StoppingCondition={
                "MaxRuntimeInSeconds": 3600,
                **({"MaxWaitTimeInSeconds": 7200} if spot else {}),
            },
            EnableManagedSpotTraining=spot,
        )
    job = sagemaker_backends[ACCOUNT][REGION].training_jobs[RUNNING]
    job.training_job_status, job.secondary_status = "InProgress", "Training"
    job.training_start_time, job.training_end_time = datetime.now(UTC) - timedelta(minutes=30), None
    job.final_metric_data_list = []
    sm.create_model(
        ModelName="m",
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": "1.dkr.ecr.us-east-1.amazonaws.com/x:1"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="digits-dev-digits-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "m",
                "InstanceType": "ml.c5.xlarge",
                "InitialInstanceCount": 2,
            }
        ],
    )
    sm.create_endpoint(EndpointName="digits-dev-digits", EndpointConfigName="digits-dev-digits-config")


def _tags(states: dict[str, str]) -> dict[str, Any]:
    """ListCostAllocationTags' answer: the keys Billing has seen, with their state."""
    return {
        "CostAllocationTags": [
            {"TagKey": k, "Type": "UserDefined", "Status": s, "LastUpdatedDate": "2026-11-01T00:00:00Z"}
            for k, s in states.items()
        ]
    }


def _post(moto, *results: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    """Queue GetCostAndUsage's answers in moto, in the order the command asks."""
    response = requests.post(
        f"{moto.url}/moto-api/static/ce/cost-and-usage-results", json={"results": list(results)}, timeout=10
    )
    assert response.status_code == 201


def _asked() -> list[dict[str, Any]]:
    """The GetCostAndUsage requests moto answered (it keeps each request's body)."""
    from moto.ce.models import ce_backends

    return [json.loads(body) for body in ce_backends[ACCOUNT]["global"].cost_usage_results]


def _cost(project, *args: str, columns: int = 80):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(
        app, ["cost", "--env", "dev", "--root", str(project.root), *args], env={"COLUMNS": str(columns)}
    )


def _money(amount: str) -> dict[str, Any]:
    return {"UnblendedCost": {"Amount": amount, "Unit": "USD"}}


def _day(start: date, groups: list[tuple[list[str], str]], estimated: bool = False) -> dict[str, Any]:
    return {
        "TimePeriod": {"Start": start.isoformat(), "End": (start + timedelta(days=1)).isoformat()},
        "Total": {},
        "Groups": [{"Keys": keys, "Metrics": _money(amount)} for keys, amount in groups],
        "Estimated": estimated,
    }


def _month(groups: list[tuple[list[str], str]]) -> dict[str, Any]:
    """One MONTHLY result over the two days (the queries after the daily one)."""
    today = datetime.now(UTC).date()
    return {
        "TimePeriod": {
            "Start": (today - timedelta(days=1)).isoformat(),
            "End": (today + timedelta(days=1)).isoformat(),
        },
        "Total": {},
        "Groups": [{"Keys": keys, "Metrics": _money(amount)} for keys, amount in groups],
        "Estimated": True,
    }


REST = [  # what no tag of sagestack's names: storage and keys
    (["Amazon Simple Storage Service", "USE1-TimedStorage-ByteHrs"], "1.50"),
    (["AWS Key Management Service", "USE1-KMS-Requests"], "0.50"),
]


def _spend(
    moto,  # type: ignore[no-untyped-def]
    endpoints: list[tuple[list[str], str]] | None = None,
    rest: list[tuple[list[str], str]] = REST,
) -> None:
    """Two days of dev's spend: by job and search tag (the first page, then the second), what
    neither names by endpoint tag, then what no tag names by service and usage type."""
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    untagged = ["sagestack:job$", "sagestack:tuning$"]
    _post(
        moto,
        {
            "ResultsByTime": [
                _day(
                    yesterday,
                    [
                        (["sagestack:job$classifier", "sagestack:tuning$"], "12.50"),
                        (["sagestack:job$classifier", "sagestack:tuning$lr-search"], "7.25"),
                        (untagged, "30.00"),
                    ],
                )
            ],
            "NextPageToken": "page-2",
        },
        {
            "ResultsByTime": [
                _day(
                    today,
                    [(["sagestack:job$classifier-spot", "sagestack:tuning$"], "1.10"), (untagged, "10.00")],
                    True,
                )
            ]
        },
        {
            "ResultsByTime": [
                _month(
                    endpoints or [(["sagestack:endpoint$digits"], "38.00"), (["sagestack:endpoint$"], "2.00")]
                )
            ]
        },
        {"ResultsByTime": [_month(rest)]},
    )


def _two_endpoints(project) -> None:  # type: ignore[no-untyped-def]
    """dev serves a second endpoint on digits' instance type."""
    spec = project.root / "config" / "sagestack.yaml"
    second = (
        f"  {SECOND}:\n"
        '    model_package: "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"\n'
        "    instance_type: ml.c5.xlarge\n"
    )
    spec.write_text(spec.read_text().replace("endpoints:\n", "endpoints:\n" + second, 1))


def _fits_with_words_whole(lines: list[str], doc: dict[str, Any], width: int = 80) -> None:
    assert [line for line in lines if len(line) > width] == []

    # every word of the screen is a word of the same document on an unbounded line: none cut in two
    # (a command too long for a line is continued as bash reads it: ` \` and no quotes)
    def words(text: list[str]) -> list[str]:
        return [w for w in " ".join(text).replace("`", "").split() if w != "\\"]

    assert words(lines[1:]) == words(render(doc, 10_000)[1:])  # [0]: the time it was read


def test_spend_per_job_search_and_endpoint_beside_the_plan_and_what_runs_now(aws, moto, monkeypatch):
    seen = with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(dict.fromkeys(TAGS, "Active"))}})
    _spend(moto)
    result = _cost(aws, "--days", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    text = "\n".join(lines)
    flat = " ".join(text.split())
    assert seen["ListCostAllocationTags"] == [{"TagKeys": list(TAGS), "Type": "UserDefined"}]
    assert "cost allocation tags active: sagestack:{project,environment,job,tuning,endpoint}" in flat
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    assert f"spend {today - timedelta(days=1):%m-%d}..{today:%m-%d} (2 days): $60.85" in text
    assert re.search(r"^  job classifier +\$12\.50  \$[\d.]+ a run, ≤ 1 h \(max_run\)$", text, re.M), text
    assert re.search(r"^  job classifier-spot +\$1\.10  ", text, re.M), text
    assert re.search(r"^  search lr-search +\$7\.25  \$[\d.]+ a run, ≤ \d+ trials x 1 h$", text, re.M), text
    plan = price_of("ml.c5.xlarge") * 24 * 2  # type: ignore[operator]
    assert re.search(rf"^  endpoint digits +\$38\.00  \${plan:,.2f} over 2 days at 1 instance", text, re.M), (
        text
    )
    assert "spend without" not in flat  # every endpoint's spend is told by its own tag
    assert "other: Amazon Simple Storage Service $1.50, AWS Key Management Service $0.50" in flat
    today_so_far = f"{today:%m-%d} $11.10 so far"  # estimated: not in the average
    assert f"per day: $49.75 average, $49.75 at most ({yesterday:%m-%d}), {today_so_far}" in flat
    spot = price_of("ml.m5.xlarge") * (1 - SPOT_SAVINGS)  # type: ignore[operator]
    serving = 2 * price_of("ml.c5.xlarge")  # type: ignore[operator]
    assert f"running now: ${spot + serving:,.2f} an hour at the catalog's prices" in text
    assert f"training classifier-spot 1 x ml.m5.xlarge spot (est.) ${spot:,.2f}/h" in text
    assert f"endpoint digits 2 x ml.c5.xlarge ${serving:,.2f}/h" in text
    # what Cost Explorer was asked: dev's tags, by job and search, End exclusive; then what neither
    # names by endpoint tag; then what no tag names
    first, second, by_endpoint, rest = _asked()
    assert first["TimePeriod"] == {
        "Start": f"{today - timedelta(days=1)}",
        "End": f"{today + timedelta(days=1)}",
    }
    assert first["Granularity"] == "DAILY" and first["Metrics"] == ["UnblendedCost"]
    env = ENV
    assert first["Filter"] == {"And": env}
    assert first["GroupBy"] == [
        {"Type": "TAG", "Key": "sagestack:job"},
        {"Type": "TAG", "Key": "sagestack:tuning"},
    ]
    assert second == {**first, "NextPageToken": "page-2"}
    absent = [{"Tags": {"Key": k, "MatchOptions": ["ABSENT"]}} for k in ("sagestack:job", "sagestack:tuning")]
    assert by_endpoint["Filter"] == {"And": [*env, *absent]} and by_endpoint["Granularity"] == "MONTHLY"
    assert by_endpoint["GroupBy"] == [{"Type": "TAG", "Key": "sagestack:endpoint"}]
    no_endpoint = {"Tags": {"Key": "sagestack:endpoint", "MatchOptions": ["ABSENT"]}}
    assert rest["Filter"] == {"And": [*env, *absent, no_endpoint]} and rest["Granularity"] == "MONTHLY"
    assert rest["GroupBy"] == [
        {"Type": "DIMENSION", "Key": "SERVICE"},
        {"Type": "DIMENSION", "Key": "USAGE_TYPE"},
    ]
    _fits_with_words_whole(lines, json.loads(_cost(aws, "--days", "2", "--json").output))


def test_json_has_the_screen_content(aws, moto, monkeypatch):
    with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(dict.fromkeys(TAGS, "Active"))}})
    _spend(moto)
    result = _cost(aws, "--days", "2", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["spend"]["total"] == 60.85 and doc["errors"] == []
    entries = {(e["kind"], e["key"]): e for e in doc["entries"]}
    assert entries[("job", "classifier")]["actual"] == 12.5
    assert entries[("search", "lr-search")]["actual"] == 7.25
    assert (
        entries[("endpoint", "digits")]["actual"] == 38.0
        and not entries[("endpoint", "digits")]["by_instance_type"]  # by its own tag
    )
    assert doc["spend"]["grouped_by"] == list(TAGS[2:])
    assert entries[("job", "classifier-ngc")]["actual"] == 0.0  # planned, never billed
    running = {r["key"]: r for r in doc["running"]}
    assert running["digits"]["count"] == 2 and running["digits"]["instance_type"] == "ml.c5.xlarge"
    assert running["classifier-spot"]["spot"] is True
    assert [d["estimated"] for d in doc["spend"]["daily"]] == [False, True]
    screen = _cost(aws, "--days", "2").output.splitlines()
    assert render(doc, 80)[1:] == screen[1:]  # the same document is the screen (the read time aside)


def test_tags_not_active_say_so_with_the_command_that_activates_them(aws, moto, monkeypatch):
    from botocore.validate import validate_parameters

    seen = with_answers(
        monkeypatch,
        {
            "ce": {
                "ListCostAllocationTags": _tags(
                    {"sagestack:project": "Inactive", "sagestack:environment": "Inactive"}
                )
            }
        },
    )
    result = _cost(aws)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    text = "\n".join(lines)
    flat = " ".join(text.split())
    assert (
        "cost allocation tags: sagestack:project inactive, sagestack:environment inactive, "
        "sagestack:job not seen yet, sagestack:tuning not seen yet, sagestack:endpoint not seen yet" in flat
    )
    assert "Billing and Cost Management → Cost allocation tags" in flat
    assert (
        "spend" in flat and "not known until sagestack:project and sagestack:environment are active" in flat
    )
    assert _asked() == []  # an inactive tag filters nothing: Cost Explorer is not asked
    assert seen["ListCostAllocationTags"]
    # the printed command (continued with ` \` at 80 columns) runs as printed: its request is valid
    joined = re.sub(r" \\\n\s*", " ", text)
    command = re.search(r"(aws ce update-cost-allocation-tags-status [^`\n]*)", joined)
    assert command, text
    words = shlex.split(command.group(1))
    assert words[3] == "--cost-allocation-tags-status"
    statuses = [dict(pair.split("=") for pair in w.split(",")) for w in words[4:]]
    assert statuses == [
        {"TagKey": "sagestack:project", "Status": "Active"},
        {"TagKey": "sagestack:environment", "Status": "Active"},
    ]
    import boto3

    model = boto3.client("ce").meta.service_model
    validate_parameters(
        {"CostAllocationTagsStatus": statuses},
        model.operation_model("UpdateCostAllocationTagsStatus").input_shape,
    )
    backfill = re.search(r"--backfill-from ([^`\s]+)", joined)
    assert backfill and re.fullmatch(r"\d{4}-\d\d-01T00:00:00Z", backfill.group(1)), text
    assert "endpoint digits 2 x ml.c5.xlarge" in text  # what runs now, all the same
    _fits_with_words_whole(lines, json.loads(_cost(aws, "--json").output))


@pytest.mark.parametrize(
    ("code", "message", "said"),
    [
        (
            "AccessDeniedException",
            "User: arn:aws:iam::123456789012:user/dev is not authorized to perform: ce:GetCostAndUsage",
            "the caller needs ce:GetCostAndUsage and ce:ListCostAllocationTags",
        ),
        (
            "AccessDeniedException",
            "User not enabled for cost explorer access",
            "Cost Explorer is not enabled",
        ),
        ("DataUnavailableException", "Data is not available.", "ready about 24 hours after Cost Explorer"),
    ],
)
def test_cost_explorer_refusals_are_one_line_with_the_fix(aws, monkeypatch, code, message, said):
    with_answers(
        monkeypatch,
        {
            "ce": {
                "ListCostAllocationTags": _tags(dict.fromkeys(TAGS, "Active")),
                "GetCostAndUsage": {"Error": {"Code": code, "Message": message}},
            }
        },
    )
    result = _cost(aws)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    refusal = [i for i, line in enumerate(lines) if line.startswith("could not read spend: ")]
    assert len(refusal) == 1, result.output
    said_lines = " ".join(lines[refusal[0] :])
    assert said in " ".join(said_lines.split()) and code in said_lines
    assert "Traceback" not in result.output
    assert "endpoint digits 2 x ml.c5.xlarge" in result.output
    _fits_with_words_whole(lines, json.loads(_cost(aws, "--json").output))


def test_cost_without_credentials_says_how_to_set_them(example_project, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    done = subprocess.run(
        [sys.executable, "-m", "sagestack.cli", "cost", "--root", str(example_project.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80", "AWS_EC2_METADATA_DISABLED": "true"},
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("sagestack: no AWS credentials: configure a profile (aws configure)"), (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_the_period_is_whole_days_with_an_exclusive_end():
    period = Period.last(30, date(2026, 12, 6))
    assert period.request() == {"Start": "2026-11-07", "End": "2026-12-07"}
    assert period.days == 30
    assert Period.last(1, date(2026, 12, 6)).request() == {"Start": "2026-12-06", "End": "2026-12-07"}


def test_usage_types_tell_hosting_clusters_and_training_apart():
    assert usage_kind("USE1-Host:ml.c5.xlarge") == ("endpoint", "ml.c5.xlarge")
    assert usage_kind("Host:ml.c5.xlarge") == ("endpoint", "ml.c5.xlarge")
    assert usage_kind("EUW1-Cluster:ml.p5.48xlarge") == ("cluster", "ml.p5.48xlarge")
    assert usage_kind("EUW1-Train-Spot:ml.g5.xlarge") == ("training", "ml.g5.xlarge")
    assert usage_kind("USE1-Cluster:VolumeUsage.gp2") == (None, "USE1-Cluster:VolumeUsage.gp2")
    assert usage_kind("USE1-TimedStorage-ByteHrs") == (None, "USE1-TimedStorage-ByteHrs")


def test_the_tags_cost_groups_by_are_the_ones_the_requests_carry(example_project):
    """The job and search tags are read off the requests sagestack renders, not assumed."""
    from sagestack.ops.cost import JOB_TAG, SEARCH_TAG, tag_keys
    from sagestack.ops.status import scope_of
    from sagestack.project import load_project, resolve_environment
    from sagestack.project.requests import render_training

    resolved = resolve_environment(load_project(example_project.root, "dev"))
    rendered = render_training(resolved, example_project.root, validate=False)
    job = rendered.jobs["classifier"].candidates[0].request
    assert {"Key": JOB_TAG, "Value": "classifier"} in job["Tags"]
    search = next(iter(rendered.tuning.values()))
    keys = {t["Key"]: t["Value"] for t in search["Tags"]}
    assert keys[SEARCH_TAG] == "lr-search" and keys[JOB_TAG]  # its trials carry both
    # an endpoint's requests carry its key (the template's resources too: test_endpoint_doors.py)
    from sagestack.core.names import CLUSTER_TAG, ENDPOINT_TAG
    from sagestack.project.requests import render_environment

    staging = resolve_environment(load_project(example_project.root, "staging"))
    chat = render_environment(staging, example_project.root).llm_endpoints["chat"]
    assert chat and all({"Key": ENDPOINT_TAG, "Value": "chat"} in r["Tags"] for r in chat.values())
    scope = scope_of(resolved)
    assert tag_keys(scope)[-2:] == (ENDPOINT_TAG, CLUSTER_TAG)  # a spec with clusters asks for theirs
    assert tag_keys(scope, {"job", "endpoint"}) == TAGS and {k: keys[k] for k in TAGS[:2]} == {
        "sagestack:project": "digits",
        "sagestack:environment": "dev",
    }


def test_tags_that_cannot_be_listed_are_said_and_the_spend_is_read_all_the_same(aws, moto, monkeypatch):
    """A member account may be refused ListCostAllocationTags (tags are activated in the management
    account) while Cost Explorer answers for its own spend."""
    with_answers(
        monkeypatch,
        {"ce": {"ListCostAllocationTags": {"Error": {"Code": "AccessDeniedException", "Message": "denied"}}}},
    )
    _spend(moto)
    result = _cost(aws, "--days", "2")
    assert result.exit_code == 1, result.output
    flat = " ".join(result.output.split())
    assert "could not read cost allocation tags: AccessDeniedException: denied" in flat
    assert re.search(r"^  job classifier +\$12\.50 ", result.output, re.M), result.output
    assert "spend" in flat and "(2 days): $60.85" in flat


def test_two_endpoints_on_one_instance_type_are_told_apart_by_their_tag(aws, moto, monkeypatch):
    """digits and digits-b both serve on ml.c5.xlarge: their usage types are the same, their
    sagestack:endpoint tags are not."""
    with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(dict.fromkeys(TAGS, "Active"))}})
    _two_endpoints(aws)
    endpoints = [
        (["sagestack:endpoint$digits"], "30.00"),
        ([f"sagestack:endpoint${SECOND}"], "8.00"),
        (["sagestack:endpoint$"], "2.00"),  # storage and keys: read by service next
    ]
    _spend(moto, endpoints)
    result = _cost(aws, "--days", "2")
    assert result.exit_code == 0, result.output
    text = result.output
    plan = price_of("ml.c5.xlarge") * 24 * 2  # type: ignore[operator]
    assert re.search(rf"^  endpoint digits +\$30\.00  \${plan:,.2f} over 2 days", text, re.M), text
    assert re.search(rf"^  endpoint {SECOND} +\$8\.00  \${plan:,.2f} over 2 days", text, re.M), text
    assert "spend without" not in " ".join(text.split()) and "digits, digits-b" not in text
    assert "other: Amazon Simple Storage Service $1.50, AWS Key Management Service $0.50" in " ".join(
        text.split()
    )
    doc = json.loads(_cost(aws, "--days", "2", "--json").output)
    assert {(e["kind"], e["key"]): e["actual"] for e in doc["entries"] if e["kind"] == "endpoint"} == {
        ("endpoint", "digits"): 30.0,
        ("endpoint", SECOND): 8.0,
    }
    assert doc["spend"]["total"] == 60.85  # the days' total: the same spend, told apart
    _fits_with_words_whole(text.splitlines(), doc)


def test_an_older_untagged_deployment_falls_back_to_its_instance_type_and_says_so(aws, moto, monkeypatch):
    """Spend of endpoints deployed before sagestack tagged them carries no sagestack:endpoint: it is
    told by its usage type, given to the planned endpoints of that type (both, when two share it),
    and the screen says why."""
    with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(dict.fromkeys(TAGS, "Active"))}})
    _two_endpoints(aws)
    host = (["Amazon SageMaker", "USE1-Host:ml.c5.xlarge"], "18.00")
    _spend(
        moto, [(["sagestack:endpoint$digits"], "20.00"), (["sagestack:endpoint$"], "20.00")], [host, *REST]
    )
    result = _cost(aws, "--days", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    text = "\n".join(lines)
    flat = " ".join(text.split())
    assert re.search(r"^  endpoint digits +\$20\.00 ", text, re.M), text  # by its tag
    assert re.search(rf"^  endpoint {SECOND} +\$0\.00 ", text, re.M), text  # no tagged spend yet
    assert re.search(rf"^  endpoint digits, {SECOND} +\$18\.00$", text, re.M), text  # by type
    assert (
        f"endpoint digits, {SECOND}: spend without sagestack:endpoint (deployed before sagestack "
        "tagged endpoints) is its instance type's usage, ml.c5.xlarge" in flat
    )
    *_, rest = _asked()
    assert {"Tags": {"Key": "sagestack:endpoint", "MatchOptions": ["ABSENT"]}} in rest["Filter"]["And"]
    doc = json.loads(_cost(aws, "--days", "2", "--json").output)
    fallback = [e for e in doc["entries"] if e["by_instance_type"]]
    assert [(e["key"], e["actual"]) for e in fallback] == [(f"digits, {SECOND}", 18.0)]
    _fits_with_words_whole(lines, doc)


def test_an_endpoint_tag_not_active_yet_falls_back_and_says_to_activate_it(aws, moto, monkeypatch):
    """sagestack:endpoint not yet active: no query groups by it, the endpoints' spend is told by
    usage type, and the screen says which tag would tell them apart."""
    states = {**dict.fromkeys(TAGS, "Active"), "sagestack:endpoint": "Inactive"}
    with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(states)}})
    host = (["Amazon SageMaker", "USE1-Host:ml.c5.xlarge"], "38.00")
    _spend(moto, [host, *REST])  # the third answer is the rest's: no endpoint query
    result = _cost(aws, "--days", "2")
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "--cost-allocation-tags-status TagKey=sagestack:endpoint,Status=Active" in flat
    assert re.search(r"^  endpoint digits +\$38\.00 ", result.output, re.M), result.output
    assert (
        "endpoint digits: spend without sagestack:endpoint (sagestack:endpoint not active) is its "
        "instance type's usage, ml.c5.xlarge" in flat
    )
    assert "per endpoint needs sagestack:endpoint active too" in flat
    asked = _asked()
    assert len(asked) == 3 and all(
        a.get("GroupBy") != [{"Type": "TAG", "Key": "sagestack:endpoint"}] for a in asked
    )
