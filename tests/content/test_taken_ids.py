"""An item id the database holds for another day is refused (sweep 24, M1: a day-03 pack took
over a loaded day-02 card, "card updated: 1", and its students' history went with it), and the
advice for a number with an exponent names a form the pack's reader accepts (M2)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.content.loader import ContentError, check_dir, parse_pack
from felab_core.content.store import check_folder, load_folder
from felab_core.content.yaml_numbers import yaml_number_form
from felab_core.db import models as m
from felab_core.settings import get_settings
from tests.db_support import CONTENT

runner = CliRunner()
DAY2 = CONTENT / "day-02.yaml"

DAY3_TAKING = """\
format: felab.content/1
id: course.day-03
day: 3
title: Batching basics
cards:
  - id: d02.card.slot-trap
    question: Why?
    answer: Because.
"""


def _said(output: str) -> str:
    return " ".join(output.split())


def test_a_card_id_of_another_loaded_day_is_refused(db: Session, tmp_path: Path) -> None:
    load_folder(db, CONTENT)
    folder = tmp_path / "xdb"
    folder.mkdir()
    (folder / "day-03.yaml").write_text(DAY3_TAKING, encoding="utf-8")
    assert check_dir(folder).ok  # within the folder alone, nothing is wrong
    (problem,) = check_folder(db, folder).problems
    said = str(problem)
    assert "cards[0].id: 'd02.card.slot-trap' is already an item of day 2" in said, said
    assert "pack 'course.day-02', day-02.yaml" in said and "this pack is day 3" in said
    assert "give it a new id" in said
    with pytest.raises(ContentError):
        load_folder(db, folder)
    card = db.scalar(select(m.Card).where(m.Card.key == "d02.card.slot-trap"))
    assert card is not None and card.question != "Why?"
    day = db.get(m.ContentDay, card.day_id)
    assert day is not None and day.number == 2


def test_a_step_id_of_another_loaded_day_is_refused(db: Session, tmp_path: Path) -> None:
    load_folder(db, CONTENT)
    step = yaml.safe_load(DAY2.read_text(encoding="utf-8"))["steps"][0]["id"]
    folder = tmp_path / "steps"
    folder.mkdir()
    text = DAY3_TAKING.replace("d02.card.slot-trap", "d03.card.new")
    text += f"steps:\n  - id: {step}\n    title: Taken\n"
    (folder / "day-03.yaml").write_text(text, encoding="utf-8")
    (problem,) = check_folder(db, folder).problems
    assert f"steps[0].id: '{step}' is already an item of day 2" in str(problem)


def test_a_card_moved_between_two_packs_of_one_load_moves(db: Session, tmp_path: Path) -> None:
    load_folder(db, CONTENT)
    folder = tmp_path / "both"
    folder.mkdir()
    day2 = yaml.safe_load(DAY2.read_text(encoding="utf-8"))
    moved = day2["cards"].pop(0)
    (folder / "day-02.yaml").write_text(yaml.safe_dump(day2, sort_keys=False), encoding="utf-8")
    (folder / "day-03.yaml").write_text(DAY3_TAKING, encoding="utf-8")
    assert moved["id"] == "d02.card.slot-trap"
    load_folder(db, folder)
    card = db.scalar(select(m.Card).where(m.Card.key == "d02.card.slot-trap"))
    assert card is not None and not card.retired
    day = db.get(m.ContentDay, card.day_id)
    assert day is not None and day.number == 3


@pytest.fixture
def own_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    database = tmp_path / "felab.db"
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{database}")
    get_settings.cache_clear()
    yield database
    get_settings.cache_clear()


def test_content_check_and_load_on_the_command_line(own_database: Path, tmp_path: Path) -> None:
    folder = tmp_path / "xdb"
    folder.mkdir()
    (folder / "day-03.yaml").write_text(DAY3_TAKING, encoding="utf-8")
    alone = runner.invoke(app, ["content", "check", str(folder)])
    assert alone.exit_code == 0, alone.output
    assert "no database yet: ids and days were checked within this folder only" in _said(
        alone.output
    )
    assert not own_database.exists()  # check makes no database
    assert runner.invoke(app, ["content", "load", str(CONTENT)]).exit_code == 0
    for command in ("check", "load"):
        out = runner.invoke(app, ["content", command, str(folder)])
        assert out.exit_code == 2, out.output
        said = _said(out.output)
        assert "'d02.card.slot-trap' is already an item of day 2 in the database" in said, said


@pytest.mark.parametrize(
    ("written", "form"),
    [("1e3", "1.0e+3"), ("1.0e3", "1.0e+3"), ("4E-2", "4.0E-2"), (".5e3", "0.5e+3")],
)
def test_the_advice_for_an_exponent_is_a_form_the_reader_accepts(
    tmp_path: Path, written: str, form: str
) -> None:
    text = DAY2.read_text(encoding="utf-8")
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("example:"))
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines[at] = f"{indent}example: {written}"
    path = tmp_path / "day-02.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    parsed, problems = parse_pack(path)
    assert parsed is None
    (said,) = [str(p) for p in problems]
    advised = yaml_number_form(written)
    assert advised is not None and advised.lower() == form.lower()
    assert f"got the text '{written}'" in said and f"write {advised}" in said, said
    lines[at] = f"{indent}example: {advised}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    parsed, problems = parse_pack(path)
    assert problems == [] and parsed is not None
    assert parsed.pack.numbers[0].example == float(written)


def test_a_quoted_number_in_the_accepted_form_is_told_to_lose_its_quotes(
    tmp_path: Path,
) -> None:
    text = DAY2.read_text(encoding="utf-8")
    edited = text.replace("example: 44.6", "example: '4.0e+1'", 1)
    assert edited != text
    path = tmp_path / "day-02.yaml"
    path.write_text(edited, encoding="utf-8")
    _, problems = parse_pack(path)
    (said,) = [str(p) for p in problems]
    assert "got the text '4.0e+1': remove the quotes" in said, said


def test_the_folder_copy_still_checks_clean(tmp_path: Path) -> None:
    shutil.copytree(CONTENT, tmp_path / "content")
    assert check_dir(tmp_path / "content").ok
