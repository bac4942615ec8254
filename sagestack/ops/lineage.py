"""`sagestack lineage ENDPOINT --env E`: from a serving endpoint back to what made its model —
endpoint → endpoint config → model → pinned model package → training job → code, data channels
and images — and whether the lock of the environment that trained it would train it again.

Reads with boto3 (AWS_ENDPOINT_URL honoured); every step that cannot be read (another account,
no access, deleted) is said, and the walk goes on with what the package itself records: the
package's CustomerMetadataProperties carry the job, its content hash, its source archive hash,
its training image and the lock file's hash (written by the training pipeline that registered it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.core.digests import DIGEST, ImageRef
from sagestack.project.loader import ProjectFiles


@dataclass
class Step:
    kind: str  # endpoint | endpoint config | model | model package | training job
    name: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    problem: str | None = None


@dataclass
class Verdict:
    environment: str | None  # whose lock was asked
    reproducible: bool | None  # None: could not tell
    reasons: list[tuple[bool | None, str]] = field(default_factory=list)  # (holds?, why), one a line
    notes: list[str] = field(default_factory=list)


@dataclass
class Lineage:
    steps: list[Step]
    verdict: Verdict

    def document(self) -> dict[str, Any]:
        return {
            "steps": [
                {
                    "kind": s.kind,
                    "name": s.name,
                    "facts": dict(s.facts),
                    **({"problem": s.problem} if s.problem else {}),
                }
                for s in self.steps
            ],
            "reproducible": self.verdict.reproducible,
            "lock": self.verdict.environment,
            "reasons": [{"holds": ok, "reason": text} for ok, text in self.verdict.reasons],
            "notes": self.verdict.notes,
        }


class LineageError(Exception):
    """The walk cannot start (no such endpoint deployed)."""


def _error_text(e: Exception) -> str:
    response = getattr(e, "response", None)
    if isinstance(response, dict) and "Error" in response:
        return f"{response['Error'].get('Code', '')}: {response['Error'].get('Message', '')}".strip(": ")
    return str(e)


def walk(sm: Any, endpoint_name: str, root: Path) -> Lineage:
    """Every step from `endpoint_name` to its training job, then the verdict of the lock of the
    environment that trained it (config/envs/<env>.lock.json under `root`)."""
    steps: list[Step] = []
    try:
        endpoint = sm.describe_endpoint(EndpointName=endpoint_name)
    except Exception as e:
        raise LineageError(f"endpoint '{endpoint_name}' could not be read: {_error_text(e)}") from None
    steps.append(
        Step(
            "endpoint",
            endpoint_name,
            [
                ("status", str(endpoint.get("EndpointStatus", "?"))),
                ("config", endpoint["EndpointConfigName"]),
            ],
        )
    )
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    models = [v["ModelName"] for v in config.get("ProductionVariants", []) if v.get("ModelName")]
    steps.append(
        Step(
            "endpoint config",
            endpoint["EndpointConfigName"],
            [
                (
                    "variants",
                    ", ".join(
                        f"{v['VariantName']}: {v.get('InitialInstanceCount', '?')}x {v.get('InstanceType', 'serverless')}"
                        for v in config.get("ProductionVariants", [])
                    ),
                )
            ],
        )
    )
    if not models:
        steps[-1].problem = (
            "its variants name no model (inference components): walk a component's model with "
            "`sagestack lineage ENDPOINT/COMPONENT`"
        )
        return Lineage(steps, Verdict(None, None, [(None, "no model to follow")]))
    model = sm.describe_model(ModelName=models[0])
    container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
    package_arn = container.get("ModelPackageName")
    steps.append(Step("model", models[0], [("package", package_arn or "none")]))
    if not package_arn:
        steps[
            -1
        ].problem = "the model names no model package: it was not deployed from a sagestack registration"
        return Lineage(steps, Verdict(None, None, [(None, "no model package to follow")]))
    return _from_package(sm, package_arn, steps, root)


def walk_package(sm: Any, package_arn: str, root: Path) -> Lineage:
    """The walk from a model package (a transform's or a component's pin)."""
    return _from_package(sm, package_arn, [], root)


def _from_package(sm: Any, package_arn: str, steps: list[Step], root: Path) -> Lineage:
    try:
        package = sm.describe_model_package(ModelPackageName=package_arn)
    except Exception as e:
        steps.append(Step("model package", package_arn, problem=f"could not be read: {_error_text(e)}"))
        return Lineage(steps, Verdict(None, None, [(None, "the model package could not be read")]))
    meta: dict[str, str] = dict(package.get("CustomerMetadataProperties") or {})
    inference = (package.get("InferenceSpecification", {}).get("Containers") or [{}])[0]
    facts = [
        ("approval", str(package.get("ModelApprovalStatus", "?"))),
        ("model data", str(inference.get("ModelDataUrl", "?"))),
        ("inference image", str(inference.get("Image", "?"))),
    ]
    if inference.get("ImageDigest"):
        facts.append(("inference image digest", str(inference["ImageDigest"])))
    for key in (
        "job",
        "tuning",
        "environment",
        "spec-hash",
        "source-sha256",
        "training-image",
        "lock-sha256",
    ):
        if f"sagestack:{key}" in meta:
            facts.append((key, meta[f"sagestack:{key}"]))
    # a package promoted from another account (ops/promote_copy): where it was copied from, and how
    for key in ("promoted-from", "promoted-digest"):
        if f"sagestack:{key}" in meta:
            facts.append((key.replace("-", " "), meta[f"sagestack:{key}"]))
    steps.append(Step("model package", package_arn, facts))
    if "sagestack:training-job" not in meta:
        steps[
            -1
        ].problem = "the package records no training job: it was not registered by a sagestack pipeline"
        return Lineage(steps, Verdict(None, None, [(None, "no lineage recorded on the package")]))
    job_name = meta["sagestack:training-job"]
    training_image = meta.get("sagestack:training-image", "")
    try:
        job = sm.describe_training_job(TrainingJobName=job_name)
    except Exception as e:
        steps.append(
            Step(
                "training job",
                job_name,
                problem=f"could not be read ({_error_text(e)}); it runs in the account that trained it — "
                "the package's own record is used",
            )
        )
    else:
        hp = job.get("HyperParameters", {})
        algorithm = job.get("AlgorithmSpecification", {})
        training_image = str(algorithm.get("TrainingImage", training_image))
        job_facts = [
            ("status", str(job.get("TrainingJobStatus", "?"))),
            ("image", training_image),
            *launch_facts(job, hp),
            (
                "instances",
                f"{job['ResourceConfig'].get('InstanceCount', '?')}x {job['ResourceConfig'].get('InstanceType', '?')}",
            ),
        ]
        for ch in job.get("InputDataConfig", []):
            source = ch.get("DataSource", {})
            uri = source.get("S3DataSource", {}).get("S3Uri") or source.get("FileSystemDataSource", {}).get(
                "DirectoryPath", "?"
            )
            job_facts.append((f"data '{ch['ChannelName']}'", str(uri)))
        steps.append(Step("training job", job_name, job_facts))
    return Lineage(steps, verdict(meta, training_image, root))


def verdict(meta: dict[str, str], training_image: str, root: Path) -> Verdict:
    """Would the lock of the environment that trained this model train it again? The same content
    hash (spec, source archive and images by name) and the same source archive say yes; a training
    image named by digest is compared with the lock's digest."""

    env = meta.get("sagestack:environment")
    job = meta.get("sagestack:job")
    notes = [
        "data channels are S3 prefixes: what they held then is not content-addressed (keep the bucket "
        "versioned, or write each dataset under its own prefix)"
    ]
    if env is None or job is None or "sagestack:spec-hash" not in meta:
        return Verdict(
            env,
            None,
            [(None, "the package records no job content hash (registered before lineage was recorded)")],
            notes,
        )
    files = ProjectFiles(root).environment_files(env)
    lock = files.lock
    if lock is None:
        return Verdict(
            env,
            None,
            [(None, f"config/envs/{env}.lock.json does not exist (`sagestack lock --env {env}`)")],
            notes,
        )
    reasons: list[tuple[bool | None, str]] = []
    locked_job = lock.get("jobs", {}).get(job)
    if locked_job is None:
        return Verdict(env, False, [(False, f"the lock has no job '{job}' any more")], notes)
    if locked_job["hash"] == meta["sagestack:spec-hash"]:
        reasons.append(
            (
                True,
                f"job '{job}': the lock's content hash {locked_job['hash']} is the one it was trained under",
            )
        )
    else:
        reasons.append(
            (
                False,
                f"job '{job}': trained under content hash {meta['sagestack:spec-hash']}, the lock now says "
                f"{locked_job['hash']} (its spec, source or images changed since)",
            )
        )
    source = meta.get("sagestack:source-sha256")
    sources = lock.get("sources", {})
    if source and source in sources.values():
        reasons.append((True, f"source archive {source[:12]}: the lock's"))
    elif source:
        reasons.append(
            (
                False,
                f"source archive {source[:12]} is not the lock's ({', '.join(v[:12] for v in sources.values())})",
            )
        )
    ran = training_image.partition("@")[2]
    if ran and DIGEST.match(ran):
        repository = training_image.partition("@")[0]
        locked = {u.rsplit(":", 1)[0]: d for u, d in lock.get("images", {}).items()}
        if locked.get(repository) == ran:
            reasons.append((True, f"training image {repository}@{ran[:19]}…: the lock pins the same digest"))
        else:
            pin = locked.get(repository)
            reasons.append(
                (
                    False,
                    f"training image ran as {ran[:19]}…; the lock pins {pin[:19] + '…' if pin else 'no digest'}",
                )
            )
    elif ImageRef.parse(training_image) is not None:
        notes.append(
            f"the training image ran by tag ({training_image}); what the tag named then is not recorded — "
            f"`sagestack lock --env {env} --digests` and a locked synth pin it"
        )
    recorded = meta.get("sagestack:lock-sha256")
    current = files.lock_sha256 or ""
    if recorded == current:
        notes.append(f"it was registered under config/envs/{env}.lock.json as it is today")
    elif recorded:
        notes.append(
            f"config/envs/{env}.lock.json changed since it was registered ({recorded[:12]} → {current[:12]})"
        )
    return Verdict(env, all(ok for ok, _ in reasons), reasons, notes)


def launch_facts(job: dict[str, Any], hp: dict[str, Any]) -> list[tuple[str, str]]:
    """Where the job's code came from and what started it: the toolkit's hyperparameters, or (the
    SDK v3's drivers contract) its code channel and sm_train.sh."""
    if "ContainerEntrypoint" not in job.get("AlgorithmSpecification", {}):
        return [
            ("code", str(hp.get("sagemaker_submit_directory", "?")).strip('"')),
            ("entry point", str(hp.get("sagemaker_program", "?")).strip('"')),
        ]
    channels = {
        c.get("ChannelName"): c.get("DataSource", {}).get("S3DataSource", {})
        for c in job.get("InputDataConfig", [])
    }
    return [
        ("code", str(channels.get("code", {}).get("S3Uri", "?"))),
        ("entry point", "sm_train.sh (launcher: drivers; the script is named in sm_drivers/sourcecode.json)"),
    ]
