"""The example's dev recommendation pipeline (digits: slo p95 20 ms at 100 requests/s, candidates
ml.c5.large, ml.c5.xlarge, ml.c5.2xlarge) executed by moto's Step Functions interpreter against a moto
server started here. moto has no Inference Recommender: the server's SageMaker handler is given
CreateInferenceRecommendationsJob / DescribeInferenceRecommendationsJob here — each request judged by
botocore's model, each answer built to the model's output shape and validated against it. The model
package the job measures is moto's own (ListModelPackages: the group's newest approved)."""

from __future__ import annotations

import json
import re
import time

import pytest
from botocore.validate import ParamValidator

from sagestack.core.catalog.service_model import service_model, validate_request
from sagestack.endpoints.verdict import table_lines, verdict
from tests.pipeline.conftest import BUCKET, KEY, MLFLOW, ROLE
from tests.support.cfn import resolve
from tests.support.moto_server import ACCOUNT, REGION

pytestmark = pytest.mark.synth

MACHINE = "digits-dev-recommend-digits"
CANDIDATES = ("ml.c5.large", "ml.c5.xlarge", "ml.c5.2xlarge")


def _answer_valid(operation: str, answer: dict) -> None:
    shape = service_model().operation_model(operation).output_shape
    report = ParamValidator().validate(answer, shape)
    assert not report.has_errors(), report.generate_report()


class FakeRecommender:
    """Inference Recommender as the test needs it: statuses in turn, then these measurements
    (instance type -> (p95 latency ms, invocations per minute, cost per inference))."""

    def __init__(self, statuses: list[str], measured: dict[str, tuple[int, int, float]], refusals: int = 0):
        self.statuses, self.measured, self.refusals = statuses, measured, refusals
        self.created: list[dict] = []
        self.described = 0

    def install(self, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        from moto.core.exceptions import JsonRESTError
        from moto.sagemaker.responses import SageMakerResponse

        fake = self

        def create_inference_recommendations_job(self):  # type: ignore[no-untyped-def]
            request = json.loads(self.body)
            validate_request("CreateInferenceRecommendationsJob", request)
            if fake.refusals:
                fake.refusals -= 1
                raise JsonRESTError(
                    "ResourceLimitExceeded",
                    "The account-level service limit 'ml.c5.large for endpoint usage' is 0 Instances, with "
                    "current utilization of 0 Instances and a request delta of 1 Instances.",
                )
            if any(j["JobName"] == request["JobName"] for j in fake.created):
                raise JsonRESTError("ResourceInUse", f"Job {request['JobName']} already exists")
            fake.created.append(request)
            answer = {"JobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:inference-recommendations-job/x"}
            _answer_valid("CreateInferenceRecommendationsJob", answer)
            return json.dumps(answer)

        def describe_inference_recommendations_job(self):  # type: ignore[no-untyped-def]
            name = json.loads(self.body)["JobName"]
            found = [j for j in fake.created if j["JobName"] == name]
            if not found:
                raise JsonRESTError("ResourceNotFound", f"Job {name} not found")
            (request,) = found
            status = fake.statuses[min(fake.described, len(fake.statuses) - 1)]
            fake.described += 1
            answer = {
                "JobName": request["JobName"],
                "JobType": request["JobType"],
                "JobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:inference-recommendations-job/x",
                "RoleArn": request["RoleArn"],
                "Status": status,
                "CreationTime": 0,
                "LastModifiedTime": 0,
                "InputConfig": request["InputConfig"],
            }
            if status == "COMPLETED":
                answer["InferenceRecommendations"] = [
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
                    for i, (instance, (latency, per_minute, cost)) in enumerate(fake.measured.items())
                ]
            _answer_valid("DescribeInferenceRecommendationsJob", {**answer, "CreationTime": time.time(),
                                                                   "LastModifiedTime": time.time()})  # fmt: skip
            return json.dumps(answer)

        for f in (create_inference_recommendations_job, describe_inference_recommendations_job):
            monkeypatch.setattr(SageMakerResponse, f.__name__, f, raising=False)


def _definition(app, topic: str) -> str:  # type: ignore[no-untyped-def]
    from aws_cdk.assertions import Template

    resources = Template.from_stack(app.stages["dev"].recommendation).to_json()["Resources"]
    (machine,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::StepFunctions::StateMachine" and r["Properties"]["StateMachineName"] == MACHINE
    ]
    pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": "aws"}

    def ref(name: str) -> str:
        if name in pseudo:
            return pseudo[name]
        if resources[name]["Type"] == "AWS::SNS::Topic":
            return topic
        raise KeyError(name)

    def get_att(name: str, attribute: str) -> str:
        if resources[name]["Type"] == "AWS::SageMaker::AIWorkloadConfig":
            workload = resources[name]["Properties"]["AIWorkloadConfigName"]
            return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:ai-workload-config/{workload}"
        return ref(name)

    def import_value(export: str) -> str:
        for fragment, value in (
            ("ExecutionRole", ROLE),
            ("Artifacts", BUCKET),
            ("Key", KEY),
            ("Tracking", MLFLOW),
        ):
            if fragment in export:
                return value
        raise KeyError(export)

    return resolve(machine["Properties"]["DefinitionString"], ref, get_att, import_value)


def _approve(moto, group: str = "digits-dev", status: str = "Approved") -> str:  # type: ignore[no-untyped-def]
    """A new version in a group, approved unless `status` says otherwise (by default what a training
    run and a review make in the environment's group)."""
    return moto.client("sagemaker").create_model_package(
        ModelPackageGroupName=group,
        ModelApprovalStatus=status,
        InferenceSpecification={
            "Containers": [{"Image": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/x:1"}],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
    )["ModelPackageArn"]


def _deploy(moto, app, *, approved: bool = True) -> tuple[str, str | None]:  # type: ignore[no-untyped-def]
    moto.reset()
    sm = moto.client("sagemaker")
    sm.create_model_package_group(ModelPackageGroupName="digits-dev")
    package = _approve(moto) if approved else None
    topic = moto.client("sns").create_topic(Name="digits-dev-recommendation")["TopicArn"]
    machine = moto.client("stepfunctions").create_state_machine(
        name=MACHINE, definition=_definition(app, topic), roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline"
    )["stateMachineArn"]
    return machine, package


def _run(moto, app, **kw) -> dict:  # type: ignore[no-untyped-def]
    machine, package = _deploy(moto, app, **kw)
    return {**_execute(moto, machine), "package": package}


def _execute(moto, machine: str) -> dict:  # type: ignore[no-untyped-def]
    """Start the deployed machine once and wait for its end: the execution, the states entered."""
    sfn = moto.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=machine, name=f"run-{time.monotonic_ns()}")[
        "executionArn"
    ]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.2)
    history = sfn.get_execution_history(executionArn=execution)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    return {**described, "entered": entered}


def _slo(app):  # type: ignore[no-untyped-def]
    return app.stages["dev"].plan.spec.endpoints["digits"].slo


def test_the_job_measures_the_served_package_and_the_cheapest_candidate_that_meets_wins(
    moto, dev_app, monkeypatch
):
    fake = FakeRecommender(
        ["IN_PROGRESS", "COMPLETED"],
        {
            "ml.c5.large": (31, 4200, 2.0e-6),
            "ml.c5.xlarge": (14, 7800, 2.2e-6),
            "ml.c5.2xlarge": (9, 15000, 2.3e-6),
        },
    )
    fake.install(monkeypatch)
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    (request,) = fake.created
    assert request["InputConfig"]["ModelPackageVersionArn"] == result["package"]  # the newest approved
    assert [c["InstanceType"] for c in request["InputConfig"]["EndpointConfigurations"]] == list(CANDIDATES)
    assert request["StoppingConditions"] == {
        "MaxInvocations": 6000,
        "ModelLatencyThresholds": [{"Percentile": "P95", "ValueInMilliseconds": 20}],
    }
    assert request["RoleArn"] == ROLE and request["InputConfig"]["VolumeKmsKeyId"] == KEY
    v = verdict("digits", "classic", _slo(dev_app), CANDIDATES, json.loads(result["output"]))
    assert v.best is not None and v.best.instance_type == "ml.c5.xlarge"
    lines = table_lines(v)
    assert all(len(line) <= 80 for line in lines)
    assert lines[-1] == "Verdict: ml.c5.xlarge meets the target at the lowest cost."
    # wrapped at a space under the reason, no word cut
    assert " ".join(lines[1:3]).split() == [
        "ml.c5.large",
        "31",
        "70",
        "0.0020",
        "no:",
        "latency",
        "31",
        "ms",
        ">",
        "20;",
        "70",
        "req/s",
        "<",
        "100",
    ]
    assert lines[2].startswith(" " * 50) and lines[3].startswith("ml.c5.xlarge")


def test_a_target_no_candidate_meets_ends_with_a_verdict_not_a_crash(moto, dev_app, monkeypatch):
    FakeRecommender(
        ["COMPLETED"], {"ml.c5.large": (48, 2400, 2.0e-6), "ml.c5.xlarge": (35, 4100, 2.1e-6)}
    ).install(monkeypatch)
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result  # the pipeline measured; the target is what failed
    v = verdict("digits", "classic", _slo(dev_app), CANDIDATES, json.loads(result["output"]))
    assert v.best is None
    lines = table_lines(v)
    assert lines[-1] == "Verdict: no candidate meets the target."
    assert lines[-2].split() == ["ml.c5.2xlarge", "-", "-", "-", "not", "measured"]


def test_no_approved_package_fails_saying_what_to_do(moto, dev_app, monkeypatch):
    fake = FakeRecommender(["COMPLETED"], {})
    fake.install(monkeypatch)
    result = _run(moto, dev_app, approved=False)
    assert result["status"] == "FAILED" and result.get("error") == "NoModelPackage"
    assert "pin model_package" in result["cause"] and fake.created == []


def test_no_room_backs_off_and_a_second_run_follows_the_same_job(moto, dev_app, monkeypatch):
    fake = FakeRecommender(["COMPLETED"], {"ml.c5.xlarge": (14, 7800, 2.2e-6)}, refusals=1)
    fake.install(monkeypatch)
    result = _run(moto, dev_app)
    assert result["status"] == "SUCCEEDED", result
    assert result["entered"].count("Back off recommend digits") == 1
    assert result["entered"].count("Recommend digits") == 2
    fake.described = 0
    result = _run(moto, dev_app)  # the job exists (fake.created keeps it): ResourceInUse, followed
    assert result["status"] == "SUCCEEDED", result
    assert "Recommend refused digits?" in result["entered"] and len(fake.created) == 1


def test_a_new_approved_version_is_measured_by_a_job_of_its_own(moto, dev_app, monkeypatch):
    """Version 1 measured; version 2 approved: the next run measures version 2 in a second job (not
    version 1's answer under the same name); a run with no new version follows version 2's job."""
    fake = FakeRecommender(["COMPLETED"], {"ml.c5.xlarge": (14, 7800, 2.2e-6)})
    fake.install(monkeypatch)
    machine, first = _deploy(moto, dev_app)
    result = _execute(moto, machine)
    assert result["status"] == "SUCCEEDED", result
    second = _approve(moto)
    assert second.endswith("/2") and first is not None and first.endswith("/1")
    result = _execute(moto, machine)
    assert result["status"] == "SUCCEEDED", result
    assert [j["InputConfig"]["ModelPackageVersionArn"] for j in fake.created] == [first, second]
    one, two = (j["JobName"] for j in fake.created)
    assert one != two and one.endswith("-v1") and two.endswith("-v2")
    assert one.removesuffix("-v1") == two.removesuffix("-v2")  # the same target: only the model differs
    output = json.loads(result["output"])
    assert output["JobName"] == two and output["ModelPackage"] == second
    # The Describe call and the notification name the job this run made, not the first one.
    history = moto.client("stepfunctions").get_execution_history(executionArn=result["executionArn"])
    published = [
        json.loads(e["taskScheduledEventDetails"]["parameters"])
        for e in history["events"]
        if e.get("taskScheduledEventDetails", {}).get("resource") == "publish"
    ]
    assert [p["Message"].split()[2] for p in published] == [two]
    result = _execute(moto, machine)  # nothing new approved: the same job, followed
    assert result["status"] == "SUCCEEDED", result
    assert "Recommend refused digits?" in result["entered"] and len(fake.created) == 2
    assert json.loads(result["output"])["JobName"] == two


def test_run_recommend_then_the_verdict_then_a_reviewed_pin(moto, dev_app, monkeypatch):
    from tests.pipeline.test_training_pipeline_moto import _cli

    FakeRecommender(
        ["IN_PROGRESS", "COMPLETED"],
        {
            "ml.c5.large": (18, 6600, 2.0e-6),
            "ml.c5.xlarge": (14, 7800, 2.2e-6),
            "ml.c5.2xlarge": (9, 15000, 2.3e-6),
        },
    ).install(monkeypatch)
    root = dev_app.root
    moto.reset()
    result = _cli(moto, root, "recommend", "digits", "--env", "dev")
    assert result.returncode == 1 and "is not deployed" in result.stderr
    _deploy(moto, dev_app)
    result = _cli(moto, root, "recommend", "digits", "--env", "dev")
    assert result.returncode == 1 and "--recommend" in result.stderr  # never run: how to run it
    result = _cli(moto, root, "run", "digits", "--env", "dev", "--recommend", "--poll", "0.2")
    assert result.returncode == 0, result.stderr
    assert "→ Recommend digits" in result.stdout and "✓ succeeded" in result.stdout
    result = _cli(moto, root, "recommend", "digits", "--env", "dev")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "Verdict: ml.c5.large meets the target at the lowest cost." in lines
    print(result.stdout)
    assert lines[-1] == "Pin it for review: sagestack recommend digits --env dev --pin"
    overlay = root / "config/envs/dev.yaml"
    before = overlay.read_text()
    result = _cli(moto, root, "recommend", "digits", "--env", "dev", "--pin")
    assert result.returncode == 0, result.stderr
    assert "✓ endpoints.digits.instance_type: ml.c5.xlarge → ml.c5.large" in result.stdout
    print(result.stdout)
    after = overlay.read_text()
    assert after.startswith(before.rstrip("\n").split("\nendpoints:")[0])  # the rest of the file kept
    from sagestack.project.loader import load_project

    assert load_project(root, "dev").spec.endpoints["digits"].instance_type == ["ml.c5.large"]
    result = _cli(moto, root, "recommend", "digits", "--env", "dev", "--pin")  # once is enough
    assert result.returncode == 0 and "has instance_type ml.c5.large already" in result.stdout
    result = _cli(moto, root, "run", "digts", "--env", "dev", "--recommend")
    assert result.returncode == 2 and "did you mean 'digits'" in result.stderr.replace("\n", " ")
    overlay.write_text(before)


def test_a_verdict_about_a_version_no_longer_served_is_shown_stale_and_never_pinned(
    moto, dev_app, monkeypatch
):
    from tests.pipeline.test_training_pipeline_moto import _cli

    FakeRecommender(["COMPLETED"], {"ml.c5.large": (18, 6600, 2.0e-6)}).install(monkeypatch)
    root = dev_app.root
    overlay = root / "config/envs/dev.yaml"
    before = overlay.read_text()
    _deploy(moto, dev_app)
    assert _cli(moto, root, "run", "digits", "--env", "dev", "--recommend", "--poll", "0.2").returncode == 0
    _approve(moto)  # version 2, not measured yet
    result = _cli(moto, root, "recommend", "digits", "--env", "dev")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    print(result.stdout)
    assert lines[0].startswith("digits in dev: digits-dev-digits-") and lines[0].endswith("-v1")
    assert lines[1] == "Measured model package version 1." and all(len(line) <= 80 for line in lines)
    assert lines[-2:] == [
        "Stale: it measured model package version 1; version 2 is served now.",
        "Measure it: sagestack run digits --env dev --recommend",
    ]
    answer = json.loads(_cli(moto, root, "recommend", "digits", "--env", "dev", "--json").stdout)
    assert answer["model_package"].endswith("/1") and "version 2 is served now" in answer["stale"]
    result = _cli(moto, root, "recommend", "digits", "--env", "dev", "--pin")
    assert result.returncode == 1 and "not pinned" in result.stderr and overlay.read_text() == before
    assert "sagestack run digits --env dev --recommend" in result.stderr.replace("\n", " ")
    # measured again: version 2's own job, and the verdict is current
    assert _cli(moto, root, "run", "digits", "--env", "dev", "--recommend", "--poll", "0.2").returncode == 0
    result = _cli(moto, root, "recommend", "digits", "--env", "dev")
    assert result.stdout.splitlines()[0].endswith("-v2") and "Stale" not in result.stdout
    assert result.stdout.splitlines()[-1] == "Pin it for review: sagestack recommend digits --env dev --pin"
    result = _cli(moto, root, "recommend", "digits", "--env", "dev", "--pin")
    assert result.returncode == 0 and "→ ml.c5.large" in result.stdout
    overlay.write_text(before)


def test_status_shows_the_verdict_the_pipeline_recorded_and_when_it_goes_stale(moto, dev_app, monkeypatch):
    """`status` reads what the real pipeline leaves (not a copy of its shape): never measured, then the
    verdict with the version it measured, then stale once a new version is approved."""
    from tests.pipeline.test_training_pipeline_moto import _cli

    FakeRecommender(["COMPLETED"], {"ml.c5.large": (18, 6600, 2.0e-6)}).install(monkeypatch)
    root = dev_app.root

    def section() -> tuple[list[str], dict]:  # type: ignore[type-arg]
        screen = _cli(moto, root, "status", "--env", "dev")
        assert "Traceback" not in screen.stderr, screen.stderr
        lines = screen.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), lines
        start = lines.index("recommendations (slo:)") + 1
        end = next((i for i in range(start, len(lines)) if not lines[i].startswith("  ")), len(lines))
        (row,) = json.loads(_cli(moto, root, "status", "--env", "dev", "--json").stdout)["recommendations"]
        return lines[start:end], row

    _deploy(moto, dev_app)
    shown, row = section()
    assert shown == ["  digits never measured", "    measure: sagestack run digits --env dev --recommend"]
    assert _cli(moto, root, "run", "digits", "--env", "dev", "--recommend", "--poll", "0.2").returncode == 0
    shown, row = section()
    assert shown[0] == "  digits ml.c5.large meets the target: 18 ms, 110 req/s, $0.0020/1k req"
    assert re.fullmatch(
        r"    measured version 1 \d\d:\d\d; table: `sagestack recommend digits --env dev`", shown[1]
    )
    assert row["job"].endswith("-v1") and row["stale"] is None and row["recommended"] == "ml.c5.large"
    # the same rows as `recommend --json`
    answer = json.loads(_cli(moto, root, "recommend", "digits", "--env", "dev", "--json").stdout)
    assert row["rows"] == answer["rows"] and row["model_package"] == answer["model_package"]
    _approve(moto)
    shown, row = section()
    assert shown[1:] == [
        "    stale: it measured model package version 1; version 2 is served now",
        "    measure: sagestack run digits --env dev --recommend",
    ]
    answer = json.loads(_cli(moto, root, "recommend", "digits", "--env", "dev", "--json").stdout)
    assert row["stale"] == answer["stale"]  # one judgement, both commands


def test_a_job_that_stops_without_a_reason_fails_naming_the_job_the_run_rendered(moto, dev_app, monkeypatch):
    FakeRecommender(["STOPPED"], {}).install(monkeypatch)
    result = _run(moto, dev_app)
    assert result["status"] == "FAILED" and result.get("error") == "RecommendationJobFailed", result
    assert re.fullmatch(
        r"Recommendation job digits-dev-digits-[0-9a-f]{12}-v1 ended without .*", result["cause"]
    )


@pytest.fixture(scope="module")
def staging_app(tmp_path_factory):
    from tests.pipeline.conftest import example_copy
    from tests.support.cdk_app import BuiltApp

    project = example_copy(tmp_path_factory)
    staging = project.root / "config/envs/staging.yaml"
    staging.write_text(staging.read_text() + "pipeline: {poll_interval: 1s, backoff: 1s}\n")
    return BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["staging"])


def _install_ai_jobs(monkeypatch, performances: dict[str, dict[str, str]]) -> list[dict]:  # type: ignore[no-untyped-def]
    """CreateAIRecommendationJob / DescribeAIRecommendationJob, which moto lacks: a job that completes
    with one recommendation per candidate and these expected figures (metric -> value)."""
    from moto.sagemaker.responses import SageMakerResponse

    created: list[dict] = []
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:ai-recommendation-job/x"

    def create_ai_recommendation_job(self):  # type: ignore[no-untyped-def]
        request = json.loads(self.body)
        validate_request("CreateAIRecommendationJob", request)
        created.append(request)
        return json.dumps({"AIRecommendationJobArn": arn})

    def describe_ai_recommendation_job(self):  # type: ignore[no-untyped-def]
        (request,) = created
        answer = {
            "AIRecommendationJobName": request["AIRecommendationJobName"],
            "AIRecommendationJobArn": arn,
            "AIRecommendationJobStatus": "Completed",
            "ModelSource": request["ModelSource"],
            "OutputConfig": {"S3OutputLocation": request["OutputConfig"]["S3OutputLocation"]},
            "AIWorkloadConfigIdentifier": request["AIWorkloadConfigIdentifier"],
            "RoleArn": request["RoleArn"],
            "CreationTime": 0,
            "Recommendations": [
                {
                    "DeploymentConfiguration": {"InstanceType": instance, "InstanceCount": 1},
                    "ExpectedPerformance": [
                        {"Metric": m, "Stat": "p95" if m == "ttft-ms" else "avg", "Value": v}
                        for m, v in perf.items()
                    ],
                }
                for instance, perf in performances.items()
            ],
        }
        _answer_valid("DescribeAIRecommendationJob", {**answer, "CreationTime": time.time()})
        return json.dumps(answer)

    for f in (create_ai_recommendation_job, describe_ai_recommendation_job):
        monkeypatch.setattr(SageMakerResponse, f.__name__, f, raising=False)
    return created


def test_an_llm_target_no_candidate_meets_is_a_verdict_too(moto, staging_app, monkeypatch):
    """chat in staging: ttft 500 ms and 30 tokens/s per user, on ml.g5.2xlarge and ml.g6.2xlarge."""
    created = _install_ai_jobs(
        monkeypatch,
        {
            "ml.g5.2xlarge": {"ttft-ms": "640", "throughput": "24.5", "cost": "3.10"},
            "ml.g6.2xlarge": {"ttft-ms": "820", "throughput": "19", "cost": "2.40"},
        },
    )
    moto.reset()
    topic = moto.client("sns").create_topic(Name="digits-staging-recommendation")["TopicArn"]
    machine = moto.client("stepfunctions").create_state_machine(
        name="digits-staging-recommend-chat",
        definition=_staging_definition(staging_app, topic),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )["stateMachineArn"]
    sfn = moto.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    deadline = time.monotonic() + 90
    while (
        time.monotonic() < deadline and sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"
    ):
        time.sleep(0.2)
    result = sfn.describe_execution(executionArn=execution)
    assert result["status"] == "SUCCEEDED", result
    (request,) = created
    assert request["ComputeSpec"] == {"InstanceTypes": ["ml.g5.2xlarge", "ml.g6.2xlarge"]}
    slo = staging_app.stages["staging"].plan.spec.endpoints["chat"].slo
    v = verdict("chat", "llm", slo, ("ml.g5.2xlarge", "ml.g6.2xlarge"), json.loads(result["output"]))
    assert v.best is None
    lines = table_lines(v)
    assert lines[0].split() == ["candidate", "TTFT", "ms", "tok/s", "$/1M", "tok", "meets"]
    assert " ".join(lines[1:3]).split() == [
        "ml.g5.2xlarge", "640", "24.5", "3.1000", "no:", "TTFT", "640", "ms", ">", "500;", "24.5", "tok/s", "<", "30"
    ]  # fmt: skip
    assert lines[-1] == "Verdict: no candidate meets the target."


def _staging_definition(app, topic: str) -> str:  # type: ignore[no-untyped-def]
    from aws_cdk.assertions import Template

    resources = Template.from_stack(app.stages["staging"].recommendation).to_json()["Resources"]
    (machine,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
        and r["Properties"]["StateMachineName"] == "digits-staging-recommend-chat"
    ]
    pseudo = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": "aws"}

    def ref(name: str) -> str:
        return pseudo.get(name, topic)

    def get_att(name: str, attribute: str) -> str:
        return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:ai-workload-config/{resources[name]['Properties']['AIWorkloadConfigName']}"

    def import_value(export: str) -> str:
        for fragment, value in (
            ("ExecutionRole", ROLE),
            ("Artifacts", BUCKET),
            ("Key", KEY),
            ("Tracking", MLFLOW),
        ):
            if fragment in export:
                return value
        raise KeyError(export)

    return resolve(machine["Properties"]["DefinitionString"], ref, get_att, import_value)


def _approval_event(moto, package: str) -> tuple[str, str, list[str]]:  # type: ignore[no-untyped-def]
    """The event SageMaker sends when a version changes state ("SageMaker Model Package State
    Change", SageMaker developer guide: Events that SageMaker sends to EventBridge): its detail is
    the package as DescribeModelPackage answers — ModelPackageGroupName, ModelPackageVersion,
    ModelPackageArn, ModelApprovalStatus, ModelPackageStatus … (PutEvents' Detail, DetailType,
    Resources)."""
    described = moto.client("sagemaker").describe_model_package(ModelPackageName=package)
    described.pop("ResponseMetadata")
    return json.dumps(described, default=str), "SageMaker Model Package State Change", [package]


def _rule_into_a_queue(moto, app) -> str:  # type: ignore[no-untyped-def]
    """The dev template's rule as it stands (name and pattern), its target a queue in place of the
    state machine (moto's EventBridge delivers to SQS, not to Step Functions): the queue receives
    what EventBridge hands the machine as its input."""
    from aws_cdk.assertions import Template

    resources = Template.from_stack(app.stages["dev"].recommendation).to_json()["Resources"]
    (rule,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Events::Rule"]
    sqs = moto.client("sqs")
    queue = sqs.create_queue(QueueName="as-the-machine-receives")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = moto.client("events")
    events.put_rule(Name=rule["Name"], EventPattern=json.dumps(rule["EventPattern"]), State=rule["State"])
    events.put_targets(Rule=rule["Name"], Targets=[{"Id": "machine", "Arn": queue_arn}])
    return queue


def _delivered(moto, queue: str) -> list[dict]:  # type: ignore[no-untyped-def]
    sqs = moto.client("sqs")
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
    for m in got:
        sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
    return [json.loads(m["Body"]) for m in got]


def _execute_with(moto, machine: str, event: dict) -> dict:  # type: ignore[no-untyped-def]
    sfn = moto.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=machine, name=f"event-{time.monotonic_ns()}", input=json.dumps(event)
    )["executionArn"]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.2)
    history = sfn.get_execution_history(executionArn=execution)["events"]
    return {**described, "entered": [e["stateEnteredEventDetails"]["name"] for e in history
                                      if "stateEnteredEventDetails" in e]}  # fmt: skip


def test_an_approval_starts_a_run_that_measures_the_version_it_approved(moto, dev_app, monkeypatch):
    """dev's overlay asks for on_registration. Two versions approved one after the other: each
    approval's event, delivered by EventBridge through the rule's own pattern, starts a run that
    measures the version that event approved — not the newest when the run gets there. A version
    left pending and another group's approval deliver nothing; the same event twice (SageMaker may
    send several) follows the one job; a run started by hand still finds the newest approved."""
    fake = FakeRecommender(["COMPLETED"], {"ml.c5.xlarge": (14, 7800, 2.2e-6)})
    fake.install(monkeypatch)
    machine, first = _deploy(moto, dev_app)
    assert first is not None
    queue = _rule_into_a_queue(moto, dev_app)
    second = _approve(moto)
    sm, events = moto.client("sagemaker"), moto.client("events")
    pending = _approve(moto, status="PendingManualApproval")
    sm.create_model_package_group(ModelPackageGroupName="other")
    elsewhere = _approve(moto, group="other")
    entries = []
    for package in (first, second, pending, elsewhere):
        detail, detail_type, resources = _approval_event(moto, package)
        entries.append(
            {"Source": "aws.sagemaker", "DetailType": detail_type, "Detail": detail, "Resources": resources}
        )
    answer = events.put_events(Entries=entries)
    assert answer["FailedEntryCount"] == 0, answer
    delivered = _delivered(moto, queue)
    assert [e["detail"]["ModelPackageArn"] for e in delivered] == [first, second]  # the pattern's choice
    assert all(e["detail-type"] == "SageMaker Model Package State Change" for e in delivered)
    # Each delivered event, as the state machine's input: first's run after second was approved.
    for event, package, version in ((delivered[0], first, "1"), (delivered[1], second, "2")):
        result = _execute_with(moto, machine, event)
        assert result["status"] == "SUCCEEDED", result
        assert "Package approved digits" in result["entered"]
        assert "Find package digits" not in result["entered"]
        output = json.loads(result["output"])
        assert output["ModelPackage"] == package and output["ModelPackageVersion"] == version
        assert output["JobName"].endswith(f"-v{version}")
    assert [j["InputConfig"]["ModelPackageVersionArn"] for j in fake.created] == [first, second]
    # SageMaker may send one change twice: the second run follows the job the first started.
    result = _execute_with(moto, machine, delivered[0])
    assert result["status"] == "SUCCEEDED" and "Recommend refused digits?" in result["entered"]
    assert len(fake.created) == 2
    # An event of another group handed over by hand is not taken: the run finds the newest approved.
    (foreign,) = [e for e in entries if e["Resources"] == [elsewhere]]
    result = _execute_with(moto, machine, {"detail": json.loads(foreign["Detail"])})
    assert result["status"] == "SUCCEEDED", result
    assert "Find package digits" in result["entered"] and len(fake.created) == 2  # v2's job, followed
    assert json.loads(result["output"])["ModelPackage"] == second
