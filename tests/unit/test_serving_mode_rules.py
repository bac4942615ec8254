"""Rules of the serving modes (async, rolling, inference components, Model Monitor) and of batch
transforms: each with a spec that passes and one that fails (message asserted)."""

from __future__ import annotations

from sagestack.core.catalog.instances import describe, nearest_offered
from tests.conftest import MINIMAL
from tests.unit.test_rules import findings

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"
ENDPOINT = MINIMAL + f'endpoints:\n  digits:\n    model_package: "{PIN}"\n'


def test_endpoint_async_rule(project):
    ok = ENDPOINT + "    instance_type: ml.m5.large\n    async: {}\n"
    assert findings(project, "endpoint-async", ok) == []
    bad = ENDPOINT + "    serverless: {}\n    async: {}\n"
    assert findings(project, "endpoint-async", bad) == [
        "endpoints.digits.async: serverless endpoints are real-time only; use instance_type for async inference"
    ]


def test_async_endpoints_may_scale_to_zero_real_time_ones_may_not(project):
    zero = "    instance_type: ml.m5.large\n    autoscaling: {min: 0, max: 2}\n"
    assert findings(project, "endpoint-autoscaling", ENDPOINT + zero + "    async: {}\n") == []
    assert findings(project, "endpoint-autoscaling", ENDPOINT + zero) == [
        "endpoints.digits.autoscaling.min: a real-time instance endpoint keeps at least 1 instance; async "
        "endpoints, serverless ones and endpoints of inference components scale to zero"
    ]


def test_endpoint_rollout_rule(project):
    assert (
        findings(
            project,
            "endpoint-rollout",
            ENDPOINT + "    instance_type: ml.g5.xlarge\n    rollout: {traffic: rolling}\n",
        )
        == []
    )
    bad = ENDPOINT + "    serverless: {}\n    rollout: {traffic: rolling}\n"
    assert findings(project, "endpoint-rollout", bad) == [
        "endpoints.digits.rollout.traffic: SageMaker does not roll serverless endpoints (a deployment-guardrails "
        "exclusion); use all_at_once"
    ]
    inf1 = ENDPOINT + "    instance_type: ml.inf1.xlarge\n    rollout: {traffic: rolling}\n"
    assert findings(project, "endpoint-rollout", inf1)[0].startswith(
        "endpoints.digits.rollout.traffic: Inf1 endpoints"
    )


def test_endpoint_components_rule(project):
    base = (
        MINIMAL
        + "endpoints:\n  shared:\n    instance_type: ml.g5.12xlarge\n    autoscaling: {min: 1, max: 2}\n"
    )
    ok = (
        base
        + f'    components:\n      small: {{model_package: "{PIN}", memory_mb: 8192, accelerators: 1, copies: 4}}\n'
    )
    assert findings(project, "endpoint-components", ok) == []
    too_big = (
        base + f'    components:\n      small: {{model_package: "{PIN}", memory_mb: 8192, accelerators: 8}}\n'
    )
    assert findings(project, "endpoint-components", too_big) == [
        "endpoints.shared.components.small: one copy needs 1 CPU cores, 8192 MB and 8 accelerator(s); "
        "ml.g5.12xlarge has 48, 196608 MB and 4: ask for less or choose a larger instance type"
    ]
    crowded = (
        base
        + f'    components:\n      small: {{model_package: "{PIN}", memory_mb: 8192, accelerators: 1, copies: 9}}\n'
    )
    assert findings(project, "endpoint-components", crowded) == [
        "endpoints.shared.components: the initial copies need 3 ml.g5.12xlarge instances; managed scaling allows "
        "at most 2: raise autoscaling.max or lower copies"
    ]
    mixed = ok.replace("endpoints:\n  shared:\n", f'endpoints:\n  shared:\n    model_package: "{PIN}"\n')
    assert findings(project, "endpoint-components", mixed) == [
        "endpoints.shared.model_package: an endpoint with components serves each component's model_package; "
        "remove model_package"
    ]


def _packed(instance_type: str, **components: dict) -> list[str]:
    from sagestack.endpoints.components import describe, pack
    from sagestack.endpoints.models import EndpointSpec

    given = {k: {"model_package": PIN, **c} for k, c in components.items()}
    spec = EndpointSpec.model_validate(
        {"instance_type": instance_type, "autoscaling": {"min": 1, "max": 4}, "components": given}
    )
    return describe(pack(spec))


def test_components_pack_largest_copies_first():
    """As a scheduler would (first fit, largest first): two 3-GPU and two 1-GPU copies take two
    4-GPU instances (3+1 each); taken in the order given, smallest first, they would take three."""
    assert _packed(
        "ml.g5.12xlarge",
        small={"memory_mb": 8192, "accelerators": 1, "copies": 2},
        big={"memory_mb": 8192, "accelerators": 3, "copies": 2},
    ) == [
        "instance 1: 1xbig, 1xsmall (free: 46 vCPU, 176.0 GiB, 0 accelerator(s))",
        "instance 2: 1xbig, 1xsmall (free: 46 vCPU, 176.0 GiB, 0 accelerator(s))",
    ]
    # without accelerators, memory decides: 40 + 16 GiB twice on 64 GiB instances
    assert _packed(
        "ml.m5.4xlarge",
        small={"memory_mb": 16384, "copies": 2},
        big={"memory_mb": 40960, "copies": 2},
    ) == [
        "instance 1: 1xbig, 1xsmall (free: 14 vCPU, 8.0 GiB)",
        "instance 2: 1xbig, 1xsmall (free: 14 vCPU, 8.0 GiB)",
    ]


def test_endpoint_monitor_rule(project):
    spec = ENDPOINT + "    instance_type: ml.m5.large\n"
    assert findings(project, "endpoint-monitor", spec + "    data_capture: {}\n    monitor: {}\n") == []
    assert findings(project, "endpoint-monitor", spec + "    monitor: {instance_type: ml.t3.nano}\n") == [
        "endpoints.digits.monitor: Model Monitor reads the endpoint's captured requests: add data_capture: {}",
        "endpoints.digits.monitor.instance_type: 'ml.t3.nano' is not a SageMaker processing job instance "
        "type; did you mean 'ml.t3.large'?",
    ]
    # a type SageMaker has, but not for processing jobs: the nearest that are (ProcessingInstanceType)
    capture = spec + "    data_capture: {}\n"
    assert findings(
        project, "endpoint-monitor", capture + "    monitor: {instance_type: ml.p4d.24xlarge}\n"
    ) == [
        "endpoints.digits.monitor.instance_type: 'ml.p4d.24xlarge' exists but SageMaker does not offer it for "
        "processing jobs; the nearest offered: "
        + ", ".join(f"{t.name} ({describe(t)})" for t in nearest_offered("ml.p4d.24xlarge", "processing"))
    ]
    assert all(t.accelerator for t in nearest_offered("ml.p4d.24xlarge", "processing"))


TRANSFORM = MINIMAL + "transforms:\n  score:\n    instance_type: ml.m5.xlarge\n"


def test_transform_model_source_rule(project):
    assert findings(project, "transform-model-source", TRANSFORM + "    model: {from: classifier}\n") == []
    assert findings(project, "transform-model-source", TRANSFORM + "    model: {from: clasifier}\n") == [
        "transforms.score.model.from: 'clasifier' is neither a job nor a tuning entry; did you mean 'classifier'?"
    ]
    assert findings(project, "transform-model-source", TRANSFORM)[0].startswith(
        "transforms.score: nothing to score with: give model: {from: <job or tuning entry>}"
    )
    both = TRANSFORM + f'    model: {{from: classifier}}\n    model_package: "{PIN}"\n'
    assert findings(project, "transform-model-source", both) == []
    other_region = PIN.replace("us-east-1", "eu-west-1")
    assert findings(
        project, "transform-model-source", TRANSFORM + f'    model_package: "{other_region}"\n'
    ) == ["transforms.score.model_package: the package is in eu-west-1; transforms run in us-east-1"]


def test_transform_payload_rule(project):
    spec = TRANSFORM + f'    model_package: "{PIN}"\n'
    assert findings(project, "transform-payload", spec + "    join_source: Input\n") == []
    bad = (
        spec
        + "    max_payload_mb: 20\n    max_concurrent_transforms: 8\n    content_type: application/x-npy\n    join_source: Input\n"
    )
    assert findings(project, "transform-payload", bad) == [
        "transforms.score.max_payload_mb: max_payload_mb 20 x max_concurrent_transforms 8 exceeds SageMaker's "
        "100 MB per instance",
        "transforms.score.join_source: SageMaker joins input and output for JSON, JSON Lines and CSV records, "
        "not application/x-npy",
    ]


SHARED = MINIMAL + (
    "endpoints:\n  shared:\n    instance_type: ml.g5.2xlarge\n    autoscaling: {min: 0, max: 2}\n"
    f'    components:\n      one: {{model_package: "{PIN}", memory_mb: 4096'
)


def test_components_scale_to_zero_only_when_every_component_can(project):
    assert findings(project, "endpoint-autoscaling", SHARED + ", min_copies: 0, max_copies: 2}\n") == []
    assert findings(project, "endpoint-components", SHARED + ", min_copies: 0, max_copies: 2}\n") == []
    assert findings(project, "endpoint-components", SHARED + "}\n") == [
        "endpoints.shared.components.one.min_copies: the endpoint scales to zero instances (autoscaling.min 0) "
        "only when every component scales to zero copies: give min_copies: 0 and max_copies"
    ]
    assert findings(project, "endpoint-components", SHARED + ", min_copies: 0}\n") == [
        "endpoints.shared.components.one.min_copies: min_copies bounds autoscaled copies: give max_copies too"
    ]


def test_a_shadow_runs_beside_a_real_time_fleet_updated_by_blue_green(project):
    shadow = f'    shadow: {{model_package: "{PIN}"}}\n'
    fleet = ENDPOINT + "    instance_type: ml.m5.large\n"
    assert findings(project, "endpoint-shadow", fleet + shadow) == []
    assert findings(project, "endpoint-shadow", fleet + shadow + "    rollout: {traffic: rolling}\n") == [
        "endpoints.digits.rollout.traffic: rolling updates exclude multi-variant endpoints, and a shadow "
        "makes two variants: use canary, linear or all_at_once"
    ]
    assert findings(project, "endpoint-shadow", fleet + shadow + "    async: {}\n") == [
        "endpoints.digits.shadow: SageMaker runs no shadow variant on asynchronous endpoints"
    ]


def _packing(instance_type: str, copies: str = "initial", **components: dict):  # type: ignore[no-untyped-def]
    from sagestack.endpoints.components import pack
    from sagestack.endpoints.models import EndpointSpec

    given = {k: {"model_package": PIN, **c} for k, c in components.items()}
    spec = EndpointSpec.model_validate(
        {"instance_type": instance_type, "autoscaling": {"min": 1, "max": 4}, "components": given}
    )
    return pack(spec) if copies == "initial" else pack(spec, copies=copies)  # the default: initial


def test_a_copy_that_needs_exactly_an_instance_fits_and_one_unit_more_does_not():
    """ml.m5.xlarge: 4 vCPU, 16384 MB. SageMaker places a copy where its whole request is free."""
    exact = _packing("ml.m5.xlarge", whole={"cpu_cores": 4, "memory_mb": 16384, "copies": 2})
    assert (exact.instances_needed, exact.unplaceable) == (2, ())
    assert exact.instance_type == "ml.m5.xlarge" and exact.per_instance is not None
    # two copies whose sum passes the instance by half a vCPU, or by 1 MB, take two instances
    cpu = _packing(
        "ml.m5.xlarge", alpha={"cpu_cores": 2.5, "memory_mb": 1024}, beta={"cpu_cores": 2, "memory_mb": 1024}
    )
    assert cpu.instances_needed == 2
    memory = _packing("ml.m5.xlarge", alpha={"memory_mb": 8192}, beta={"memory_mb": 8193})
    assert memory.instances_needed == 2
    gpus = _packing("ml.g5.12xlarge", alpha={"memory_mb": 1024, "accelerators": 4, "copies": 2})
    assert (gpus.instances_needed, gpus.unplaceable) == (2, ())


def test_a_component_too_big_for_the_instance_is_named_and_the_rest_still_placed():
    packing = _packing(
        "ml.m5.xlarge",
        first={"memory_mb": 1024},
        huge={"memory_mb": 16385},
        last={"memory_mb": 2048, "copies": 2},
    )
    assert packing.unplaceable == ("huge",)
    assert sorted(c for i in packing.instances for c in i.copies) == ["first", "last", "last"]


def test_max_copies_are_packed_when_asked_for_and_copies_otherwise():
    components = {
        "alpha": {"memory_mb": 8192, "copies": 1, "max_copies": 4},
        "beta": {"memory_mb": 8192, "copies": 2},
    }
    assert _packing("ml.m5.xlarge", **components).instances_needed == 2  # 1 + 2 copies of 8 GiB
    at_max = _packing("ml.m5.xlarge", "max", **components)
    assert at_max.instances_needed == 3  # 4 + 2 (beta has no max_copies: its copies)
    assert sorted(c for i in at_max.instances for c in i.copies) == ["alpha"] * 4 + ["beta"] * 2


def test_an_instance_type_of_unknown_size_is_packed_onto_nothing(monkeypatch):
    """A type whose vCPUs or memory the catalog lacks: no packing (plan says so), never a guess."""
    import dataclasses

    from sagestack.endpoints import components
    from sagestack.endpoints.components import instance_capacity

    known = components.lookup("ml.m5.xlarge")
    for missing in ({"memory_gib": None}, {"vcpu": None}):
        monkeypatch.setattr(components, "lookup", lambda _, m=missing: dataclasses.replace(known, **m))
        assert instance_capacity("ml.m5.xlarge") is None
        packing = _packing("ml.m5.xlarge", alpha={"memory_mb": 1024})
        assert (packing.instance_type, packing.per_instance, packing.instances, packing.unplaceable) == (
            "ml.m5.xlarge",
            None,
            (),
            (),
        )
    monkeypatch.undo()
    assert instance_capacity("ml.nope.xlarge") is None
