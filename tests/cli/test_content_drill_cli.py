"""`felab content check|load`, `felab db` and `felab drill` on an embedded SQLite database."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.settings import get_settings
from tests.db_support import CONTENT

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'felab.db'}")
    monkeypatch.setenv("TZ", "Europe/London")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_check_and_load_are_idempotent() -> None:
    result = runner.invoke(app, ["content", "check", str(CONTENT)])
    assert result.exit_code == 0, result.output
    assert "day-02.yaml" in result.output
    first = runner.invoke(app, ["content", "load", str(CONTENT)])
    assert first.exit_code == 0, first.output
    assert "card added: 2" in first.output
    second = runner.invoke(app, ["content", "load", str(CONTENT)])
    assert second.exit_code == 0 and "nothing changed" in second.output
    status = runner.invoke(app, ["db", "status"])
    assert "(current)" in status.output


def test_problems_name_file_field_and_exit_1(tmp_path: Path) -> None:
    folder = tmp_path / "content"
    shutil.copytree(CONTENT, folder)
    data = yaml.safe_load((folder / "day-02.yaml").read_text())
    del data["whiteboards"][0]["careful"]
    (folder / "day-02.yaml").write_text(yaml.safe_dump(data))
    for cmd in ("check", "load"):
        result = runner.invoke(app, ["content", cmd, str(folder)])
        assert result.exit_code == 2
        assert "day-02.yaml:" in result.output
        assert "whiteboards[0].careful: missing" in result.output


def test_drill_reveal_and_rate() -> None:
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    listed = runner.invoke(app, ["drill", "--list", "--day", "2"])
    assert listed.exit_code == 0, listed.output
    assert "2 cards today" in listed.output and "[new] day 2" in listed.output
    # First card: reveal, a wrong key, then good. Second card: reveal, easy.
    session = runner.invoke(app, ["drill", "--plain"], input="\nMaybe\nG\n\ne\n")
    assert session.exit_code == 0, session.output
    assert "In plain words" in session.output and "Picture it" in session.output
    assert "'Maybe' is not a rating" in session.output  # as typed, capital kept
    assert "good: back" in session.output and "easy: back" in session.output
    assert "Rated 2 of 2" in session.output and "Streak: 1 day (best 1)" in session.output
    again = runner.invoke(app, ["drill", "--list"])
    assert "Nothing due right now" in again.output


def test_drill_on_a_day_without_a_pack() -> None:
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    result = runner.invoke(app, ["drill", "--day", "5"], input="q\n")
    assert result.exit_code == 0, result.output
    assert "Day 5: no drill today" in result.output
    assert "Question (from day 2)" in result.output  # earlier days' cards still come
    assert "Rated 0 of 2" in result.output


def test_end_of_input_ends_the_session_quietly() -> None:
    """Ctrl-D (or a closed stdin) is quitting: no 'Aborted.', exit 0, nothing rated."""
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    for typed in ("", "\n"):  # at the question, then at the rating
        result = runner.invoke(app, ["drill", "--day", "2"], input=typed)
        assert result.exit_code == 0, result.output
        assert "Aborted" not in result.output and "Rated 0 of 2" in result.output


def test_drill_for_an_unknown_cohort_says_so() -> None:
    result = runner.invoke(app, ["drill", "--member", "123", "--cohort", "99"])
    assert result.exit_code == 2
    assert "no cohort 99" in result.output


def test_a_closed_stdin_is_end_of_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """`felab drill <&-` leaves Python no sys.stdin at all: quitting, not a crash."""
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    from felab.cli import drill

    monkeypatch.setattr(drill.sys, "stdin", None)
    assert drill._ask("Enter to show the answer") is None


def test_junk_typed_as_a_rating_is_not_repeated_whole() -> None:
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    junk = "x" * 500
    result = runner.invoke(app, ["drill", "--day", "2"], input=f"\n{junk}\nq\n")
    assert result.exit_code == 0, result.output
    assert "not a rating" in result.output and junk not in result.output
    assert "'" + "x" * 40 + "'..." in result.output


def test_reply_after_reply_that_is_no_rating_ends_the_drill() -> None:
    """Thirteenth sweep H4: `yes | felab drill` asked again for good (126,490 lines in 10 s)."""
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    result = runner.invoke(app, ["drill", "--day", "2"], input="\n" + "y\n" * 1000)
    assert result.exit_code == 2, result.output
    assert result.output.count("'y' is not a rating") == 11
    assert "11 replies in a row were not ratings" in result.output
    assert "rated 0 of 2: those are kept" in result.output
