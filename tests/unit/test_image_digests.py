"""Digests in the requests: `sagestack lock --digests` asks an ECR (a moto server, over HTTP) for
every image the example's requests name; a locked synth renders each by digest, refuses a tag that
moved (naming both digests), and renders the lock's digests without asking with digests=offline."""

from __future__ import annotations

import contextlib
import json

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.core.digests import ImageRef, images_in, pin_images
from tests.support.moto_server import running_moto

DIGEST_A = "sha256:" + "a" * 64


def _requests(project):
    from sagestack.ops.lock import request_images
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_environment

    plan = resolve_environment(project.load("dev"))
    requests = render_environment(plan, project.root)
    return plan, requests, request_images(plan, requests)


def test_every_image_is_found_and_pinned_requests_stay_valid(example_project):
    from sagestack.core.catalog.service_model import validate_request

    _plan, requests, images = _requests(example_project)
    repositories = {ImageRef.parse(u).repository for u in images}  # type: ignore[union-attr]
    # training (cpu and gpu builds), the inference image the package registers, a rule evaluator
    assert {"pytorch-training", "pytorch-inference"} <= repositories, repositories
    pins = {u: DIGEST_A for u in images}
    for key, job in requests.jobs.items():
        for c in job.candidates:
            pinned = pin_images(c.request, pins)
            image = pinned["AlgorithmSpecification"]["TrainingImage"]
            assert image.endswith("@" + DIGEST_A) and ":" not in image.split("/", 1)[1].split("@")[0], (
                key,
                image,
            )
            validate_request("CreateTrainingJob", pinned)
            assert images_in(pinned) == []  # nothing left by tag
    for ops in requests.endpoints.values():
        for op, request in ops.items():
            validate_request(op, pin_images(request, pins))
    # an image nobody pinned keeps its tag
    assert pin_images({"Image": images[0]}, {}) == {"Image": images[0]}


@pytest.fixture()
def ecr(monkeypatch):
    with running_moto() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        yield server.client("ecr")


def _push(ecr, uri: str, layer: str) -> str:
    """An image in moto's ECR under `uri`'s registry, repository and tag; returns its digest."""
    ref = ImageRef.parse(uri)
    assert ref is not None
    with contextlib.suppress(ecr.exceptions.RepositoryAlreadyExistsException):
        ecr.create_repository(repositoryName=ref.repository, registryId=ref.registry)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"digest": "sha256:" + layer * 64, "size": 1, "mediaType": "x"},
            "layers": [{"digest": "sha256:" + layer * 64, "size": 1, "mediaType": "x"}],
        }
    )
    image = ecr.put_image(repositoryName=ref.repository, imageManifest=manifest, imageTag=ref.tag)["image"]
    return str(image["imageId"]["imageDigest"])


@pytest.mark.synth
def test_locked_synth_renders_digests_and_refuses_a_moved_tag(example_project, ecr, tmp_path):
    from aws_cdk import App

    from sagestack.app.builder import build_app
    from sagestack.core.digests import MovedTagError
    from sagestack.ops.lock import read_lock

    root = example_project.root
    *_, images = _requests(example_project)
    pushed = {uri: _push(ecr, uri, "1") for uri in images}

    runner = CliRunner()
    out = runner.invoke(app, ["lock", "--env", "dev", "--digests", "--root", str(root)])
    assert out.exit_code == 0, out.output
    lock = read_lock(root, "dev")
    assert lock["images"] == pushed  # every image, by the digest the registry reports

    locked = {"sagestack:locked": "true", "sagestack:quotas": "off", "sagestack:environments": "dev"}
    stage = build_app(App(outdir=str(tmp_path / "a"), context=locked), root, nag=False)[0]
    from aws_cdk.assertions import Template

    assert stage.training is not None
    text = json.dumps(Template.from_stack(stage.training).to_json())
    for uri, digest in pushed.items():
        if uri in text or ImageRef.parse(uri).pinned(digest) in text:  # type: ignore[union-attr]
            assert uri not in text, f"{uri} still named by tag in a locked synth"
    assert text.count("@sha256:") >= 2

    # `render --locked` shows the same pinned request
    shown = runner.invoke(
        app, ["render", "classifier", "--env", "dev", "--locked", "--json", "-c", "0", "--root", str(root)]
    )
    assert shown.exit_code == 0, shown.output
    image = json.loads(shown.output)["requests"][0]["request"]["AlgorithmSpecification"]["TrainingImage"]
    repository, _, digest = image.partition("@")
    assert digest == next(d for u, d in pushed.items() if u.rsplit(":", 1)[0] == repository), image

    # Someone pushes a new image under the same tag: the locked synth refuses, naming both digests.
    moved_uri = next(u for u in images if ImageRef.parse(u).repository == "pytorch-training")  # type: ignore[union-attr]
    new_digest = _push(ecr, moved_uri, "2")
    assert new_digest != pushed[moved_uri]
    with pytest.raises(MovedTagError) as e:
        build_app(App(outdir=str(tmp_path / "b"), context=locked), root, nag=False)
    assert moved_uri in str(e.value) and pushed[moved_uri] in str(e.value) and new_digest in str(e.value)
    assert "sagestack lock --env dev --digests" in str(e.value)

    # Offline, the lock's digest is what runs, without asking the registry.
    build_app(
        App(outdir=str(tmp_path / "c"), context={**locked, "sagestack:digests": "offline"}), root, nag=False
    )

    # Re-locking without --digests keeps the pins; with --digests it takes the new one.
    kept = runner.invoke(app, ["lock", "--env", "dev", "--root", str(root)])
    assert (
        "kept the digests of" in kept.output
        and read_lock(root, "dev")["images"][moved_uri] == pushed[moved_uri]
    )
    again = runner.invoke(app, ["lock", "--env", "dev", "--digests", "--root", str(root)])
    assert again.exit_code == 0 and new_digest[:19] in " ".join(again.output.split()), again.output
    assert read_lock(root, "dev")["images"][moved_uri] == new_digest
    build_app(App(outdir=str(tmp_path / "d"), context=locked), root, nag=False)


def test_lock_without_a_registry_says_which_digests_it_could_not_get(project, monkeypatch):
    from tests.conftest import MINIMAL

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    project.spec(MINIMAL).env("dev")
    out = CliRunner().invoke(app, ["lock", "--env", "dev", "--digests", "--root", str(project.root)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "ECR did not tell the digest of 1 image(s)" in text and "pytorch-training:" in text
    from sagestack.ops.lock import read_lock

    assert "images" not in read_lock(project.root, "dev")
