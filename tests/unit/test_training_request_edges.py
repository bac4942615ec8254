"""The edges of a CreateTrainingJob request that a plausible slip would move without any golden
request noticing: spot's default wait (max_run doubled, at most 28 days), the user's own values
over sagestack's defaults, and the limit of five instance preferences. Each assertion here was seen
to fail under a hand-made mutation of the line it guards (issue 26, item 19); `make mutate` keeps the
rest of the module honest."""

from __future__ import annotations

import pytest

from sagestack.core.catalog import validate_request
from sagestack.core.names import Names
from sagestack.training.models import JobSpec
from sagestack.training.preferences import PREFERENCES_MAX
from sagestack.training.rendered import RenderedJob, resolve_training_job
from sagestack.training.request import CHECKPOINT_DIR_VARIABLE
from tests.conftest import MINIMAL
from tests.unit.test_rules import findings
from tests.unit.test_training_requests import GPU, context
from tests.unit.test_training_rules import job as job_yaml

SPOT = {
    "instance_type": "ml.g5.xlarge",
    "use_spot_instances": True,
    "max_run": "2h",
    "checkpoint": {"every_steps": 100},
}


def test_a_spot_job_without_max_wait_may_wait_as_long_again_as_it_runs():
    # MaxWaitTimeInSeconds includes the run: equal to max_run it would leave no time to wait for capacity
    stopping = _request(SPOT)["StoppingCondition"]
    assert stopping == {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 14400}
    validate_request("CreateTrainingJob", _request(SPOT))
    # at most 28 days (SageMaker's longest run; it ends every job 30 days after it starts)
    days = _request({**SPOT, "max_run": "20d"})["StoppingCondition"]
    assert days == {"MaxRuntimeInSeconds": 20 * 86400, "MaxWaitTimeInSeconds": 28 * 86400}
    # the rule spot-default-max-wait says which wait was chosen (test_training_rules.py)
    # an on-demand job has no wait at all (SageMaker refuses one without spot)
    assert _request({"instance_type": "ml.g5.xlarge", "max_run": "2h"})["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 7200
    }


def test_max_wait_equal_to_max_run_is_accepted_and_sent_as_given(project):
    request = _request({**SPOT, "max_wait": "2h"})
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 7200}
    validate_request("CreateTrainingJob", request)
    longer = _request({**SPOT, "max_wait": "3h"})["StoppingCondition"]
    assert longer["MaxWaitTimeInSeconds"] == 10800  # the spec's own, not max_run
    body = "instance_type: ml.g5.xlarge\nuse_spot_instances: true\ncheckpoint: {every_steps: 100}\n"
    assert findings(project, "spot-max-wait", job_yaml(body + "max_run: 2h\nmax_wait: 2h")) == []
    # one second shorter is refused (SageMaker requires MaxWaitTimeInSeconds >= MaxRuntimeInSeconds)
    assert findings(project, "spot-max-wait", job_yaml(body + "max_run: 7200\nmax_wait: 7199")) == [
        "jobs.big.max_wait: max_wait (7199 s) is shorter than max_run (7200 s); SageMaker requires max_wait >= "
        "max_run (it includes the time spent waiting for spot capacity)"
    ]


def test_the_users_checkpoint_dir_wins_over_the_default():
    default = _request(SPOT)["Environment"]
    assert default == {CHECKPOINT_DIR_VARIABLE: "/opt/ml/checkpoints"}
    own = _request({**SPOT, "environment": {CHECKPOINT_DIR_VARIABLE: "/opt/ml/checkpoints/mine", "A": "1"}})
    assert own["Environment"] == {CHECKPOINT_DIR_VARIABLE: "/opt/ml/checkpoints/mine", "A": "1"}
    # without a checkpoint the variable is not invented
    assert "Environment" not in _request({"instance_type": "ml.g5.xlarge"})


def test_the_users_checkpoint_arguments_win_over_the_spec_interval():
    hps = _request(SPOT)["HyperParameters"]
    assert hps["checkpoint_every_steps"] == "100" and hps["checkpoint_keep_last"] == "3"
    own = _request({**SPOT, "hyperparameters": {"checkpoint_every_steps": 7, "checkpoint_keep_last": 1}})
    assert own["HyperParameters"]["checkpoint_every_steps"] == "7"
    assert own["HyperParameters"]["checkpoint_keep_last"] == "1"
    # a checkpoint without an interval passes no interval (the script's own default stands)
    bare = _request({"instance_type": "ml.g5.xlarge", "checkpoint": {"keep_last": 2}})["HyperParameters"]
    assert "checkpoint_every_steps" not in bare and "checkpoint_keep_last" not in bare


def _plan(body: dict) -> RenderedJob:
    return resolve_training_job(
        names=Names("digits", "dev"),
        key="c",
        job=JobSpec.model_validate({"image": "t", **body}),
        source_sha256="0" * 64,
        image_uris={},
        context=context(GPU),
    )


def _request(body: dict) -> dict:
    return _plan(body).candidates[0].request


# Six types whose requests differ only in the instance type (one GPU each, NVMe storage on all).
ALIKE = [
    "ml.g5.2xlarge",
    "ml.g4dn.2xlarge",
    "ml.g5.4xlarge",
    "ml.g4dn.4xlarge",
    "ml.g5.8xlarge",
    "ml.g4dn.8xlarge",
]


@pytest.mark.parametrize("count", [2, PREFERENCES_MAX])
def test_up_to_five_alike_candidates_are_one_job_with_instance_preferences(count):
    plan = _plan({"instance_type": ALIKE[:count], "instance_count": 2})
    assert plan.preferred is not None and plan.loop_reason is None
    assert plan.launch_kind == "InstancePreferences"
    assert (
        plan.launch_path
        == "InstancePreferences: one job; SageMaker launches the first candidate with capacity"
    )
    request = plan.preferred.request
    assert request["ResourceConfig"]["InstancePreferences"] == [
        {"InstanceType": t, "InstanceCount": 2} for t in ALIKE[:count]
    ]
    assert (
        "InstanceType" not in request["ResourceConfig"] and "InstanceCount" not in request["ResourceConfig"]
    )
    assert request["TrainingJobName"] == plan.preferred.name
    assert request["HyperParameters"]["sagemaker_job_name"] == f'"{plan.preferred.name}"'
    assert "EnableManagedSpotTraining" not in request
    validate_request("CreateTrainingJob", request)


def test_six_candidates_keep_the_pipelines_loop():
    assert PREFERENCES_MAX == 5  # ResourceConfig.InstancePreferences holds 1 to 5 (botocore's model)
    plan = _plan({"instance_type": ALIKE})
    assert plan.preferred is None
    assert plan.loop_reason == "6 candidates; InstancePreferences holds 5"
    assert plan.launch_kind == "candidate loop"
    assert plan.launch_path == "candidate loop: 6 candidates; InstancePreferences holds 5"


def test_one_candidate_or_spot_keeps_the_loop_and_says_why():
    assert _plan({"instance_type": ALIKE[:1]}).loop_reason == "one candidate"
    spot = _plan({**SPOT, "instance_type": ALIKE[:2]})
    assert spot.preferred is None
    assert spot.loop_reason == "managed spot training, which InstancePreferences does not support"


def test_candidates_that_differ_name_the_first_difference():
    # MPI's processes per host follow each type's GPUs: one job cannot carry both.
    plan = _plan({"instance_type": ["ml.g5.12xlarge", "ml.g5.2xlarge"], "distribution": {"mpi": {}}})
    assert plan.preferred is None
    assert (
        plan.loop_reason
        == "ml.g5.12xlarge and ml.g5.2xlarge differ in sagemaker_mpi_num_of_processes_per_host"
    )


def test_torch_distributed_preferences_drop_the_per_candidate_instance_type_and_name_the_job_by_key():
    plan = _plan({"instance_type": ALIKE[:2], "instance_count": 2, "distribution": {"torch_distributed": {}}})
    assert plan.preferred is not None
    assert plan.preferred.name == Names("digits", "dev").preference_job("c", plan.digest)
    hps = plan.preferred.request["HyperParameters"]
    assert (
        "sagemaker_instance_type" not in hps
    )  # the toolkit reads the launched type from resourceconfig.json
    assert hps["sagemaker_torch_distributed_enabled"] == "true"


def test_smp_v1_runs_one_mpi_process_per_accelerator_unless_told():
    body = {"instance_type": "ml.p4d.24xlarge", "instance_count": 2}
    v1 = _request({**body, "distribution": {"smp": {"version": 1, "parameters": {"partitions": 2}}}})
    assert v1["HyperParameters"]["sagemaker_mpi_num_of_processes_per_host"] == "8"
    told = {"smp": {"version": 1, "processes_per_host": 2, "parameters": {"partitions": 2}}}
    assert (
        _request({**body, "distribution": told})["HyperParameters"]["sagemaker_mpi_num_of_processes_per_host"]
        == "2"
    )


def test_the_specs_inter_container_encryption_wins_over_the_multi_node_default():
    body = {"instance_type": "ml.g5.xlarge", "instance_count": 2}
    assert _request(body)["EnableInterContainerTrafficEncryption"] is True
    assert (
        _request({**body, "encrypt_inter_container_traffic": False})["EnableInterContainerTrafficEncryption"]
        is False
    )
    assert _request({"instance_type": "ml.g5.xlarge", "encrypt_inter_container_traffic": True})[
        "EnableInterContainerTrafficEncryption"
    ]


def test_a_channels_content_type_is_sent():
    channels = {"train": {"key_prefix": "d/train", "content_type": "application/x-npz"}, "val": {}}
    request = _request({"instance_type": "ml.g5.xlarge", "channels": channels})
    train, val = request["InputDataConfig"]
    assert train["ContentType"] == "application/x-npz" and "ContentType" not in val


def test_the_stand_in_tracking_server_is_the_foundations_and_names_experiments_by_the_prefix():
    from sagestack.core.deployment import Deployment
    from sagestack.training.context import MlflowTarget

    names = Names("digits", "dev")
    deployment = Deployment.stand_ins(region="eu-west-1", account="111122223333")
    target = MlflowTarget.stand_in(deployment, names)
    assert (
        target.arn
        == f"arn:aws:sagemaker:eu-west-1:111122223333:mlflow-tracking-server/{names.tracking_server}"
    )
    assert target.experiment("classifier") == f"{names.prefix}-classifier" == "digits-dev-classifier"


def test_the_stand_in_mlflow_app_is_an_app_arn_that_jobs_log_to(project):
    """tracking.mlflow.app: the jobs' MlflowConfig and tracking URI name an mlflow-app ARN (its
    name standing in for the ID SageMaker assigns), never the tracking server."""
    from sagestack.project.environment import resolve_environment
    from sagestack.project.requests import mlflow_target
    from sagestack.training.context import is_mlflow_app

    project.spec(MINIMAL + "tracking:\n  mlflow: {app: true}\n").env("dev")
    target = mlflow_target(resolve_environment(project.load("dev")))
    assert target is not None and is_mlflow_app(target.arn)
    assert target.arn.endswith(":mlflow-app/digits-dev-mlflow")


def test_an_overlay_may_turn_a_sized_server_into_an_app(project):
    """size and version are a tracking server's: beside app: true (an overlay's, over a project file
    that sizes the others' servers) they are ignored, not refused."""
    from sagestack.project.environment import resolve_environment

    project.spec(MINIMAL + "tracking:\n  mlflow: {size: Medium, version: '2.16'}\n").env(
        "dev", "tracking:\n  mlflow: {app: true}\n"
    )
    mlflow = resolve_environment(project.load("dev")).spec.tracking.mlflow
    assert mlflow is not None and mlflow.app


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            "{app: true, server: 'arn:aws:sagemaker:us-east-1:111111111111:mlflow-app/app-1'}",
            "app: true creates an MLflow App, server: names one that exists; keep one of them",
        ),
    ],
)
def test_an_app_refuses_a_servers_settings_with_a_located_error(project, given, said):
    project.spec(MINIMAL + f"tracking:\n  mlflow: {given}\n").env("dev")
    (error,) = project.errors()
    assert error.startswith("config/sagestack.yaml:") and said in error, error
