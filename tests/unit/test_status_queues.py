"""`sagestack status`'s training queues: each queue's held service jobs (ListServiceJobs per
state: Batch lists RUNNING ones only without one), with their share and why they wait, read against
the moto server with Batch's service jobs answered in the test (moto lacks them; each request and
answer validated against botocore's Batch model); a queue not deployed says so."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from sagestack.cli.status import render
from sagestack.core.names import Names
from sagestack.ops.status_queues import read_queues
from tests.support.batch_service_jobs import ServiceJobs
from tests.support.moto_server import ACCOUNT, REGION, running_moto

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def moto():
    with running_moto() as server:
        yield server


def _queued(moto, names: Names) -> tuple[ServiceJobs, object]:
    submitted = int((NOW - timedelta(minutes=42)).timestamp() * 1000)
    jobs = ServiceJobs(
        moto.client("sagemaker"),
        REGION,
        ACCOUNT,
        waits=1000,
        queues={names.queue("shared")},
        created_at=submitted,
    )
    batch = jobs.hook(moto.client("batch"))
    for name, share in (
        ("digits-dev-classifier-5e1f0a2b-0", "research"),
        ("digits-dev-ranker-0c9d8e7f-0", "production"),
    ):
        payload = {"TrainingJobName": name}
        batch.submit_service_job(
            jobName=name,
            jobQueue=names.queue("shared"),
            serviceJobType="SAGEMAKER_TRAINING",
            serviceRequestPayload=json.dumps(payload),
            shareIdentifier=share,
        )
    return jobs, batch


def test_a_queue_shows_its_waiting_jobs_with_share_age_and_reason_and_an_undeployed_one_says_so(moto):
    names = Names("digits", "dev")
    _, batch = _queued(moto, names)
    rows = read_queues(names, ("shared", "fifo"), batch, NOW)
    shared, fifo = rows
    assert fifo == {"key": "fifo", "name": "digits-dev-fifo", "deployed": False, "jobs": []}
    assert [(j["name"], j["status"], j["share"], j["waiting_seconds"]) for j in shared["jobs"]] == [
        ("digits-dev-classifier-5e1f0a2b-0", "RUNNABLE", "research", 42 * 60),
        ("digits-dev-ranker-0c9d8e7f-0", "RUNNABLE", "production", 42 * 60),
    ]
    doc = {
        "project": "digits",
        "environment": "dev",
        "region": REGION,
        "read_at": NOW.isoformat(),
        "stacks": [],
        "pipelines": [],
        "training_jobs": [],
        "tuning_jobs": [],
        "endpoints": [],
        "clusters": [],
        "queues": rows,
        "schedules": [],
        "errors": [],
    }
    screen = render(doc, 80)
    assert max(len(line) for line in screen) <= 80
    at = screen.index("training queues")
    assert screen[at + 1 : at + 4] == [
        "  shared: 2 waiting, 0 running",
        "    digits-dev-classifier-5e1f0a2b-0 RUNNABLE research 42m: waiting for capacity",
        "        in the service environment",
    ]
    assert "  fifo not deployed" in screen
