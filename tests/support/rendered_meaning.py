"""Whether a rendered request (`sagestack render`) means what the template's resource says:
every concrete value equal, every intrinsic (what only the deployment knows) a stand-in `render`
names or the physical name it resolves to, a Fn::Join's literal parts in order."""

from __future__ import annotations

from typing import Any

# Properties CloudFormation takes and the Create call does not (a component's rollout).
CLOUDFORMATION_ONLY = ("DeploymentConfig",)
TEMPLATE_TYPES = {
    "CreateModel": "AWS::SageMaker::Model",
    "CreateEndpointConfig": "AWS::SageMaker::EndpointConfig",
    "CreateInferenceComponent": "AWS::SageMaker::InferenceComponent",
}


def _intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Ref", "Fn::"))


def differences(
    template: Any, request: Any, stand_ins: Any, names: tuple[str, ...] = (), where: str = ""
) -> list[str]:
    """What differs between a resource's properties and a rendered request (empty: the same).
    stand_ins: the markers `render` names; names: physical names an intrinsic may resolve to."""
    if _intrinsic(template):
        ((fn, args),) = template.items()
        if not isinstance(request, str):
            return [f"{where}: {template} rendered as {request!r}"]
        if fn == "Fn::Join":
            rest = request
            for part in (p for p in args[1] if isinstance(p, str)):
                if part not in rest:
                    return [f"{where}: {part!r} of {template} not in {request!r}"]
                rest = rest[rest.index(part) + len(part) :]
        if not (any(m in request for m in stand_ins) or request in names):
            return [f"{where}: {template} rendered as {request!r}, not a named stand-in"]
        return []
    if isinstance(template, dict):
        if not isinstance(request, dict) or set(template) != set(request):
            keys = set(request) if isinstance(request, dict) else request
            return [f"{where}: keys {sorted(template)} rendered as {keys}"]
        return [
            d
            for k in template
            for d in differences(template[k], request[k], stand_ins, names, f"{where}.{k}")
        ]
    if isinstance(template, list):
        if not isinstance(request, list) or len(template) != len(request):
            return [f"{where}: {template} rendered as {request!r}"]
        return [
            d
            for i, (t, r) in enumerate(zip(template, request, strict=True))
            for d in differences(t, r, stand_ins, names, f"{where}[{i}]")
        ]
    return [] if template == request else [f"{where}: {template!r} rendered as {request!r}"]


def resource_differences(
    properties: dict[str, Any], shown: dict[str, Any], names: tuple[str, ...] = ()
) -> list[str]:
    """A template resource's properties against one request `render --json` showed ({operation,
    request, stand_ins}); the names CloudFormation generates are stand-ins in the request."""
    template = {k: v for k, v in properties.items() if k not in CLOUDFORMATION_ONLY}
    request = dict(shown["request"])
    for generated in ("ModelName", "EndpointConfigName"):
        if generated in request and generated not in template:
            value = request.pop(generated)
            if not any(m in value for m in shown["stand_ins"]):
                return [f"{generated}: {value!r} is no named stand-in"]
    return differences(template, request, shown["stand_ins"], names, shown["operation"])
