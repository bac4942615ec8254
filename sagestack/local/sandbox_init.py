"""What starts a simulated host of the drivers contract inside its sandbox (local/sandbox.py).

Run as a script (standard library only, like guard.py), in one of two modes:

- `sandbox_init.py --hold`: the run's network. Started under `unshare --net` (as root) or
  `unshare --user --map-root-user --net` (as a normal user), it brings the new namespace's loopback
  up, prints its pid and `ready`, and waits until it is killed. Every host of the run joins that
  namespace, so the drivers' fixed ports (torchrun's 7777 on every interface, sshd's 22) belong to
  the run alone: two runs at once never meet.
- `sandbox_init.py SPEC.json -- COMMAND…`: one host. It joins the holder's (user and) network
  namespace, makes a mount namespace of its own (mounts private: nothing leaks out), places each of
  SPEC's files over its container path (/opt/ml, /etc/hosts, /etc/environment, /usr/sbin/sshd),
  then runs COMMAND in SPEC's folder with exactly SPEC's environment (what the platform gives a
  container, no more). A path that does not exist is made inside the namespace only: its folder is
  covered by a tmpfs on which every original entry is bound back, so what the folder held (a conda
  install in /opt, the system's programs in /usr/sbin) stays reachable.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import socket
import struct
import sys
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
_IFREQ = "16sH22x"  # struct ifreq: the name, the flags, padded to its 40 bytes

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    _check(
        _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {source} on {target}",
    )


def loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | IFF_UP))


def hold() -> None:
    loopback_up()
    print(os.getpid(), "ready", flush=True)
    while True:
        signal.pause()


def _join(holder: int, user: bool) -> None:
    kinds = [("user", CLONE_NEWUSER)] if user else []
    for name, kind in [*kinds, ("net", CLONE_NEWNET)]:
        fd = os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY)
        try:
            _check(_libc.setns(fd, kind), f"setns {name} of process {holder}")
        finally:
            os.close(fd)
    _check(_libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def _shadow(folder: Path, stash: Path, skip: set[str]) -> None:
    """Cover `folder` with a tmpfs holding every original entry (bound back from `stash`), so that
    new entries can be made in it here without touching the machine's own folder."""
    stash.mkdir(parents=True, exist_ok=True)
    _mount(str(folder), str(stash), None, MS_BIND | MS_REC)
    # held open: the stash stays reachable even where the tmpfs covers its path (a run folder in /opt)
    held = os.open(stash, os.O_RDONLY | os.O_DIRECTORY)
    _mount("tmpfs", str(folder), "tmpfs", 0, "mode=755")
    for entry in os.scandir(held):
        if entry.name in skip:
            continue
        source, target = f"/proc/self/fd/{held}/{entry.name}", folder / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(source), target)
            continue
        if entry.is_dir(follow_symlinks=False):
            target.mkdir()
        else:
            target.touch()
        _mount(source, str(target), None, MS_BIND | MS_REC)


def place(files: dict[str, str], stash: Path) -> None:
    """Each source bound over its container path, made first where it does not exist."""
    missing = [Path(t) for t in files if not os.path.lexists(t)]
    for index, folder in enumerate(sorted({t.parent for t in missing})):
        if not folder.is_dir():
            raise OSError(f"{folder} does not exist on this machine; the sandbox cannot make {folder}")
        _shadow(folder, stash / str(index), {t.name for t in missing if t.parent == folder})
    for target, source in files.items():
        path = Path(target)
        if not os.path.lexists(path):
            if Path(source).is_dir():
                path.mkdir()
            else:
                path.touch()
        _mount(source, target, None, MS_BIND | MS_REC)


def run_host(spec_file: str, command: list[str]) -> None:
    spec = json.loads(Path(spec_file).read_text())
    _join(int(spec["holder"]), bool(spec["user"]))
    place(dict(spec["files"]), Path(spec["stash"]))
    os.chdir(spec["cwd"])
    environment = dict(spec["environment"])
    os.execvpe(command[0], command, environment)


def main(argv: list[str]) -> None:
    if argv == ["--hold"]:
        hold()
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: sandbox_init.py --hold | sandbox_init.py SPEC.json -- COMMAND [ARG...]")
    try:
        run_host(argv[0], argv[2:])
    except OSError as e:
        sys.exit(f"sagestack sandbox: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
