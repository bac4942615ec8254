"""Quota needs and cost of a plan (pure: quota values come in a QuotaBook)."""

from __future__ import annotations

import pytest

from sagestack.capacity.assess import assess
from sagestack.capacity.ledger import SPOT_SAVINGS, QuotaBook, QuotaValue
from sagestack.core.catalog.instances import instance_type
from sagestack.core.catalog.quotas import TRAINING_INSTANCES_TOTAL
from sagestack.project import resolve_environment
from sagestack.project.requests import render_training
from tests.conftest import MINIMAL

SPEC = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  big:
    image: train
    instance_type: [ml.p4d.24xlarge, ml.g5.48xlarge]
    instance_count: 2
    max_run: 4h
    use_spot_instances: true
    max_wait: 8h
    checkpoint: {every_steps: 100}
    run_on_deploy: true
  small:
    image: train
    instance_type: [ml.g5.2xlarge]
    instance_count: 1
    max_run: 30m
    run_on_deploy: true
    metric_definitions: {acc: 'acc=([0-9.]+)'}
tuning:
  search:
    job: small
    objective: {metric: acc, type: Maximize}
    ranges: {lr: {continuous: [0.001, 0.1]}}
    max_jobs: 10
    max_parallel_jobs: 3
endpoints:
  web:
    model_package: "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"
    instance_type: ml.c5.xlarge
    autoscaling: {min: 1, max: 5}
"""


def evaluate(project, plan, book):
    """capacity.assess over the environment's one rendering, as `plan` and synth call it."""
    return assess(plan, render_training(plan, project.root), book)


def book(**values: float) -> QuotaBook:
    names = {
        "p4d_spot": "ml.p4d.24xlarge for spot training job usage",
        "g5x48_spot": "ml.g5.48xlarge for spot training job usage",
        "g5_2x": "ml.g5.2xlarge for training job usage",
        "c5_ep": "ml.c5.xlarge for endpoint usage",
        "total": TRAINING_INSTANCES_TOTAL,
    }
    return QuotaBook(
        "snapshot",
        "test",
        {names[k]: QuotaValue(names[k], f"L-{k.upper()}", v) for k, v in values.items()},
    )


@pytest.fixture
def plan(project):
    project.spec(SPEC).env("dev")
    return resolve_environment(project.load("dev"))


def _row(report, kind, key, itype=None):
    return next(
        r
        for r in report.rows
        if r.kind == kind and r.key == key and (itype is None or r.instance_type == itype)
    )


def test_the_first_candidate_with_quota_is_chosen(project, plan):
    report = evaluate(project, plan, book(p4d_spot=0, g5x48_spot=4, g5_2x=10, c5_ep=5, total=20))
    assert not report.short
    assert _row(report, "job", "big", "ml.p4d.24xlarge").status == "short"
    chosen = report.chosen("job", "big")
    assert chosen is not None and chosen.instance_type == "ml.g5.48xlarge"
    assert chosen.quota == "ml.g5.48xlarge for spot training job usage"


def test_every_candidate_short_is_a_shortfall_with_the_fix(project, plan):
    report = evaluate(project, plan, book(p4d_spot=1, g5x48_spot=1, g5_2x=10, c5_ep=5, total=20))
    assert report.short
    (s,) = report.shortfalls
    assert s.message() == (
        "job 'big' needs 2 of 'ml.p4d.24xlarge for spot training job usage' (L-P4D_SPOT); the account allows 1 "
        "with 0 in use, so 1 are free. To fix: lower the count to 1; or ask for more: aws service-quotas "
        "request-service-quota-increase --service-code sagemaker --quota-code L-P4D_SPOT --desired-value 2"
    )


def test_usage_counts_against_the_quota(project, plan):
    b = book(p4d_spot=4, g5_2x=10, c5_ep=5, total=20)
    b.usage["ml.p4d.24xlarge for spot training job usage"] = 3
    report = evaluate(project, plan, b)
    assert _row(report, "job", "big", "ml.p4d.24xlarge").available == 1
    assert report.chosen("job", "big").instance_type == "ml.g5.48xlarge"  # unchecked: not in the book
    assert report.chosen("job", "big").status == "unchecked"


def test_searches_endpoints_and_the_aggregate_sum_what_runs_at_once(project, plan):
    report = evaluate(project, plan, book(p4d_spot=2, g5_2x=2, c5_ep=4, total=2))
    search = _row(report, "tuning", "search")
    assert search.needed == 3 and search.status == "short"  # 3 parallel trials x 1 instance
    endpoint = _row(report, "endpoint", "web")
    assert endpoint.needed == 5 and endpoint.status == "short"  # the autoscaling maximum
    total = _row(report, "aggregate", "training")
    assert total.needed == 3  # big (2) and small (1) start together on deploy
    assert [s.kind for s in report.shortfalls] == ["tuning", "endpoint", "aggregate"]
    assert "lower max_parallel_jobs so that at most 2 instances run at once" in report.shortfalls[0].message()


def test_jobs_started_together_share_a_quota(project):
    spec = MINIMAL.replace(
        "instance_type: ml.m5.xlarge", "instance_type: ml.m5.xlarge\n    run_on_deploy: true"
    )
    spec += "  other:\n    image: train\n    instance_type: ml.m5.xlarge\n    run_on_deploy: true\n"
    project.spec(spec).env("dev")
    plan = resolve_environment(project.load("dev"))
    name = "ml.m5.xlarge for training job usage"
    report = evaluate(project, plan, QuotaBook("snapshot", "t", {name: QuotaValue(name, "L-M5", 1)}))
    assert [r.status for r in report.rows if r.kind == "job"] == ["ok", "short"]
    assert report.shortfalls[0].key == "other"


def test_costs_are_price_times_instances_times_max_run(project, plan):
    report = evaluate(project, plan, QuotaBook.none("off"))
    big = _row(report, "job", "big", "ml.p4d.24xlarge")
    price = instance_type("ml.p4d.24xlarge").price_per_hour
    assert big.cost_on_demand == pytest.approx(price * 2 * 4)
    assert big.cost_spot == pytest.approx(price * 2 * 4 * (1 - SPOT_SAVINGS))
    search = _row(report, "tuning", "search")
    assert search.cost_on_demand == pytest.approx(instance_type("ml.g5.2xlarge").price_per_hour * 0.5 * 10)
    web = _row(report, "endpoint", "web")
    assert web.cost_on_demand == pytest.approx(instance_type("ml.c5.xlarge").price_per_hour * 730)
    assert all(r.status == "unchecked" for r in report.rows) and not report.short


def test_a_short_job_is_offered_instance_types_that_have_quota(project, plan):
    b = book(p4d_spot=1, g5x48_spot=1, g5_2x=10, c5_ep=5, total=20)
    for itype, value in (
        ("ml.p3.16xlarge", 4),
        ("ml.p5.48xlarge", 2),
        ("ml.m5.24xlarge", 8),
        ("ml.g5.12xlarge", 1),
    ):
        name = f"{itype} for spot training job usage"
        b.values[name] = QuotaValue(name, f"L-{itype}", value)
    (s,) = evaluate(project, plan, b).shortfalls
    # GPU types with 2 free first (cheapest first), then the CPU one; g5.12xlarge has only 1 free
    assert s.alternatives == ("ml.p3.16xlarge", "ml.p5.48xlarge", "ml.m5.24xlarge")
    assert "add a candidate with quota (ml.p3.16xlarge, ml.p5.48xlarge, ml.m5.24xlarge)" in s.message()


def _q(name: str, value: float) -> QuotaValue:
    return QuotaValue(name, "L-" + name.split(" ")[0].replace(".", "").upper(), value)


def test_a_transform_takes_its_first_candidate_with_transform_quota(project):
    project.spec(
        MINIMAL
        + "transforms:\n  score:\n"
        + '    model_package: "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"\n'
        + "    instance_type: [ml.g5.xlarge, ml.m5.xlarge]\n    instance_count: 2\n"
    ).env("dev")
    plan = resolve_environment(project.load("dev"))
    names = ["ml.g5.xlarge for transform job usage", "ml.m5.xlarge for transform job usage"]
    report = evaluate(
        project, plan, QuotaBook("snapshot", "t", {n: _q(n, v) for n, v in zip(names, [1, 2], strict=True)})
    )
    assert _row(report, "transform", "score", "ml.g5.xlarge").status == "short"
    assert report.chosen("transform", "score").instance_type == "ml.m5.xlarge"
    assert not report.short
    report = evaluate(project, plan, QuotaBook("snapshot", "t", {n: _q(n, 1) for n in names}))
    (short,) = report.shortfalls
    assert short.message().startswith(
        "batch transform 'score' needs 2 of 'ml.g5.xlarge for transform job usage'"
    )


def test_a_short_cluster_group_says_what_to_do(project):
    """Regression: a cluster shortfall had no name for its kind and raised KeyError."""
    project.spec(
        "project: digits\nregion: us-east-1\nclusters:\n  lab:\n    instance_groups:\n"
        "      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}\n"
        "      gpu: {instance_type: ml.g5.8xlarge, count: 4}\n    lifecycle: {source_dir: training_src}\n"
    ).env("dev")
    plan = resolve_environment(project.load("dev", run_rules=False))
    name = "ml.g5.8xlarge for cluster usage"
    report = evaluate(project, plan, QuotaBook("snapshot", "t", {name: _q(name, 2)}))
    (short,) = report.shortfalls
    assert "cluster group 'lab/gpu' needs 4" in short.message() and "lower the count to 2" in short.message()


def test_cluster_groups_on_one_type_share_its_quota(project):
    """A cluster-usage quota is per account and type: two groups of 1 on ml.m5.xlarge (in two
    clusters here) need 2 of it together. Each checked alone, as before, both passed a quota of 1."""
    project.spec(
        "project: digits\nregion: us-east-1\nclusters:\n"
        "  lab:\n    instance_groups:\n"
        "      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}\n"
        "      gpu: {instance_type: ml.g5.8xlarge, count: 2}\n    lifecycle: {source_dir: training_src}\n"
        "  lab2:\n    instance_groups:\n"
        "      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}\n"
        "      gpu: {instance_type: ml.g5.8xlarge, count: 2}\n    lifecycle: {source_dir: training_src}\n"
    ).env("dev")
    plan = resolve_environment(project.load("dev", run_rules=False))
    small, gpu = "ml.m5.xlarge for cluster usage", "ml.g5.8xlarge for cluster usage"
    report = evaluate(project, plan, QuotaBook("snapshot", "t", {small: _q(small, 1), gpu: _q(gpu, 4)}))
    (short,) = report.shortfalls
    assert short.quota == small and short.needed == 2
    assert short.message().startswith(
        "cluster groups 'lab/ctl' and 'lab2/ctl' together need 2 of 'ml.m5.xlarge for cluster usage'"
    )
    assert "lower their counts to 1 in all" in short.message()
    rows = {r.key: r for r in report.rows if r.kind == "cluster"}
    assert rows["lab/gpu"].needed == 4 and rows["lab/gpu"].status == "ok"
    assert rows["lab/ctl"].status == rows["lab2/ctl"].status == "short"
    assert "quota shared with lab2/ctl" in rows["lab/ctl"].note


def test_components_cost_the_instances_their_initial_copies_take(project):
    package = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"
    project.spec(
        MINIMAL
        + "endpoints:\n  shared:\n    instance_type: ml.g5.12xlarge\n    autoscaling: {min: 1, max: 4}\n"
        + f'    components:\n      small: {{model_package: "{package}", memory_mb: 8192, accelerators: 1, copies: 6}}\n'
    ).env("dev")
    plan = resolve_environment(project.load("dev"))
    row = _row(evaluate(project, plan, QuotaBook.none("t")), "endpoint", "shared")
    # 4 GPUs per ml.g5.12xlarge: 6 one-GPU copies take 2 instances
    assert row.note == "1 components: initial copies on 2 instance(s)"
    assert row.cost_basis.startswith("per month at 2 instance(s)")


def test_a_search_over_a_multi_node_job_needs_parallel_trials_times_its_instances(project):
    """max_parallel_jobs x instance_count: three trials of a two-node job hold six instances."""
    spec = SPEC.replace(
        "    instance_type: [ml.g5.2xlarge]\n    instance_count: 1\n",
        "    instance_type: [ml.g5.2xlarge, ml.g4dn.2xlarge]\n    instance_count: 2\n",
    )
    project.spec(spec).env("dev")
    plan = resolve_environment(project.load("dev"))
    g4dn = "ml.g4dn.2xlarge for training job usage"
    quotas = book(p4d_spot=4, g5_2x=5, c5_ep=5, total=20)
    quotas.values[g4dn] = QuotaValue(g4dn, "L-G4DN", 6)
    report = evaluate(project, plan, quotas)
    search = _row(report, "tuning", "search")
    assert (search.count, search.needed, search.available, search.status) == (2, 6, 5, "short")
    assert search.note == "3 trials at once" and search.cost_basis == "≤ 10 trials x 0.5 h"
    price = instance_type("ml.g5.2xlarge").price_per_hour
    assert search.cost_on_demand == pytest.approx(price * 10 * 2 * 0.5)
    (short,) = [s for s in report.shortfalls if s.kind == "tuning"]
    assert short.alternatives == ("ml.g4dn.2xlarge",)  # 6 free there: room for all six
    assert short.message() == (
        "tuning entry 'search' needs 6 of 'ml.g5.2xlarge for training job usage' (L-G5_2X); the account allows "
        "5 with 0 in use, so 5 are free. To fix: lower max_parallel_jobs so that at most 5 instances run at "
        "once; or use a candidate with quota (ml.g4dn.2xlarge); or ask for more: aws service-quotas "
        "request-service-quota-increase --service-code sagemaker --quota-code L-G5_2X --desired-value 6"
    )
    # the account-wide total holds the largest search (6), more than the jobs started on deploy (2 + 2)
    assert _row(report, "aggregate", "training").needed == 6


BROAD = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  classifier:
    image: train
    instance_type: [ml.g5.2xlarge, ml.g4dn.2xlarge, ml.g5.4xlarge]
    instance_count: 2
    max_run: 1h
    metric_definitions: {acc: 'acc=([0-9.]+)'}
tuning:
  search:
    job: classifier
    objective: {metric: acc, type: Maximize}
    ranges: {lr: {continuous: [0.001, 0.1]}}
    max_jobs: 4
    max_parallel_jobs: 2
endpoints:
  fleet:
    model: {from: classifier}
    instance_type: ml.c5.xlarge
    initial_instance_count: 2
  pinned:
    model_package: "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"
    instance_type: ml.c5.2xlarge
    autoscaling: {min: 1, max: 3}
  queue:
    model: {from: classifier}
    instance_type: ml.g5.xlarge
    async: {}
    autoscaling: {min: 0, max: 2}
  lambda-like:
    model: {from: classifier}
    serverless: {memory_mb: 4096, max_concurrency: 7}
transforms:
  score:
    model: {from: classifier}
    instance_type: [ml.m5.xlarge, ml.c5.xlarge]
    instance_count: 3
  rescore:
    model_package: "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"
    instance_type: ml.m5.2xlarge
clusters:
  lab:
    instance_groups:
      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}
      gpu: {instance_type: ml.g5.8xlarge, count: 4, training_plan: "arn:aws:sagemaker:us-east-1:111111111111:training-plan/lab"}
    lifecycle: {source_dir: training_src}
"""


def test_every_row_of_a_broad_plan(project, snapshot):
    """Each kind of work's row, word for word: what `sagestack plan` prints, its quotas and its costs.
    (Prices come from the catalog; a price change shows here as a changed golden.)"""
    import dataclasses

    from syrupy.extensions.json import JSONSnapshotExtension

    project.spec(BROAD).env("dev")
    plan = resolve_environment(project.load("dev", run_rules=False))
    quotas = {
        "ml.g5.2xlarge for training job usage": 3,  # the search's 2 x 2 does not fit; the job's 2 does
        "ml.g4dn.2xlarge for training job usage": 8,
        "ml.c5.xlarge for endpoint usage": 2,
        "ml.c5.2xlarge for endpoint usage": 2,  # short of the autoscaling maximum
        "ml.m5.xlarge for transform job usage": 1,  # short: the second candidate is chosen
        "ml.c5.xlarge for transform job usage": 3,
        "ml.g5.8xlarge for cluster usage": 4,
        TRAINING_INSTANCES_TOTAL: 3,
    }
    report = evaluate(
        project,
        plan,
        QuotaBook(
            "snapshot", "t", {n: QuotaValue(n, f"L-{i}", v) for i, (n, v) in enumerate(quotas.items())}
        ),
    )
    golden = {
        "rows": [dataclasses.asdict(r) for r in report.rows],
        "shortfalls": [s.message() for s in report.shortfalls],
    }
    assert golden == snapshot.use_extension(JSONSnapshotExtension)


def test_an_optimization_job_counts_its_instance_beside_its_endpoint(project):
    """An LLM's optimization job runs on one instance of its DeploymentInstanceType, against that
    type's endpoint quota (optimization jobs have none of their own: the pipeline checks the same
    name) while its endpoint holds its own instances there; it costs at most max_runtime."""
    import json

    from sagestack.core.catalog.quotas import quota_name
    from sagestack.core.deployment import Deployment
    from sagestack.core.states import PipelineSettings
    from sagestack.llm.optimization_job import resolve_optimizations
    from sagestack.llm.optimization_states import optimization_definition

    project.spec(
        MINIMAL
        + """\
endpoints:
  chat:
    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]
    autoscaling: {min: 0, max: 2}
    components:
      chat:
        llm:
          container: djl-lmi
          weights: {s3: models/chat/}
          parameters: 1.0e9
          optimize: {quantization: awq}
        memory_mb: 8192
        cpu_cores: 4
        min_copies: 0
        max_copies: 2
  solo:
    instance_type: ml.g5.2xlarge
    llm:
      container: djl-lmi
      weights: {s3: models/solo/}
      parameters: 1.0e9
      optimize: {quantization: awq, instance_type: ml.g6.2xlarge, max_runtime: 7200}
"""
    ).env("dev")
    plan = resolve_environment(project.load("dev"))
    g5, g6 = (quota_name(t, "endpoint") for t in ("ml.g5.2xlarge", "ml.g6.2xlarge"))
    report = evaluate(project, plan, QuotaBook("snapshot", "t", {g5: _q(g5, 3), g6: _q(g6, 1)}))
    component = _row(report, "optimization", "chat/chat")
    # the endpoint's 2 on its first pool with room, and the job's 1
    assert (component.instance_type, component.quota, component.needed) == ("ml.g5.2xlarge", g5, 3)
    assert component.status == "ok" and component.chosen
    price = instance_type("ml.g5.2xlarge").price_per_hour
    assert component.cost_on_demand == pytest.approx(price * 1.0)  # max_runtime 3600 s
    solo = _row(report, "optimization", "solo")  # its own type: no endpoint instance beside it
    assert (solo.instance_type, solo.needed, solo.status) == ("ml.g6.2xlarge", 1, "ok")
    assert solo.cost_basis.startswith("≤ 2 h")
    assert not report.short
    # one g5 short: the component's job is the shortfall, with the type that has room
    tight = evaluate(project, plan, QuotaBook("snapshot", "t", {g5: _q(g5, 2), g6: _q(g6, 2)}))
    (short,) = [s for s in tight.shortfalls if s.kind == "optimization"]
    message = short.message()
    assert message.startswith(f"optimization job of 'chat/chat' needs 3 of '{g5}'")
    assert "set optimize.instance_type to a type with quota (ml.g6.2xlarge)" in message
    # the quota plan counts is the one the pipeline checks before it creates the job
    deployment = Deployment.stand_ins(region="us-east-1")
    for o in resolve_optimizations(plan.names, plan.spec.endpoints):
        row = _row(report, "optimization", o.label)
        definition = optimization_definition(o, deployment, PipelineSettings(), env="dev", group="g")
        assert f"'{row.quota}'" in json.dumps(definition["States"])


def test_a_jobs_rows_follow_its_rendered_requests_not_a_second_reading_of_the_spec(project, plan):
    """capacity reads what the pipeline sends: each candidate's quota, instance count and
    MaxRuntimeInSeconds come from its rendered CreateTrainingJob request."""
    import copy
    import dataclasses

    requests = render_training(plan, project.root)
    big = requests.jobs["big"]
    changed = []
    for c in big.candidates:
        request = copy.deepcopy(c.request)
        request["ResourceConfig"]["InstanceCount"] = 7
        request["StoppingCondition"]["MaxRuntimeInSeconds"] = 1800
        changed.append(dataclasses.replace(c, request=request, quota_name=f"{c.instance_type} (rendered)"))
    jobs = {**requests.jobs, "big": dataclasses.replace(big, candidates=tuple(changed))}
    report = assess(plan, dataclasses.replace(requests, jobs=jobs), QuotaBook.none("t"))
    rows = [r for r in report.rows if r.kind == "job" and r.key == "big"]
    assert [r.quota for r in rows] == [f"{c.instance_type} (rendered)" for c in big.candidates]
    assert {(r.count, r.needed, r.cost_basis) for r in rows} == {(7, 7.0, "≤ 0.5 h (max_run)")}


def test_a_queue_whose_limit_a_quota_can_never_reach_is_a_warning_not_a_failure(project):
    """A queue's capacity limit counts instances of any type; the quotas are per type. Two queued
    jobs of 2 x ml.m5.xlarge under a limit of 8 may run 4 at once: a quota of 3 holds the fourth
    behind the quota rather than the queue's shares (said), and nothing fails (Batch waits)."""
    project.spec(
        MINIMAL
        + "    instance_count: 2\n    queue: {name: shared}\n"
        + "  second:\n    image: train\n    instance_type: ml.m5.xlarge\n    instance_count: 2\n"
        + "    queue: {name: shared}\n"
        + "queues:\n  shared: {max_instances: 8}\n"
    ).env("dev")
    plan = resolve_environment(project.load("dev"))
    name = "ml.m5.xlarge for training job usage"
    book = QuotaBook(
        "snapshot", "t", {name: _q(name, 3), TRAINING_INSTANCES_TOTAL: _q(TRAINING_INSTANCES_TOTAL, 3)}
    )
    report = evaluate(project, plan, book)
    assert not report.short
    assert (
        "queue 'shared' may run 4 x ml.m5.xlarge at once (its jobs' on that type, within max_instances 8), "
        "but 'ml.m5.xlarge for training job usage' allows 3" in report.warnings[0]
    )
    assert report.warnings[1].startswith("the queues may run 4 training instances at once")
    # with room for the queue's whole limit: no word
    roomy = QuotaBook(
        "snapshot", "t", {name: _q(name, 8), TRAINING_INSTANCES_TOTAL: _q(TRAINING_INSTANCES_TOTAL, 8)}
    )
    assert not [w for w in evaluate(project, plan, roomy).warnings if "queue" in w]
