"""Serve a model folder through the PyTorch inference container's own stack, on this machine.

What the SageMaker PyTorch inference image runs at start (its entry point, `serving.main()` of
sagemaker-pytorch-inference): the toolkit writes /etc/sagemaker-ts.properties from the
environment (SAGEMAKER_TS_* batching, workers, the handler) and starts TorchServe (Java) with the
model folder; TorchServe's Python workers call the handler. Stood in for, and nothing else:
- /opt/ml is SAGEMAKER_BASE_DIR=<a folder of ours>/ (the toolkit honours it): the model is
  <base>/model, its code <base>/model/code;
- /etc is an overlay in a private mount namespace (`unshare -m`, root only), so the properties
  file the toolkit writes never reaches the machine's /etc;
- TS_INFERENCE_ADDRESS / TS_MANAGEMENT_ADDRESS / TS_METRICS_ADDRESS keep TorchServe on loopback
  ports of our choosing (the container's properties enable TS_* variables).
The toolkit refuses to start beside another TorchServe on the machine, so users of this module
take a lock first. /ping answers before the workers have loaded the model: readiness is a good
POST /invocations answered 200.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from sagestack.local.training.processes import free_port

BIN = Path(sys.executable).parent
LOCK = Path(tempfile.gettempdir()) / "sagestack-torchserve.lock"
_HELD: list[ContainerServer] = []  # a second server in the same process would wait on its own lock

SCRIPT = r"""
set -eu
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
cd "$1/cwd"
exec "$PYTHON" -c 'from sagemaker_pytorch_serving_container import serving; serving.main()'
"""


def missing() -> str | None:
    """Why the container stack cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "serving through the container stack needs root (a private mount namespace)"
    if shutil.which("java") is None:
        return "TorchServe needs Java: make setup installs Debian's openjdk-17-jre-headless"
    if not (BIN / "torchserve").exists():
        return "TorchServe is not installed: make setup installs the conformance extra"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is missing"
    return None


def _free_port() -> int:
    return free_port()  # outside the ephemeral range: Java binds it seconds later


class ContainerServer:
    """`with ContainerServer(model_dir, env) as url:` — the model served as the container serves it.

    env: the model's container environment (what the endpoint's Model sets, e.g. the batching
    variables); SAGEMAKER_PROGRAM is inference.py as in every package sagestack registers.
    probe: a (body, content type) the model answers with 200, to tell when the workers are up.
    """

    def __init__(
        self,
        model_dir: Path,
        env: dict[str, str] | None = None,
        *,
        probe: tuple[bytes, str],
        startup_timeout: float = 240,
    ) -> None:
        self.model_dir = model_dir
        self.env = dict(env or {})
        self.probe = probe
        self.startup_timeout = startup_timeout
        self.port = 0
        self.work: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def logs(self) -> Path:
        assert self.work is not None
        return self.work / "logs"

    def log_text(self) -> str:
        parts = []
        for name in ("out.log", "logs/model_log.log", "logs/ts_log.log"):
            path = (self.work or Path("/nonexistent")) / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def __enter__(self) -> str:
        reason = missing()
        if reason:
            raise RuntimeError(reason)
        if _HELD:
            raise RuntimeError("a ContainerServer is already running in this process; stop it first")
        self._lock = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # one TorchServe on the machine at a time
        _HELD.append(self)
        try:
            return self._start()
        except BaseException:
            self.__exit__()
            raise

    def _start(self) -> str:
        self.work = Path(tempfile.mkdtemp(prefix="sagestack-ts-"))
        for sub in ("upper", "work", "cwd", "logs", "base"):
            (self.work / sub).mkdir()
        shutil.copytree(self.model_dir, self.work / "base" / "model")
        self.port = _free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SAGEMAKER_", "TS_"))},
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHON": sys.executable,
            "SAGEMAKER_BASE_DIR": str(self.work / "base"),
            "SAGEMAKER_PROGRAM": "inference.py",
            "TS_INFERENCE_ADDRESS": self.url,
            "TS_MANAGEMENT_ADDRESS": f"http://127.0.0.1:{_free_port()}",
            "TS_METRICS_ADDRESS": f"http://127.0.0.1:{_free_port()}",
            "LOG_LOCATION": str(self.logs),
            "METRICS_LOCATION": str(self.logs),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        with open(self.work / "out.log", "wb") as out:
            self.proc = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "bash", "-c", SCRIPT, "ts", str(self.work)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # TorchServe, its Java and its workers: one process group
            )
        deadline = time.monotonic() + self.startup_timeout
        body, content_type = self.probe
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the container stack exited ({self.proc.returncode}):\n{self.log_text()}")
            try:
                request = urllib.request.Request(
                    f"{self.url}/invocations", data=body, headers={"Content-Type": content_type}
                )
                with urllib.request.urlopen(request, timeout=10) as resp:
                    if resp.status == 200:
                        return self.url
            except (OSError, urllib.error.HTTPError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no answer from the container stack in {self.startup_timeout:.0f} s:\n{self.log_text()}"
                )
            time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.proc is not None:
            # whatever of the group outlived the leader (TorchServe, its workers)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None
            _HELD.remove(self)
        if self.work is not None and os.environ.get("SAGESTACK_KEEP_TS_LOGS") != "1":
            shutil.rmtree(self.work, ignore_errors=True)


def batch_sizes(model_log: str) -> list[int]:
    """The batch sizes inference.py's handler logged (SAGESTACK_SERVE_LOG_BATCHES=1)."""
    sizes = []
    for line in model_log.splitlines():
        _, found, rest = line.partition("sagestack batch: requests=")
        if found:
            sizes.append(int(rest.split()[0]))
    return sizes


def json_probe(sample_shape: tuple[int, ...]) -> tuple[bytes, str]:
    import numpy as np

    return json.dumps(np.zeros(sample_shape, dtype=np.float32).tolist()).encode(), "application/json"
