"""A redis-server of the test's own for each worker test that asks for `broker`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.fleet import RedisServer


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)  # on a free port, stopped by its PID
    yield server
    server.stop()
