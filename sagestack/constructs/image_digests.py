"""ImageDigests: render every image a construct's requests name by digest (`repository@sha256:…`)
instead of by tag, for every construct in a scope — what a locked environment deploys."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from constructs import Construct

from sagestack.constructs.prop_types import typed_props
from sagestack.core.digests import pin_images

CONTEXT_KEY = "sagestack:image-digests"


class ImageDigests:
    """`ImageDigests.pin(stage, {uri: "sha256:…"})` before the stage's stacks are added: each
    JobPipeline definition (training, tuning, transform, baseline) and each L1 that names an image
    (a Model Monitor job definition) below `stage` names those images by digest. Images it does
    not know keep their tag."""

    @staticmethod
    @typed_props
    def pin(scope: Construct, digests: Mapping[str, str]) -> None:
        scope.node.set_context(CONTEXT_KEY, dict(sorted(digests.items())))

    @staticmethod
    def of(scope: Construct) -> dict[str, str]:
        """The digests pinned on `scope` or above it ({} when none)."""
        return dict(scope.node.try_get_context(CONTEXT_KEY) or {})

    @staticmethod
    def apply(scope: Construct, value: Any) -> Any:
        """`value` (a request, a definition, a URI) with the pinned images by digest."""
        return pin_images(value, ImageDigests.of(scope))

    @staticmethod
    def apply_below(parent: Construct, value: Any) -> Any:
        """`apply` for a construct being added under `parent` (which sets no context of its own): the
        digests are read once per parent, since a scope that has children can no longer set context
        (constructs refuses it), and neither can any scope above it."""
        pinned = _PINNED.get(parent)
        if pinned is None:
            pinned = _PINNED[parent] = ImageDigests.of(parent)
        return pin_images(value, pinned)


# The digests each parent of pipelines sees: one read through jsii per stack, not one per pipeline.
_PINNED: weakref.WeakKeyDictionary[Construct, dict[str, str]] = weakref.WeakKeyDictionary()
