"""AWS images whose registry account differs per region (Model Monitor's analyzer, Debugger's rule
evaluator), in a stack whose region is a token (an environment-agnostic stack): a CfnMapping of
every region sagemaker-core knows the image in, read with Fn::FindInMap at deploy, as aws-cdk
reads its own regional facts. A region without the image fails the deploy, not the synth."""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import Aws, CfnMapping, Stack

# The mapping's logical ID per sagemaker-core image config (one mapping per stack and image).
MAPPINGS = {"model-monitor": "ModelMonitorAnalyzerImages", "debugger": "DebuggerRuleEvaluatorImages"}


def image_in_deploy_region(stack: Stack, framework: str, uri_of: Callable[[str], str]) -> str:
    """`uri_of(region)` for the region the stack is deployed to, as a token of the template."""
    mapping = stack.node.try_find_child(MAPPINGS[framework])
    if mapping is None:
        mapping = CfnMapping(stack, MAPPINGS[framework], mapping=_images(framework, uri_of))
    assert isinstance(mapping, CfnMapping)
    return mapping.find_in_map(Aws.REGION, "uri")


def _images(framework: str, uri_of: Callable[[str], str]) -> dict[str, dict[str, str]]:
    from sagemaker.core import image_uris  # sagemaker-core loads slowly; only agnostic stacks need this

    images: dict[str, dict[str, str]] = {}
    for version in image_uris.config_for_framework(framework)["versions"].values():
        for region in sorted(version["registries"]):
            try:
                images.setdefault(region, {"uri": uri_of(region)})
            except ValueError:  # a region sagemaker-core lists but cannot name the image in
                continue
    return dict(sorted(images.items()))
