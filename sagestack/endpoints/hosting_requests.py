"""An LLM endpoint's requests as CloudFormation sends them, for `sagestack render`: CreateModel (the
family's image loading the weights' S3 prefix, the family's environment; or an optimized package
pinned), CreateEndpointConfig (its variant: an instance fleet or pools, or the fleet inference
components share) and each component's CreateInferenceComponent — rendered from the spec and a
Deployment, with the names CloudFormation generates as stand-ins.

The config is the one the template holds (endpoints/config_request.py renders it for both); the
models and components are built by the constructs (constructs/endpoint_llm.py,
endpoint_components.py) from the same LLM hosting values (llm/hosting.py), and
tests/unit/test_render.py holds this rendering to the example's recorded template, property by
property.
"""

from __future__ import annotations

from typing import Any

from sagestack.core.deployment import Deployment
from sagestack.core.names import ENDPOINT_TAG
from sagestack.endpoints.batching import spec_batching_environment
from sagestack.endpoints.config_request import VARIANT, endpoint_config_request
from sagestack.endpoints.models import ComponentSpec, EndpointSpec
from sagestack.endpoints.scaling_request import FleetScaling, variant_scaling_requests
from sagestack.llm.hosting import llm_hosting
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import accelerator_devices, timeouts

# What the requests name in place of what CloudFormation names (no explicit name: a change replaces
# the model or config) or creates beside the endpoint (the async topics).
STAND_IN_GENERATED = "named-by-cloudformation"


def serves_llm(ep: EndpointSpec) -> bool:
    """An endpoint this environment deploys whose model is an LLM, or that has components."""
    return ep.deploy and bool(ep.instance_type) and (ep.llm is not None or bool(ep.components))


def runs(ep: EndpointSpec) -> bool:
    """Whether the environment runs the endpoint's instances: deployed with its stack (a pinned
    package, components or an LLM, unless `deploy: false`), or by its pipeline once its model
    registers (`model: from`)."""
    return ep.model is not None or (ep.deploy and bool(ep.model_package or ep.components or ep.llm))


def model_name(component: str | None = None) -> str:
    return f"{STAND_IN_GENERATED}-model" + (f"-{component}" if component else "")


def _tags(deployment: Deployment) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in deployment.tags]


def _model_request(
    spec: LlmSpec,
    ep: EndpointSpec,
    deployment: Deployment,
    *,
    name: str,
    accelerators: int | None = None,
    model_package: str | None = None,
) -> dict[str, Any]:
    """CreateModel of an LLM: network-isolated, the weights an uncompressed S3 prefix."""
    hosted = llm_hosting(
        spec,
        region=deployment.region,
        instance_types=list(ep.instance_type or ()),
        bucket_name=deployment.bucket,
        accelerators=accelerators,
        model_package=model_package,
        volume=False,
    )
    container: dict[str, Any]
    if hosted.model_package is not None:
        container = {"ModelPackageName": hosted.model_package}
    else:
        container = {
            "Image": hosted.image_uri,
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": hosted.weights_uri,
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        }
    if hosted.environment:
        container["Environment"] = dict(hosted.environment)
    return _create_model(ep, deployment, name, container)


def _create_model(
    ep: EndpointSpec, deployment: Deployment, name: str, container: dict[str, Any]
) -> dict[str, Any]:
    """CreateModel of one container, network-isolated, in the endpoint's VPC, with the tags."""
    request: dict[str, Any] = {
        "ModelName": name,
        "ExecutionRoleArn": deployment.role_arn,
        "PrimaryContainer": container,
        "EnableNetworkIsolation": True,
    }
    if ep.vpc is not None:
        request["VpcConfig"] = {
            "SecurityGroupIds": list(ep.vpc.security_groups),
            "Subnets": list(ep.vpc.subnets),
        }
    if deployment.tags:
        request["Tags"] = _tags(deployment)
    return request


def _package_model_request(
    ep: EndpointSpec, deployment: Deployment, package: str, name: str, workers: int
) -> dict[str, Any]:
    """CreateModel of a component's registered package (its own container and environment, with
    the endpoint's `batching:` added: `workers` per copy by default)."""
    container: dict[str, Any] = {"ModelPackageName": package}
    if ep.batching is not None:
        container["Environment"] = spec_batching_environment(ep.batching, workers)
    return _create_model(ep, deployment, name, container)


def _config_request(key: str, ep: EndpointSpec, deployment: Deployment) -> dict[str, Any]:
    """The config as rendered once (endpoints/config_request.py), named and tagged as CloudFormation
    creates it, its models and async topics stand-ins."""
    topic = f"arn:aws:sns:{deployment.region}:{deployment.account}:{STAND_IN_GENERATED}"
    request = endpoint_config_request(
        key,
        ep,
        deployment,
        model_name=model_name(),
        shadow_model_name=model_name("shadow"),
        topics=(f"{topic}-success", f"{topic}-error"),
    )
    request = {"EndpointConfigName": f"{STAND_IN_GENERATED}-config", **request}
    if deployment.tags:
        request["Tags"] = _tags(deployment)
    return request


def _component_request(
    name: str, c: ComponentSpec, ep: EndpointSpec, *, endpoint_name: str, deployment: Deployment
) -> dict[str, Any]:
    """CreateInferenceComponent: an LLM's copy spans its tensor-parallel degree's accelerators
    (unless `accelerators` says otherwise) and starts within its timeouts."""
    types = list(ep.instance_type or ())
    accelerators = accelerator_devices(c.llm, types[0], c.accelerators) if c.llm else c.accelerators
    needs: dict[str, Any] = {"NumberOfCpuCoresRequired": c.cpu_cores, "MinMemoryRequiredInMb": c.memory_mb}
    if accelerators is not None:
        needs["NumberOfAcceleratorDevicesRequired"] = accelerators
    specification: dict[str, Any] = {"ModelName": model_name(name), "ComputeResourceRequirements": needs}
    if c.llm is not None:
        download, startup = timeouts(c.llm)
        specification["StartupParameters"] = {
            "ModelDataDownloadTimeoutInSeconds": download,
            "ContainerStartupHealthCheckTimeoutInSeconds": startup,
        }
    request: dict[str, Any] = {
        "InferenceComponentName": f"{endpoint_name}-{name}",
        "EndpointName": endpoint_name,
        "VariantName": VARIANT,
        "Specification": specification,
        "RuntimeConfig": {"CopyCount": c.copies},
    }
    if deployment.tags:
        request["Tags"] = _tags(deployment)
    return request


def llm_endpoint_requests(
    key: str, ep: EndpointSpec, *, endpoint_name: str, deployment: Deployment
) -> dict[str, dict[str, Any]]:
    """'CreateModel' (the endpoint's LLM), 'CreateModel <component>' and 'CreateInferenceComponent
    <component>' for each component, 'CreateEndpointConfig': what the template creates for `ep`,
    each tagged with the endpoint's key as InferenceEndpoint tags its resources."""
    deployment = deployment.tagged(ENDPOINT_TAG, key)
    out: dict[str, dict[str, Any]] = {}
    if ep.llm is not None:
        out["CreateModel"] = _model_request(
            ep.llm, ep, deployment, name=model_name(), model_package=ep.model_package
        )
        if ep.shadow is not None:  # the candidate package, served with the production LLM's settings
            out["CreateModel shadow"] = _model_request(
                ep.llm, ep, deployment, name=model_name("shadow"), model_package=ep.shadow.model_package
            )
    for name, c in ep.components.items():
        if c.llm is not None:
            out[f"CreateModel {name}"] = _model_request(
                c.llm, ep, deployment, name=model_name(name), accelerators=c.accelerators
            )
        elif c.model_package is not None:
            workers = c.accelerators or max(1, int(c.cpu_cores))  # the model server's default per copy
            out[f"CreateModel {name}"] = _package_model_request(
                ep, deployment, c.model_package, model_name(name), workers
            )
    out["CreateEndpointConfig"] = _config_request(key, ep, deployment)
    for name, c in ep.components.items():
        out[f"CreateInferenceComponent {name}"] = _component_request(
            name, c, ep, endpoint_name=endpoint_name, deployment=deployment
        )
    return out


def fleet_requests(
    key: str, ep: EndpointSpec, *, endpoint_name: str, deployment: Deployment
) -> dict[str, dict[str, Any]]:
    """What an endpoint holds of the account: 'CreateEndpointConfig' (its variant's instances, pools
    and shadow, or serverless concurrency) and, for an instance fleet of one model that autoscales,
    'RegisterScalableTarget' and 'PutScalingPolicy <name>' (endpoints/scaling_request.py) — the
    requests capacity counts (capacity/assess.py) and InferenceEndpoint builds from."""
    out = {"CreateEndpointConfig": _config_request(key, ep, deployment)}
    if ep.autoscaling is not None and ep.instance_type and not ep.components:
        scaling = FleetScaling.of(ep.autoscaling)
        asynchronous = ep.async_ is not None
        out.update(
            variant_scaling_requests(endpoint_name, scaling, asynchronous=asynchronous, tags=deployment.tags)
        )
    return out
