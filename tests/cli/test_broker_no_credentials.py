"""A broker URL with no user and no password (`redis://host:port/0`) that Redis refuses (its
default user is off, or needs a password) was said as "refused user 'default' (a wrong
password, or the user is off)": no user was named and no password given. It is said as a login
with neither, with where they go. Real redis-server, the real command (CliRunner)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.settings import get_settings
from felab_worker.pairing import refused_user

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("FELAB_BROKER_URL", "FELAB_BROKER_PREFIX"):
        monkeypatch.setenv(var, "")  # set first, so that the undo removes what _felab sets
        monkeypatch.delenv(var)
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'felab.db'}")
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "250")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis://127.0.0.1:6390/0", "refused a login with no user and no password"),
        ("redis://admin@127.0.0.1:6390/0", "refused the user (no password was given)"),
        ("redis://admin:pw@127.0.0.1:6390/0", "refused user 'admin' (a wrong password"),
        ("redis://:pw@127.0.0.1:6390/0", "refused user 'default' (a wrong password"),
    ],
)
def test_each_login_is_said_as_it_was_given(url: str, said: str) -> None:
    words = refused_user(url)
    assert said in words
    assert "pw@" not in words


def test_a_url_with_no_user_and_no_password_is_said_so(tmp_path: Path) -> None:
    from tests.e2e.fleet import RedisServer

    (tmp_path / "redis").mkdir()
    server = RedisServer(tmp_path / "redis")
    try:
        bare = server.url.replace(f"admin:{server.password}@", "")
        assert "@" not in bare
        os.environ["FELAB_BROKER_URL"] = bare  # the autouse fixture's monkeypatch undoes it
        get_settings.cache_clear()
        for args in (
            ["status"],
            ["broker", "setup"],
            ["worker", "pair", "--code", "3F9A1C-77B2E0-0D4E21"],
        ):
            result = runner.invoke(app, args)
            flat = " ".join(result.output.split())
            assert result.exit_code == 2, (args, result.output)
            assert "refused a login with no user and no password" in flat, (args, flat)
            assert "USER:PASSWORD@ in the broker URL" in flat
            assert "'default'" not in flat and "wrong password" not in flat
    finally:
        server.stop()
