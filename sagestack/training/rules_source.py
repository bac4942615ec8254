"""Rules about a job's code: the folder packed as sourcedir.tar.gz (core/sourcedir.py says what is
packed) lies in the project, its entry point in it, and nothing in it leaks or breaks the packing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.core.sourcedir import IGNORE_FILE, SourceSelection, select_source_files


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _packed_folders(ctx: RuleContext) -> Iterator[tuple[str, str, SourceSelection]]:
    """(job, source_dir, what is packed) for each job whose folder exists inside the project."""
    seen: dict[str, SourceSelection] = {}
    for name, job in ctx.spec.jobs.items():
        folder = ctx.root / job.source_dir
        if not folder.is_dir() or not _inside(folder, ctx.root):
            continue  # source-dir-exists / source-dir-in-project say so
        if job.source_dir not in seen:
            seen[job.source_dir] = select_source_files(folder)
        yield name, job.source_dir, seen[job.source_dir]


@rule(
    "source-dir-in-project",
    "error",
    "a job's source_dir lies inside the project",
    why=(
        "The folder is packed and uploaded to S3 with every job; a path that leaves the project (../.., "
        "an absolute path, a symlink out) packs whatever is there on the machine that synthesizes, which "
        "git does not review and another machine does not have."
    ),
    fix="Move the code into the project (or link its files into a folder of the project) and name it "
    "relative to the project root, e.g. source_dir: training_src.",
)
def source_dir_in_project(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        folder = ctx.root / job.source_dir
        if PurePosixPath(job.source_dir).is_absolute() or not _inside(folder, ctx.root):
            yield Finding(
                ("jobs", name, "source_dir"),
                f"'{job.source_dir}' is outside the project ({folder.resolve()} is not under "
                f"{ctx.root.resolve()}); give a folder of the project, relative to its root",
            )


@rule(
    "entry-point-in-source-dir",
    "error",
    "a job's entry_point is a relative path to a file that is packed from its source_dir",
    why=(
        "The container runs entry_point from the unpacked sourcedir.tar.gz (/opt/ml/code): an absolute "
        "path or one with .. names a file of the container's own file system, and a file that "
        ".sagestackignore or the defaults leave out of the archive is not there at all."
    ),
    fix="Name the script relative to source_dir (entry_point: train.py), and keep it out of the "
    "ignored files.",
)
def entry_point_in_source_dir(ctx: RuleContext) -> Iterator[Finding]:
    packed = {name: selection for name, _, selection in _packed_folders(ctx)}
    for name, job in ctx.spec.jobs.items():
        entry = PurePosixPath(job.entry_point)
        folder = ctx.root / job.source_dir
        if entry.is_absolute() or ".." in entry.parts or "\\" in job.entry_point:
            yield Finding(
                ("jobs", name, "entry_point"),
                f"'{job.entry_point}' is not a path inside source_dir ({job.source_dir}/); give it relative "
                "to that folder, e.g. train.py",
            )
        elif (folder / entry).exists() and not _inside(folder / entry, folder):
            yield Finding(
                ("jobs", name, "entry_point"),
                f"'{job.entry_point}' leads out of {job.source_dir}/ (a symlink to "
                f"{(folder / entry).resolve()}); the container would not find it",
            )
        elif name in packed and (pattern := packed[name].excluded(entry.as_posix())) is not None:
            where = pattern.source if pattern.source != IGNORE_FILE else f"{job.source_dir}/{IGNORE_FILE}"
            yield Finding(
                ("jobs", name, "entry_point"),
                f"'{job.entry_point}' is left out of the archive by the pattern '{pattern.text}' "
                f"({where}); re-include it with '!{job.entry_point}' in {job.source_dir}/{IGNORE_FILE}",
            )


@rule(
    "source-dir-contents",
    "error",
    "every symlink in a job's source_dir points to a file inside it",
    why=(
        "A symlink to a file inside the folder is packed as that file's content; one that leads out of "
        "the folder (to ~/.aws/credentials, say), to a folder, or nowhere would pack something that "
        "depends on this machine, or nothing, without a word."
    ),
    fix="Copy the file into the folder, link each file of a folder instead of the folder, remove the "
    "dangling link, or ignore the link in <source_dir>/.sagestackignore.",
)
def source_dir_contents(ctx: RuleContext) -> Iterator[Finding]:
    for name, source_dir, selection in _packed_folders(ctx):
        for problem in selection.problems:
            yield Finding(("jobs", name, "source_dir"), f"{source_dir}/{problem}")


@rule(
    "source-dir-secrets",
    "warning",
    "no file that looks like a secret is packed with a job's code",
    why=(
        "sourcedir.tar.gz is uploaded to S3 and unpacked in every container of the job: a key, a "
        "certificate or an .env file in it reaches everyone who can read the bucket or the job. Such "
        "files are ignored by default; this warns about each one a '!' pattern packs all the same, and "
        "about each symlink that packs one under another name (settings.txt -> .env is packed with the "
        ".env file's content): a link is judged by its own name, the name each link on its way points "
        "at, and its target's path in the folder."
    ),
    fix="Remove the '!' pattern from <source_dir>/.sagestackignore (or the symlink, or ignore it there) "
    "and pass the secret at run time (Secrets Manager, an environment variable from the job's role), "
    "or rename a file that only looks like a secret.",
)
def source_dir_secrets(ctx: RuleContext) -> Iterator[Finding]:
    for name, source_dir, selection in _packed_folders(ctx):
        secrets = selection.secret_files()
        if secrets:
            shown = []
            for rel in secrets:
                alias = selection.link(rel)
                shown.append(rel if alias is None else f"{rel} (a link to {alias.target})")
            yield Finding(
                ("jobs", name, "source_dir"),
                f"{len(secrets)} file(s) of {source_dir}/ that look like secrets would be uploaded with the "
                f"code: {', '.join(shown)}",
            )
