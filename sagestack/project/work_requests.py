"""What an environment's work beside its training holds of the account, as the requests that ask
for it — each rendered by its feature with the environment's stand-ins and validated against
botocore's model: every endpoint's fleet (CreateEndpointConfig, and its autoscaling's
RegisterScalableTarget / PutScalingPolicy: endpoints/hosting_requests.fleet_requests), every
cluster's CreateCluster (clusters/request.py) and every transform's CreateModel and one
CreateTransformJob per instance candidate (transforms/request.py).

project/requests.render_training joins them to the environment's one rendering, so capacity
(capacity/assess.py) counts what `plan`, synth's quota check, `check` and `render` all see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sagestack.clusters.request import create_cluster_request, stand_in_cluster_context
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.deployment import Deployment
from sagestack.endpoints.hosting_requests import fleet_requests, runs
from sagestack.endpoints.scaling_request import OPERATIONS, validate_scaling
from sagestack.project.environment import ResolvedEnvironment
from sagestack.transforms.request import ResolvedTransform, stand_in_requests

Requests = dict[str, dict[str, Any]]  # operation[ <part>] -> request


@dataclass
class WorkRequests:
    fleets: dict[str, Requests] = field(default_factory=dict)  # endpoint the environment runs
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)  # cluster -> CreateCluster
    transforms: dict[str, Requests] = field(
        default_factory=dict
    )  # 'CreateModel', 'CreateTransformJob <type>'


def validate_all(requests: Requests) -> None:
    """SageMaker's requests against its model, the fleet's autoscaling against its own."""
    validate_scaling(requests)
    for op, request in requests.items():
        if op.split(" ")[0] not in OPERATIONS:
            validate_request(op.split(" ")[0], request)


def render_work(plan: ResolvedEnvironment, deployment: Deployment, *, validate: bool) -> WorkRequests:
    """The fleets, clusters and transforms of `plan`, with `deployment`'s stand-ins."""
    out = WorkRequests()
    for key, ep in plan.spec.endpoints.items():
        if runs(ep):
            out.fleets[key] = fleet_requests(
                key, ep, endpoint_name=plan.names.endpoint(key), deployment=deployment
            )
    for key, cluster in plan.spec.clusters.items():
        context = stand_in_cluster_context(
            deployment, fsx=cluster.fsx is not None, eks=cluster.orchestrator == "eks"
        )
        out.clusters[key] = create_cluster_request(plan.names, key, cluster, context)
    for key, transform in plan.spec.transforms.items():
        out.transforms[key] = stand_in_requests(ResolvedTransform.of(plan.names, key, transform), deployment)
    if validate:
        for requests in [*out.fleets.values(), *out.transforms.values()]:
            validate_all(requests)
        for request in out.clusters.values():
            validate_request("CreateCluster", request)
    return out
