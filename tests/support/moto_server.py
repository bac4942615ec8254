"""A moto server in this process (so tests can make it refuse requests the way AWS does), with
Step Functions executing state machines and their aws-sdk tasks sent back to it."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import requests

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoServer:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    def start(self) -> None:
        # moto's interpreter sends each aws-sdk task to localhost:$MOTO_PORT.
        os.environ["MOTO_PORT"] = str(self.port)
        self._server.start()
        requests.post(
            f"{self.url}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}}, timeout=10
        ).raise_for_status()

    def stop(self) -> None:
        # moto's backends are process-wide: every in-process server shares them. Leave none of this
        # server's resources behind for the next one (the e2e tier bootstraps CDKToolkit itself).
        requests.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()
        self._server.stop()

    def reset(self) -> None:
        requests.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()
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


@contextmanager
def running_moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
