"""Rules about an LLM's optimization job (`llm.optimize`): the instance type it optimizes for must be
one CreateOptimizationJob accepts, and the endpoint must have pools to take the default from."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.llm.optimization_job import deployment_type_problem
from sagestack.llm.rules import served


@rule(
    "llm-optimize-instance",
    "error",
    "an optimization job targets an instance type CreateOptimizationJob accepts",
    why=(
        "CreateOptimizationJob's DeploymentInstanceType takes only the GPU, Inferentia2 and Trainium types "
        "of botocore's OptimizationJobDeploymentInstanceType; any other is refused when the pipeline "
        "runs, after the deploy."
    ),
    fix="Set optimize.instance_type to a type the finding lists (the model is optimized for it; the "
    "endpoint's pools may still differ), or put such a type first in the endpoint's instance_type.",
)
def llm_optimize_instance(ctx: RuleContext) -> Iterator[Finding]:
    for name, s in served(ctx):
        opt = s.spec.optimize
        if opt is None:
            continue
        if opt.instance_type is not None:
            target, path = opt.instance_type, (*s.path, "optimize", "instance_type")
        elif s.types:
            target, path = s.types[0], s.type_path(name, 0)
        else:
            yield Finding(
                (*s.path, "optimize"),
                "an optimization job needs an instance type to optimize for: the endpoint has no "
                "instance_type; set optimize.instance_type",
            )
            continue
        problem = deployment_type_problem(target)
        if problem is not None:
            yield Finding(path, problem)
