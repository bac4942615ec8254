"""AWS Batch's service jobs for SageMaker training, for the moto server's Step Functions interpreter:
moto serves Batch but not SubmitServiceJob / DescribeServiceJob. The interpreter's Batch client
answers those two here (every other Batch call still goes to moto). Step Functions' aws-sdk
integration takes and gives PascalCase where Batch's API is camelCase; moto's port leaves names as
written, so the names are converted here by the operation's shapes, as Step Functions does. Each
request is validated against botocore's Batch model, as Stubber would; a submitted job waits RUNNABLE for `waits` polls
(a capacity wait), then Batch does what it does for SAGEMAKER_TRAINING — CreateTrainingJob from the
payload, with the service job's tags — on the moto server, and the service job's state follows the
training job's (InProgress: RUNNING, Completed: SUCCEEDED, Failed: FAILED)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from sagestack.core.catalog import validate_request

STATES = {
    "InProgress": "RUNNING",
    "Stopping": "RUNNING",
    "Completed": "SUCCEEDED",
    "Failed": "FAILED",
    "Stopped": "FAILED",
}


@dataclass
class ServiceJobs:
    sagemaker: Any  # a moto server's SageMaker client
    region: str
    account: str
    waits: int = 1  # polls a job stays RUNNABLE before Batch starts it
    queues: set[str] | None = None  # the job queues that exist (None: any)
    created_at: int = 0  # epoch milliseconds each job was submitted at
    submitted: list[dict[str, Any]] = field(default_factory=list)  # the SubmitServiceJob requests
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    _params: dict[str, dict[str, Any]] = field(default_factory=dict)

    def install(self, monkeypatch: Any) -> None:
        """Hook the interpreter's clients (moto.stepfunctions.parser…state_task_service_aws_sdk)."""
        from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
            state_task_service_aws_sdk as sdk,
        )

        original = sdk.boto_client_for

        def client_for(region: str, service: str, state_credentials: Any = None) -> Any:
            client = original(region, service, state_credentials)
            return self.hook(client, pascal=True) if service == "batch" else client

        monkeypatch.setattr(sdk, "boto_client_for", client_for)

    def hook(self, client: Any, *, pascal: bool = False) -> Any:
        """Answer the service-job calls of a Batch client (`pascal`: the names as Step Functions'
        aws-sdk integration writes them; else boto3's own)."""
        events = client.meta.events
        for op in ("SubmitServiceJob", "DescribeServiceJob", "TerminateServiceJob", "ListServiceJobs"):
            events.register(f"provide-client-params.batch.{op}", self._keep(op, pascal))
            events.register(f"before-call.batch.{op}", self._answer_in(pascal))
        return client

    def _keep(self, operation: str, pascal: bool) -> Any:
        def keep(params: dict[str, Any], model: Any, **_: Any) -> dict[str, Any]:
            api = _renamed(params, model.input_shape, _camel) if pascal else dict(params)
            validate_request(operation, api, service="batch")
            self._params[operation] = api
            return api

        return keep

    def _answer_in(self, pascal: bool) -> Any:
        def answer(model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
            params = self._params.pop(model.name)
            if model.name == "SubmitServiceJob":
                out = self._submit(params)
            elif model.name == "ListServiceJobs":
                out = self._list(params)
            elif model.name == "TerminateServiceJob":
                self.jobs[params["jobId"]]["terminated"] = params["reason"]
                out = {}
            else:
                out = self._describe(params["jobId"])
            return AWSResponse("https://batch", 200, {}, None), (
                _renamed(out, model.output_shape, _pascal) if pascal else out
            )

        return answer

    def _submit(self, params: dict[str, Any]) -> dict[str, Any]:
        self.submitted.append(params)
        job_id = str(uuid.uuid4())
        arn = f"arn:aws:batch:{self.region}:{self.account}:service-job/{job_id}"
        self.jobs[job_id] = {"params": params, "polls": 0, "arn": arn, "training_job": None}
        return {"jobArn": arn, "jobName": params["jobName"], "jobId": job_id}

    def _list(self, params: dict[str, Any]) -> dict[str, Any]:
        """ListServiceJobs of one queue and status (as Batch, RUNNING when no status is given)."""
        if self.queues is not None and params["jobQueue"] not in self.queues:
            raise ClientError(
                {"Error": {"Code": "ClientException", "Message": f"{params['jobQueue']} does not exist"}},
                "ListServiceJobs",
            )
        want = params.get("jobStatus", "RUNNING")
        summaries = []
        for job_id, job in self.jobs.items():
            if job["params"]["jobQueue"] != params["jobQueue"]:
                continue
            described = self._describe(job_id)
            job["polls"] -= 1  # a listing is no poll of the job's own
            if described["status"] == want:
                keys = ("jobArn", "jobId", "jobName", "serviceJobType", "status", "statusReason", "createdAt")
                summaries.append({k: described[k] for k in keys if k in described})
                if "shareIdentifier" in job["params"]:
                    summaries[-1]["shareIdentifier"] = job["params"]["shareIdentifier"]
        return {"jobSummaryList": summaries}

    def _head(self, job_id: str) -> dict[str, Any]:
        job = self.jobs[job_id]
        params = job["params"]
        return {
            "jobArn": job["arn"],
            "jobId": job_id,
            "jobName": params["jobName"],
            "jobQueue": params["jobQueue"],
            "serviceJobType": params["serviceJobType"],
            "serviceRequestPayload": params["serviceRequestPayload"],
            "createdAt": self.created_at,
        }

    def _describe(self, job_id: str) -> dict[str, Any]:
        job = self.jobs[job_id]
        params = job["params"]
        job["polls"] += 1
        if "terminated" in job:
            return {
                **self._head(job_id),
                "status": "FAILED",
                "statusReason": job["terminated"],
                "isTerminated": True,
            }
        out: dict[str, Any] = {**self._head(job_id), "status": "RUNNABLE"}
        if job["polls"] <= self.waits:
            out["statusReason"] = "waiting for capacity in the service environment"
            return out
        if job["training_job"] is None:
            payload = json.loads(params["serviceRequestPayload"])
            tags = [{"Key": k, "Value": v} for k, v in params.get("tags", {}).items()]
            job["training_job"] = self.sagemaker.create_training_job(**payload, Tags=tags)["TrainingJobArn"]
        described = self.sagemaker.describe_training_job(TrainingJobName=params["jobName"])
        out["status"] = STATES.get(described["TrainingJobStatus"], "STARTING")
        out["latestAttempt"] = {"serviceResourceId": {"name": "TrainingJobArn", "value": job["training_job"]}}
        if out["status"] == "FAILED":
            out["statusReason"] = f"Received status from SageMaker: {described.get('FailureReason', '')}"
        return out


def _camel(name: str) -> str:
    return name[0].lower() + name[1:]


def _pascal(name: str) -> str:
    return name[0].upper() + name[1:]


def _renamed(value: Any, shape: Any, case: Any) -> Any:
    """`value` with its structure members' names in `case` (map keys are data, kept as they are)."""
    if shape is None:
        return value
    if shape.type_name == "structure" and isinstance(value, dict):
        members = {case(m): (m, s) for m, s in shape.members.items()}
        out = {}
        for key, v in value.items():
            member, member_shape = members.get(case(key), (key, None))
            out[case(member)] = _renamed(v, member_shape, case)
        return out
    if shape.type_name == "list" and isinstance(value, list):
        return [_renamed(v, shape.member, case) for v in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {k: _renamed(v, shape.value, case) for k, v in value.items()}
    return value
