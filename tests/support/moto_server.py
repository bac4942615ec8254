"""A moto server in this process (so tests can make it refuse requests the way AWS does), with
Step Functions executing state machines and their aws-sdk tasks sent back to it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import requests

from sagestack.local.training.processes import free_port as outside_ephemeral

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account


def free_port() -> int:
    """A free port outside the kernel's ephemeral range (the servers bind it seconds later)."""
    return outside_ephemeral()


class MotoServer:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        # The seconds each Retry of a state asked to wait, in order (cleared by reset): moto's interpreter
        # runs every retry, but does not sleep them here (see _RetryWaits).
        self.retry_waits: list[float] = []

    def start(self) -> None:
        # moto's interpreter sends each aws-sdk task to localhost:$MOTO_PORT.
        os.environ["MOTO_PORT"] = str(self.port)
        _RetryWaits.install(self.retry_waits)
        self._server.start()
        requests.post(
            f"{self.url}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}}, timeout=10
        ).raise_for_status()

    def stop(self) -> None:
        # moto's backends are process-wide: every in-process server shares them. Leave none of this
        # server's resources behind for the next one (the e2e tier bootstraps CDKToolkit itself).
        requests.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()
        self._server.stop()
        _RetryWaits.uninstall()

    def reset(self) -> None:
        requests.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()
        self.retry_waits.clear()
        requests.post(
            f"{self.url}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}}, timeout=10
        ).raise_for_status()

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


class _RetryWaits:
    """moto's Step Functions interpreter sleeps a Retry's interval for real (IntervalSeconds x BackoffRate^n:
    2 + 4 + 8 s for a quota read moto cannot answer, 5 + 10 + 20 s for a describe). Here each wait is
    recorded in the server's retry_waits and not slept: every attempt still runs, in the same order, with
    the same outcome; only the wall-clock pause is left out (the suite's pipeline runs spent most of their
    time in it)."""

    _original: Any = None

    def __init__(self, waits: list[float]) -> None:
        self._waits = waits

    def sleep(self, seconds: float) -> None:
        self._waits.append(seconds)

    @classmethod
    def install(cls, waits: list[float]) -> None:
        from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

        if cls._original is None:
            cls._original = retrier_decl.time
        retrier_decl.time = cls(waits)  # type: ignore[assignment]

    @classmethod
    def uninstall(cls) -> None:
        from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

        if cls._original is not None:
            retrier_decl.time = cls._original
            cls._original = None


@contextmanager
def running_moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def jayway_json_paths(monkeypatch: Any) -> None:
    """Make moto's Step Functions interpreter evaluate an indefinite JSONPath (a filter, a deep scan,
    a wildcard, a slice) as AWS does with Jayway JsonPath: always a JSON array of every match,
    possibly empty. moto's port (from LocalStack) fails on a filter with no match and unwraps a single
    match — localstack discussion #64 ("filter projection loses its array shape for zero or one match")."""
    import importlib
    import re

    from jsonpath_ng.ext import parse
    from moto.stepfunctions.parser.asl.utils import json_path

    original = json_path.extract_json
    indefinite = re.compile(r"\[\?\(|\.\.|\[\*\]|\[-?\d*:-?\d*\]")

    def extract_json(path: str, data: Any) -> Any:
        if indefinite.search(path):
            return [m.value for m in parse(path).find(data)]
        return original(path, data)

    for module in (
        "moto.stepfunctions.parser.asl.utils.json_path",
        "moto.stepfunctions.parser.asl.component.common.string.string_expression",
        "moto.stepfunctions.parser.asl.component.intrinsic.argument.argument",
    ):
        monkeypatch.setattr(importlib.import_module(module), "extract_json", extract_json)
