"""What starts a simulated host of the drivers contract inside its sandbox (local/drivers/sandbox.py).

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
  install in /opt, the system's programs in /usr/sbin) stays reachable. Then the host's file system
  is sealed (`seal`): every mount read-only but SPEC's `writable` paths (the run folder, the host's
  /opt/ml and /etc/environment, a tracking store) and /dev; /tmp is the host's own folder in the run
  folder, with what the machine's /tmp held bound back read-only. So a value that slips through
  sm_train.sh's quoting (rule drivers-shell-values) cannot write into the project, the user's home
  or the system.
"""

from __future__ import annotations

import ctypes
import errno
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
MS_NOSUID = 2
MS_NODEV = 4
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_UNBINDABLE = 1 << 17
MOUNT_ATTR_RDONLY = 0x1
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (Linux 5.12+)
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


class _MountAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("attr_set", "attr_clr", "propagation", "userns_fd")]


def _read_only(path: str, read_only: bool, *, recursive: bool) -> None:
    """mount_setattr(2): the mount at `path` (and those under it) read-only, or writable."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY if read_only else 0, 0 if read_only else MOUNT_ATTR_RDONLY, 0, 0)
    result = _libc.syscall(
        SYS_MOUNT_SETATTR,
        ctypes.c_int(AT_FDCWD),
        path.encode(),
        ctypes.c_uint(AT_RECURSIVE if recursive else 0),
        ctypes.byref(attr),
        ctypes.c_size_t(ctypes.sizeof(attr)),
    )
    _check(0 if result == 0 else -1, f"make {path} {'read-only' if read_only else 'writable'}")


def seal(writable: list[str], tmp: str, stash: Path) -> None:
    """Every mount read-only but `writable` (each bound on itself first, so that only it is made
    writable), /dev (with a /dev/shm of the host's own) and a /tmp of the host's own (`tmp`: the
    machine's /tmp entries are bound back, read-only). The stashes of the covered folders lie in
    the sandbox folder but are unbindable (`_shadow`): a writable folder's bind leaves them out."""
    _shadow(Path("/tmp"), stash / "tmp", set(), cover=tmp)
    opened = ["/dev", *(p for p in writable if os.path.lexists(p))]
    for path in opened:
        _mount(path, path, None, MS_BIND | MS_REC)
    try:
        _read_only("/", True, recursive=True)
    except OSError as e:
        if e.errno != errno.ENOSYS:
            raise
        print(
            "sagestack sandbox: this kernel has no mount_setattr (Linux 5.12+): the file system outside "
            "the run folder stays writable",
            file=sys.stderr,
            flush=True,
        )
        return
    _read_only("/tmp", False, recursive=False)  # new entries: the host's folder; the bound-back ones stay
    if os.path.isdir("/dev/shm"):  # the host's own shared memory, as a container has
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    for path in opened:
        _read_only(path, False, recursive=True)


def _shadow(folder: Path, stash: Path, skip: set[str], cover: str | None = None) -> None:
    """Cover `folder` with a tmpfs (or the folder `cover`) holding every original entry (bound back
    from `stash`), so that new entries can be made in it here without touching the machine's own
    folder."""
    stash.mkdir(parents=True, exist_ok=True)
    _mount(str(folder), str(stash), None, MS_BIND | MS_REC)
    # held open: the stash stays reachable even where the tmpfs covers its path (a run folder in /opt)
    held = os.open(stash, os.O_RDONLY | os.O_DIRECTORY)
    if cover is None:
        _mount("tmpfs", str(folder), "tmpfs", 0, "mode=755")
    else:
        Path(cover).mkdir(parents=True, exist_ok=True)
        _mount(cover, str(folder), None, MS_BIND)
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
    # the machine's folder, reachable in the sandbox folder: left out of every later bind (a writable
    # run folder's), so it is never made writable with it
    _mount(None, f"/proc/self/fd/{held}", None, MS_UNBINDABLE | MS_REC)


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
    if "writable" in spec:
        seal(list(spec["writable"]), str(spec["tmp"]), Path(spec["stash"]))
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
