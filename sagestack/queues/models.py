"""The spec of training queues (`queues:`) and of a job's place in one (`jobs.<key>.queue:`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from sagestack.core.model import StrictModel
from sagestack.core.types import EntryName


class QueueSpec(StrictModel):
    """An AWS Batch queue for SageMaker training jobs: a service environment whose capacity limit
    caps the instances its jobs hold at once, and, with `shares:`, fair-share scheduling."""

    max_instances: int = Field(
        ge=1,
        le=10000,
        description="the service environment's capacity limit: instances the queue's training jobs may "
        "hold at once (Batch keeps the others waiting, RUNNABLE)",
    )
    priority: int = Field(
        default=1,
        ge=0,
        le=1000,
        description="the job queue's priority among queues sharing a service environment (higher first)",
    )
    shares: dict[EntryName, Annotated[float, Field(ge=0.0001, le=999.9999)]] = Field(
        default_factory=dict,
        description="fair-share scheduling by share (team), each with Batch's weight factor: a LOWER factor "
        "gets MORE capacity (0.5 gets twice what 1 gets when both wait). Empty: first in, first out",
    )
    share_decay_seconds: int | None = Field(
        default=None,
        ge=0,
        le=604800,
        description="how long past usage counts against a share (default: Batch's, 0 = current usage only)",
    )
    compute_reservation: int | None = Field(
        default=None,
        ge=0,
        le=99,
        description="a percentage of capacity held back for shares that have not used the queue lately",
    )


class JobQueueRef(StrictModel):
    """Where a job waits: the queue, its share (team) and its priority within that share."""

    name: str = Field(description="a key of queues:")
    share: str | None = Field(default=None, description="the share (team) the job counts against")
    priority: int | None = Field(
        default=None,
        ge=0,
        le=9999,
        description="scheduling priority within the share (higher first; fair-share queues only)",
    )
