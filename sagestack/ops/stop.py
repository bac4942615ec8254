"""Stop what runs (`sagestack stop`, Ctrl-C in `sagestack run`): a pipeline's running Step Functions
executions and the SageMaker jobs they started. A pipeline's states create a job and poll it
(training/states.py): stopping the execution alone leaves the job running, and billed.

Only what is sagestack's in this environment is stopped: executions of the spec's state machines
(by name), training jobs by the environment's name prefix, tuning jobs by name stem and the
environment's tags. Whether a name can be one of these is known from the spec (its entries, the
names of their jobs, the shapes of run names): `check_target` refuses any other before a client is
made. boto3 is not imported here: the caller passes the clients."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from typing import Any

from sagestack.core.catalog.suggest import could_be
from sagestack.ops.logs import what_is
from sagestack.ops.status import Scope, job_of, search_of, state_machines, tagged
from sagestack.ops.status_schedules import error_code


class NotOurs(LookupError):
    """What the user named is no pipeline, run or job of this environment (the message says why)."""


@dataclass(frozen=True)
class Stopped:
    kind: str  # "execution", "training job", "tuning job" or "queued job" (a Batch service job)
    name: str
    entry: str | None
    spot: bool = False  # a spot training job: its checkpoints stay in S3

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "entry": self.entry, "spot": self.spot}


@dataclass(frozen=True)
class Plan:
    """What `stop TARGET` stops: running executions (entry, ARN) and jobs (kind, name, entry)."""

    executions: tuple[tuple[str, str], ...]
    jobs: tuple[tuple[str, str, str | None], ...]


# The names of the runs sagestack starts (`run`: run-<time>, `run --retrain`: retrain-<time>, a
# deploy's run_on_deploy: deploy-<digest>) and the UUIDs Step Functions' console and EventBridge
# give theirs; a run of any other name is stopped by its ARN.
RUN_NAME = re.compile(r"(run|retrain|deploy)-[A-Za-z0-9_-]+|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.I)
EXECUTION_ARN = re.compile(r"arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:execution:([^:]+):([^:]+)")


def check_target(scope: Scope, target: str) -> None:
    """NotOurs, before any AWS call, when `target` can be nothing `stop` stops here: no entry with
    a pipeline, no name of one of its training or tuning jobs, no run name and no ARN of a run of
    the spec's state machines. What it is instead, or the names it could be."""
    if target in scope.pipelines or job_of(scope, target) or search_of(scope, target):
        return
    where = f"{scope.names.project}/{scope.names.env}"
    pipelines = ", ".join(scope.pipelines) or "none"
    arn = EXECUTION_ARN.fullmatch(target)
    if arn is not None:
        if arn[1] in scope.pipelines.values():
            return
        raise NotOurs(
            f"run {arn[2]} is of state machine {arn[1]}, no pipeline of {where} (pipelines: {pipelines}); "
            "sagestack stops only what it started there"
        )
    if RUN_NAME.fullmatch(target):
        return  # a run's name: whose run it is, only Step Functions knows
    other = what_is(scope, target)
    if other is not None:
        raise NotOurs(
            f"'{target}' is {other} of {where}, not a pipeline, run or job: `sagestack stop` stops a "
            f"pipeline's runs and the jobs they started (pipelines: {pipelines})"
        )
    raise NotOurs(
        f"'{target}' is no pipeline, run or job of {where}{could_be(target, scope.pipelines)} "
        f"(pipelines: {pipelines}; a run by the name `sagestack run` printed, run-…, or by its ARN); "
        "sagestack stops only what it started there"
    )


def plan(scope: Scope, sfn: Any, sm: Any, target: str, batch: Any = None) -> Plan:
    """The running executions and jobs `target` names: a pipeline's entry (all it runs), a run's
    name or ARN (that run and its job), or a training or tuning job's name; NotOurs otherwise.
    With a Batch client, a queued job's service job too (one still queued has no training job)."""
    check_target(scope, target)
    machines = state_machines(scope, sfn)
    if target in scope.pipelines:
        executions = [(target, arn) for arn in _running(sfn, machines.get(target))]
        jobs = {j for _, arn in executions for j in jobs_of_execution(scope, sm, sfn, arn, target, batch)}
        jobs |= set(_running_jobs(scope, sm, target))
        return Plan(tuple(executions), tuple(sorted(jobs)))
    for entry, machine in machines.items():
        for arn in _running(sfn, machine):
            if target in (arn, arn.rsplit(":", 1)[-1]):
                return Plan(((entry, arn),), tuple(jobs_of_execution(scope, sm, sfn, arn, entry, batch)))
    job_entry = job_of(scope, target)
    if job_entry is not None:
        status = _described(sm.describe_training_job, TrainingJobName=target)
        running = status and status["TrainingJobStatus"] == "InProgress"
        return Plan((), (("training job", target, job_entry),) if running else ())
    search = search_of(scope, target)
    if search is not None:
        described = _described(sm.describe_hyper_parameter_tuning_job, HyperParameterTuningJobName=target)
        if described and tagged(sm, described["HyperParameterTuningJobArn"], scope):
            running = described["HyperParameterTuningJobStatus"] == "InProgress"
            return Plan((), (("tuning job", target, search),) if running else ())
    known = ", ".join(scope.pipelines) or "none"
    raise NotOurs(
        f"'{target}' is no pipeline, run or job of {scope.names.project}/{scope.names.env} "
        f"(pipelines: {known}); sagestack stops only what it started there"
    )


def stop(plan: Plan, sfn: Any, sm: Any, scope: Scope, batch: Any = None) -> list[Stopped]:
    """Stop the plan's jobs, then its executions (so no state creates a job after): what was stopped.
    A queued job's service job is terminated first, so Batch starts no training job after."""
    done: list[Stopped] = []
    for kind, name, entry in sorted(plan.jobs, key=lambda j: j[0] != "service job"):
        if kind == "service job":
            described = batch.describe_service_job(jobId=name)
            if described["status"] in ("SUCCEEDED", "FAILED"):
                continue
            batch.terminate_service_job(jobId=name, reason="stopped by `sagestack stop`")
            done.append(Stopped("queued job", described["jobName"], entry))
            continue
        if kind == "tuning job":
            sm.stop_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
            done.append(Stopped(kind, name, entry))
            continue
        described = sm.describe_training_job(TrainingJobName=name)
        if described["TrainingJobStatus"] != "InProgress":
            continue  # ended since it was planned
        sm.stop_training_job(TrainingJobName=name)
        done.append(Stopped(kind, name, entry, spot=bool(described.get("EnableManagedSpotTraining"))))
    for entry, arn in plan.executions:
        sfn.stop_execution(executionArn=arn, error="sagestack.Stopped", cause="stopped by `sagestack stop`")
        done.append(Stopped("execution", arn.rsplit(":", 1)[-1], entry))
    return done


def jobs_of_execution(
    scope: Scope, sm: Any, sfn: Any, arn: str, entry: str, batch: Any = None
) -> list[tuple[str, str, str | None]]:
    """The SageMaker jobs an execution's states created (and the Batch service jobs it submitted,
    with the training jobs Batch started for them), those still running."""
    found: list[tuple[str, str, str | None]] = []
    for kind, name in scheduled_jobs(sfn, arn):
        if kind == "service job":
            if batch is None:
                continue
            described = batch.describe_service_job(jobId=name)
            if described["status"] not in ("SUCCEEDED", "FAILED"):
                found.append((kind, name, entry))
            status = _described(sm.describe_training_job, TrainingJobName=described["jobName"])
            if status and status["TrainingJobStatus"] == "InProgress" and job_of(scope, described["jobName"]):
                found.append(("training job", described["jobName"], entry))
        elif kind == "training job":
            status = _described(sm.describe_training_job, TrainingJobName=name)
            if status and status["TrainingJobStatus"] == "InProgress" and job_of(scope, name):
                found.append((kind, name, entry))
        else:
            described = _described(sm.describe_hyper_parameter_tuning_job, HyperParameterTuningJobName=name)
            if described and described["HyperParameterTuningJobStatus"] == "InProgress":
                found.append((kind, name, entry))
    return list(dict.fromkeys(found))


def scheduled_jobs(sfn: Any, arn: str) -> list[tuple[str, str]]:
    """(kind, name) of each job an execution's states asked SageMaker to create, in order (its
    history's TaskScheduled events of sagemaker:createTrainingJob / createHyperParameterTuningJob),
    and ("service job", its ID) of each a queued job's state submitted to Batch (TaskSucceeded of
    batch:submitServiceJob: the ID is Batch's answer)."""
    found: list[tuple[str, str]] = []
    for page in sfn.get_paginator("get_execution_history").paginate(executionArn=arn):
        for event in page["events"]:
            submitted = event.get("taskSucceededEventDetails") or {}
            # an aws-sdk task's resource type: 'aws-sdk:batch' (as moto writes it) or 'batch'
            if _service(submitted) == "batch" and submitted.get("resource", "").startswith(
                "submitServiceJob"
            ):
                with contextlib.suppress(ValueError, KeyError):
                    found.append(("service job", json.loads(submitted.get("output") or "{}")["JobId"]))
                continue
            details = event.get("taskScheduledEventDetails") or {}
            if _service(details) != "sagemaker":
                continue
            try:
                params = json.loads(details.get("parameters") or "{}")
            except ValueError:
                continue
            resource = details.get("resource", "")
            if resource.startswith("createTrainingJob") and isinstance(params.get("TrainingJobName"), str):
                found.append(("training job", params["TrainingJobName"]))
            elif resource.startswith("createHyperParameterTuningJob") and isinstance(
                params.get("HyperParameterTuningJobName"), str
            ):
                found.append(("tuning job", params["HyperParameterTuningJobName"]))
    return found


def _service(details: dict[str, Any]) -> str:
    return str(details.get("resourceType", "")).removeprefix("aws-sdk:")


def _running(sfn: Any, machine: str | None) -> list[str]:
    if machine is None:
        return []
    arns: list[str] = []
    pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=machine, statusFilter="RUNNING")
    for page in pages:
        arns += [e["executionArn"] for e in page["executions"]]
    return arns


def _running_jobs(scope: Scope, sm: Any, entry: str) -> list[tuple[str, str, str | None]]:
    """The entry's jobs in progress, whichever run started them (a run already stopped, a schedule)."""
    if entry in scope.jobs:
        listed = sm.list_training_jobs(
            NameContains=scope.names.prefix, StatusEquals="InProgress", MaxResults=100
        )["TrainingJobSummaries"]
        return [
            ("training job", s["TrainingJobName"], entry)
            for s in listed
            if job_of(scope, s["TrainingJobName"]) == entry
        ]
    if entry in scope.tuning:
        listed = sm.list_hyper_parameter_tuning_jobs(
            NameContains=scope.names.project, StatusEquals="InProgress", MaxResults=100
        )["HyperParameterTuningJobSummaries"]
        return [
            ("tuning job", s["HyperParameterTuningJobName"], entry)
            for s in listed
            if search_of(scope, s["HyperParameterTuningJobName"]) == entry
            and tagged(sm, s["HyperParameterTuningJobArn"], scope)
        ]
    return []


def _described(describe: Any, **args: str) -> dict[str, Any] | None:
    try:
        return dict(describe(**args))
    except Exception as e:
        if error_code(e) in ("ValidationException", "ResourceNotFound"):
            return None
        raise
