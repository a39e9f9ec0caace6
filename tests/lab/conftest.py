"""Helpers for the lab tests: an isolated felab cache, so a test never touches the real one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from felab_core.settings import get_settings


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """FELAB_CACHE_DIR pointing at an empty folder, and no engine on the PATH."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("FELAB_CACHE_DIR", str(cache))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    get_settings.cache_clear()
    yield cache
    get_settings.cache_clear()
