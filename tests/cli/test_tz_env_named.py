"""A TZ this terminal's learner would be made in, that names no zone: said naming TZ, with an
example (it had been "'Foo/Bar' is not a time zone name", with no word of where it came from);
glibc's path form and any name zoneinfo reads are taken; a POSIX rule (JST-9) is refused
before a learner is made in another zone, naming that zone and --timezone."""

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


def _stored_zones(tmp_path: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(tmp_path / "felab.db") as db:
        return [row[0] for row in db.execute("select timezone from members")]


@pytest.mark.parametrize("tz", ["JST-9", "UTC+5", "EST5"])
def test_a_posix_rule_is_said_before_a_learner_is_made_in_another_zone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tz: str
) -> None:
    """TZ=JST-9 had made the learner in /etc/localtime's zone (Etc/UTC) with nothing said,
    and a learner keeps the zone it is made in: it is refused, naming that zone and
    --timezone."""
    monkeypatch.setenv("TZ", tz)
    fallback = local_zone()
    result = runner.invoke(app, ["drill", "--list"])
    assert result.exit_code == 2, result.output
    assert f"the TZ environment variable is {tz!r}, a POSIX rule" in result.output
    assert f"would be made in {fallback}" in result.output
    assert "felab drill --timezone Area/City" in result.output
    assert f"--timezone {fallback}" in result.output
    assert "Traceback" not in result.output
    assert _stored_zones(tmp_path) == []
    # the advice works, and the learner made then is not stopped by the rule afterwards
    made = runner.invoke(app, ["drill", "--list", "--timezone", "Asia/Tokyo"])
    assert made.exit_code == 0, made.output
    again = runner.invoke(app, ["drill", "--list"])
    assert again.exit_code == 0, again.output
    assert _stored_zones(tmp_path) == ["Asia/Tokyo"]
