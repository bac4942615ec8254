"""TrainingQueue: an AWS Batch queue for SageMaker training jobs — a service environment whose
capacity limit caps the instances its jobs hold at once, a fair-share scheduling policy where teams
share it, and a job queue of type SAGEMAKER_TRAINING in front of them. Its create requests are the
ones queues/request.py renders, validated against botocore's Batch model at synth."""

from __future__ import annotations

from aws_cdk import aws_batch as batch
from constructs import Construct

from sagestack.constructs.prop_types import typed_props
from sagestack.core.catalog import validate_request
from sagestack.core.names import Names
from sagestack.queues.models import QueueSpec
from sagestack.queues.request import queue_requests

# What synth validates the job queue's request with where the policy's ARN is a token.
_POLICY_STAND_IN = "arn:aws:batch:us-east-1:123456789012:scheduling-policy/stand-in"


class TrainingQueue(Construct):
    """Props:
    names: the environment's Names (the queue is Names.queue(key)).
    key: the queue's key in queues:.
    queue: its QueueSpec (max_instances, priority, shares, share_decay_seconds, compute_reservation).
    """

    @typed_props
    def __init__(self, scope: Construct, id: str, *, names: Names, key: str, queue: QueueSpec) -> None:
        super().__init__(scope, id)
        requests = queue_requests(names, key, queue, _POLICY_STAND_IN)
        for operation, request in requests.items():
            validate_request(operation, request, service="batch")
        environment = requests["CreateServiceEnvironment"]
        self.service_environment = batch.CfnServiceEnvironment(
            self,
            "ServiceEnvironment",
            service_environment_name=environment["serviceEnvironmentName"],
            service_environment_type=environment["serviceEnvironmentType"],
            state=environment["state"],
            capacity_limits=[
                batch.CfnServiceEnvironment.CapacityLimitProperty(
                    max_capacity=limit["maxCapacity"], capacity_unit=limit["capacityUnit"]
                )
                for limit in environment["capacityLimits"]
            ],
        )
        self.scheduling_policy: batch.CfnSchedulingPolicy | None = None
        policy = requests.get("CreateSchedulingPolicy")
        if policy is not None:
            fair = policy["fairsharePolicy"]
            self.scheduling_policy = batch.CfnSchedulingPolicy(
                self,
                "SchedulingPolicy",
                name=policy["name"],
                fairshare_policy=batch.CfnSchedulingPolicy.FairsharePolicyProperty(
                    share_decay_seconds=fair.get("shareDecaySeconds"),
                    compute_reservation=fair.get("computeReservation"),
                    share_distribution=[
                        batch.CfnSchedulingPolicy.ShareAttributesProperty(
                            share_identifier=s["shareIdentifier"], weight_factor=s["weightFactor"]
                        )
                        for s in fair["shareDistribution"]
                    ],
                ),
            )
        queue_request = requests["CreateJobQueue"]
        self.job_queue = batch.CfnJobQueue(
            self,
            "JobQueue",
            job_queue_name=queue_request["jobQueueName"],
            job_queue_type=queue_request["jobQueueType"],
            state=queue_request["state"],
            priority=queue_request["priority"],
            scheduling_policy_arn=self.scheduling_policy.attr_arn if self.scheduling_policy else None,
            service_environment_order=[
                batch.CfnJobQueue.ServiceEnvironmentOrderProperty(
                    order=1, service_environment=self.service_environment.attr_service_environment_arn
                )
            ],
        )
        self.name = queue_request["jobQueueName"]
        self.max_instances = queue.max_instances

    @property
    def job_queue_arn(self) -> str:
        return self.job_queue.attr_job_queue_arn
