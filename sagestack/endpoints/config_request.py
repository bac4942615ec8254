"""An endpoint's CreateEndpointConfig, rendered once from its spec and a Deployment: `render` prints
it (with stand-ins, endpoints/hosting_requests.py) and InferenceEndpoint turns the same request,
rendered with the deployment's tokens, into its AWS::SageMaker::EndpointConfig
(constructs/endpoint_config.config_from_request) — on the spec path (an `endpoints:` entry) and for
a library user's typed props alike (constructs/endpoint_typed.py translates them into an
EndpointSpec and a Placement). A field of the config is added here and on the spec
(endpoints/models.py); the construct needs no change.

The production variant is an instance fleet (one type, or instance pools in priority order),
serverless, or the fleet inference components share; a shadow variant receives a copy of the
traffic; what CloudFormation names (the models, the async topics) is passed in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core.deployment import Deployment
from sagestack.endpoints.models import EndpointSpec
from sagestack.llm.hosting import volume_size_gb
from sagestack.llm.sizing import timeouts

VARIANT = "AllTraffic"  # blue/green updates need the same variant name in the old and new config
SHADOW = "Shadow"  # the shadow variant's name, its metrics' VariantName


@dataclass(frozen=True)
class Storage:
    """Where a part of the config writes — an s3:// prefix (a token's bucket allowed), without a
    trailing '/' — and the key it encrypts with (None: the bucket's default)."""

    prefix: str
    kms_key_id: str | None = None


@dataclass(frozen=True)
class Hosting:
    """A model's ModelDataDownloadTimeoutInSeconds, ContainerStartupHealthCheckTimeoutInSeconds and
    (the production variant's only) VolumeSizeInGB; None: not set."""

    download_timeout: int | None = None
    startup_timeout: int | None = None
    volume_size_gb: int | None = None


@dataclass(frozen=True)
class Placement:
    """What a library user's props give as values where an `endpoints:` entry has them derived from
    the project: the LLM's hosting values (an LlmModel has no spec form), the shadow's variant name,
    where data capture and async results are written and with which key (each part names its own
    bucket and folder). None: derived, as for the spec (`placement_of`)."""

    hosting: Hosting | None = None
    shadow_name: str = SHADOW
    capture: Storage | None = None
    async_output: Storage | None = None


def placement_of(key: str, ep: EndpointSpec, deployment: Deployment) -> Placement:
    """An `endpoints:` entry's placement: its LLM's timeouts and volume (llm/sizing, llm/hosting),
    capture/<key> and async/<key> in the deployment's bucket, with the deployment's key."""
    types = list(ep.instance_type or ())
    hosting = None
    if ep.llm is not None and types and not ep.components:
        download, startup = timeouts(ep.llm)
        hosting = Hosting(download, startup, volume_size_gb(ep.llm, types))
    kms = deployment.kms_key_id or None
    return Placement(
        hosting=hosting,
        capture=Storage(deployment.s3.uri(f"capture/{key}"), kms),
        async_output=Storage(deployment.s3.uri(f"async/{key}"), kms),
    )


def _variant(ep: EndpointSpec, model_name: str | None, hosting: Hosting | None) -> dict[str, Any]:
    """The production variant: one model's fleet (its LLM's timeouts and volume) or serverless, or
    the fleet the components share (managed instance scaling between autoscaling's min and max).
    Two or more types replace InstanceType with InstancePools ("replace the InstanceType parameter
    in your production variant with an InstancePools list": SageMaker's realtime-endpoints-
    heterogeneous)."""
    types = list(ep.instance_type or ())
    shared = bool(ep.components)
    variant: dict[str, Any] = {"VariantName": VARIANT}
    if types:
        variant["InitialInstanceCount"] = ep.initial_instance_count
    if not shared:
        variant["ModelName"] = model_name
        variant["InitialVariantWeight"] = 1.0
    if len(types) >= 2:
        variant["InstancePools"] = [{"InstanceType": t, "Priority": i} for i, t in enumerate(types, 1)]
    elif types:
        variant["InstanceType"] = types[0]
    if ep.provision_timeout:
        variant["VariantInstanceProvisionTimeoutInSeconds"] = ep.provision_timeout
    if ep.capacity_reservation:
        variant["CapacityReservationConfig"] = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "MlReservationArn": ep.capacity_reservation,
        }
    if hosting is not None and not shared:
        variant.update(_timeouts(hosting))
        if hosting.volume_size_gb is not None:
            variant["VolumeSizeInGB"] = hosting.volume_size_gb
    if ep.serverless is not None:
        variant["ServerlessConfig"] = {
            "MemorySizeInMB": ep.serverless.memory_mb,
            "MaxConcurrency": ep.serverless.max_concurrency,
        }
    if shared:
        a = ep.autoscaling
        variant["ManagedInstanceScaling"] = {
            "Status": "ENABLED",
            "MinInstanceCount": a.min if a else ep.initial_instance_count,
            "MaxInstanceCount": a.max if a else ep.initial_instance_count,
        }
        variant["RoutingConfig"] = {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    return variant


def _timeouts(hosting: Hosting) -> dict[str, int]:
    timeouts = {
        "ModelDataDownloadTimeoutInSeconds": hosting.download_timeout,
        "ContainerStartupHealthCheckTimeoutInSeconds": hosting.startup_timeout,
    }
    return {k: v for k, v in timeouts.items() if v is not None}


def _shadow(ep: EndpointSpec, model_name: str, place: Placement) -> dict[str, Any]:
    """The shadow: its weight against production's 1.0 is the share of requests copied to it; a
    shadow of an LLM downloads and starts within the production LLM's timeouts."""
    assert ep.shadow is not None and ep.instance_type
    shadow: dict[str, Any] = {
        "VariantName": place.shadow_name,
        "ModelName": model_name,
        "InitialInstanceCount": ep.shadow.initial_instance_count,
        "InstanceType": ep.shadow.instance_type or ep.instance_type[0],
        "InitialVariantWeight": ep.shadow.sampling_percent / 100,
    }
    if place.hosting is not None:
        shadow.update(_timeouts(place.hosting))
    return shadow


def _data_capture(ep: EndpointSpec, where: Storage) -> dict[str, Any]:
    """Requests and responses (JSON as text) under capture/<endpoint>/, encrypted with the key."""
    assert ep.data_capture is not None
    capture: dict[str, Any] = {
        "EnableCapture": True,
        "InitialSamplingPercentage": ep.data_capture.sampling_percent,
        "DestinationS3Uri": where.prefix,
    }
    if where.kms_key_id:
        capture["KmsKeyId"] = where.kms_key_id
    capture["CaptureOptions"] = [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}]
    capture["CaptureContentTypeHeader"] = {"JsonContentTypes": ["application/json"]}
    return capture


def _async_config(ep: EndpointSpec, where: Storage, topics: tuple[str, str] | None) -> dict[str, Any]:
    """Results under async/<endpoint>/output/, failures under …/failures/, the topics' ARNs
    (success, error) when it notifies."""
    a = ep.async_
    assert a is not None
    output: dict[str, Any] = {
        "S3OutputPath": f"{where.prefix}/output/",
        "S3FailurePath": f"{where.prefix}/failures/",
    }
    if where.kms_key_id:
        output["KmsKeyId"] = where.kms_key_id
    if a.notify and topics is not None:
        output["NotificationConfig"] = {"SuccessTopic": topics[0], "ErrorTopic": topics[1]}
        if a.include_response_in_notification:
            output["NotificationConfig"]["IncludeInferenceResponseIn"] = ["SUCCESS_NOTIFICATION_TOPIC"]
    config: dict[str, Any] = {"OutputConfig": output}
    if a.max_concurrent_invocations_per_instance:
        config["ClientConfig"] = {
            "MaxConcurrentInvocationsPerInstance": a.max_concurrent_invocations_per_instance
        }
    return config


def endpoint_config_request(
    key: str,
    ep: EndpointSpec,
    deployment: Deployment,
    *,
    model_name: str | None,
    shadow_model_name: str | None = None,
    topics: tuple[str, str] | None = None,
    placement: Placement | None = None,
) -> dict[str, Any]:
    """CreateEndpointConfig of endpoint `key` but its name and tags (CloudFormation names the
    config; the stack tags it): model_name — the production variant's model (components name their
    own); shadow_model_name — the shadow's; topics — the async success and error topics' ARNs;
    placement — a library user's own values (default: the spec's, `placement_of`)."""
    place = placement_of(key, ep, deployment) if placement is None else placement
    request: dict[str, Any] = {"ProductionVariants": [_variant(ep, model_name, place.hosting)]}
    if ep.instance_type and deployment.kms_key_id:  # serverless endpoints take no key
        request["KmsKeyId"] = deployment.kms_key_id
    if ep.shadow is not None and ep.instance_type and shadow_model_name is not None:
        request["ShadowProductionVariants"] = [_shadow(ep, shadow_model_name, place)]
    if ep.data_capture is not None:
        assert place.capture is not None, "a typed placement names where data capture writes"
        request["DataCaptureConfig"] = _data_capture(ep, place.capture)
    if ep.async_ is not None:
        assert place.async_output is not None, "a typed placement names where async results land"
        request["AsyncInferenceConfig"] = _async_config(ep, place.async_output, topics)
    if ep.components:  # components name their models; the config names the role instead
        request["ExecutionRoleArn"] = deployment.role_arn
    if ep.metrics is not None:
        m = ep.metrics
        request["MetricsConfig"] = {
            "EnableEnhancedMetrics": m.enhanced,
            "EnableDetailedObservability": m.detailed_observability,
        }
        if m.publish_frequency is not None:
            request["MetricsConfig"]["MetricPublishFrequencyInSeconds"] = m.publish_frequency
    return request
