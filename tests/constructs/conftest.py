"""Build the example app once per test process (jsii start-up and a synth of every environment are
the slow part; five modules read it, none changes it)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.support.cdk_app import BuiltApp


@pytest.fixture(scope="session")
def example_app(tmp_path_factory) -> BuiltApp:
    return BuiltApp(REPO, tmp_path_factory.mktemp("cdk.out"))
