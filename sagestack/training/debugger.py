"""A job's Debugger and Profiler settings as the SageMaker SDK renders them: DebugHookConfig,
DebugRuleConfigurations, ProfilerConfig and ProfilerRuleConfigurations."""

from __future__ import annotations

import json
from typing import Any

from sagestack.core.catalog.debugger import action_json, debugger_rules
from sagestack.core.catalog.images import debugger_rules_image_uri
from sagestack.training.context import RequestContext
from sagestack.training.models import DebuggerSpec, JobSpec, ProfilerSpec

PROFILER_RULE_NAMES = {
    "profiler_report": "ProfilerReport",
    "cpu_bottleneck": "CPUBottleneck",
    "gpu_memory_increase": "GPUMemoryIncrease",
    "io_bottleneck": "IOBottleneck",
    "low_gpu_utilization": "LowGPUUtilization",
    "batch_size": "BatchSize",
    "step_outlier": "StepOutlier",
    "load_balancing": "LoadBalancing",
    "max_initialization_time": "MaxInitializationTime",
    "overall_system_usage": "OverallSystemUsage",
}


def rules_image_for(job: JobSpec, region: str) -> str | None:
    """The Debugger/Profiler rule evaluator image (sagemaker-core's debugger table), when the job has
    rules to evaluate."""
    return (
        debugger_rules_image_uri(region) if (job.debugger or (job.profiler and job.profiler.rules)) else None
    )


def rule_configuration(
    name: str, ctx: RequestContext, parameters: dict[str, str] | None = None
) -> dict[str, Any]:
    if ctx.rules_image_uri is None:
        raise ValueError("Debugger/Profiler rules need the region's rule evaluator image")
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": ctx.rules_image_uri,
        "RuleParameters": parameters or {"rule_to_invoke": name},
    }


def _text(value: Any) -> str:
    # Rule, hook and collection parameters are strings; booleans as Python writes them ("True"),
    # which is how SDK users pass them and how smdebug parses them.
    return str(value)


def debugger_configs(
    debugger: DebuggerSpec, ctx: RequestContext, *, job_name: str, s3_output: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """DebugHookConfig and DebugRuleConfigurations as the SageMaker SDK renders Rule.sagemaker(...)
    rules with a DebuggerHookConfig: each rule's default parameters, the user's on top, its actions
    as action_json (StopTraining's prefix is the job's name); the collections every rule needs merged
    into the hook with the hook's own (the hook's parameters win for a collection both name)."""

    catalog = debugger_rules()
    rules: list[dict[str, Any]] = []
    collections: dict[str, dict[str, str]] = {}
    for r in debugger.rules:
        entry = catalog[r.rule]
        parameters = {**entry["parameters"], **{k: _text(v) for k, v in r.parameters.items()}}
        actions: list[tuple[str, dict[str, str]]] = []
        if debugger.stops_training(r):
            actions.append(("stoptraining", {"training_job_prefix": job_name}))
        actions += [("email", {"endpoint": e}) for e in r.email]
        actions += [("sms", {"endpoint": n}) for n in r.sms]
        if actions:
            parameters["action_json"] = action_json(actions)
        rules.append(rule_configuration(entry["name"], ctx, parameters))
        for c in entry["collections"]:
            collections.setdefault(c["CollectionName"], dict(c.get("CollectionParameters", {})))
    hook: dict[str, Any] = {"S3OutputPath": s3_output}
    if debugger.hook is not None:
        for cname, cparams in debugger.hook.collections.items():
            collections[cname] = {**collections.get(cname, {}), **{k: _text(v) for k, v in cparams.items()}}
        if debugger.hook.parameters:
            hook["HookParameters"] = {k: _text(v) for k, v in debugger.hook.parameters.items()}
    if collections:
        hook["CollectionConfigurations"] = [
            {"CollectionName": c, **({"CollectionParameters": p} if p else {})}
            for c, p in collections.items()
        ]
    return hook, rules


def profiler_configs(
    profiler: ProfilerSpec, ctx: RequestContext, *, s3_output: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """ProfilerConfig, and ProfilerRuleConfigurations (empty when the job names no rule)."""
    config: dict[str, Any] = {
        "S3OutputPath": s3_output,
        "ProfilingIntervalInMilliseconds": profiler.system_interval_ms,
        "DisableProfiler": False,
    }
    parameters = framework_profiling(profiler)
    if parameters:
        config["ProfilingParameters"] = parameters
    return config, [rule_configuration(PROFILER_RULE_NAMES[r], ctx) for r in profiler.rules]


def framework_profiling(profiler: ProfilerSpec) -> dict[str, str]:
    """ProfilingParameters as the SDK's FrameworkProfile writes them: one JSON string per kind."""
    out: dict[str, str] = {}
    if profiler.framework is not None:
        f = profiler.framework
        out["DetailedProfilingConfig"] = json.dumps({"StartStep": f.start_step, "NumSteps": f.num_steps})
    if profiler.dataloader is not None:
        d = profiler.dataloader
        out["DataloaderProfilingConfig"] = json.dumps(
            {"StartStep": d.start_step, "NumSteps": d.num_steps, "MetricsRegex": d.metrics_regex}
        )
    if profiler.python is not None:
        p = profiler.python
        config: dict[str, Any] = {
            "StartStep": p.start_step,
            "NumSteps": p.num_steps,
            "ProfilerName": p.profiler,
        }
        if p.profiler == "cprofile":
            config["cProfileTimer"] = p.cprofile_timer
        out["PythonProfilingConfig"] = json.dumps(config)
    return out
