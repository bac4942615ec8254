from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.site import build


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    done = build(site)
    assert done.returncode == 0, done.stderr[-4000:]
    return site
