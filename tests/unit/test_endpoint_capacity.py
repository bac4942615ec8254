"""An endpoint's instance pools at plan and synth: every pool type's quota ("<type> for endpoint
usage"), placeable when one pool has room, the shadow variant's instances on top, each pool priced,
and an LLM's accelerators, tensor-parallel degree and memory per pool type."""

from __future__ import annotations

import json

import pytest

from sagestack.capacity.assess import assess
from sagestack.capacity.ledger import QuotaBook, QuotaValue
from sagestack.core.catalog.instances import instance_type
from sagestack.project import resolve_environment
from sagestack.project.requests import render_training
from tests.conftest import MINIMAL

PACKAGE = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"
CANDIDATE = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/2"
P5 = "ml.p5.48xlarge for endpoint usage"
G6E = "ml.g6e.12xlarge for endpoint usage"
G5 = "ml.g5.12xlarge for endpoint usage"

POOLS = (
    MINIMAL
    + f"""\
endpoints:
  web:
    model_package: "{PACKAGE}"
    instance_type: [ml.p5.48xlarge, ml.g6e.12xlarge, ml.g5.12xlarge]
    autoscaling: {{min: 1, max: 3}}
"""
)


def evaluate(project, plan, book):
    """capacity.assess over the environment's one rendering, as `plan` and synth call it."""
    return assess(plan, render_training(plan, project.root), book)


def _book(**values: float) -> QuotaBook:
    names = {"p5": P5, "g6e": G6E, "g5": G5}
    return QuotaBook(
        "snapshot",
        "test",
        {names[k]: QuotaValue(names[k], f"L-{k.upper()}", v) for k, v in values.items()},
    )


def _plan(project, text: str, **load):
    project.spec(text).env("dev")
    return resolve_environment(project.load("dev", **load))


def _rows(report, kind="endpoint", key="web"):
    return [r for r in report.rows if r.kind == kind and r.key == key]


def test_every_pool_type_is_a_row_and_the_first_with_room_is_marked(project):
    report = evaluate(project, _plan(project, POOLS), _book(p5=0, g6e=3, g5=8))
    rows = _rows(report)
    assert [(r.instance_type, r.quota, r.needed, r.available, r.status) for r in rows] == [
        ("ml.p5.48xlarge", P5, 3, 0, "short"),
        ("ml.g6e.12xlarge", G6E, 3, 3, "ok"),
        ("ml.g5.12xlarge", G5, 3, 8, "ok"),
    ]
    assert [r.chosen for r in rows] == [False, True, False]
    assert not report.short  # one pool with room is enough: SageMaker places the variant there


def test_the_first_priority_pool_without_quota_is_a_warning_with_the_fix(project):
    report = evaluate(project, _plan(project, POOLS), _book(p5=0, g6e=3, g5=8))
    (warning,) = report.warnings
    assert warning == (
        "endpoint 'web': its first-priority pool ml.p5.48xlarge has too little quota in "
        "'ml.p5.48xlarge for endpoint usage' (L-P5; needs 3, 0 free), so SageMaker will place it on "
        "ml.g6e.12xlarge. To serve on ml.p5.48xlarge: aws service-quotas request-service-quota-increase "
        "--service-code sagemaker --quota-code L-P5 --desired-value 3"
    )
    assert evaluate(project, _plan(project, POOLS), _book(p5=3, g6e=0)).warnings == []


def test_no_pool_with_room_is_a_shortfall_naming_every_pool_and_how_to_raise(project):
    plan = _plan(project, POOLS)
    book = _book(p5=0, g6e=1, g5=1)
    book.values["ml.g6.12xlarge for endpoint usage"] = QuotaValue(
        "ml.g6.12xlarge for endpoint usage", "L-G6", 4
    )
    report = evaluate(project, plan, book)
    assert [r.chosen for r in _rows(report)] == [True, False, False]  # SageMaker tries it first
    (short,) = report.shortfalls
    assert short.kind == "endpoint" and short.quota == P5
    assert short.message() == (
        "endpoint 'web' needs 3 of 'ml.p5.48xlarge for endpoint usage' (L-P5); the account allows 0 "
        "with 0 in use, so 0 are free; its other pools are short too (ml.g6e.12xlarge: 1 free, "
        "ml.g5.12xlarge: 1 free). To fix: add a pool with quota (ml.g6.12xlarge); or ask for more: "
        "aws service-quotas request-service-quota-increase --service-code sagemaker --quota-code L-P5 "
        "--desired-value 3"
    )


def test_pools_that_hold_the_variant_only_together_place_it_on_mixed_types(project):
    """SageMaker provisions each instance from the first pool with capacity (a variant's
    InstancePools summary counts instances per type): 2 + 1 free hold 3 instances."""
    report = evaluate(project, _plan(project, POOLS), _book(p5=0, g6e=2, g5=1))
    assert not report.short
    assert [r.chosen for r in _rows(report)] == [False, True, True]
    (warning,) = report.warnings
    assert "so SageMaker will place it across its pools (ml.g6e.12xlarge: 2, ml.g5.12xlarge: 1)" in warning


def test_unlisted_pools_are_unchecked_and_never_short(project):
    report = evaluate(project, _plan(project, POOLS), QuotaBook.none("off"))
    assert [r.status for r in _rows(report)] == ["unchecked"] * 3
    assert [r.chosen for r in _rows(report)] == [True, False, False]
    assert not report.short and report.warnings == []


def test_one_type_endpoints_keep_their_single_row(project):
    text = POOLS.replace("[ml.p5.48xlarge, ml.g6e.12xlarge, ml.g5.12xlarge]", "ml.g5.12xlarge")
    report = evaluate(project, _plan(project, text), _book(g5=2))
    (row,) = _rows(report)
    assert (row.instance_type, row.needed, row.status, row.chosen) == ("ml.g5.12xlarge", 3, "short", True)
    (short,) = report.shortfalls
    assert "its other pools" not in short.message() and "lower the count to 2" in short.message()


def test_each_pool_is_priced_and_the_endpoint_costs_a_range(project):
    report = evaluate(project, _plan(project, POOLS), QuotaBook.none("off"))
    p5, g6e, g5 = _rows(report)
    price = instance_type("ml.p5.48xlarge").price_per_hour
    assert p5.price_per_hour == price and p5.cost_on_demand == pytest.approx(price * 730)
    assert g6e.price_per_hour is None and g6e.cost_on_demand is None  # the catalog has no price
    assert g5.cost_on_demand == pytest.approx(instance_type("ml.g5.12xlarge").price_per_hour * 730)
    assert report.monthly_cost("web") == pytest.approx((g5.cost_on_demand, p5.cost_on_demand))


SHADOW = POOLS + f'    shadow: {{model_package: "{CANDIDATE}", initial_instance_count: 2}}\n'


def test_a_shadow_adds_its_instances_to_its_types_quota(project):
    """The shadow runs on the first pool type unless it names its own: on that type both variants'
    instances count against one quota, and the shadow is a row of its own."""
    report = evaluate(project, _plan(project, SHADOW), _book(p5=4, g6e=3, g5=8))
    pools = _rows(report)
    assert [(r.instance_type, r.needed) for r in pools] == [
        ("ml.p5.48xlarge", 5),  # 3 production + 2 shadow
        ("ml.g6e.12xlarge", 3),
        ("ml.g5.12xlarge", 3),
    ]
    assert [r.status for r in pools] == ["short", "ok", "ok"]
    (shadow,) = _rows(report, "shadow")
    assert (shadow.instance_type, shadow.needed, shadow.available, shadow.status) == (
        "ml.p5.48xlarge",
        2,
        4,
        "ok",
    )
    assert shadow.cost_on_demand == pytest.approx(instance_type("ml.p5.48xlarge").price_per_hour * 2 * 730)
    assert not report.short  # production on g6e, the shadow alone on p5


def test_a_shadow_without_room_is_a_shortfall_of_its_own(project):
    text = SHADOW.replace(
        "initial_instance_count: 2}", "initial_instance_count: 2, instance_type: ml.g5.2xlarge}"
    )
    name = "ml.g5.2xlarge for endpoint usage"
    book = _book(p5=4)
    book.values[name] = QuotaValue(name, "L-G52X", 1)
    report = evaluate(project, _plan(project, text), book)
    assert [r.needed for r in _rows(report)] == [3, 3, 3]  # the shadow has a type of its own
    (short,) = report.shortfalls
    assert short.kind == "shadow" and short.quota == name
    assert short.message().startswith(
        "shadow variant of endpoint 'web' needs 2 of 'ml.g5.2xlarge for endpoint usage' (L-G52X)"
    )


def test_components_need_the_fleets_managed_scaling_max_on_each_pool(project):
    text = (
        MINIMAL
        + "endpoints:\n  shared:\n    instance_type: [ml.g5.12xlarge, ml.g5.2xlarge]\n"
        + "    autoscaling: {min: 1, max: 4}\n"
        + f'    components:\n      small: {{model_package: "{PACKAGE}", memory_mb: 8192, accelerators: 1, copies: 3}}\n'
    )
    report = evaluate(project, _plan(project, text), QuotaBook.none("off"))
    big, small = _rows(report, key="shared")
    assert (big.needed, small.needed) == (4, 4)  # managed instance scaling's max
    # three one-GPU copies: one 4-GPU instance, or three 1-GPU ones
    assert big.note.endswith("initial copies on 1 instance(s)")
    assert small.note.endswith("initial copies on 3 instance(s)")
    assert small.cost_on_demand == pytest.approx(instance_type("ml.g5.2xlarge").price_per_hour * 3 * 730)
    from sagestack.ops.report import as_json, plan_report

    packing = as_json(plan_report(project.root, _plan(project, text), QuotaBook.none("off")))["endpoints"]
    assert packing["shared"]["packing"]["ml.g5.12xlarge"] == {
        "instances": 1,
        "unplaceable": [],
        "detail": ["instance 1: 3xsmall (free: 45 vCPU, 168.0 GiB, 1 accelerator(s))"],
    }
    assert packing["shared"]["packing"]["ml.g5.2xlarge"]["instances"] == 3


LLM = (
    MINIMAL
    + """\
endpoints:
  chat:
    instance_type: [ml.g5.12xlarge, ml.g5.2xlarge]
    llm:
      container: djl-lmi
      weights: {s3: models/chat/}
      parameters: 13.0e9
      dtype: bf16
"""
)


def test_an_llm_endpoint_is_quota_checked_like_a_pinned_one(project):
    report = evaluate(project, _plan(project, LLM, run_rules=False), _book(g5=1))
    big, small = _rows(report, key="chat")
    assert (big.instance_type, big.needed, big.status, small.status) == (
        "ml.g5.12xlarge",
        1,
        "ok",
        "unchecked",
    )


def test_the_plan_json_carries_pools_cost_and_llm_fit(project):
    from sagestack.ops.report import as_json, plan_report

    plan = _plan(project, LLM, run_rules=False)  # the LLM rules are not this test's subject
    data = as_json(plan_report(project.root, plan, QuotaBook.none("off")))
    chat = data["endpoints"]["chat"]
    assert chat["pools"] == ["ml.g5.12xlarge", "ml.g5.2xlarge"]
    low, high = chat["monthly_cost"]
    assert low == pytest.approx(instance_type("ml.g5.2xlarge").price_per_hour * 730)
    assert high == pytest.approx(instance_type("ml.g5.12xlarge").price_per_hour * 730)
    big, small = chat["llm"]
    # 13e9 bf16 parameters: 24.2 GiB of weights; four 24 GiB A10Gs hold them, one does not
    assert (big["instance_type"], big["accelerators"], big["tensor_parallel_degree"]) == (
        "ml.g5.12xlarge",
        4,
        4,
    )
    assert big["weights_gib"] == pytest.approx(13e9 * 2 / 2**30) and big["fits"] is True
    assert (small["accelerators"], small["tensor_parallel_degree"], small["fits"]) == (1, 1, False)


def test_the_lock_records_an_endpoints_pools_and_keeps_one_type_as_it_was(project):
    from sagestack.ops.lock import deployed_serving

    assert deployed_serving(_plan(project, POOLS)) == {
        "web": {
            "instance_types": ["ml.p5.48xlarge", "ml.g6e.12xlarge", "ml.g5.12xlarge"],
            "autoscaled": True,
        }
    }
    one = POOLS.replace("[ml.p5.48xlarge, ml.g6e.12xlarge, ml.g5.12xlarge]", "ml.g5.12xlarge")
    assert deployed_serving(_plan(project, one)) == {
        "web": {"instance_type": "ml.g5.12xlarge", "autoscaled": True}
    }
    llm = deployed_serving(_plan(project, LLM, run_rules=False))  # an LLM's weights are deployed
    assert llm == {"chat": {"instance_types": ["ml.g5.12xlarge", "ml.g5.2xlarge"], "autoscaled": False}}


@pytest.mark.parametrize(
    ("before", "after", "refused"),
    [
        ("ml.g5.12xlarge", "[ml.g5.12xlarge, ml.g6e.12xlarge]", True),  # a pool added
        ("[ml.g5.12xlarge, ml.g6e.12xlarge]", "[ml.g6e.12xlarge, ml.g5.12xlarge]", True),  # reordered
        ("[ml.g5.12xlarge, ml.g6e.12xlarge]", "ml.g5.12xlarge", True),  # a pool removed
        ("[ml.g5.12xlarge, ml.g6e.12xlarge]", "[ml.g5.12xlarge, ml.g6e.12xlarge]", False),
    ],
)
def test_an_autoscaled_variants_pool_list_cannot_change_in_one_update(project, before, after, refused):
    from sagestack.ops.lock import autoscaled_type_changes, deployed_serving

    text = POOLS.replace("[ml.p5.48xlarge, ml.g6e.12xlarge, ml.g5.12xlarge]", before)
    locked = {"serving": deployed_serving(_plan(project, text))}
    problems = autoscaled_type_changes(locked, _plan(project, text.replace(before, after)))
    assert bool(problems) == refused
    if refused:
        (problem,) = problems
        shown = lambda t: t.strip("[]")  # noqa: E731
        assert problem.startswith(
            f"endpoint 'web' would move from {shown(before)} to {shown(after)} while autoscaling is registered"
        )
        assert "Make it two deploys" in problem


WIDE_LLM = SHADOW + LLM.removeprefix(MINIMAL).removeprefix("endpoints:\n").replace(
    "[ml.g5.12xlarge, ml.g5.2xlarge]", "[ml.g5.12xlarge, ml.g6.12xlarge, ml.inf2.24xlarge]"
)


@pytest.mark.parametrize("width", [80, 160])
def test_the_plan_shows_pools_shadow_and_llm_rows_in_80_columns(project, width):
    """Every line fits; each pool type appears whole with its mark, the shadow has its row, the cost
    range and the LLM's tensor-parallel degree and memory per pool are shown."""
    from rich.console import Console

    from sagestack.ops.report import plan_report, render

    plan = _plan(project, WIDE_LLM, run_rules=False)
    console = Console(width=width, record=True, color_system=None)
    render(plan_report(project.root, plan, _book(p5=0, g6e=4, g5=8)), console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    assert "→ ml.g6e.12xlarge" in text and "  ml.p5.48xlarge" in text  # p5 short, g6e has room
    assert "(shadow)" in text.replace("\n", " ").replace("  ", " ")
    cost = (instance_type("ml.g5.12xlarge").price_per_hour or 0) * 730
    assert f"${cost:,.2f}..$" in text and "cheapest..dearest priced pool" in text
    llm_rows = [line.replace("│", " ").split() for line in text.splitlines() if "NeuronCore" in line]
    # 24.2 GiB of weights + 12 x 1 GiB of activations (djl-lmi: CUDA's, run_rules=False) within 90 % of
    # 12 NeuronCores x 16 GiB; no token limit, so no KV cache
    assert ["ml.inf2.24xlarge", "12x", "NeuronCore", "12", "0.0", "36.2", "/", "172.8", "yes"] in llm_rows
    assert "its first-priority pool ml.p5.48xlarge has too little quota" in " ".join(text.split())


def test_synth_checks_every_pool_and_fails_only_when_none_has_room(project, capsys):
    """`cdk synth`'s quota check (-c sagestack:quotas=snapshot) is the plan's: one pool with room
    passes; none fails with the plan's message."""
    from aws_cdk import App

    from sagestack.app.builder import check_quotas
    from sagestack.capacity.assess import QuotaShortfallError
    from sagestack.ops.account import snapshot_document

    def synth_check(values: dict[str, float]) -> None:
        quotas = [
            {"QuotaName": n, "QuotaCode": f"L-{i}", "Value": v} for i, (n, v) in enumerate(values.items())
        ]
        document = snapshot_document("us-east-1", quotas, {}, "123456789012")
        (project.root / "config/envs/dev.quotas.json").write_text(json.dumps(document))
        plan = _plan(project, POOLS)
        check_quotas(App(context={"sagestack:quotas": "snapshot"}), project.root, [plan])

    synth_check({P5: 0, G6E: 0, G5: 3})  # the last pool has room: placeable
    # ... and the synth warns, as plan does, that the first-priority pool has too little quota
    assert "warning: dev: endpoint 'web': its first-priority pool ml.p5.48xlarge" in capsys.readouterr().err
    with pytest.raises(QuotaShortfallError) as e:
        synth_check({P5: 0, G6E: 1, G5: 1})
    assert "endpoint 'web' needs 3 of 'ml.p5.48xlarge for endpoint usage' (L-0)" in str(e.value)
    assert "its other pools are short too (ml.g6e.12xlarge: 1 free, ml.g5.12xlarge: 1 free)" in str(e.value)
    synth_check({P5: 0, G6E: 2, G5: 1})  # together they hold 3: mixed types, placeable


def test_live_usage_counts_each_pools_instances_and_the_shadows():
    """DescribeEndpoint reports a pooled variant's instances per type (InstancePools) and a shadow
    variant's beside production's; botocore's Stubber holds the responses to the API's model."""
    import boto3
    from botocore.stub import Stubber

    from sagestack.ops.account import count_usage

    sm = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    now = "2026-12-04T00:00:00Z"
    with Stubber(sm) as stub:
        stub.add_response("list_training_jobs", {"TrainingJobSummaries": []}, {"StatusEquals": "InProgress"})
        stub.add_response(
            "list_endpoints",
            {
                "Endpoints": [
                    {
                        "EndpointName": "web",
                        "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/web",
                        "CreationTime": now,
                        "LastModifiedTime": now,
                        "EndpointStatus": "InService",
                    }
                ]
            },
            {"StatusEquals": "InService"},
        )
        stub.add_response(
            "describe_endpoint",
            {
                "EndpointName": "web",
                "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/web",
                "EndpointConfigName": "web-1",
                "EndpointStatus": "InService",
                "CreationTime": now,
                "LastModifiedTime": now,
                "ProductionVariants": [
                    {
                        "VariantName": "AllTraffic",
                        "CurrentInstanceCount": 3,
                        "InstancePools": [
                            {"InstanceType": "ml.g6e.12xlarge", "CurrentInstanceCount": 2},
                            {"InstanceType": "ml.g5.12xlarge", "CurrentInstanceCount": 1},
                        ],
                    }
                ],
                "ShadowProductionVariants": [{"VariantName": "Shadow", "CurrentInstanceCount": 1}],
            },
            {"EndpointName": "web"},
        )
        stub.add_response(
            "describe_endpoint_config",
            {
                "EndpointConfigName": "web-1",
                "EndpointConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/web-1",
                "CreationTime": now,
                "ProductionVariants": [
                    {
                        "VariantName": "AllTraffic",
                        "ModelName": "m",
                        "InstancePools": [
                            {"InstanceType": "ml.g6e.12xlarge", "Priority": 1},
                            {"InstanceType": "ml.g5.12xlarge", "Priority": 2},
                        ],
                    }
                ],
                "ShadowProductionVariants": [
                    {"VariantName": "Shadow", "ModelName": "c", "InstanceType": "ml.g5.12xlarge"}
                ],
            },
            {"EndpointConfigName": "web-1"},
        )
        usage = count_usage("us-east-1", sm)
    assert usage == {G6E: 2.0, G5: 2.0}  # one production and the shadow's on g5


def test_the_quotas_an_endpoint_draws_on_are_its_pools_and_its_shadows(project):
    """What `sagestack quota snapshot` lists as the quotas the spec uses."""
    from sagestack.capacity.endpoints import endpoint_quotas

    text = SHADOW.replace(
        "initial_instance_count: 2}", "initial_instance_count: 2, instance_type: ml.g5.2xlarge}"
    )
    (web,) = _plan(project, text).spec.endpoints.values()
    assert endpoint_quotas(web) == {P5, G6E, G5, "ml.g5.2xlarge for endpoint usage"}


def test_a_reserved_endpoint_says_its_training_plan_is_paid_up_front(project):
    plan_arn = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/serving-q1"
    text = POOLS.replace("    autoscaling:", f'    capacity_reservation: "{plan_arn}"\n    autoscaling:')
    rows = _rows(evaluate(project, _plan(project, text), QuotaBook.none("off")))
    assert all(r.note.endswith(", reserved on training plan serving-q1 (paid up front)") for r in rows)


def test_a_serving_only_plan_prints_no_empty_training_table(project):
    from rich.console import Console

    from sagestack.ops.report import plan_report, render

    project.spec("project: chat\nregion: us-east-1\nendpoints:\n" + POOLS.split("endpoints:\n", 1)[1])
    plan = resolve_environment(project.env("dev").load("dev"))
    console = Console(width=80, record=True, color_system=None)
    render(plan_report(project.root, plan, QuotaBook.none("off")), console)
    text = console.export_text()
    assert "Training jobs" not in text and "→ ml.p5.48xlarge" in text
