"""`sagestack logs` and `sagestack stop` against a moto server over HTTP: a finished, a running and a
failed training job with their hosts' CloudWatch streams, an endpoint's stream, running executions.
moto has no StopTrainingJob: the server is given one here (the job goes to Stopping, as AWS does),
so the request still travels over HTTP, validated by botocore against the model. Ctrl-C in `run`
is tried under tmux (a terminal: it asks) and in a pipe (it prints the stop command, which is then
run as printed)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from tests.conftest import REPO
from tests.support.interrupt import default_sigint
from tests.support.moto_server import ACCOUNT, REGION, running_moto

ROLE = f"arn:aws:iam::{ACCOUNT}:role/r"
DONE, RUNNING, FAILED = (
    "digits-dev-classifier-1a2b3c4d-0",
    "digits-dev-classifier-spot-5e6f7a8b-0",
    "digits-dev-classifier-9c0d1e2f-1",
)
GROUP = "/aws/sagemaker/TrainingJobs"
LONG = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 22.06 GiB total "
    "capacity; 19.40 GiB already allocated)"
)
T0 = int(datetime(2026, 12, 6, 3, 0, tzinfo=UTC).timestamp() * 1000)


@pytest.fixture(scope="module")
def moto():
    from moto.core.base_backend import BackendDict
    from moto.core.responses import ActionResult
    from moto.sagemaker.responses import SageMakerResponse
    from moto.stepfunctions import responses
    from moto.stepfunctions.models import StepFunctionBackend

    def stop_training_job(self):  # type: ignore[no-untyped-def]
        job = self.sagemaker_backend.training_jobs[self._get_param("TrainingJobName")]
        job.training_job_status = job.secondary_status = "Stopping"
        return ActionResult({})

    SageMakerResponse.stop_training_job = stop_training_job  # type: ignore[attr-defined]
    with running_moto() as server, pytest.MonkeyPatch.context() as patch:
        # Executions stay RUNNING until stopped: a static Step Functions backend of the module's own.
        # Not the process's: moto picks the backend per request from a process-wide config, and a
        # module that deploys with CloudFormation swaps the models' backends for the interpreter's
        # (the interpreter would end a Pass at once, and its store lacks what was deployed here).
        static = BackendDict(StepFunctionBackend, "stepfunctions")
        patch.setattr(responses, "get_backend", lambda account, region: static[account][region])
        yield server
    del SageMakerResponse.stop_training_job  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def world(moto):  # type: ignore[no-untyped-def]
    """Every test starts in the same world: stopping a job or a run changes it, and moto's backends are
    the process's (a reset by anything else in this worker empties them)."""
    moto.reset()
    _deploy(moto)


@pytest.fixture
def aws(moto, monkeypatch, example_project):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    return example_project


def _job(sm, name: str, spot: bool) -> None:  # type: ignore[no-untyped-def]
    sm.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "1.dkr.ecr.us-east-1.amazonaws.com/x:1",
            "TrainingInputMode": "File",
        },
        RoleArn=ROLE,
        OutputDataConfig={"S3OutputPath": "s3://b/o"},
        ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 3600, **({"MaxWaitTimeInSeconds": 7200} if spot else {})},
        EnableManagedSpotTraining=spot,
    )


def _deploy(moto) -> None:  # type: ignore[no-untyped-def]
    from moto.sagemaker.models import sagemaker_backends

    sm = moto.client("sagemaker")
    for name, spot in (
        (DONE, False),
        (FAILED, False),
        (RUNNING, True),
        ("digits-prod-classifier-1a2b3c4d-0", False),
    ):
        _job(sm, name, spot)
    jobs = sagemaker_backends[ACCOUNT][REGION].training_jobs
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
    failed.failure_reason = "AlgorithmError: ExecuteUserScriptError: train.py exited with code 1"
    failed.final_metric_data_list = []
    done.creation_time, failed.creation_time = start - timedelta(minutes=5), start  # the failed one is newer

    logs = moto.client("logs")
    logs.create_log_group(logGroupName=GROUP)
    streams = {  # two hosts, their lines interleaved in time
        f"{DONE}/algo-1-1765000000": [(0, "epoch 1 loss 0.9"), (20, "epoch 2 loss 0.4")],
        f"{DONE}/algo-2-1765000000": [(10, "epoch 1 loss 0.8"), (30, "saved model.pth")],
        f"{FAILED}/algo-1-1765000000": [(0, "RuntimeError: CUDA out of memory"), (1, LONG)],
        f"{RUNNING}/algo-1-1765000000": [(0, "spot: resumed from checkpoint epoch 3")],
    }
    for stream, events in streams.items():
        logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
        logs.put_log_events(
            logGroupName=GROUP,
            logStreamName=stream,
            logEvents=[{"timestamp": T0 + s * 1000, "message": m} for s, m in events],
        )
    endpoint = "/aws/sagemaker/Endpoints/digits-dev-digits"
    logs.create_log_group(logGroupName=endpoint)
    logs.create_log_stream(logGroupName=endpoint, logStreamName="AllTraffic/i-0abc")
    logs.put_log_events(
        logGroupName=endpoint,
        logStreamName="AllTraffic/i-0abc",
        logEvents=[{"timestamp": T0, "message": "POST /invocations 200"}],
    )
    sfn = moto.client("stepfunctions")
    for machine in ("digits-dev-classifier", "digits-dev-classifier-spot", "digits-prod-classifier"):
        sfn.create_state_machine(
            name=machine,
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}),
            roleArn=ROLE,
        )


def _cli(project, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [*args, "--root", str(project.root)], env={"COLUMNS": "80"})


def _fits(lines: list[str], width: int = 80) -> None:
    assert [line for line in lines if len(line) > width] == []


# ---------------------------------------------------------------- logs


def test_logs_of_a_finished_job_every_host_in_time_order_then_its_metrics(aws):
    result = _cli(aws, "logs", DONE, "--env", "dev")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{DONE} · {GROUP}"
    assert lines[1:5] == [
        "03:00:00 algo-1 epoch 1 loss 0.9",
        "03:00:10 algo-2 epoch 1 loss 0.8",
        "03:00:20 algo-1 epoch 2 loss 0.4",
        "03:00:30 algo-2 saved model.pth",
    ]
    assert lines[5:] == [  # fitted to 80 columns, words whole
        f"{DONE}: Completed, trained 12m00s, billed 12m00s,",
        "  val_accuracy=0.9731",
    ]
    _fits(lines)


def test_logs_of_a_job_key_is_its_newest_training_job_and_a_failed_one_says_why(aws):
    result = _cli(aws, "logs", "classifier", "--env", "dev", "--follow", "--poll", "0")
    assert result.exit_code == 1, result.output  # the job failed: --follow ends as the job did
    lines = result.output.splitlines()
    assert lines[0] == f"{FAILED} · {GROUP}"
    assert lines[1:3] == ["03:00:00 algo-1 RuntimeError: CUDA out of memory", f"03:00:01 algo-1 {LONG}"]
    assert lines[3] == f"{FAILED}: Failed, trained 0s"
    assert lines[4].startswith("  failed: AlgorithmError: ExecuteUserScriptError:")
    _fits(lines[3:])  # a log line not in a terminal: one line, as the host wrote it


def test_logs_of_a_running_job_say_how_to_follow_it_and_json_is_lines(aws):
    result = _cli(aws, "logs", RUNNING, "--env", "dev")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "03:00:00 algo-1 spot: resumed from checkpoint epoch 3"
    assert " ".join(lines[2:-1]).startswith(f"{RUNNING}: InProgress/Training, trained 30m")
    assert lines[-1] == "still running: `sagestack logs classifier-spot --env dev --follow` follows it"
    _fits(lines)
    parsed = [
        json.loads(line) for line in _cli(aws, "logs", RUNNING, "--env", "dev", "--json").output.splitlines()
    ]
    assert parsed[0] == {
        "time": "2026-12-06T03:00:00.000+00:00",
        "host": "algo-1",
        "message": "spot: resumed from checkpoint epoch 3",
    }
    assert parsed[1]["job"]["status"] == "InProgress" and parsed[1]["job"]["spot"] is True


def test_follow_reads_on_until_the_job_ends_and_then_once_more(aws, moto):
    """The contract of the SDK's logs_for_job: lines written while the job stops are printed too."""
    from moto.sagemaker.models import sagemaker_backends

    from sagestack.ops.logs import Reader, follow, resolve
    from sagestack.ops.status import scope_of
    from sagestack.project import load_project

    loaded = load_project(aws.root, "dev")
    scope = scope_of(type("R", (), {"spec": loaded.spec, "env": "dev"}))
    sm, logs = moto.client("sagemaker"), moto.client("logs")
    name = "digits-dev-classifier-0f0f0f0f-0"
    _job(sm, name, False)
    job = sagemaker_backends[ACCOUNT][REGION].training_jobs[name]
    job.training_job_status, job.secondary_status, job.final_metric_data_list = "InProgress", "Training", []
    logs.create_log_stream(logGroupName=GROUP, logStreamName=f"{name}/algo-1-1765000000")
    seen: list[str] = []
    rounds = iter(range(10))

    def sleep(_: float) -> None:
        i = next(rounds)
        logs.put_log_events(
            logGroupName=GROUP,
            logStreamName=f"{name}/algo-1-1765000000",
            logEvents=[{"timestamp": T0 + i * 1000, "message": f"line {i}"}],
        )
        if i == 2:  # the job ends; its last line comes after
            job.training_job_status = "Completed"

    reader = Reader(logs, resolve(scope, sm, name))
    described = follow(reader, sm, lambda lines: seen.extend(x.message for x in lines), sleep=sleep)
    assert described["TrainingJobStatus"] == "Completed"
    assert seen == ["line 0", "line 1", "line 2"]  # each line once, the one after the end too


def test_logs_of_an_endpoint_and_refusals(aws):
    result = _cli(aws, "logs", "digits", "--env", "dev")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == "03:00:00 AllTraffic/i-0abc POST /invocations 200"
    other = _cli(aws, "logs", "digits-prod-classifier-1a2b3c4d-0", "--env", "dev")
    assert other.exit_code == 1 and "is no job or endpoint of digits/dev" in str(other.exception)
    never = _cli(aws, "logs", "classifier-ngc", "--env", "dev")
    assert never.exit_code == 1 and "`sagestack run classifier-ngc --env dev` starts one" in str(
        never.exception
    )


def test_logs_in_tmux_wrap_a_long_line_at_spaces_under_its_message_and_in_a_pipe_keep_it_whole(
    aws, moto, tmp_path
):
    env = _env(moto)
    sagestack = [sys.executable, "-m", "sagestack.cli"]
    args = ["logs", FAILED, "--env", "dev", "--root", str(aws.root)]
    piped = subprocess.run([*sagestack, *args], capture_output=True, text=True, env=env)
    assert piped.returncode == 0, piped.stderr
    assert f"03:00:01 algo-1 {LONG}" in piped.stdout.splitlines()
    if shutil.which("tmux") is None:
        pytest.fail("tmux is part of the test set-up (apt-get install tmux)")
    socket = f"logs-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "logs.sh"
    exports = " ".join(
        f"{k}='{env[k]}'" for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PATH")
    )
    script.write_text(
        f"clear\nexport {exports} PYTHONPATH='{REPO}'\n{shlex.join([*sagestack, *args])}\necho exit=$?\n"
    )
    new = ["tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "s", "-x", "80", "-y", "24"]
    subprocess.run([*new, "bash", "--norc"], check=True)
    try:
        subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "s", f"bash {script}", "Enter"], check=True)
        screen = _wait(socket, lambda s: "exit=" in s, capture=["capture-pane", "-p", "-t", "s"])
        shown = screen.splitlines()
        _fits(shown)
        at = next(i for i, line in enumerate(shown) if line.startswith("03:00:01 algo-1 torch."))
        wrapped = [shown[at], *[line for line in shown[at + 1 : at + 3] if line.startswith(" " * 16)]]
        assert len(wrapped) >= 2, screen  # wrapped under the message's column, words whole
        assert " ".join(w.strip() for w in wrapped) == f"03:00:01 algo-1 {LONG}", screen
        assert "exit=0" in screen, screen
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


# ---------------------------------------------------------------- stop


def _describe(moto, execution_arn: str | None = None, job: str | None = None):  # type: ignore[no-untyped-def]
    execution = (
        execution_arn
        and moto.client("stepfunctions").describe_execution(executionArn=execution_arn)["status"]
    )
    status = job and moto.client("sagemaker").describe_training_job(TrainingJobName=job)["TrainingJobStatus"]
    return execution, status


def _start(moto, machine: str) -> str:  # type: ignore[no-untyped-def]
    sfn = moto.client("stepfunctions")
    arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{machine}"
    return sfn.start_execution(stateMachineArn=arn, name=f"run-{uuid.uuid4().hex[:8]}")["executionArn"]


def test_stop_a_job_stops_its_runs_and_its_training_job_and_says_so(aws, moto):
    execution = _start(moto, "digits-dev-classifier-spot")
    prod = _start(moto, "digits-prod-classifier")
    result = _cli(aws, "stop", "classifier-spot", "--env", "dev")
    assert result.exit_code == 0, result.output
    run = execution.rsplit(":", 1)[-1]
    assert result.output.splitlines() == [
        f"stopped training job {RUNNING} (classifier-spot)",
        "  spot: its checkpoints stay in S3; the next run of the job resumes from them",
        f"stopped run {run} (classifier-spot)",
    ]
    assert _describe(moto, execution, RUNNING) == ("ABORTED", "Stopping")
    assert _describe(moto, prod) == ("RUNNING", None)  # another environment's run: untouched
    again = _cli(aws, "stop", "classifier-spot", "--env", "dev", "--json")
    assert again.exit_code == 0 and json.loads(again.output) == {"stopped": []}
    said = _cli(aws, "stop", "classifier-spot", "--env", "dev")
    assert said.output == "nothing of 'classifier-spot' is running in dev: nothing stopped\n"


def test_stop_refuses_what_is_not_this_environments(aws, moto):
    prod = _start(moto, "digits-prod-classifier")
    for target in (prod.rsplit(":", 1)[-1], "digits-prod-classifier-1a2b3c4d-0", "someone-elses-job"):
        result = _cli(aws, "stop", target, "--env", "dev")
        assert result.exit_code == 1, (target, result.output)
        assert "sagestack stops only what it started there" in str(result.exception)
    assert _describe(moto, prod) == ("RUNNING", None)


# ---------------------------------------------------------------- a name the spec does not know

NO_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": None,
    "AWS_SECRET_ACCESS_KEY": None,
    "AWS_SESSION_TOKEN": None,
    "AWS_PROFILE": None,
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/config",
}
UNKNOWN = [  # (command, name, what the refusal says)
    (
        "logs",
        "clasifier",
        "'clasifier' is no job or endpoint of digits/dev; did you mean 'classifier', 'classifier-ngc' or "
        "'classifier-spot'? (jobs: classifier, classifier-spot, classifier-ngc; endpoints: digits, chat;",
    ),
    ("logs", "nosuch", "'nosuch' is no job or endpoint of digits/dev (jobs: classifier, "),
    ("logs", "lr-search", "'lr-search' is a search of digits/dev, not a job or endpoint"),
    ("logs", "digits-prod-classifier-1a2b3c4d-0", "is no job or endpoint of digits/dev"),
    (
        "stop",
        "nosuch",
        "'nosuch' is no pipeline, run or job of digits/dev (pipelines: classifier, classifier-spot, "
        "classifier-ngc, lr-search; a run by the name `sagestack run` printed, run-…, or by its ARN); "
        "sagestack stops only what it started there",
    ),
    ("stop", "lr-serch", "; did you mean 'lr-search'?"),
    ("stop", "digits", "'digits' is an endpoint of digits/dev, not a pipeline, run or job"),
    ("stop", "digits-prod-classifier-1a2b3c4d-0", "sagestack stops only what it started there"),
    (
        "stop",
        f"arn:aws:states:{REGION}:{ACCOUNT}:execution:digits-prod-classifier:run-1",
        "run run-1 is of state machine digits-prod-classifier, no pipeline of digits/dev",
    ),
]


def _requests(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """Every request the moto server answers from now on: method, path and X-Amz-Target."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    seen: list[str] = []
    answer = DomainDispatcherApplication.__call__

    def counted(self, environ, start_response):  # type: ignore[no-untyped-def]
        seen.append(
            " ".join((environ["REQUEST_METHOD"], environ["PATH_INFO"], environ.get("HTTP_X_AMZ_TARGET", "")))
        )
        return answer(self, environ, start_response)

    monkeypatch.setattr(DomainDispatcherApplication, "__call__", counted)
    return seen


@pytest.mark.parametrize(("command", "name", "said"), UNKNOWN, ids=[f"{c}-{n[:20]}" for c, n, _ in UNKNOWN])
def test_a_name_the_spec_does_not_know_is_refused_before_credentials(example_project, command, name, said):
    """The trial: `logs nosuch` and `stop nosuch` said "no AWS credentials" first, not the name."""
    result = CliRunner().invoke(
        app, [command, name, "--env", "dev", "--root", str(example_project.root)], env=NO_CREDENTIALS
    )
    assert result.exit_code == 1, result.output
    assert said in str(result.exception) and "credentials" not in str(result.exception), result.exception


def test_a_name_the_spec_does_not_know_is_refused_before_any_request(aws, moto, monkeypatch):
    """With credentials, `stop nosuch` asked Step Functions for the state machines first."""
    prod = _start(moto, "digits-prod-classifier")
    seen = _requests(monkeypatch)
    for command, name, said in UNKNOWN:
        result = _cli(aws, command, name, "--env", "dev")
        assert result.exit_code == 1 and said in str(result.exception), (command, name, result.output)
        assert seen == [], (command, name, seen)
    assert _describe(moto, prod) == ("RUNNING", None)
    # what the spec does know still goes to AWS: a run's name (whose it is, only AWS knows)
    result = _cli(aws, "stop", prod.rsplit(":", 1)[-1], "--env", "dev")
    assert result.exit_code == 1 and "sagestack stops only what it started there" in str(result.exception)
    assert seen, "the counter saw no request: it would pass whatever the command did"


# ---------------------------------------------------------------- Ctrl-C in run


def _env(moto) -> dict[str, str]:  # type: ignore[no-untyped-def]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AWS_ENDPOINT_URL": moto.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    env.pop("COLUMNS", None)
    return env


def _running(moto) -> list[str]:  # type: ignore[no-untyped-def]
    arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:digits-dev-classifier"
    listed = moto.client("stepfunctions").list_executions(stateMachineArn=arn, statusFilter="RUNNING")
    return [e["executionArn"] for e in listed["executions"]]


def test_ctrl_c_in_run_in_a_pipe_leaves_it_running_and_prints_the_stop_command_that_works(aws, moto):
    sagestack = [sys.executable, "-m", "sagestack.cli"]
    before = set(_running(moto))
    running = subprocess.Popen(
        [*sagestack, "run", "classifier", "--env", "dev", "--root", str(aws.root), "--poll", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(moto),
        preexec_fn=default_sigint,  # as a terminal's Ctrl-C finds it, even under `make test &`
    )
    assert running.stdout is not None
    assert running.stdout.readline().startswith("started arn:aws:states:")
    running.send_signal(signal.SIGINT)
    _, errors = running.communicate(timeout=60)
    assert running.returncode == 130, errors
    (execution,) = set(_running(moto)) - before  # left running: no terminal to ask in
    (said,) = errors.splitlines()  # one line in a pipe, whatever its length
    assert (
        "Traceback" not in errors
        and f"run {execution.rsplit(':', 1)[-1]} of classifier is still running" in said
    )
    command = said.split("`")[1]
    assert command.startswith("sagestack stop run-")
    stopped = subprocess.run(
        [*sagestack, *shlex.split(command)[1:]], capture_output=True, text=True, env=_env(moto)
    )
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.startswith(f"stopped run {execution.rsplit(':', 1)[-1]} (classifier)")
    assert _describe(moto, execution) == ("ABORTED", None)


@pytest.mark.parametrize("answer", ["", "n"])
def test_ctrl_c_in_run_under_tmux_asks_and_stops_unless_told_not_to(aws, moto, tmp_path, answer):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is part of the test set-up (apt-get install tmux)")
    env = _env(moto)
    before = set(_running(moto))
    socket = f"run-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "run.sh"
    exports = " ".join(
        f"{k}='{env[k]}'" for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "PATH")
    )
    script.write_text(
        f"export {exports} PYTHONPATH='{REPO}'\ncd {aws.root}\n"
        f"{sys.executable} -m sagestack.cli run classifier --env dev --poll 0.2\necho exit=$?\n"
    )
    new = ["tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "s", "-x", "80", "-y", "24"]
    subprocess.run([*new, "bash", "--norc"], check=True)
    keys = ["tmux", "-L", socket, "send-keys", "-t", "s"]
    try:
        subprocess.run([*keys, f"bash {script}", "Enter"], check=True)
        _wait(socket, lambda s: "started arn:aws:states:" in s)
        time.sleep(1)
        subprocess.run([*keys, "C-c"], check=True)
        screen = _wait(socket, lambda s: "and its job? [Y/n]" in s)
        subprocess.run([*keys, answer, "Enter"] if answer else [*keys, "Enter"], check=True)
        screen = _wait(socket, lambda s: "exit=" in s)
        _fits(screen[screen.index("and its job?") :].splitlines())
        assert "exit=130" in screen and "Traceback" not in screen, screen
        left = set(_running(moto)) - before
        if answer == "n":
            (execution,) = left
            assert "is still running; to stop it and its job:" in " ".join(screen.split()), screen
            moto.client("stepfunctions").stop_execution(executionArn=execution)
        else:
            assert left == set(), screen
            assert "stopped run run-" in screen, screen
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)


def _wait(socket: str, done, timeout: float = 60, capture: list[str] | None = None) -> str:  # type: ignore[no-untyped-def]
    """The tmux pane once `done(screen)`; -J joins what the terminal folded (give `capture` without
    it to see the rows as shown)."""
    deadline = time.monotonic() + timeout
    while True:
        screen = subprocess.run(
            ["tmux", "-L", socket, *(capture or ["capture-pane", "-p", "-J", "-t", "s"])],
            capture_output=True,
            text=True,
        ).stdout
        if done(screen):
            return screen
        assert time.monotonic() < deadline, screen
        time.sleep(0.3)


# ---------------------------------------------------------------- stop: what moto cannot show


def _with_answers(monkeypatch, answers: dict[str, dict[str, dict]]) -> dict[str, list[dict]]:  # type: ignore[no-untyped-def]
    """boto3 clients whose `answers` (service -> operation -> response) are answered here, the
    request and the response validated against botocore's model; the rest goes to moto."""
    import boto3
    from botocore.awsrequest import AWSResponse
    from botocore.validate import validate_parameters

    made, requests_seen = boto3.client, {}

    def answered_here(c, operation: str, response: dict) -> list[dict]:  # type: ignore[no-untyped-def]
        model = c.meta.service_model.operation_model(operation)
        if model.output_shape is not None:  # StopHyperParameterTuningJob answers nothing
            validate_parameters(response, model.output_shape)
        seen: list[dict] = []

        def check(params, **_):  # type: ignore[no-untyped-def]
            validate_parameters(params, model.input_shape)
            seen.append(params)

        service = c.meta.service_model.service_name
        c.meta.events.register(f"before-parameter-build.{service}.{operation}", check)
        c.meta.events.register(
            f"before-call.{service}.{operation}", lambda **_: (AWSResponse(None, 200, {}, None), response)
        )
        return seen

    def client(service, *args, **kwargs):  # type: ignore[no-untyped-def]
        c = made(service, *args, **kwargs)
        for operation, response in answers.get(service, {}).items():
            requests_seen[operation] = answered_here(c, operation, response)
        return c

    monkeypatch.setattr(boto3, "client", client)
    return requests_seen


def test_stop_a_run_stops_the_training_job_its_history_names(aws, moto, monkeypatch):
    """A run's training job is found in its execution history (a TaskScheduled of
    sagemaker:createTrainingJob); moto's history has no such event: answered here, validated."""
    from moto.sagemaker.models import sagemaker_backends

    name = "digits-dev-classifier-spot-77777777-0"
    _job(moto.client("sagemaker"), name, True)
    job = sagemaker_backends[ACCOUNT][REGION].training_jobs[name]
    job.training_job_status, job.secondary_status = "InProgress", "Training"
    execution = _start(moto, "digits-dev-classifier-spot")
    scheduled = {
        "timestamp": datetime.now(UTC),
        "type": "TaskScheduled",
        "id": 2,
        "taskScheduledEventDetails": {
            "resourceType": "sagemaker",
            "resource": "createTrainingJob",
            "region": REGION,
            "parameters": json.dumps({"TrainingJobName": name, "RoleArn": ROLE}),
        },
    }
    seen = _with_answers(monkeypatch, {"stepfunctions": {"GetExecutionHistory": {"events": [scheduled]}}})
    run = execution.rsplit(":", 1)[-1]
    result = _cli(aws, "stop", run, "--env", "dev", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["stopped"] == [
        {"kind": "training job", "name": name, "entry": "classifier-spot", "spot": True},
        {"kind": "execution", "name": run, "entry": "classifier-spot", "spot": False},
    ]
    assert seen["GetExecutionHistory"] == [{"executionArn": execution}]
    assert _describe(moto, execution, name) == ("ABORTED", "Stopping")


def test_stop_a_search_stops_its_tuning_job_not_another_environments(aws, moto, monkeypatch):
    """moto has no StopHyperParameterTuningJob: answered here, the request validated."""
    from moto.sagemaker.models import sagemaker_backends

    sm = moto.client("sagemaker")
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
        sagemaker_backends[ACCOUNT][REGION].hyper_parameter_tuning_jobs[
            name
        ].hyper_parameter_tuning_job_status = "InProgress"
    seen = _with_answers(monkeypatch, {"sagemaker": {"StopHyperParameterTuningJob": {}}})
    result = _cli(aws, "stop", "lr-search", "--env", "dev")
    assert result.exit_code == 0, result.output
    assert result.output == "stopped tuning job digits-lr-search-1a2b3c4d (lr-search)\n"
    assert seen["StopHyperParameterTuningJob"] == [
        {"HyperParameterTuningJobName": "digits-lr-search-1a2b3c4d"}
    ]
    refused = _cli(aws, "stop", "digits-lr-search-5e6f7a8b", "--env", "dev")  # prod's, by its tags
    assert refused.exit_code == 1 and "stops only what it started there" in str(refused.exception)


def test_run_prints_its_training_jobs_log_lines_as_it_goes_each_once(aws, moto, monkeypatch):
    """The job is the one the execution's history names (answered here: moto's history has no
    TaskScheduled); its hosts' lines come between the run's own lines, each once over many polls."""
    scheduled = {
        "timestamp": datetime.now(UTC),
        "type": "TaskScheduled",
        "id": 2,
        "taskScheduledEventDetails": {
            "resourceType": "sagemaker",
            "resource": "createTrainingJob",
            "region": REGION,
            "parameters": json.dumps({"TrainingJobName": DONE}),
        },
    }
    _with_answers(monkeypatch, {"stepfunctions": {"GetExecutionHistory": {"events": [scheduled]}}})
    before = set(_running(moto))
    result = _cli(aws, "run", "classifier", "--env", "dev", "--poll", "0.1", "--timeout", "1")
    (execution,) = set(_running(moto)) - before
    moto.client("stepfunctions").stop_execution(executionArn=execution)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1:5] == [
        "03:00:00 algo-1 epoch 1 loss 0.9",
        "03:00:10 algo-2 epoch 1 loss 0.8",
        "03:00:20 algo-1 epoch 2 loss 0.4",
        "03:00:30 algo-2 saved model.pth",
    ]
    assert lines[5].startswith("still running after 1.0 s")
    quiet = _cli(aws, "run", "classifier", "--env", "dev", "--poll", "0.1", "--timeout", "0.3", "--no-logs")
    for arn in set(_running(moto)) - before:
        moto.client("stepfunctions").stop_execution(executionArn=arn)
    assert "epoch" not in quiet.output and quiet.exit_code == 0, quiet.output
