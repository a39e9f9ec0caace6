"""A TZ this terminal's learner would be made in, that names no zone: said naming TZ, with an
example (it had been "'Foo/Bar' is not a time zone name", with no word of where it came from);
glibc's path form and any name zoneinfo reads are taken; a POSIX rule passes as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.acting_for import local_zone
from felab.cli.main import app
from felab_core.settings import get_settings

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'felab.db'}")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize("tz", ["Foo/Bar", ":Europe/Pari", "/usr/share/zoneinfo/Foo/Bar", "Mars"])
def test_a_tz_that_names_no_zone_is_said_as_tz(monkeypatch: pytest.MonkeyPatch, tz: str) -> None:
    monkeypatch.setenv("TZ", tz)
    result = runner.invoke(app, ["drill", "--list"])
    assert result.exit_code != 0, result.output
    assert f"the TZ environment variable is {tz!r}, not an IANA time zone name" in result.output
    assert "such as Europe/Paris" in result.output and "--timezone" in result.output
    assert "Traceback" not in result.output


def test_timezone_given_wins_over_a_bad_tz(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Foo/Bar")
    result = runner.invoke(app, ["drill", "--list", "--timezone", "Europe/Paris"])
    assert result.exit_code == 0, result.output


def test_a_bad_tz_does_not_stop_a_learner_already_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Paris")
    assert runner.invoke(app, ["drill", "--list"]).exit_code == 0
    monkeypatch.setenv("TZ", "Foo/Bar")  # the zone is the learner's, stored when made
    result = runner.invoke(app, ["drill", "--list"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("tz", "zone"),
    [
        ("UTC", "UTC"),
        ("/usr/share/zoneinfo/Asia/Tokyo", "Asia/Tokyo"),
        (":Europe/Paris", "Europe/Paris"),
    ],
)
def test_names_zoneinfo_reads_are_taken(
    monkeypatch: pytest.MonkeyPatch, tz: str, zone: str
) -> None:
    monkeypatch.setenv("TZ", tz)
    assert local_zone() == zone
