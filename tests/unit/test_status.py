"""`sagestack status` against a moto server: a finished, a running and a failed training job, an
InService and a Failed endpoint, an execution, a stack; what moto lacks (ListInferenceComponents)
answered in the client with the request validated against botocore's model. The screen is held
to 80 columns (in a pipe and in tmux), --json to the same content."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.cli.status import one_screen, render
from sagestack.ops.status_schedules import next_run
from tests.conftest import REPO
from tests.support.interrupt import default_sigint
from tests.support.moto_server import ACCOUNT, REGION, running_moto

ROLE = f"arn:aws:iam::{ACCOUNT}:role/r"
DONE, RUNNING, FAILED = (
    "digits-dev-classifier-1a2b3c4d-0",
    "digits-dev-classifier-spot-5e6f7a8b-0",
    "digits-dev-classifier-9c0d1e2f-1",
)
SCHEDULE = '    schedule: {expression: "cron(0 3 ? * MON *)", enabled: true}\n'


@pytest.fixture(scope="module")
def moto():
    with running_moto() as server:
        _deploy(server)
        yield server


@pytest.fixture
def aws(moto, monkeypatch, example_project):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    dev = example_project.root / "config/envs/dev.yaml"
    text = dev.read_text()
    dev.write_text(text.replace("    max_run: 1h\n", "    max_run: 1h\n" + SCHEDULE, 1))
    assert SCHEDULE in dev.read_text()
    return example_project


def _deploy(moto) -> None:  # type: ignore[no-untyped-def]
    from moto.sagemaker.models import sagemaker_backends

    moto.client("cloudformation").create_stack(
        StackName="digits-dev-foundation",
        TemplateBody=json.dumps({"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}),
    )
    sfn = moto.client("stepfunctions")
    machine = sfn.create_state_machine(
        name="digits-dev-classifier",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
        roleArn=ROLE,
    )["stateMachineArn"]
    sfn.start_execution(stateMachineArn=machine, name="run-1")
    sm = moto.client("sagemaker")
    for name, spot in (
        (DONE, False),
        (RUNNING, True),
        (FAILED, False),
        ("digits-prod-classifier-1a2b3c4d-0", False),
    ):
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
    for name, env in (("digits-lr-search-1a2b3c4d", "dev"), ("digits-lr-search-5e6f7a8b", "prod")):
        sm.create_hyper_parameter_tuning_job(
            HyperParameterTuningJobName=name,
            HyperParameterTuningJobConfig={
                "Strategy": "Bayesian",
                "ResourceLimits": {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2},
            },
            TrainingJobDefinition={
                "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
                "RoleArn": ROLE,
                "OutputDataConfig": {"S3OutputPath": "s3://b/o"},
                "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
                "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
            },
            Tags=[
                {"Key": "sagestack:project", "Value": "digits"},
                {"Key": "sagestack:environment", "Value": env},
            ],
        )
    backend = sagemaker_backends[ACCOUNT][REGION]
    jobs = backend.training_jobs
    start = datetime.now(UTC) - timedelta(minutes=30)
    done = jobs[DONE]
    done.training_start_time, done.training_end_time = start, start + timedelta(minutes=12)
    done.training_time_in_seconds = done.billable_time_in_seconds = 720
    done.final_metric_data_list = [{"MetricName": "val_accuracy", "Value": 0.9731, "Timestamp": start}]
    running = jobs[RUNNING]
    running.training_job_status, running.secondary_status = "InProgress", "Training"
    running.training_start_time, running.training_end_time = start, None
    running.final_metric_data_list = []
    failed = jobs[FAILED]
    failed.training_job_status = failed.secondary_status = "Failed"
    failed.failure_reason = (
        "AlgorithmError: ExecuteUserScriptError: train.py exited with code 1 (CUDA out of memory)"
    )
    failed.final_metric_data_list = []
    sm.create_model(
        ModelName="m",
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": "1.dkr.ecr.us-east-1.amazonaws.com/x:1"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="cfg",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "m",
                "InstanceType": "ml.c5.xlarge",
                "InitialInstanceCount": 2,
            }
        ],
    )
    for name in ("digits-dev-digits", "digits-dev-chat"):
        # as deployed: the environment's tags and the endpoint's own (what `cost` groups by)
        env_tags = [
            {"Key": "sagestack:project", "Value": "digits"},
            {"Key": "sagestack:environment", "Value": "dev"},
        ]
        endpoint_tag = {"Key": "sagestack:endpoint", "Value": name.removeprefix("digits-dev-")}
        sm.create_endpoint(EndpointName=name, EndpointConfigName="cfg", Tags=[*env_tags, endpoint_tag])
    chat = backend.endpoints["digits-dev-chat"]
    chat.endpoint_status, chat.failure_reason = (
        "Failed",
        "Image pull failed: access denied to the ECR repository",
    )
    moto.client("cloudwatch").put_metric_data(
        Namespace="AWS/SageMaker",
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": dims,
                "Value": value,
                "Timestamp": datetime.now(UTC) - timedelta(minutes=5),
            }
            for name, value in (
                ("Invocations", 120.0),
                ("Invocation5XXErrors", 3.0),
                ("ModelLatency", 12500.0),
            )
            for dims in (
                [
                    {"Name": "EndpointName", "Value": "digits-dev-digits"},
                    {"Name": "VariantName", "Value": "AllTraffic"},
                ],
            )
        ],
    )
    moto.client("scheduler").create_schedule(
        Name="digits-dev-classifier-retrain",
        ScheduleExpression="cron(0 3 ? * MON *)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": machine, "RoleArn": ROLE},
        State="ENABLED",
    )


def answered_here(client, operation: str, response: dict) -> list[dict]:  # type: ignore[no-untyped-def]
    """Answer `operation` in the client (as botocore's Stubber does: the request validated against
    the service model, the response too), the client's other calls going to moto. The requests."""
    from botocore.awsrequest import AWSResponse
    from botocore.validate import validate_parameters

    model = client.meta.service_model.operation_model(operation)
    validate_parameters(response, model.output_shape)
    seen: list[dict] = []

    def check(params, **_):  # type: ignore[no-untyped-def]
        validate_parameters(params, model.input_shape)
        seen.append(params)

    client.meta.events.register(
        f"before-parameter-build.{client.meta.service_model.service_name}.{operation}", check
    )
    client.meta.events.register(
        f"before-call.{client.meta.service_model.service_name}.{operation}",
        lambda **_: (AWSResponse(None, 200, {}, None), response),
    )
    return seen


@pytest.fixture
def components(monkeypatch):  # type: ignore[no-untyped-def]
    """The chat endpoint's inference components (moto has no ListInferenceComponents)."""
    import boto3

    made = boto3.client

    def client(service, *args, **kwargs):  # type: ignore[no-untyped-def]
        c = made(service, *args, **kwargs)
        if service == "sagemaker":
            seen = answered_here(
                c,
                "ListInferenceComponents",
                {
                    "InferenceComponents": [
                        {
                            "CreationTime": datetime.now(UTC),
                            "InferenceComponentArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:inference-component/chat-chat",
                            "InferenceComponentName": "digits-dev-chat-chat",
                            "EndpointArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/digits-dev-chat",
                            "EndpointName": "digits-dev-chat",
                            "VariantName": "AllTraffic",
                            "InferenceComponentStatus": "Failed",
                            "LastModifiedTime": datetime.now(UTC),
                        }
                    ]
                },
            )
            client.requests = seen  # type: ignore[attr-defined]
        return c

    monkeypatch.setattr(boto3, "client", client)
    return client


def _status(project, *args: str, columns: int = 80):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(
        app, ["status", "--env", "dev", "--root", str(project.root), *args], env={"COLUMNS": str(columns)}
    )


def _fits(lines: list[str], width: int = 80) -> None:
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, "\n".join(too_long)
    assert not [line for line in lines if "…" in line], "\n".join(lines)


def test_status_shows_jobs_endpoints_runs_and_stacks_at_80_columns(aws, components):
    result = _status(aws)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    _fits(lines)
    text = "\n".join(lines)
    assert lines[0].startswith("digits · dev · us-east-1 · read ")
    flat = " ".join(text.split())  # what the screen says, wherever it wrapped
    assert re.search(r"^stacks: foundation CREATE_COMPLETE \d\d:\d\d; not deployed:", text, re.M), text
    assert "not deployed: training, serving, optimization, clusters" in flat
    assert re.search(r"^  classifier +SUCCEEDED \d\d:\d\d$", text, re.M), text
    assert "  not deployed: classifier-spot, classifier-ngc, lr-search" in text
    assert f"  {DONE} Completed 12m billed 12m val_accuracy=0.9731\n" in text
    assert f"{RUNNING} InProgress/Training 30m spot" in text
    assert f"{FAILED} Failed" in text and "failed: AlgorithmError: ExecuteUserScriptError:" in text
    assert "(CUDA out of memory)" in text  # the reason whole, on hanging lines
    assert "digits-prod-" not in text  # another environment's job
    assert re.search(r"^  digits InService · AllTraffic 2/2 instances: 120 calls,", text, re.M), text
    assert "AllTraffic 2/2 instances: 120 calls, 4XX 0, 5XX 3, 12.5 ms" in flat
    assert re.search(r"^  chat +Failed · AllTraffic 2/2 instances: 0 calls, 4XX 0, 5XX 0$", text, re.M), text
    assert "failed: Image pull failed: access denied" in text
    assert "components: digits-dev-chat-chat Failed" in text
    assert components.requests == [{"EndpointNameEquals": "digits-dev-chat"}]
    assert re.search(
        r"^  classifier retrain ENABLED next \d\d-\d\d 03:00 · cron\(0 3 \? \* MON \*\)$", text, re.M
    ), text
    # the tuning job of dev (its tag says so); prod's, of the same name stem, is not shown
    assert "digits-lr-search-1a2b3c4d Completed" in text and "(1 done, 0 running, 0 failed)" in text
    assert "digits-lr-search-5e6f7a8b" not in text
    assert "could not read" not in text


def test_status_json_has_the_screen_content(aws, components):
    result = _status(aws, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    jobs = {j["name"]: j for j in doc["training_jobs"]}
    assert set(jobs) == {DONE, RUNNING, FAILED}
    assert jobs[DONE]["metrics"] == {"val_accuracy": 0.9731} and jobs[DONE]["job"] == "classifier"
    assert jobs[RUNNING]["job"] == "classifier-spot" and jobs[RUNNING]["spot"] is True
    assert jobs[FAILED]["failure_reason"].endswith("(CUDA out of memory)")
    endpoints = {e["key"]: e for e in doc["endpoints"]}
    assert endpoints["digits"]["variants"][0]["last_hour"] == {
        "invocations": 120,
        "errors_4xx": 0,
        "errors_5xx": 3,
        "latency_ms": 12.5,
    }
    assert endpoints["chat"]["status"] == "Failed"
    assert doc["pipelines"][0]["executions"][0]["status"] == "SUCCEEDED"
    assert doc["errors"] == []
    # the same document, rendered, is the screen
    screen = _status(aws).output.splitlines()
    assert render(doc, 80)[1:] == screen[1:]


def test_status_in_a_pipe_and_in_tmux_at_80_columns(aws, moto, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AWS_ENDPOINT_URL": moto.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    env.pop("COLUMNS", None)
    sagestack = [sys.executable, "-m", "sagestack.cli"]
    piped = subprocess.run(
        [*sagestack, "status", "--env", "dev", "--root", str(aws.root)],
        capture_output=True,
        text=True,
        env=env,
    )
    # the chat endpoint's components cannot be read from moto in another process: said, exit 1
    assert piped.returncode == 1, piped.stderr
    lines = piped.stdout.splitlines()
    _fits(lines)
    assert lines[-1].startswith("could not read inference components of digits-dev-chat: ")
    assert not piped.stderr.strip() or "Traceback" not in piped.stderr

    # --watch in a pipe: each read a whole screen after the last (no clearing), Ctrl-C ends it cleanly
    watching = subprocess.Popen(
        [*sagestack, "status", "--env", "dev", "--root", str(aws.root), "--watch", "--every", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_sigint,  # as a terminal's Ctrl-C finds it, even under `make test &`
    )
    seen: list[str] = []
    assert watching.stdout is not None
    deadline = threading.Timer(60, watching.kill)  # a screen never ended: EOF, and the test fails
    deadline.start()
    while sum(line.startswith("digits · dev · ") for line in seen) < 2:
        line = watching.stdout.readline()
        assert line, seen
        seen.append(line.rstrip("\n"))
    deadline.cancel()
    watching.send_signal(signal.SIGINT)
    rest, errors = watching.communicate(timeout=60)
    assert watching.returncode == 0, errors
    assert "Traceback" not in errors and "\x1b" not in rest
    assert seen[-2] == "every 1 s · Ctrl-C to stop"

    if shutil.which("tmux") is None:
        pytest.fail("tmux is part of the test set-up (apt-get install tmux)")
    socket = f"status-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "run.sh"
    exports = " ".join(
        f"{k}='{env[k]}'" for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PATH")
    )
    script.write_text(
        f"export {exports} PYTHONPATH='{REPO}'\n"
        f"{' '.join(sagestack)} status --env dev --root {aws.root} --watch --every 1\n"
        f"echo exit=$?\n"
    )
    subprocess.run(
        [
            "tmux",
            "-L",
            socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "s",
            "-x",
            "80",
            "-y",
            "24",
            "bash",
            "--norc",
        ],
        check=True,
    )
    try:
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "s", f"bash {script}", "Enter"], check=True)
        screen = _wait(socket, lambda s: s.count("Ctrl-C to stop") >= 1 and "digits InService" in s)
        shown = screen.splitlines()
        _fits(shown)
        # one screen: the header is still on it with the footer (nothing scrolled off)
        assert any(line.startswith("digits · dev · us-east-1 · read ") for line in shown), screen
        assert screen.rstrip().endswith("every 1 s · Ctrl-C to stop"), screen
        time.sleep(1.5)  # a second read
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "s", "C-c"], check=True)
        screen = _wait(socket, lambda s: "exit=" in s)
        assert "exit=0" in screen and "Traceback" not in screen and "KeyboardInterrupt" not in screen, screen
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def _wait(socket: str, done, timeout: float = 60) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        screen = subprocess.run(
            ["tmux", "-L", socket, "capture-pane", "-p", "-J", "-t", "s"], capture_output=True, text=True
        ).stdout
        if done(screen):
            return screen
        assert time.monotonic() < deadline, screen
        time.sleep(0.3)


def test_status_without_credentials_says_how_to_set_them(example_project, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    done = subprocess.run(
        [sys.executable, "-m", "sagestack.cli", "status", "--root", str(example_project.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("sagestack: no AWS credentials: configure a profile (aws configure)"), (
        done.stderr
    )
    assert "Traceback" not in done.stderr


def test_the_next_run_of_each_kind_of_expression():
    now = datetime(2026, 12, 6, 2, 40, tzinfo=UTC)  # a Sunday
    assert next_run("cron(0 3 ? * MON *)", "UTC", now) == datetime(2026, 12, 7, 3, 0, tzinfo=UTC)
    assert next_run("cron(30 1 * * ? *)", "UTC", now) == datetime(2026, 12, 7, 1, 30, tzinfo=UTC)
    assert next_run("cron(0 9 1 1-3 ? *)", "Europe/Berlin", now) == datetime(2027, 1, 1, 8, 0, tzinfo=UTC)
    assert next_run("cron(0/15 * * * ? *)", "UTC", now) == datetime(2026, 12, 6, 2, 45, tzinfo=UTC)
    assert (
        next_run("cron(0 3 L * ? *)", "UTC", now) is None
    )  # beyond this reading: the screen shows the expression
    start = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
    assert next_run("rate(7 days)", "UTC", now, start) == datetime(2026, 12, 8, 0, 0, tzinfo=UTC)
    assert next_run("at(2027-01-02T10:00:00)", "UTC", now) == datetime(2027, 1, 2, 10, 0, tzinfo=UTC)
    assert next_run("at(2026-01-02T10:00:00)", "UTC", now) is None


def test_watch_keeps_to_the_terminals_rows():
    lines = [f"line {i}" for i in range(30)]
    assert one_screen(lines, 30) == lines
    assert one_screen(lines, 23) == [*lines[:22], "(8 more lines: `sagestack status` shows them all)"]


def test_clusters_and_their_groups_read_through_the_model():
    """moto's CreateCluster cannot stand in here: DescribeCluster through botocore's Stubber."""
    import boto3
    from botocore.stub import Stubber

    from sagestack.core.names import Names
    from sagestack.ops.status import Scope, read_clusters

    sm = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    stub = Stubber(sm)
    stub.add_response(
        "describe_cluster",
        {
            "ClusterArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abc",
            "ClusterName": "digits-dev-train",
            "ClusterStatus": "InService",
            "InstanceGroups": [
                {
                    "InstanceGroupName": "controller",
                    "InstanceType": "ml.m5.xlarge",
                    "CurrentCount": 1,
                    "TargetCount": 1,
                },
                {
                    "InstanceGroupName": "workers",
                    "InstanceType": "ml.g5.8xlarge",
                    "CurrentCount": 2,
                    "TargetCount": 4,
                },
            ],
        },
        {"ClusterName": "digits-dev-train"},
    )
    stub.add_client_error(
        "describe_cluster",
        "ValidationException",
        "Could not find cluster",
        expected_params={"ClusterName": "digits-dev-big"},
    )
    with stub:
        rows = read_clusters(Scope(Names("digits", "dev"), REGION, clusters=("train", "big")), sm)
    stub.assert_no_pending_responses()
    assert [r["status"] for r in rows] == ["InService", None]
    doc = {
        "project": "digits",
        "environment": "dev",
        "region": REGION,
        "read_at": "2026-12-06T02:40:00+00:00",
        **{
            key: []
            for key in (
                "stacks",
                "pipelines",
                "training_jobs",
                "tuning_jobs",
                "endpoints",
                "schedules",
                "errors",
            )
        },
        "clusters": rows,
    }
    screen = render(doc, 80)
    _fits(screen)
    assert "  train InService: controller 1/1 ml.m5.xlarge, workers 2/4 ml.g5.8xlarge" in screen
    assert "  big not deployed" in screen


def test_model_monitor_schedules_read_through_the_model():
    """moto has no DescribeMonitoringSchedule: botocore's Stubber, the requests checked."""
    import boto3
    from botocore.stub import Stubber

    from sagestack.ops.status_schedules import read_schedules

    sm = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")
    stub = Stubber(sm)
    now = datetime(2026, 12, 6, 2, 40, tzinfo=UTC)
    stub.add_response(
        "describe_monitoring_schedule",
        {
            "MonitoringScheduleArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:monitoring-schedule/x",
            "MonitoringScheduleName": "digits-dev-digits-data-quality",
            "MonitoringScheduleStatus": "Scheduled",
            "CreationTime": now,
            "LastModifiedTime": now,
            "MonitoringScheduleConfig": {"ScheduleConfig": {"ScheduleExpression": "cron(0 * ? * * *)"}},
            "LastMonitoringExecutionSummary": {
                "MonitoringScheduleName": "digits-dev-digits-data-quality",
                "ScheduledTime": now,
                "CreationTime": now,
                "LastModifiedTime": now,
                "MonitoringExecutionStatus": "CompletedWithViolations",
            },
        },
        {"MonitoringScheduleName": "digits-dev-digits-data-quality"},
    )
    stub.add_client_error(
        "describe_monitoring_schedule",
        "ResourceNotFound",
        "not found",
        expected_params={"MonitoringScheduleName": "digits-dev-chat-data-quality"},
    )
    monitors = {"digits": "digits-dev-digits-data-quality", "chat": "digits-dev-chat-data-quality"}
    with stub:
        rows = read_schedules({}, monitors, None, sm, now)
    stub.assert_no_pending_responses()
    assert [(r["entry"], r["state"], r["next_run"]) for r in rows] == [
        ("digits", "Scheduled", "2026-12-06T03:00:00+00:00"),
        ("chat", None, None),
    ]
    doc = {
        "project": "digits",
        "environment": "dev",
        "region": REGION,
        "read_at": now.isoformat(),
        **{
            key: []
            for key in (
                "stacks",
                "pipelines",
                "training_jobs",
                "tuning_jobs",
                "endpoints",
                "clusters",
                "errors",
            )
        },
        "schedules": rows,
    }
    screen = render(doc, 80)
    _fits(screen)
    flat = " ".join(" ".join(screen).split())
    assert (
        "digits data quality Scheduled next 03:00, last CompletedWithViolations · cron(0 * ? * * *)" in flat
    )
    assert not [line for line in screen if line.startswith("stacks")]  # none read, none shown
    assert "  chat data quality not deployed" in screen
