"""Rules about the foundation: references between entries, files that must exist, data retention,
images that exist in the project's region."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sagestack.core.catalog.images import ImageLookupError, dlc_image_uri, smp_image_uri
from sagestack.core.catalog.instances import is_retired
from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.config import ENV_DIR, PROJECT_FILE, list_environments
from sagestack.core.errors import SpecError
from sagestack.core.names import CLUSTER_TAG, ENDPOINT_TAG
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.core.yamldoc import read_yaml

PROTECTED_ENV_PREFIXES = ("prod",)


@rule(
    "image-reference",
    "error",
    "a job's image names an entry of images:",
    why=(
        "A job runs the container named by its image: key; a name that is not "
        "under images: has no URI, so nothing could be rendered or deployed."
    ),
    fix="Define the image under images: (dlc:, uri: or dockerfile:) or correct the job's image: key.",
)
def image_reference(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if job.image not in ctx.spec.images:
            yield Finding(
                ("jobs", name, "image"),
                f"image '{job.image}' is not defined under images:{did_you_mean(job.image, ctx.spec.images)} "
                f"(defined: {', '.join(ctx.spec.images) or 'none'})",
            )


@rule(
    "tuning-job-reference",
    "error",
    "a tuning entry names a job of jobs:",
    why=(
        "A tuning job runs trials of one training job's definition; without "
        "it there is no image, code, instance type or metric to search with."
    ),
    fix="Point tuning.<name>.job at a key of jobs:.",
)
def tuning_job_reference(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.tuning.items():
        if t.job not in ctx.spec.jobs:
            yield Finding(
                ("tuning", name, "job"),
                f"job '{t.job}' is not defined under jobs:{did_you_mean(t.job, ctx.spec.jobs)}",
            )


@rule(
    "dockerfile-exists",
    "error",
    "an image built from a Dockerfile points at a folder holding one",
    why=(
        "cdk deploy builds a dockerfile: image from its folder; a missing folder "
        "or Dockerfile fails the deploy after the other stacks have changed."
    ),
    fix="Create <folder>/Dockerfile, or fix the path (relative to the project root).",
)
def dockerfile_exists(ctx: RuleContext) -> Iterator[Finding]:
    for name, image in ctx.spec.images.items():
        build = image.dockerfile_spec
        if build is None:
            continue
        folder = ctx.root / build.directory
        if not (folder / "Dockerfile").is_file():
            yield Finding(
                ("images", name, "dockerfile"),
                f"{build.directory}/Dockerfile does not exist (paths are relative to the project root)",
            )


@rule(
    "source-dir-exists",
    "error",
    "a job's source_dir exists and holds its entry_point",
    why=(
        "The source folder is packed as sourcedir.tar.gz and the container runs entry_point from it; the "
        "toolkit fails the job at start-up (after paying for the instances) when the file is missing."
    ),
    fix="Create the folder and entry point, or fix source_dir / entry_point.",
)
def source_dir_exists(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        src = ctx.root / job.source_dir
        if not src.is_dir():
            yield Finding(("jobs", name, "source_dir"), f"folder '{job.source_dir}' does not exist")
        elif not (src / job.entry_point).is_file():
            present = sorted(p.name for p in src.glob("*.py"))
            yield Finding(
                ("jobs", name, "entry_point"),
                f"'{job.entry_point}' is not in {job.source_dir}/{did_you_mean(job.entry_point, present)}",
            )


@rule(
    "prod-retains-data",
    "error",
    "a production environment keeps its buckets, keys and repositories",
    why=(
        "An environment whose name starts with 'prod' holds data you cannot rebuild: deleting "
        "its stack with retain_data: false would delete its buckets, keys and repositories."
    ),
    fix="Set retain_data: true in config/envs/<env>.yaml (or rename a throwaway environment).",
)
def prod_retains_data(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.env and ctx.env.startswith(PROTECTED_ENV_PREFIXES) and not ctx.spec.retain_data:
        yield Finding(
            ("retain_data",),
            f"environment '{ctx.env}' must retain its data (checkpoints, models, keys); "
            "remove retain_data: false from its overlay",
        )


@rule(
    "dlc-in-region",
    "error",
    "every DLC image exists in the project's region for the instances that use it",
    why=(
        "AWS Deep Learning Containers are published per region, framework version and processor; a "
        "combination that does not exist makes CreateTrainingJob fail with 'image does not exist'."
    ),
    fix=(
        "Choose a framework version published for the region "
        "and instance type (see `sagestack plan`), or use uri:."
    ),
)
def dlc_in_region(ctx: RuleContext) -> Iterator[Finding]:
    used: dict[str, list[str]] = {}
    smp_used: dict[str, list[str]] = {}
    for job in ctx.spec.jobs.values():
        # a retired type is the retired-instance-type rule's finding, on the instance_type key
        current = [t for t in job.instance_type if not is_retired(t)]
        (smp_used if job.uses_smp_v2 else used).setdefault(job.image, []).extend(current)
    # An image only an endpoint's image: names is an inference DLC (endpoint-inference-image checks it).
    serving_only = {ep.image for ep in ctx.spec.endpoints.values() if ep.image} - set(used) - set(smp_used)
    for name, image in ctx.spec.images.items():
        if image.dlc is None or name in serving_only:
            continue
        dlc = image.dlc
        seen: set[str] = set()
        plain = used.get(name) or ([] if smp_used.get(name) else ["ml.m5.xlarge"])
        for itype, smp in [(t, False) for t in plain] + [(t, True) for t in smp_used.get(name, [])]:
            try:
                if smp:
                    smp_image_uri(dlc.version, dlc.py_version, region=ctx.spec.region, instance_type=itype)
                else:
                    dlc_image_uri(
                        dlc.framework,
                        dlc.version,
                        dlc.py_version,
                        region=ctx.spec.region,
                        instance_type=itype,
                    )
            except ImageLookupError as e:
                if str(e) not in seen:
                    seen.add(str(e))
                    kind = "SMP v2 " if smp else ""
                    yield Finding(
                        ("images", name, "dlc"),
                        f"no {kind}{dlc.framework} container for {itype} in {ctx.spec.region}: {e}",
                    )


@rule(
    "tag-limits",
    "error",
    "tags fit AWS's limits with sagestack's own (≤ 50 a resource, key ≤ 128, value ≤ 256, no aws:)",
    why=(
        "AWS rejects a resource with more than 50 tags, keys over 128 or values over 256 "
        "characters, or keys starting with aws: — and CloudFormation rolls the whole stack back. "
        "sagestack adds its own tags beside yours: sagestack:project and sagestack:environment "
        "everywhere, sagestack:endpoint on an endpoint's resources, sagestack:cluster on a cluster, "
        "a job's own tags with sagestack:job and sagestack:spec-hash on its training jobs, and "
        "sagestack:tuning on a search's."
    ),
    fix="Shorten or drop tags, so that yours and sagestack's on one resource are 50 at most.",
)
def tag_limits(ctx: RuleContext) -> Iterator[Finding]:
    tags = ctx.spec.tags
    added, where = max(sagestack_tags(ctx.spec), key=lambda a: len(a[0]))
    limit = MAX_TAGS - len(added - set(tags))
    if len(tags) > limit:
        # located at the first tag over the limit, where it is written: an overlay's tags come
        # after the project file's, so one that adds too many is pointed at, not the project file
        over = len(tags) - limit - 1
        yield Finding(
            ("tags", list(tags)[limit]),
            f"{len(tags)} tags given; with the {len(added - set(tags))} sagestack adds to {where}, "
            f"AWS's {MAX_TAGS} a resource leave room for {limit}: drop this one"
            + (f" and the {over} after it" if over else ""),
        )
    else:
        for key, job in ctx.spec.jobs.items():
            own = [k for k in job.tags if k not in tags]
            search = TUNING_TAG if _searched(ctx.spec, key) else ()
            room = MAX_TAGS - len(set(tags) | _JOB_TAGS | set(search))
            if len(own) > room:
                yield Finding(
                    ("jobs", key, "tags", own[room]),
                    f"job {key}: {len(own)} tags of its own beside the project's {len(tags)} and "
                    f"sagestack's; AWS's {MAX_TAGS} a resource leave room for {room}: drop this one"
                    + (f" and the {len(own) - room - 1} after it" if len(own) - room > 1 else ""),
                )
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            yield Finding(("tags", key), "tag keys starting with 'aws:' are reserved by AWS")
        if not 1 <= len(key) <= 128:
            yield Finding(("tags", key), f"tag key is {len(key)} characters; allowed 1-128")
        if len(value) > 256:
            yield Finding(("tags", key), f"tag value is {len(value)} characters; allowed at most 256")


MAX_TAGS = 50  # CreateTrainingJob's Tags (botocore: max 50), CloudFormation's Tags on every resource
_ENV_TAGS = frozenset(("sagestack:project", "sagestack:environment"))  # Names.tags
_JOB_TAGS = _ENV_TAGS | {"sagestack:job", "sagestack:spec-hash"}  # training/request.py
TUNING_TAG = ("sagestack:tuning",)  # tuning/request.py


def _searched(spec: Any, job: str) -> bool:
    return any(t.job == job for t in spec.tuning.values())


def sagestack_tags(spec: Any) -> list[tuple[frozenset[str], str]]:
    """The tag keys sagestack puts on each kind of resource this spec creates (beside the spec's
    `tags:` and a job's own), and where: what the limit of 50 a resource is counted against."""
    out = [(_ENV_TAGS, "every resource")]
    if spec.endpoints:
        out.append((_ENV_TAGS | {ENDPOINT_TAG}, "an endpoint's resources"))
    if spec.clusters:
        out.append((_ENV_TAGS | {CLUSTER_TAG}, "a cluster"))
    for key in spec.jobs:
        search = TUNING_TAG if _searched(spec, key) else ()
        what = f"job {key}'s {'searches' if search else 'training jobs'}"
        out.append((_JOB_TAGS | set(search), what))
    return out


@rule(
    "environment-name-overlap",
    "warning",
    "no two environments that may share an account have names where one is the other and a '-'",
    why=(
        "Every name sagestack gives an environment's resources starts with '<project>-<env>-'; an "
        "environment 'dev-eu' beside 'dev' starts with 'digits-dev-' too. sagestack holds every "
        "SageMaker grant to the environment's tags as well, so neither environment's roles can touch "
        "the other's jobs and models, but in one account the names themselves can collide (dev's job "
        "'eu-x' and dev-eu's job 'x' are both 'digits-dev-eu-x'), and the console, the CLI and any "
        "policy of your own that filters by 'digits-dev-*' mix the two environments."
    ),
    fix=(
        "Rename one environment so that neither name is the other followed by '-' (e.g. 'dev' and "
        "'eu-dev' instead of 'dev' and 'dev-eu'), or deploy them to different accounts (account:)."
    ),
)
def environment_name_overlap(ctx: RuleContext) -> Iterator[Finding]:
    if ctx.env is None:
        return
    mine = f"{ctx.env}-"
    for other in list_environments(ctx.root):
        theirs = f"{other}-"
        if other == ctx.env or not (theirs.startswith(mine) or mine.startswith(theirs)):
            continue
        account = declared_account(ctx.root, other)
        if account and ctx.spec.account and account != ctx.spec.account:
            continue  # two accounts: nothing is shared
        where = f"account {account}" if account and account == ctx.spec.account else "one account"
        longer, shorter = (ctx.env, other) if len(ctx.env) > len(other) else (other, ctx.env)
        yield Finding(
            ("account",) if ctx.spec.account else ("project",),
            f"environments '{shorter}' and '{longer}' may share {where}: every name of '{longer}' "
            f"('{ctx.spec.project}-{longer}-…') also starts with '{ctx.spec.project}-{shorter}-'; "
            f"rename one (e.g. '{longer.removeprefix(shorter + '-')}-{shorter}'), or give them "
            "different accounts",
        )


def declared_account(root: Path, env: str) -> str | None:
    """The account an environment's files declare (its overlay's, else the project file's): read
    from the files, not by loading the environment (whose own rules would read this one's)."""
    for display in (f"{ENV_DIR}/{env}.yaml", PROJECT_FILE):
        try:
            data = read_yaml(root / display, display).data
        except SpecError:
            return None  # that environment's own load reports it
        if isinstance(data, dict) and data.get("account") is not None:
            return str(data["account"])
    return None
