"""Quota snapshots (ListServiceQuotas pages through botocore's Stubber, usage counted on a moto
server), `sagestack plan` against them, the synth-time quota check, and the lock round trip."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.core.catalog.quotas import TRAINING_INSTANCES_TOTAL
from sagestack.ops.account import count_usage, list_quotas, snapshot_document
from tests.conftest import MINIMAL
from tests.support.moto_server import ACCOUNT, REGION, running_moto

SPEC = MINIMAL.replace(
    "instance_type: ml.m5.xlarge", "instance_type: [ml.g5.2xlarge, ml.m5.xlarge]\n    instance_count: 2"
)
G5 = "ml.g5.2xlarge for training job usage"
M5 = "ml.m5.xlarge for training job usage"


def _quota(name: str, code: str, value: float) -> dict:
    return {
        "ServiceCode": "sagemaker",
        "ServiceName": "Amazon SageMaker",
        "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:sagemaker/{code}",
        "QuotaCode": code,
        "QuotaName": name,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def test_list_quotas_follows_every_page():
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "service-quotas", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)  # requests and responses are validated against the Service Quotas model
    stub.add_response(
        "list_service_quotas",
        {"Quotas": [_quota(G5, "L-G5", 0.0)], "NextToken": "page-2"},
        {"ServiceCode": "sagemaker", "MaxResults": 100},
    )
    stub.add_response(
        "list_service_quotas",
        {"Quotas": [_quota(M5, "L-M5", 4.0), _quota(TRAINING_INSTANCES_TOTAL, "L-ALL", 20.0)]},
        {"ServiceCode": "sagemaker", "MaxResults": 100, "NextToken": "page-2"},
    )
    with stub:
        quotas = list_quotas(REGION, client)
    stub.assert_no_pending_responses()
    assert [(q["QuotaName"], q["QuotaCode"], q["Value"]) for q in quotas] == [
        (G5, "L-G5", 0.0),
        (M5, "L-M5", 4.0),
        (TRAINING_INSTANCES_TOTAL, "L-ALL", 20.0),
    ]


@pytest.fixture(scope="module")
def moto():
    with running_moto() as server:
        yield server


def test_usage_counts_running_jobs_and_serving_endpoints(moto):
    from moto.sagemaker.models import sagemaker_backends

    moto.reset()
    sm = moto.client("sagemaker")
    role = f"arn:aws:iam::{ACCOUNT}:role/r"
    for name, itype, count, spot in (
        ("a", "ml.g5.2xlarge", 2, False),
        ("b", "ml.g5.2xlarge", 1, True),
        ("c", "ml.m5.xlarge", 3, False),
    ):
        sm.create_training_job(
            TrainingJobName=name,
            AlgorithmSpecification={
                "TrainingImage": "123.dkr.ecr.us-east-1.amazonaws.com/x:1",
                "TrainingInputMode": "File",
            },
            RoleArn=role,
            OutputDataConfig={"S3OutputPath": "s3://b/o"},
            ResourceConfig={"InstanceType": itype, "InstanceCount": count, "VolumeSizeInGB": 30},
            StoppingCondition={
                "MaxRuntimeInSeconds": 3600,
                **({"MaxWaitTimeInSeconds": 7200} if spot else {}),
            },
            EnableManagedSpotTraining=spot,
        )
    jobs = sagemaker_backends[ACCOUNT][REGION].training_jobs
    for name in ("a", "b"):  # moto completes jobs at once; these two are still running
        jobs[name].training_job_status = "InProgress"
    sm.create_model(
        ModelName="m",
        ExecutionRoleArn=role,
        PrimaryContainer={"Image": "123.dkr.ecr.us-east-1.amazonaws.com/x:1"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="cfg",
        ProductionVariants=[
            {"VariantName": "v", "ModelName": "m", "InstanceType": "ml.c5.xlarge", "InitialInstanceCount": 2}
        ],
    )
    sm.create_endpoint(EndpointName="ep", EndpointConfigName="cfg")

    usage = count_usage(REGION, sm)
    assert usage == {
        G5: 2.0,
        "ml.g5.2xlarge for spot training job usage": 1.0,
        TRAINING_INSTANCES_TOTAL: 3.0,
        "ml.c5.xlarge for endpoint usage": 2.0,
    }


def _snapshot(project, env: str, values: dict[str, float], usage: dict[str, float] | None = None) -> None:
    quotas = [{"QuotaName": n, "QuotaCode": f"L-{i}", "Value": v} for i, (n, v) in enumerate(values.items())]
    document = snapshot_document(REGION, quotas, usage or {}, ACCOUNT)
    (project.root / f"config/envs/{env}.quotas.json").write_text(json.dumps(document))


def _plan(project, *args: str):
    return CliRunner().invoke(
        app, ["plan", "--env", "dev", "--root", str(project.root), *args], env={"COLUMNS": "200"}
    )


def test_plan_takes_the_second_candidate_when_the_first_has_no_quota(project, snapshot):
    project.spec(SPEC).env("dev")
    _snapshot(project, "dev", {G5: 0, M5: 4, TRAINING_INSTANCES_TOTAL: 10})
    result = _plan(project, "--quotas", "snapshot")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "classifier" in line or "ml.m5" in line]
    assert "→ ml.m5.xlarge" in result.output and "→ ml.g5.2xlarge" not in result.output
    assert lines == snapshot


def test_plan_exits_3_with_the_quota_and_the_command_to_raise_it(project):
    project.spec(SPEC).env("dev")
    _snapshot(project, "dev", {G5: 0, M5: 4}, usage={M5: 3})
    result = _plan(project, "--quotas", "snapshot")
    assert result.exit_code == 3, result.output
    assert (
        "job 'classifier' needs 2 of 'ml.g5.2xlarge for training job usage' (L-0); the account allows 0 with 0 in "
        "use, so 0 are free. To fix: ask for more: aws service-quotas request-service-quota-increase "
        "--service-code sagemaker --quota-code L-0 --desired-value 2"
    ) in " ".join(result.output.replace(" \\\n", " ").replace("`", "").split())  # quoted, or continued
    data = json.loads(_plan(project, "--quotas", "snapshot", "--json").output)
    assert data["shortfalls"][0]["quota"] == G5 and data["quotas"]["source"] == "snapshot"


def test_plan_without_credentials_or_snapshot_says_it_could_not_check(project, monkeypatch):
    for v in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HOME", str(project.root))  # no ~/.aws here
    project.spec(SPEC).env("dev")
    result = _plan(project)
    assert result.exit_code == 0
    assert "not checked: no credentials and no snapshot" in result.output
    assert _plan(project, "--quotas", "snapshot").exit_code == 1


def test_synth_fails_on_a_short_quota_with_the_same_message(project, tmp_path):
    from aws_cdk import App

    from sagestack.app.builder import build_app
    from sagestack.capacity.assess import QuotaShortfallError

    project.spec(SPEC).env("dev")
    _snapshot(project, "dev", {G5: 0, M5: 1})
    with pytest.raises(QuotaShortfallError) as e:
        build_app(App(outdir=str(tmp_path / "a")), project.root)  # default: the snapshot
    assert "dev: quotas short" in str(e.value)
    assert "needs 2 of 'ml.g5.2xlarge for training job usage' (L-0)" in str(e.value)
    # off skips the check
    build_app(App(outdir=str(tmp_path / "b"), context={"sagestack:quotas": "off"}), project.root, nag=False)


def test_lock_round_trip_and_locked_synth(project, tmp_path):
    from aws_cdk import App

    from sagestack.app.builder import build_app
    from sagestack.ops.lock import LockMismatchError, read_lock

    project.spec(SPEC).env("dev")
    locked = {"sagestack:locked": "true", "sagestack:quotas": "off"}
    with pytest.raises(LockMismatchError, match=r"lock\.json does not exist"):
        build_app(App(outdir=str(tmp_path / "a"), context=locked), project.root, nag=False)

    runner = CliRunner()
    out = runner.invoke(app, ["lock", "--env", "dev", "--root", str(project.root)])
    assert out.exit_code == 0 and "wrote" in out.output
    lock = read_lock(project.root, "dev")
    assert set(lock["jobs"]["classifier"]["candidates"]) == {"ml.g5.2xlarge", "ml.m5.xlarge"}
    build_app(App(outdir=str(tmp_path / "b"), context=locked), project.root, nag=False)  # matches
    assert "lock: matches" in _plan(project, "--quotas", "off").output

    spec = project.root / "config/sagestack.yaml"
    spec.write_text(spec.read_text().replace("instance_count: 2", "instance_count: 3"))
    with pytest.raises(LockMismatchError) as e:
        build_app(App(outdir=str(tmp_path / "c"), context=locked), project.root, nag=False)
    text = str(e.value)
    assert "~ jobs.classifier (hash " in text and "~ ResourceConfig.InstanceCount: 2 → 3" in text
    assert "sagestack lock --env dev" in text
    plan_out = _plan(project, "--quotas", "off").output
    assert "change(s) against config/envs/dev.lock.json" in plan_out
    again = runner.invoke(app, ["lock", "--env", "dev", "--root", str(project.root)])
    assert "updated" in again.output and "~ jobs.classifier (hash " in again.output
    build_app(App(outdir=str(tmp_path / "d"), context=locked), project.root, nag=False)


def test_check_says_what_is_ready_and_what_to_do(project, moto, monkeypatch):
    moto.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    project.spec(SPEC).env("dev").env("prod", 'account: "111111111111"\n')
    runner = CliRunner()

    def check(env: str):
        result = runner.invoke(
            app, ["check", "--env", env, "--root", str(project.root)], env={"COLUMNS": "300"}
        )
        return result.exit_code, {line.split(":")[0][2:]: line for line in result.output.splitlines()}

    code, lines = check("dev")
    assert code == 1
    assert (
        lines["credentials"].startswith("✓ credentials: arn:aws:")
        and f"(account {ACCOUNT})" in lines["credentials"]
    )
    assert lines["region"] == "✓ region: SageMaker is available in us-east-1"
    assert lines["bootstrap"].startswith("✗ bootstrap: no CDKToolkit stack in us-east-1")
    assert f"run `cdk bootstrap aws://{ACCOUNT}/us-east-1`" in lines["bootstrap"]
    assert lines["ECR"].startswith("✓ ECR: login works; repository digits-dev-training is not deployed yet")
    assert lines["quotas"].startswith("- quotas: could not read them")  # moto has no SageMaker quotas

    moto.client("cloudformation").create_stack(
        StackName="CDKToolkit",
        TemplateBody=json.dumps({"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}),
    )
    moto.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="27", Type="String")
    _snapshot(project, "dev", {G5: 4, M5: 4, TRAINING_INSTANCES_TOTAL: 10})
    code, lines = check("dev")
    assert code == 0, lines
    assert lines["bootstrap"] == "✓ bootstrap: CDKToolkit CREATE_COMPLETE, bootstrap version 27"
    assert lines["quotas"].startswith("✓ quotas: 2 needs fit (snapshot config/envs/dev.quotas.json")

    code, lines = check("prod")
    assert code == 1
    assert f"is in account {ACCOUNT}, but 'prod' deploys to 111111111111" in lines["credentials"]


@pytest.mark.parametrize("env", ["dev", "staging", "prod"])
def test_the_example_locks_are_current(env):
    """config/envs/<env>.lock.json is committed: a change to the spec or training_src that is not
    re-locked (`sagestack lock --env <env>`) shows up here, as `cdk synth -c sagestack:locked=true` would."""
    from sagestack.capacity.ledger import QuotaBook
    from sagestack.ops.report import plan_report
    from sagestack.project import load_project, resolve_environment
    from tests.conftest import REPO

    result = plan_report(REPO, resolve_environment(load_project(REPO, env)), QuotaBook.none("off"))
    assert result.lock_state == "matches", result.lock_changes


def test_plan_says_why_live_quotas_were_not_used(project, moto, monkeypatch):
    # Credentials are configured, but the quota service cannot answer (moto has no SageMaker quotas).
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    project.spec(SPEC).env("dev")
    result = _plan(project)
    assert result.exit_code == 0
    assert "not checked: live quotas unavailable (" in " ".join(result.output.split())
    _snapshot(project, "dev", {G5: 4, M5: 4})
    out = " ".join(_plan(project).output.split())
    assert "quotas: snapshot config/envs/dev.quotas.json" in out and "; live quotas unavailable (" in out


@pytest.mark.parametrize("width", [80, 160])
def test_plan_tables_stay_readable_at_80_columns_and_in_wide_terminals(width):
    """Every line fits the console, and what a reader acts on is never cut: each candidate and
    instance type appears whole, each entry's name appears (possibly folded), and every status."""
    from rich.console import Console

    from sagestack.capacity.ledger import QuotaBook
    from sagestack.ops.report import plan_report, render
    from sagestack.project import load_project, resolve_environment
    from tests.conftest import REPO

    plan = resolve_environment(load_project(REPO, "prod"))
    console = Console(width=width, record=True, color_system=None)
    render(plan_report(REPO, plan, QuotaBook.none("off")), console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    types = {t for job in plan.spec.jobs.values() for t in job.instance_type} | {
        "ml.c5.xlarge",
        "ml.m5.xlarge",
    }
    for itype in types:
        assert itype in text, itype
    squashed = text.replace("\n", "").replace(" ", "")
    for entry in (*plan.spec.jobs, *plan.spec.tuning, *plan.spec.endpoints, *plan.spec.transforms):
        assert entry.replace(" ", "") in squashed, entry
    if width >= 120:
        assert "…" not in text


def test_a_refused_serving_update_names_the_lock_and_each_problem():
    from sagestack.ops.lock import ServingUpdateError

    error = ServingUpdateError("prod", ["endpoints.web: a", "endpoints.api: b"])
    assert (error.env, error.problems) == ("prod", ["endpoints.web: a", "endpoints.api: b"])
    assert str(error) == (
        "prod: against config/envs/prod.lock.json (what was last locked for deployment):\n"
        "  ✗ endpoints.web: a\n  ✗ endpoints.api: b"
    )


def test_a_quota_books_codes_and_what_is_free():
    from sagestack.capacity.ledger import QuotaBook, QuotaValue

    name = "ml.g5.xlarge for training job usage"
    book = QuotaBook("snapshot", "t", {name: QuotaValue(name, "L-G5X", 4)})
    book.usage[name] = 1
    assert book.code(name) == "L-G5X" and book.available(name) == 3
    assert book.code("ml.p5.48xlarge for training job usage") is None
    assert book.available("ml.p5.48xlarge for training job usage") is None
