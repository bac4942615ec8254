"""`sagestack status`'s training queues: the service jobs each queue of the spec holds now — waiting
(SUBMITTED, PENDING, RUNNABLE: capacity, share or priority), starting or running — with their share
and why they wait (Batch's statusReason). A job waiting here has no training job yet: this is where
it shows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sagestack.core.names import Names
from sagestack.ops.status_schedules import error_code, iso

# Batch's states of a service job that has not ended, in the order the screen lists them.
HELD = ("RUNNING", "STARTING", "SCHEDULED", "RUNNABLE", "PENDING", "SUBMITTED")


def read_queues(names: Names, queues: tuple[str, ...], batch: Any, now: datetime) -> list[dict[str, Any]]:
    """Each queue's held service jobs (ListServiceJobs by status: without a filter it lists the
    running ones only); a queue not deployed yet says so."""
    rows: list[dict[str, Any]] = []
    for key in queues:
        name = names.queue(key)
        jobs: list[dict[str, Any]] = []
        try:
            for status in HELD:
                token: str | None = None
                while True:
                    page = batch.list_service_jobs(
                        jobQueue=name, jobStatus=status, **({"nextToken": token} if token else {})
                    )
                    jobs += [_job(j, now) for j in page.get("jobSummaryList", [])]
                    token = page.get("nextToken")
                    if not token:
                        break
        except Exception as e:
            if error_code(e) not in ("ClientException", "ResourceNotFoundException"):
                raise
            rows.append({"key": key, "name": name, "deployed": False, "jobs": []})
            continue
        rows.append({"key": key, "name": name, "deployed": True, "jobs": jobs})
    return rows


def _job(summary: dict[str, Any], now: datetime) -> dict[str, Any]:
    created = summary.get("createdAt")
    since = datetime.fromtimestamp(created / 1000, UTC) if created else None
    return {
        "name": summary["jobName"],
        "status": summary["status"],
        "share": summary.get("shareIdentifier"),
        "reason": summary.get("statusReason"),
        "submitted_at": iso(since) if since else None,
        "waiting_seconds": int((now - since).total_seconds()) if since else None,
    }
