"""A drivers-contract job's launch files (`launcher: drivers`): what its `code` and `sm_drivers`
channels read, as one content-addressed folder (S3Layout.launch_files(digest): code/ and sm_drivers/
under it).

`code/` holds exactly the files the job's source archive packs (core/sourcedir.py), unpacked from
that archive; `sm_drivers/` the job's packed drivers (launcher.pack_job_drivers). The digest is a hash
of both: the same files give the same prefix on every machine, and a change of either (the code, or
the pinned sagemaker-train's drivers) gives a new one. The constructs upload the folder; `sagestack
lock` records the digest, so a change of the drivers shows in the lock's diff.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from sagestack.core.drivers import CODE_CHANNEL, DRIVERS_CHANNEL, PackedDrivers, write_drivers
from sagestack.core.sourcedir import SourceArchive, unpack_source_archive
from sagestack.training.launcher import pack_job_drivers
from sagestack.training.models import JobSpec

DIGEST_LENGTH = 16  # hex characters of the prefix's hash (64 bits, as the source asset's file name)


def launch_files_digest(source_sha256: str, drivers_sha256: str) -> str:
    """The prefix's hash: of the source archive's sha256 and the packed drivers' sha256."""
    text = f"{source_sha256}\0{drivers_sha256}".encode()
    return hashlib.sha256(text).hexdigest()[:DIGEST_LENGTH]


@dataclass(frozen=True)
class LaunchFiles:
    """One job's launch files: its source archive (unpacked under code/) and its drivers."""

    archive: SourceArchive
    drivers: PackedDrivers

    @property
    def digest(self) -> str:
        return launch_files_digest(self.archive.sha256, self.drivers.sha256)

    def write(self, dest: Path) -> None:
        """Lay the folder out as the channels read it: dest/code/…, dest/sm_drivers/…"""
        code = dest / CODE_CHANNEL
        code.mkdir(parents=True, exist_ok=True)
        unpack_source_archive(self.archive.data, code)
        write_drivers(self.drivers.files, dest / DRIVERS_CHANNEL)


def job_launch_files(job: JobSpec, archive: SourceArchive) -> LaunchFiles:
    """The launch files of a drivers job whose code packs to `archive`."""
    return LaunchFiles(archive, pack_job_drivers(job, archive.files))
