"""Build the example app once per module (jsii start-up is the slow part)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.support.cdk_app import BuiltApp


@pytest.fixture(scope="module")
def example_app(tmp_path_factory) -> BuiltApp:
    return BuiltApp(REPO, tmp_path_factory.mktemp("cdk.out"))
