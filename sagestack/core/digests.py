"""Image digests: every ECR image a request names, resolved once (`sagestack lock --digests`) and
rendered as `repository@sha256:…` by a locked synth, so a locked environment runs tomorrow the
bytes it ran today — a tag that moved is refused, naming both digests.

Pure functions over rendered requests (dicts): they find images wherever a request names one
(TrainingImage, RuleEvaluatorImage, a package's Image, a processing job's ImageUri …), so a new
kind of request needs nothing here."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# <registry>.dkr.ecr.<region>.amazonaws.com[.cn]/<repository>:<tag> (a tag, not yet a digest)
ECR_TAGGED = re.compile(
    r"^(?P<registry>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*):(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127})$"
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageRef:
    uri: str
    registry: str
    region: str
    repository: str
    tag: str

    @classmethod
    def parse(cls, uri: str) -> ImageRef | None:
        m = ECR_TAGGED.match(uri)
        if m is None:
            return None
        return cls(uri, m["registry"], m["region"], m["repository"], m["tag"])

    def pinned(self, digest: str) -> str:
        """The same image by digest: `<registry>/<repository>@sha256:…` (the tag dropped, as
        SageMaker's TrainingImage pattern and ECR's pull by digest expect)."""
        return f"{self.uri.rsplit(':', 1)[0]}@{digest}"


def images_in(value: Any) -> list[str]:
    """Every tagged ECR image URI anywhere in `value` (requests, nested), in order, once."""
    found: dict[str, None] = {}

    def walk(v: Any) -> None:
        if isinstance(v, str):
            if ECR_TAGGED.match(v):
                found.setdefault(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, (list, tuple)):
            for item in v:
                walk(item)

    walk(value)
    return list(found)


def pin_images(value: Any, digests: Mapping[str, str]) -> Any:
    """A copy of `value` with each image URI that `digests` knows replaced by its pinned form."""
    if not digests:
        return value
    if isinstance(value, str):
        digest = digests.get(value)
        ref = ImageRef.parse(value) if digest else None
        return ref.pinned(digest) if ref is not None and digest else value
    if isinstance(value, dict):
        return {k: pin_images(v, digests) for k, v in value.items()}
    if isinstance(value, list):
        return [pin_images(v, digests) for v in value]
    if isinstance(value, tuple):
        return tuple(pin_images(v, digests) for v in value)
    return value


def resolve_digests(
    uris: Iterable[str], lookup: Callable[[str], str | None]
) -> tuple[dict[str, str], list[str]]:
    """Ask `lookup` (ECR's DescribeImages) for each image: ({uri: digest}, [uris it could not tell])."""
    found: dict[str, str] = {}
    missing: list[str] = []
    for uri in uris:
        digest = lookup(uri)
        if digest and DIGEST.match(digest):
            found[uri] = digest
        else:
            missing.append(uri)
    return found, missing


def moved_tags(locked: Mapping[str, str], lookup: Callable[[str], str | None]) -> list[str]:
    """Each locked image whose tag now names another digest, as a sentence naming both. An image
    the registry will not describe (no credentials, no access) is not a refusal: the lock's digest
    is what runs."""
    moved = []
    for uri, digest in sorted(locked.items()):
        now = lookup(uri)
        if now and now != digest:
            moved.append(f"{uri}: the lock pins {digest}, the tag now names {now}")
    return moved


class MovedTagError(Exception):
    """A locked synth found that an image tag names another digest than the lock pinned."""

    def __init__(self, env: str, moved: list[str]) -> None:
        self.env, self.moved = env, moved
        super().__init__(
            f"{env}: -c sagestack:locked=true and an image tag moved since config/envs/{env}.lock.json was "
            "written:\n"
            + "\n".join(f"  ✗ {m}" for m in moved)
            + "\nThe lock's digest is what was tested. To run the new image, review it and "
            f"`sagestack lock --env {env} --digests`; to keep the old one, deploy the lock as it is "
            "(`-c sagestack:locked=true -c sagestack:digests=offline` renders the locked digests without "
            "asking ECR)."
        )
