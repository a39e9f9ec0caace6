"""A card's FSRS state (card_states) held to what FSRS keeps, in a backup and in the live
database (sweep 24 t3 H2, M4): a stability of -5 or 0, a step of -4 or a difficulty of 99 had
been restored without a word, and the next `felab drill` stopped as "a bug in felab" (exit 70).
One set of bounds (felab_core/db/readable.py BOUNDS) for restore and for rating a card."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import fsrs.scheduler
import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db.readable import BOUNDS
from felab_core.settings import get_settings
from tests.db_support import CONTENT

runner = CliRunner()

#: A due time long past, so the edited card is asked again at once.
_DUE = "due = '2001-01-01 00:00:00.000000'"

CHANGES = [
    (f"UPDATE card_states SET stability = -5, {_DUE} WHERE id = 1", "stability", "-5.0"),
    (f"UPDATE card_states SET stability = 0, {_DUE} WHERE id = 1", "stability", "0"),
    (f"UPDATE card_states SET step = -4, state = 1, {_DUE} WHERE id = 1", "step", "-4"),
    (f"UPDATE card_states SET difficulty = -50, {_DUE} WHERE id = 1", "difficulty", "-50"),
    (f"UPDATE card_states SET difficulty = 99, {_DUE} WHERE id = 1", "difficulty", "99"),
    (f"UPDATE card_states SET state = 7, {_DUE} WHERE id = 1", "state", "7"),
]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A database after a first drill of day 2: card_states rows 1 and 2."""
    path = tmp_path / "felab.db"
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("TZ", "Europe/London")
    get_settings.cache_clear()
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    done = runner.invoke(app, ["drill", "--day", "2"], input="\ngood\n\nhard\n")
    assert done.exit_code == 0 and "Rated 2 of 2" in done.output, done.output
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM card_states").fetchone() == (2,)
    yield path
    get_settings.cache_clear()


def _drill_again() -> tuple[int, str]:
    done = runner.invoke(app, ["drill", "--day", "2"], input="\ngood\n\ngood\n")
    return done.exit_code, " ".join(done.output.split())


def test_the_bounds_are_fsrs_own() -> None:
    """The difficulty FSRS clamps to, 1 and 10, both kept; stability above 0 (FSRS's least is
    0.001); a step counted from 0; the three states fsrs.State has."""
    low, high, _ = BOUNDS[("card_states", "difficulty")]
    assert low < fsrs.scheduler.MIN_DIFFICULTY and high == fsrs.scheduler.MAX_DIFFICULTY
    assert low > fsrs.scheduler.MIN_DIFFICULTY - 1e-9
    assert BOUNDS[("card_states", "stability")][0] < fsrs.scheduler.STABILITY_MIN
    low, high, _ = BOUNDS[("card_states", "state")]
    assert [s for s in range(-1, 6) if low < s <= high] == [int(s) for s in fsrs.State]


@pytest.mark.parametrize(("change", "column", "shown"), CHANGES)
def test_restore_refuses_a_state_fsrs_never_keeps(
    db: Path, tmp_path: Path, change: str, column: str, shown: str
) -> None:
    backup = tmp_path / "two.bak"
    assert runner.invoke(app, ["db", "backup", str(backup)]).exit_code == 0
    edited = tmp_path / "edited.bak"
    shutil.copy(backup, edited)
    with sqlite3.connect(edited) as con:
        con.execute(change)
    before = db.read_bytes()
    done = runner.invoke(app, ["db", "restore", str(edited), "--yes"])
    said = " ".join(done.output.split())
    assert done.exit_code == 2, said
    assert re.search(rf"card_states\.{column} of row 1 \({re.escape(shown)}", said), said
    assert "nothing was replaced" in said
    assert db.read_bytes() == before
    assert runner.invoke(app, ["db", "restore", str(backup), "--yes"]).exit_code == 0


def test_restore_refuses_a_review_state_without_its_stability(db: Path, tmp_path: Path) -> None:
    """FSRS asserts a stability and a difficulty once a card is in review: the assertion had
    been the drill's 'unexpected error'."""
    backup = tmp_path / "two.bak"
    assert runner.invoke(app, ["db", "backup", str(backup)]).exit_code == 0
    with sqlite3.connect(backup) as con:
        con.execute(f"UPDATE card_states SET state = 2, stability = NULL, {_DUE} WHERE id = 1")
    done = runner.invoke(app, ["db", "restore", str(backup), "--yes"])
    said = " ".join(done.output.split())
    assert done.exit_code == 2 and "card_states row 1" in said, said
    assert "without its stability" in said


@pytest.mark.parametrize(("change", "column", "shown"), CHANGES)
def test_the_drill_names_a_live_row_fsrs_cannot_use(
    db: Path, change: str, column: str, shown: str
) -> None:
    with sqlite3.connect(db) as con:
        con.execute(change)
    code, said = _drill_again()
    assert code == 2, said
    assert "holds a value felab cannot use" in said
    assert re.search(rf"card_states\.{column} of row 1 \({re.escape(shown)}", said), said
    assert "felab db restore FILE --yes" in said and "unexpected" not in said


def test_the_drill_names_a_live_review_state_without_its_stability(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute(f"UPDATE card_states SET state = 2, stability = NULL, {_DUE} WHERE id = 1")
    code, said = _drill_again()
    assert code == 2, said
    assert "card_states.stability of row 1 (empty" in said and "unexpected" not in said


def test_the_bounds_keep_what_fsrs_writes(db: Path) -> None:
    """Difficulty exactly 1 or 10 and FSRS's least stability are what its clamps write."""
    with sqlite3.connect(db) as con:
        con.execute(
            f"UPDATE card_states SET difficulty = 1.0, stability = 0.001, {_DUE} WHERE id = 1"
        )
        con.execute(f"UPDATE card_states SET difficulty = 10.0, {_DUE} WHERE id = 2")
    code, said = _drill_again()
    assert code == 0 and "Rated 2 of 2" in said, said
