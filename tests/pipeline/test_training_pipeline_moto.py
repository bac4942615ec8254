"""The synthesized training state machine, executed by moto's Step Functions interpreter against
a moto server started here: success, fallback to the next candidate, and failures with reasons."""

from __future__ import annotations

import json
import time

import pytest

from tests.pipeline.conftest import ROLE, definition
from tests.support.moto_server import ACCOUNT, REGION, jayway_json_paths

pytestmark = pytest.mark.synth


def _deploy(moto, app, job: str = "classifier") -> str:
    """What `cdk deploy` would leave behind: the topic and the state machine."""
    moto.reset()
    topic = moto.client("sns").create_topic(Name="digits-dev-training")["TopicArn"]
    moto.client("sagemaker").create_model_package_group(
        ModelPackageGroupName="digits-dev"
    )  # the foundation's
    return moto.client("stepfunctions").create_state_machine(
        name=f"digits-dev-{job}",
        definition=definition(app, f"digits-dev-{job}", topic),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )["stateMachineArn"]


def _run(moto, app, job: str = "classifier", timeout: float = 60) -> dict:
    machine = _deploy(moto, app, job)
    sfn = moto.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.2)
    history = sfn.get_execution_history(executionArn=execution)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    return {**described, "entered": entered}


def _jobs(moto) -> dict[str, dict]:
    sm = moto.client("sagemaker")
    names = [j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"]]
    return {n: sm.describe_training_job(TrainingJobName=n) for n in names}


def test_success_path_creates_the_first_candidate(moto, dev_app):
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    output = json.loads(result["output"])
    plan = dev_app.stages["dev"].training.job_plans["classifier"]
    first = plan.candidates[0]
    assert output["TrainingJobName"] == first.name and output["InstanceType"] == "ml.g4dn.xlarge"
    jobs = _jobs(moto)
    assert list(jobs) == [first.name]
    recorded = jobs[first.name]
    assert recorded["RoleArn"] == ROLE
    assert recorded["ResourceConfig"]["InstanceType"] == "ml.g4dn.xlarge"
    assert recorded["HyperParameters"]["sagemaker_program"] == '"train.py"'
    assert recorded["HyperParameters"]["epochs"] == "10"
    assert "Notify succeeded" in result["entered"]


def test_resource_limit_exceeded_moves_to_the_next_candidate(moto, dev_app, monkeypatch):
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.models import SageMakerModelBackend

    original = SageMakerModelBackend.create_training_job

    def refuse_g4dn(self, *args, **kwargs):
        itype = kwargs["resource_config"]["InstanceType"]
        if itype == "ml.g4dn.xlarge":
            raise JsonRESTError(
                "ResourceLimitExceeded",
                f"The account-level service limit '{itype} for training job usage' is 0 Instances, with current "
                "utilization of 0 Instances and a request delta of 1 Instances.",
            )
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SageMakerModelBackend, "create_training_job", refuse_g4dn)
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])["InstanceType"] == "ml.m5.xlarge"
    assert "Back off 1/2" in result["entered"] and "Create 2/2" in result["entered"]
    # The second candidate's quota is known: GetServiceQuota runs; moto has no SageMaker quotas,
    # so the step fails and the pipeline proceeds (as it must on AWS when the quota API is unavailable).
    assert "Quota 2/2" in result["entered"]
    quota_state = dev_app.stages["dev"].training.pipelines["classifier"].definition["States"]["Quota 2/2"]
    assert quota_state["Resource"] == "arn:aws:states:::aws-sdk:servicequotas:getServiceQuota"
    assert quota_state["Parameters"] == {"ServiceCode": "sagemaker", "QuotaCode": "L-E7898792"}
    assert [j["ResourceConfig"]["InstanceType"] for j in _jobs(moto).values()] == ["ml.m5.xlarge"]


def _fail_jobs_on(monkeypatch, reasons: dict[str, str]) -> None:
    from moto.sagemaker.models import SageMakerModelBackend

    original = SageMakerModelBackend.describe_training_job

    def describe(self, training_job_name):
        response = dict(original(self, training_job_name))
        reason = reasons.get(response["ResourceConfig"]["InstanceType"])
        if reason:
            response.update(TrainingJobStatus="Failed", FailureReason=reason)
        return response

    monkeypatch.setattr(SageMakerModelBackend, "describe_training_job", describe)


def test_failed_job_ends_in_the_fail_state_with_its_reason(moto, dev_app, monkeypatch):
    reason = "AlgorithmError: ExecuteUserScriptError: loss became NaN at step 1200"
    _fail_jobs_on(monkeypatch, {"ml.g4dn.xlarge": reason})
    result = _run(moto, dev_app)
    assert result["status"] == "FAILED"
    assert result["error"] == "TrainingJobFailed" and result["cause"] == reason
    assert "Create 2/2" not in result["entered"]  # an algorithm error is not the next candidate's business


def test_capacity_failure_after_creation_tries_the_next_candidate(moto, dev_app, monkeypatch):
    _fail_jobs_on(
        monkeypatch, {"ml.g4dn.xlarge": "CapacityError: Unable to provision requested ML compute capacity."}
    )
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    assert json.loads(result["output"])["InstanceType"] == "ml.m5.xlarge"


def test_every_candidate_refused_fails_with_a_clear_cause(moto, dev_app, monkeypatch):
    _fail_jobs_on(
        monkeypatch, {t: "InsufficientCapacityError: no capacity" for t in ("ml.g4dn.xlarge", "ml.m5.xlarge")}
    )
    result = _run(moto, dev_app)
    assert result["status"] == "FAILED" and result["error"] == "NoCandidateAvailable"
    assert "1x ml.g4dn.xlarge, 1x ml.m5.xlarge" in result["cause"]


def test_without_a_snapshot_the_quota_is_looked_up_and_an_unreachable_api_is_noted(moto, dev_app):
    """moto's interpreter has no servicequotas integration: the lookup fails, the pipeline notes
    why and proceeds (as it must on AWS when the quota API is unavailable)."""
    result = _run(moto, dev_app)
    assert result["entered"][:2] == ["Quota 1/2", "Quota 1/2: not checked"]
    states = dev_app.stages["dev"].training.pipelines["classifier"].definition["States"]
    assert states["Quota 1/2"]["Resource"] == "arn:aws:states:::aws-sdk:servicequotas:listServiceQuotas"
    assert result["status"] == "SUCCEEDED", result
    # Each failed lookup was retried as its Retry says, with its waits (recorded, not slept: MotoServer)
    unanswered = [s for s in result["entered"] if f"{s}: not checked" in result["entered"]]
    assert unanswered[0] == "Quota 1/2" and len(unanswered) == 2, result["entered"]  # and the transform's
    retries = [states[s]["Retry"] for s in unanswered]
    assert moto.retry_waits == [
        r["IntervalSeconds"] * r["BackoffRate"] ** attempt
        for (r,) in retries
        for attempt in range(r["MaxAttempts"])
    ], (moto.retry_waits, retries)


QUOTAS = [
    {
        "ServiceCode": "sagemaker",
        "QuotaCode": f"L-{i:08X}",
        "QuotaName": f"ml.fake{i}.xlarge for training job usage",
        "Value": 1.0,
    }
    for i in range(230)
]


@pytest.fixture
def service_quotas(monkeypatch):
    """What moto lacks: ListServiceQuotas for SageMaker (230 quotas, 3 pages) and the Step Functions
    interpreter's route to it. The state machine's own paging, filtering and choices then run."""
    from moto.servicequotas.responses import ServiceQuotasResponse
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
        StateTaskService,
    )

    quotas = [
        *QUOTAS[:120],
        {
            "ServiceCode": "sagemaker",
            "QuotaCode": "L-G4DN",
            "QuotaName": "ml.g4dn.xlarge for training job usage",
            "Value": 0.0,
        },
        *QUOTAS[120:],
        {
            "ServiceCode": "sagemaker",
            "QuotaCode": "L-M5",
            "QuotaName": "ml.m5.xlarge for training job usage",
            "Value": 4.0,
        },
    ]
    calls: list[dict] = []

    def list_service_quotas(self):  # type: ignore[no-untyped-def]
        params = json.loads(self.body)
        calls.append(params)
        start, size = int(params.get("NextToken") or 0), int(params.get("MaxResults", 100))
        out: dict = {"Quotas": quotas[start : start + size]}
        if start + size < len(quotas):
            out["NextToken"] = str(start + size)
        return json.dumps(out)

    monkeypatch.setattr(ServiceQuotasResponse, "list_service_quotas", list_service_quotas, raising=False)
    jayway_json_paths(monkeypatch)
    monkeypatch.setitem(
        StateTaskService._SERVICE_NAME_SFN_TO_BOTO_OVERRIDES, "servicequotas", "service-quotas"
    )
    return calls


def test_without_a_snapshot_a_zero_quota_is_found_by_name_across_pages_and_skipped(
    moto, dev_app, service_quotas
):
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    # ml.g4dn.xlarge is on the second page with a quota of 0: the next candidate, without a create call
    assert "Quota 1/2: next page" in result["entered"] and "Quota 1/2: value" in result["entered"]
    assert "Create 1/2" not in result["entered"]
    # then the example's transform looks for its first candidate's quota: three pages, not found
    # (this account lists none), so that create call is the judge
    assert [c.get("NextToken") for c in service_quotas] == [None, "100", None, "100", "200"]
    assert "Quota transform score ml.m5.xlarge: not found" in result["entered"]
    assert all(c["ServiceCode"] == "sagemaker" and c["MaxResults"] == 100 for c in service_quotas)
    assert json.loads(result["output"])["InstanceType"] == "ml.m5.xlarge"
    assert [j["ResourceConfig"]["InstanceType"] for j in _jobs(moto).values()] == ["ml.m5.xlarge"]


def _cli(moto, root, *args):
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": moto.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }
    env.pop("AWS_PROFILE", None)
    return subprocess.run(
        [sys.executable, "-m", "sagestack.cli", *args, "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_sagestack_run_starts_and_follows_the_pipeline(moto, dev_app):
    _deploy(moto, dev_app)
    result = _cli(moto, dev_app.root, "run", "classifier", "--env", "dev", "--poll", "0.2")
    assert result.returncode == 0, result.stderr
    assert "→ Create 1/2" in result.stdout and "✓ succeeded" in result.stdout
    assert dev_app.stages["dev"].training.job_plans["classifier"].candidates[0].name in result.stdout


def test_sagestack_run_reports_the_failure_reason(moto, dev_app, monkeypatch):
    _fail_jobs_on(monkeypatch, {"ml.g4dn.xlarge": "AlgorithmError: out of memory"})
    _deploy(moto, dev_app)
    result = _cli(moto, dev_app.root, "run", "classifier", "--env", "dev", "--poll", "0.2")
    assert result.returncode == 1
    assert "TrainingJobFailed" in result.stderr and "AlgorithmError: out of memory" in result.stderr
    assert "Traceback" not in result.stderr


def test_sagestack_run_says_what_to_deploy_when_nothing_is(moto, dev_app):
    moto.reset()
    result = _cli(moto, dev_app.root, "run", "classifier", "--env", "dev")
    assert result.returncode == 1
    assert (
        "state machine 'digits-dev-classifier' is not deployed in us-east-1; run `cdk deploy digits-dev-training` first"
        in result.stderr
    )


def test_sagestack_run_unknown_job_suggests(moto, dev_app):
    result = _cli(moto, dev_app.root, "run", "clasifier", "--env", "dev")
    assert (
        result.returncode == 2
        and "no job, tuning entry, transform or optimized LLM 'clasifier'; did you mean 'classifier'?"
        in result.stderr
    )


def test_lineage_walks_a_served_model_back_to_its_training(moto, dev_app, tmp_path):
    """The pipeline registers the package (with its lineage); an endpoint serves it as the serving
    stack would; `sagestack lineage` walks back and judges the lock; a spec change makes it say no."""
    import shutil

    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    sm = moto.client("sagemaker")
    packages = sm.list_model_packages(ModelPackageGroupName="digits-dev")["ModelPackageSummaryList"]
    described = [sm.describe_model_package(ModelPackageName=p["ModelPackageArn"]) for p in packages]
    # one for the endpoint, one for the transform: the endpoint's is served
    (package,) = [
        p for p in described if p["CustomerMetadataProperties"].get("sagestack:endpoint") == "digits"
    ]
    arn, meta = package["ModelPackageArn"], package["CustomerMetadataProperties"]
    plan = dev_app.stages["dev"].training.job_plans["classifier"]
    assert meta["sagestack:training-job"] == plan.candidates[0].name
    assert meta["sagestack:spec-hash"] == plan.digest and meta["sagestack:job"] == "classifier"
    assert (
        meta["sagestack:training-image"]
        == plan.candidates[0].request["AlgorithmSpecification"]["TrainingImage"]
    )
    assert len(meta["sagestack:lock-sha256"]) == 64
    sm.create_model(
        ModelName="digits-dev-digits", PrimaryContainer={"ModelPackageName": arn}, ExecutionRoleArn=ROLE
    )
    sm.create_endpoint_config(
        EndpointConfigName="digits-dev-digits-1",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "digits-dev-digits",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.c5.xlarge",
            }
        ],
    )
    sm.create_endpoint(EndpointName="digits-dev-digits", EndpointConfigName="digits-dev-digits-1")

    # The project's own lock (the fixture's training_src is not the repository's: its source hash differs).
    here = tmp_path / "here"
    shutil.copytree(dev_app.root, here)
    assert _cli(moto, here, "lock", "--env", "dev").returncode == 0
    lineage = _cli(moto, here, "lineage", "digits", "--env", "dev", "--check")
    out = " ".join(lineage.stdout.split())
    assert lineage.returncode == 0, lineage.stdout + lineage.stderr
    for fact in (
        "endpoint digits-dev-digits",
        f"model package {arn}",
        f"training job {plan.candidates[0].name}",
        "code: s3://",
        "instances: 1x ml.g4dn.xlarge",
        "Would config/envs/dev.lock.json train it again? yes",
        f"the lock's content hash {plan.digest}",
        "ran by tag",
    ):
        assert fact in out, (fact, lineage.stdout)
    as_json = json.loads(_cli(moto, here, "lineage", "digits", "--env", "dev", "--json").stdout)
    assert [s["kind"] for s in as_json["steps"]] == [
        "endpoint",
        "endpoint config",
        "model",
        "model package",
        "training job",
    ]

    # The spec moves on (and is locked): the lock no longer trains what is served.
    changed = tmp_path / "changed"
    shutil.copytree(here, changed)
    spec = changed / "config/sagestack.yaml"
    spec.write_text(spec.read_text().replace("epochs: 10", "epochs: 11"))
    assert _cli(moto, changed, "lock", "--env", "dev").returncode == 0
    again = _cli(moto, changed, "lineage", "digits", "--env", "dev", "--check")
    text = " ".join(again.stdout.split())
    assert again.returncode == 1, again.stdout + again.stderr
    assert "Would config/envs/dev.lock.json train it again? no" in text
    assert f"trained under content hash {plan.digest}, the lock now says" in text
    assert "changed since it was registered" in text
    # Under the very lock the synth saw, it says so.
    same = _cli(moto, dev_app.root, "lineage", "digits", "--env", "dev")
    assert "registered under config/envs/dev.lock.json as it is today" in " ".join(same.stdout.split())

    unknown = _cli(moto, dev_app.root, "lineage", "digts", "--env", "dev")
    assert unknown.returncode == 2 and "did you mean 'digits'?" in unknown.stderr
