"""What an environment runs now, read from AWS (`sagestack status`): its stacks, its pipelines'
latest executions, its training and tuning jobs, endpoints (with the last hour's CloudWatch
metrics), clusters, training queues and retraining schedules.

Everything is found by sagestack's own names (core/names.py) and, where a name cannot tell
environments apart (tuning jobs), by the environment's tags; nothing in the account is listed
blindly. The result is one JSON-ready document: the CLI prints it as a screen or as --json.
boto3 is not imported here: the caller passes `client(service)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sagestack.core.names import Names
from sagestack.endpoints.models import EndpointSpec
from sagestack.endpoints.recommend import resolve_recommendations
from sagestack.llm.optimization_job import resolve_optimizations
from sagestack.ops.status_queues import read_queues
from sagestack.ops.status_recommend import read_recommendations
from sagestack.ops.status_schedules import error_code, iso, kept, no_credentials, read_schedules, reason

STACK_KINDS = ("foundation", "training", "serving", "optimization", "clusters")
MAX_SPLIT_STACKS = 20  # training-01 … (a split training stack), probed until one is missing
EXECUTIONS = 3  # each pipeline's latest executions
TRAINING_JOBS = 6  # the environment's newest training jobs
TUNING_JOBS = 3
METRICS = (  # (key, CloudWatch metric, statistic) of an endpoint's variant over the last hour
    ("invocations", "Invocations", "Sum"),
    ("errors_4xx", "Invocation4XXErrors", "Sum"),
    ("errors_5xx", "Invocation5XXErrors", "Sum"),
    ("latency_ms", "ModelLatency", "Average"),
)

Client = Callable[[str], Any]


@dataclass(frozen=True)
class Scope:
    """What of an environment to look for: its names, and the spec's entries."""

    names: Names
    region: str
    jobs: tuple[str, ...] = ()
    tuning: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()  # training queues (queues:)
    # endpoints that host inference components (ListInferenceComponents is asked for these only)
    component_hosts: tuple[str, ...] = ()
    # entry label -> state machine name, in the spec's order
    pipelines: dict[str, str] = field(default_factory=dict)
    # job -> (schedule name, expression, timezone)
    schedules: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    # endpoint -> its Model Monitor schedule's name
    monitors: dict[str, str] = field(default_factory=dict)
    # endpoint -> its spec, each with slo: candidates measured by a recommendation pipeline
    slos: dict[str, EndpointSpec] = field(default_factory=dict)


def scope_of(resolved: Any) -> Scope:
    """The Scope of a resolved environment (project.environment.ResolvedEnvironment)."""
    spec, names = resolved.spec, Names(resolved.spec.project, resolved.env)
    pipelines = {key: names.training_state_machine(key) for key in spec.jobs}
    pipelines |= {key: names.tuning_state_machine(key) for key in spec.tuning}
    pipelines |= {
        key: names.transform_state_machine(key) for key, t in spec.transforms.items() if t.model_package
    }
    pipelines |= {o.label: o.state_machine for o in resolve_optimizations(names, spec.endpoints)}
    schedules = {
        key: (names.retrain_schedule(key), job.schedule.expression, job.schedule.timezone)
        for key, job in spec.jobs.items()
        if job.schedule is not None
    }
    return Scope(
        names=names,
        region=spec.region,
        jobs=tuple(spec.jobs),
        tuning=tuple(spec.tuning),
        endpoints=tuple(spec.endpoints),
        clusters=tuple(spec.clusters),
        queues=tuple(spec.queues),
        component_hosts=tuple(key for key, ep in spec.endpoints.items() if ep.components),
        pipelines=pipelines,
        schedules=schedules,
        monitors={key: names.monitoring_schedule(key) for key, ep in spec.endpoints.items() if ep.monitor},
        slos={r.endpoint: spec.endpoints[r.endpoint] for r in resolve_recommendations(names, spec.endpoints)},
    )


def read_status(scope: Scope, client: Client, now: datetime | None = None) -> dict[str, Any]:
    """The environment's status document. A section AWS refuses to read (a missing permission, an
    API the region lacks) is left empty and named in "errors"; missing credentials raise."""
    now = now or datetime.now(UTC)
    errors: list[str] = []
    document: dict[str, Any] = {
        "project": scope.names.project,
        "environment": scope.names.env,
        "region": scope.region,
        "read_at": iso(now),
    }
    sections: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("stacks", lambda: read_stacks(scope, client("cloudformation"))),
        ("pipelines", lambda: read_pipelines(scope, client("stepfunctions"))),
        ("training_jobs", lambda: read_training_jobs(scope, client("sagemaker"), now)),
        ("tuning_jobs", lambda: read_tuning_jobs(scope, client("sagemaker"), now)),
        ("endpoints", lambda: read_endpoints(scope, client("sagemaker"), client("cloudwatch"), now, errors)),
        (
            "recommendations",
            lambda: read_recommendations(
                scope.names, scope.slos, client("stepfunctions"), client("sagemaker"), kept
            ),
        ),
        ("clusters", lambda: read_clusters(scope, client("sagemaker"))),
        (
            "queues",
            lambda: read_queues(scope.names, scope.queues, client("batch"), now) if scope.queues else [],
        ),
        (
            "schedules",
            lambda: read_schedules(
                scope.schedules, scope.monitors, client("scheduler"), client("sagemaker"), now
            ),
        ),
    )
    for key, read in sections:
        try:
            document[key] = read()
        except Exception as e:
            if no_credentials(e):
                raise
            document[key] = []
            errors.append(f"{key}: {reason(e)}")
    document["errors"] = errors
    return document


# ---------------------------------------------------------------- stacks and pipelines


def read_stacks(scope: Scope, cfn: Any) -> list[dict[str, Any]]:
    """Each stack sagestack deploys for the environment (a training stack split in shards too):
    its status, or None when it is not deployed."""
    rows = [_stack(cfn, scope.names.stack(kind), kind) for kind in STACK_KINDS]
    for index in range(1, MAX_SPLIT_STACKS + 1):
        kind = f"training-{index:02d}"
        row = _stack(cfn, scope.names.stack(kind), kind)
        if row["status"] is None:
            break
        rows.append(row)
    return rows


def _stack(cfn: Any, name: str, kind: str) -> dict[str, Any]:
    try:
        (stack,) = cfn.describe_stacks(StackName=name)["Stacks"]
    except Exception as e:
        if error_code(e) == "ValidationError":  # "Stack with id … does not exist"
            return {"kind": kind, "name": name, "status": None, "reason": None, "updated": None}
        raise
    updated = stack.get("LastUpdatedTime") or stack.get("CreationTime")
    return {
        "kind": kind,
        "name": name,
        "status": stack["StackStatus"],
        "reason": stack.get("StackStatusReason"),
        "updated": iso(updated),
    }


def read_pipelines(scope: Scope, sfn: Any) -> list[dict[str, Any]]:
    """Each pipeline of the spec (found among the state machines by its name) with its latest
    executions, newest first."""
    arns = state_machines(scope, sfn)
    rows = []
    for entry, name in scope.pipelines.items():
        executions = []
        if entry in arns:
            listed = sfn.list_executions(stateMachineArn=arns[entry], maxResults=EXECUTIONS)["executions"]
            executions = [
                {
                    "name": e["name"],
                    "status": e["status"],
                    "started": iso(e.get("startDate")),
                    "stopped": iso(e.get("stopDate")),
                }
                for e in sorted(listed, key=lambda e: e["startDate"], reverse=True)
            ]
        rows.append(
            {"entry": entry, "state_machine": name, "deployed": entry in arns, "executions": executions}
        )
    return rows


def state_machines(scope: Scope, sfn: Any) -> dict[str, str]:
    """Entry -> ARN of each deployed state machine of the spec (found by its name)."""
    wanted = {name: entry for entry, name in scope.pipelines.items()}
    found: dict[str, str] = {}
    for page in sfn.get_paginator("list_state_machines").paginate():
        found |= {
            wanted[m["name"]]: m["stateMachineArn"] for m in page["stateMachines"] if m["name"] in wanted
        }
    return found


# ---------------------------------------------------------------- training and tuning jobs


def job_of(scope: Scope, job_name: str) -> str | None:
    """The spec's job a training job belongs to (names.training_job: '<prefix>-<job>-<hash8>-<i>',
    cut in front; a retrain's '<name cut>-<hex8>'): the longest job stem it starts with."""
    stems = {key: scope.names.training_job(key, "0" * 8, 0).removesuffix("-00000000-0") for key in scope.jobs}
    found = [key for key, stem in stems.items() if job_name.startswith(stem + "-")]
    return max(found, key=lambda k: len(stems[k]), default=None)


def search_of(scope: Scope, name: str) -> str | None:
    """The spec's search a tuning job's name belongs to (names.tuning_job: its stem and a hash):
    the longest stem it starts with. The name has no room for the environment: see `tagged`."""
    stems = {key: scope.names.tuning_job(key, "0" * 8).removesuffix("-00000000") for key in scope.tuning}
    found = [key for key, stem in stems.items() if name.startswith(stem + "-")]
    return max(found, key=lambda k: len(stems[k]), default=None)


def tagged(sm: Any, arn: str, scope: Scope) -> bool:
    """Whether a SageMaker resource carries this environment's tags."""
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn).get("Tags", [])}
    return all(tags.get(k) == v for k, v in scope.names.tags.items())


def read_training_jobs(scope: Scope, sm: Any, now: datetime) -> list[dict[str, Any]]:
    """The environment's newest training jobs (by its name prefix, each one a job of the spec)."""
    listed = sm.list_training_jobs(
        NameContains=scope.names.prefix, SortBy="CreationTime", SortOrder="Descending", MaxResults=50
    )["TrainingJobSummaries"]
    ours = [(s["TrainingJobName"], job_of(scope, s["TrainingJobName"])) for s in listed]
    return [
        training_row(sm.describe_training_job(TrainingJobName=name), key, now)
        for name, key in [(n, k) for n, k in ours if k is not None][:TRAINING_JOBS]
    ]


def training_row(job: dict[str, Any], key: str | None, now: datetime) -> dict[str, Any]:
    """A DescribeTrainingJob response as a row: elapsed and billable time, spot savings, the
    last value of each metric and the failure reason."""
    status = job["TrainingJobStatus"]
    start = job.get("TrainingStartTime") or job.get("CreationTime")
    end = job.get("TrainingEndTime") or (
        now if status in ("InProgress", "Stopping") else job.get("LastModifiedTime")
    )
    elapsed = job.get("TrainingTimeInSeconds")
    if elapsed is None and start and end:
        elapsed = max(0, int((end - start).total_seconds()))
    billable = job.get("BillableTimeInSeconds")
    spot = bool(job.get("EnableManagedSpotTraining"))
    savings = None
    if spot and billable is not None and job.get("TrainingTimeInSeconds"):
        savings = round(100 * (1 - billable / job["TrainingTimeInSeconds"]))
    metrics: dict[str, float] = {}
    for m in sorted(job.get("FinalMetricDataList") or [], key=lambda m: m.get("Timestamp") or now):
        metrics[m["MetricName"]] = m["Value"]
    resources = job.get("ResourceConfig") or {}
    return {
        "name": job["TrainingJobName"],
        "job": key,
        "status": status,
        "secondary_status": job.get("SecondaryStatus"),
        "instance_type": resources.get("InstanceType"),
        "instance_count": resources.get("InstanceCount"),
        "started": iso(start),
        "elapsed_s": elapsed,
        "billable_s": billable,
        "spot": spot,
        "spot_savings_percent": savings,
        "metrics": metrics,
        "failure_reason": job.get("FailureReason"),
    }


def read_tuning_jobs(scope: Scope, sm: Any, now: datetime) -> list[dict[str, Any]]:
    """The newest tuning jobs of the spec's searches: a tuning job's name has no room for the
    environment (names.tuning_job), so each candidate's sagestack:environment tag decides."""
    if not scope.tuning:
        return []
    listed = sm.list_hyper_parameter_tuning_jobs(
        NameContains=scope.names.project, SortBy="CreationTime", SortOrder="Descending", MaxResults=50
    )["HyperParameterTuningJobSummaries"]
    rows = []
    for summary in listed:
        name = summary["HyperParameterTuningJobName"]
        key = search_of(scope, name)
        if key is None or not tagged(sm, summary["HyperParameterTuningJobArn"], scope):
            continue
        described = sm.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
        rows.append(tuning_row(described, key, now))
        if len(rows) == TUNING_JOBS:
            break
    return rows


def tuning_row(job: dict[str, Any], key: str, now: datetime) -> dict[str, Any]:
    status = job["HyperParameterTuningJobStatus"]
    start = job.get("CreationTime")
    end = job.get("HyperParameterTuningEndTime") or (
        now if status == "InProgress" else job.get("LastModifiedTime")
    )
    counters = job.get("TrainingJobStatusCounters") or {}
    best = job.get("BestTrainingJob") or {}
    objective = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    return {
        "name": job["HyperParameterTuningJobName"],
        "search": key,
        "status": status,
        "elapsed_s": int((end - start).total_seconds()) if start and end else None,
        "completed": counters.get("Completed", 0),
        "in_progress": counters.get("InProgress", 0),
        "failed": counters.get("RetryableError", 0) + counters.get("NonRetryableError", 0),
        "best_job": best.get("TrainingJobName"),
        "best_metric": {objective["MetricName"]: objective["Value"]} if objective else {},
        "failure_reason": job.get("FailureReason"),
    }


# ---------------------------------------------------------------- endpoints, clusters, schedules


def read_endpoints(scope: Scope, sm: Any, cw: Any, now: datetime, errors: list[str]) -> list[dict[str, Any]]:
    """Each endpoint of the spec (`endpoint_rows`) with each variant's last hour of invocations,
    4XX/5XX errors and mean model latency."""
    rows = endpoint_rows(scope, sm, errors)
    deployed = [(r["name"], v) for r in rows for v in r["variants"]]
    if deployed:
        try:
            _last_hour(cw, deployed, now)
        except Exception as e:
            if no_credentials(e):
                raise
            errors.append(f"endpoint metrics: {reason(e)}")
    return rows


def endpoint_rows(scope: Scope, sm: Any, errors: list[str]) -> list[dict[str, Any]]:
    """Each endpoint of the spec: status, its endpoint config, variants (their instance pools) and
    inference components; no metrics (`cost` reads these without CloudWatch)."""
    rows: list[dict[str, Any]] = []
    for key in scope.endpoints:
        name = scope.names.endpoint(key)
        try:
            described = sm.describe_endpoint(EndpointName=name)
        except Exception as e:
            if error_code(e) != "ValidationException":  # "Could not find endpoint"
                raise
            rows.append({"key": key, "name": name, "status": None, "variants": [], "components": []})
            continue
        rows.append(
            {
                "key": key,
                "name": name,
                "status": described["EndpointStatus"],
                "failure_reason": described.get("FailureReason"),
                "config": described.get("EndpointConfigName"),
                "variants": [_variant(v) for v in described.get("ProductionVariants") or []],
                "components": _components(sm, name, errors) if key in scope.component_hosts else [],
            }
        )
    return rows


def _variant(v: dict[str, Any]) -> dict[str, Any]:
    pools = [
        {"instance_type": p.get("InstanceType"), "current": p.get("CurrentInstanceCount")}
        for p in v.get("InstancePools") or []
    ]
    return {
        "name": v["VariantName"],
        "current": v.get("CurrentInstanceCount"),
        "desired": v.get("DesiredInstanceCount"),
        "weight": v.get("CurrentWeight"),
        "serverless": "CurrentServerlessConfig" in v,
        "pools": pools,
        "last_hour": {},
    }


def _components(sm: Any, endpoint: str, errors: list[str]) -> list[dict[str, Any]]:
    try:
        listed = sm.list_inference_components(EndpointNameEquals=endpoint)["InferenceComponents"]
    except Exception as e:
        if no_credentials(e):
            raise
        errors.append(f"inference components of {endpoint}: {reason(e)}")
        return []
    return [
        {
            "name": c["InferenceComponentName"],
            "variant": c["VariantName"],
            "status": c["InferenceComponentStatus"],
        }
        for c in listed
    ]


def _last_hour(cw: Any, variants: list[tuple[str, dict[str, Any]]], now: datetime) -> None:
    """Fill each variant's "last_hour" from one GetMetricData (AWS/SageMaker, one hour's period)."""
    queries: list[dict[str, Any]] = []
    where: dict[str, Any] = {}
    for endpoint, variant in variants:
        for key, metric, stat in METRICS:
            qid = f"m{len(queries)}"
            where[qid] = (variant, key)
            dimensions = [
                {"Name": "EndpointName", "Value": endpoint},
                {"Name": "VariantName", "Value": variant["name"]},
            ]
            queries.append(
                {
                    "Id": qid,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "AWS/SageMaker",
                            "MetricName": metric,
                            "Dimensions": dimensions,
                        },
                        "Period": 3600,
                        "Stat": stat,
                    },
                }
            )
    for start in range(0, len(queries), 500):
        result = cw.get_metric_data(
            MetricDataQueries=queries[start : start + 500], StartTime=now - timedelta(hours=1), EndTime=now
        )
        for r in result["MetricDataResults"]:
            variant, key = where[r["Id"]]
            values = r.get("Values") or []
            if not values:
                variant["last_hour"][key] = 0 if key != "latency_ms" else None
            elif key == "latency_ms":  # ModelLatency is in microseconds
                variant["last_hour"][key] = round(sum(values) / len(values) / 1000, 1)
            else:
                variant["last_hour"][key] = int(sum(values))


def read_clusters(scope: Scope, sm: Any) -> list[dict[str, Any]]:
    """Each HyperPod cluster of the spec with its instance groups' counts."""
    rows: list[dict[str, Any]] = []
    for key in scope.clusters:
        name = scope.names.cluster(key)
        try:
            described = sm.describe_cluster(ClusterName=name)
        except Exception as e:
            if error_code(e) not in ("ResourceNotFound", "ValidationException"):
                raise
            rows.append({"key": key, "name": name, "status": None, "groups": []})
            continue
        groups = [
            {
                "name": g["InstanceGroupName"],
                "instance_type": g.get("InstanceType"),
                "current": g.get("CurrentCount"),
                "target": g.get("TargetCount"),
            }
            for g in described.get("InstanceGroups") or []
        ]
        rows.append(
            {
                "key": key,
                "name": name,
                "status": described["ClusterStatus"],
                "failure_reason": described.get("FailureMessage"),
                "groups": groups,
            }
        )
    return rows
