"""Content packs: the Day 2 pack, specific errors, all-or-nothing and idempotent loading."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.content.format import Pack
from felab_core.content.loader import ContentError, check_dir, parse_pack
from felab_core.content.store import check_folder, load_folder
from felab_core.db import models as m
from felab_core.drills.review import make_scheduler, rate_card
from tests.db_support import CONTENT, NOW

DAY2 = CONTENT / "day-02.yaml"


def _raw() -> dict:
    return yaml.safe_load(DAY2.read_text(encoding="utf-8"))


def _write(folder: Path, name: str, data: dict | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- the Day 2 pack


def test_day2_pack_has_what_the_course_page_lists() -> None:
    report = check_dir(CONTENT)
    assert report.ok, report.problems
    (parsed,) = report.packs
    pack = parsed.pack
    assert pack.day == 2
    assert len(pack.cards) == 2
    assert len(pack.prompts) == 1
    assert len(pack.items_of("whiteboards")) == 2
    assert [n.server for n in pack.numbers] == ["ollama", "llamacpp", "mlx"]
    assert pack.done_when is not None
    assert pack.done_when.measured == ["ollama", "llamacpp", "mlx"]
    assert pack.numbers[0].example == 44.6
    for card in pack.cards:
        assert card.picture and card.real_numbers and card.words and card.engineer
    for board in pack.items_of("whiteboards"):
        assert board.given and board.careful and len(board.working) >= 3


def test_day2_figures_are_the_course_arithmetic() -> None:
    """The figures written in the pack are the ones the arithmetic gives."""
    text = DAY2.read_text(encoding="utf-8")
    assert 8192 // 4 == 2048 and "2,048" in text
    assert 4 * 8192 == 32768 and "32,768" in text
    assert 8234 * 16 == 131744 and "131,744" in text
    assert f"{131744 / 8192:.2f}" == "16.08" and "16.08" in text
    assert 131744 * 2 == 263488 and "263,488" in text
    assert 263488 // 4096 == 64 and 131744 // 4096 == 32
    assert f"{0.5 / 1.6:.2f}" == "0.31" and "0.31" in text
    assert round(273 / 4.9) == 56 and "56 tokens per second" in text
    assert f"{8000 / 2048:.1f}" == "3.9"


# ----------------------------------------------------------------------------- specific errors


def _problems(tmp_path: Path, data: dict | str) -> list[str]:
    path = _write(tmp_path, "day-02.yaml", data)
    parsed, problems = parse_pack(path)
    assert parsed is None
    return [str(p) for p in problems]


def test_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    data = _raw()
    del data["cards"][1]["answer"]
    (msg,) = _problems(tmp_path, data)
    assert msg.startswith(str(tmp_path / "day-02.yaml") + ":")
    assert "cards[1].answer: missing: this field is required" in msg
    line = int(msg.split(":")[1])
    lines = (tmp_path / "day-02.yaml").read_text().splitlines()
    assert "ollama-in-production" in "\n".join(lines[line - 3 : line + 1])


def test_unknown_field_is_refused(tmp_path: Path) -> None:
    data = _raw()
    data["cards"][0]["anwser"] = "typo"
    (msg,) = _problems(tmp_path, data)
    assert "cards[0].anwser: unknown field" in msg


def test_bad_id_says_what_an_id_looks_like(tmp_path: Path) -> None:
    data = _raw()
    data["whiteboards"][1]["id"] = "Board Two"
    (msg,) = _problems(tmp_path, data)
    assert "whiteboards[1].id: expected an id of 2-100 lower-case letters" in msg
    assert "'Board Two'" in msg


def test_wrong_server_lists_the_choices(tmp_path: Path) -> None:
    data = _raw()
    data["numbers"][0]["server"] = "lmstudio"
    (msg,) = _problems(tmp_path, data)
    assert "numbers[0].server: expected one of" in msg and "'lmstudio'" in msg


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda d: d.update(day=True), "day: "),  # YAML's true is not day 1
        (lambda d: d["numbers"][0].update(example="44.6"), "numbers[0].example: "),  # text
        (lambda d: d["numbers"][0].update(example=1e308), "numbers[0].example: "),
        (lambda d: d["done_when"].update(measured=["ollama", "ollama"]), "listed more than once"),
    ],
    ids=["day-true", "example-quoted", "example-1e308", "measured-twice"],
)
def test_values_yaml_reads_loosely_are_refused(
    tmp_path: Path, edit: Callable[[dict], None], says: str
) -> None:
    data = _raw()
    edit(data)
    (msg,) = _problems(tmp_path, data)
    assert says in msg, msg


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("2026-01-05", "got a date (2026-01-05)"),
        ("yes", "got true (YAML reads an unquoted yes/no/on/off as true/false)"),
        ("12", "got a number (12)"),
    ],
)
def test_unquoted_text_yaml_reads_as_another_type_says_to_quote_it(
    tmp_path: Path, value: str, says: str
) -> None:
    text = DAY2.read_text(encoding="utf-8")
    edited = re.sub(r"(?m)^title: .*$", f"title: {value}", text, count=1)
    assert edited != text
    (msg,) = _problems(tmp_path, edited)
    assert f"title: expected text, {says}: put the value in quotes" in msg, msg


def test_an_exponent_without_a_dot_says_yaml_read_it_as_text(tmp_path: Path) -> None:
    text = DAY2.read_text(encoding="utf-8")
    edited = re.sub(r"(?m)^(\s+example:) .*$", r"\1 4e1", text, count=1)
    assert edited != text
    (msg,) = _problems(tmp_path, edited)
    assert "got the text '4e1': the pack's YAML (1.1) reads an exponent" in msg, msg
    assert "write 4.0e+1" in msg, msg


def test_duplicate_id_and_unknown_step(tmp_path: Path) -> None:
    data = _raw()
    data["cards"][1]["id"] = data["cards"][0]["id"]
    data["prompts"][0]["step"] = "d02.step.nope"
    msgs = _problems(tmp_path, data)
    assert any("cards[1].id: 'd02.card.slot-trap' is already the id of cards[0]" in m for m in msgs)
    assert any("prompts[0].step: 'd02.step.nope' is not a step of this day" in m for m in msgs)


def test_invalid_yaml_gives_the_line(tmp_path: Path) -> None:
    text = DAY2.read_text(encoding="utf-8").replace("day: 2\n", "day: [2\n", 1)
    (msg,) = _problems(tmp_path, text)
    assert "not valid YAML" in msg
    assert re.search(r"day-02\.yaml:\d+:", msg)


def test_key_written_twice_is_refused(tmp_path: Path) -> None:
    text = DAY2.read_text(encoding="utf-8").replace("minutes: 10\n", "minutes: 10\nminutes: 12\n")
    msgs = _problems(tmp_path, text)
    assert any("minutes: written twice" in m for m in msgs)


def test_a_merge_key_is_refused_with_its_line(tmp_path: Path) -> None:
    """Seventeenth sweep (b) L5: `<<: {minutes: 20}` beside `minutes: 10` checked clean."""
    text = DAY2.read_text(encoding="utf-8").replace(
        "minutes: 10\n", "minutes: 10\n<<: {minutes: 20}\n"
    )
    msgs = _problems(tmp_path, text)
    assert any(re.search(r":\d+: <<: a YAML merge key", m) for m in msgs), msgs


def test_wrong_format_line(tmp_path: Path) -> None:
    data = _raw()
    data["format"] = "felab.content/9"
    (msg,) = _problems(tmp_path, data)
    assert "format: expected format: felab.content/1" in msg


def test_rules_between_files(tmp_path: Path) -> None:
    _write(tmp_path, "day-02.yaml", _raw())
    other = _raw()
    other["id"] = "course.day-02b"
    other["cards"] = other["cards"][:1]
    other["steps"], other["numbers"], other["prompts"], other["whiteboards"] = [], [], [], []
    other["cards"][0].pop("step")
    _write(tmp_path, "day-02b.yaml", other)
    msgs = [str(p) for p in check_dir(tmp_path).problems]
    assert any("day-02b.yaml: day: day 2 is also the day of day-02.yaml" in m for m in msgs)
    assert any(
        "cards[0].id: 'd02.card.slot-trap' is already used in day-02.yaml" in m for m in msgs
    )


def test_a_folder_named_like_a_pack_is_named_not_passed_over(tmp_path: Path) -> None:
    """Thirteenth sweep: a folder day-02.yaml (an archive unpacked into it) was skipped, and the
    content folder was then said to hold "no .yaml packs"."""
    (tmp_path / "day-02.yaml").mkdir()
    msgs = [str(p) for p in check_dir(tmp_path).problems]
    assert msgs == [
        f"{tmp_path / 'day-02.yaml'}: is a folder: give the pack (one day of course text) itself"
    ]


REQUIRED = [
    ("title",),
    ("cards", 0, "question"),
    ("cards", 1, "answer"),
    ("prompts", 0, "answer"),
    ("whiteboards", 0, "given"),
    ("whiteboards", 1, "careful"),
    ("whiteboards", 0, "working"),
    ("numbers", 2, "label"),
    ("steps", 0, "title"),
]


@settings(max_examples=len(REQUIRED) * 2, deadline=None)
@given(st.sampled_from(REQUIRED))
def test_any_required_field_removed_is_named(loc: tuple) -> None:
    import tempfile

    data = _raw()
    node = data
    for part in loc[:-1]:
        node = node[part]
    del node[loc[-1]]
    with tempfile.TemporaryDirectory() as tmp:
        msgs = _problems(Path(tmp), data)
    want = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
    assert any(f"{want}: missing" in m for m in msgs), msgs


def test_pack_model_round_trips_the_file() -> None:
    pack = Pack.model_validate(_raw())
    assert Pack.model_validate(pack.model_dump()) == pack


# ----------------------------------------------------------------------------- loading


def _count(db: Session, model: type) -> int:
    return db.scalar(select(func.count()).select_from(model)) or 0


def test_load_twice_changes_nothing(db: Session) -> None:
    first = load_folder(db, CONTENT)
    assert first.counts["card added"] == 2 and first.counts["whiteboard added"] == 2
    second = load_folder(db, CONTENT)
    assert not second.changed
    assert second.counts["card unchanged"] == 2
    assert _count(db, m.Card) == 2 and _count(db, m.ContentDay) == 1


def test_edited_card_updates_in_place_and_keeps_its_history(
    db: Session, tmp_path: Path, student: m.Member
) -> None:
    folder = tmp_path / "content"
    shutil.copytree(CONTENT, folder)
    load_folder(db, folder)
    card = db.scalar(select(m.Card).where(m.Card.key == "d02.card.slot-trap"))
    assert card is not None
    rate_card(db, student, card, "good", NOW, scheduler=make_scheduler(fuzz=False))
    card_id = card.id

    data = yaml.safe_load((folder / "day-02.yaml").read_text())
    data["cards"][0]["answer"] = "Each of the 4 seats gets 8,192 ÷ 4 = 2,048 tokens."
    del data["cards"][1]
    _write(folder, "day-02.yaml", data)
    report = load_folder(db, folder)
    assert report.counts["card updated"] == 1 and report.counts["card retired"] == 1

    edited = db.scalar(select(m.Card).where(m.Card.key == "d02.card.slot-trap"))
    assert edited is not None and edited.id == card_id
    assert edited.answer.startswith("Each of the 4 seats")
    assert _count(db, m.Review) == 1
    assert db.scalar(select(m.Review.card_id)) == card_id
    retired = db.scalar(select(m.Card).where(m.Card.key == "d02.card.ollama-in-production"))
    assert retired is not None and retired.retired

    # Putting it back brings the same row back to life.
    shutil.copy(CONTENT / "day-02.yaml", folder / "day-02.yaml")
    load_folder(db, folder)
    db.refresh(retired)
    assert not retired.retired


def test_a_broken_pack_never_half_loads(db: Session, tmp_path: Path) -> None:
    good = _raw()
    _write(tmp_path, "day-02.yaml", good)
    broken = _raw()
    broken.update(id="course.day-03", day=3)
    for section in ("steps", "numbers", "cards", "prompts", "whiteboards"):
        for item in broken[section]:
            item["id"] = item["id"].replace("d02", "d03")
            if "step" in item:
                item["step"] = item["step"].replace("d02", "d03")
    broken["whiteboards"][0]["working"] = []
    _write(tmp_path, "day-03.yaml", broken)
    with pytest.raises(ContentError) as exc:
        load_folder(db, tmp_path)
    assert "whiteboards[0].working: expected at least one entry" in str(exc.value)
    assert "nothing was loaded" in str(exc.value)
    assert _count(db, m.ContentPack) == 0 and _count(db, m.Card) == 0


def test_a_day_taken_by_another_pack_in_the_database_is_refused(
    db: Session, tmp_path: Path
) -> None:
    load_folder(db, CONTENT)
    other = _raw()
    other["id"] = "course.day-02-rewrite"
    for section in ("steps", "numbers", "cards", "prompts", "whiteboards"):
        for item in other[section]:
            item["id"] = item["id"] + "-v2"
            if "step" in item:
                item["step"] = item["step"] + "-v2"
    _write(tmp_path, "day-02.yaml", other)
    report = check_folder(db, tmp_path)
    assert any(
        "day 2 is already loaded from pack 'course.day-02'" in str(p) for p in report.problems
    )
    with pytest.raises(ContentError):
        load_folder(db, tmp_path)
    assert _count(db, m.Card) == 2


def test_empty_or_missing_folder_says_so(tmp_path: Path) -> None:
    assert "no .yaml packs here" in str(check_dir(tmp_path).problems[0])
    assert "does not exist" in str(check_dir(tmp_path / "nope").problems[0])
    (tmp_path / "a-file").write_text("x")
    assert "not a folder" in str(check_dir(tmp_path / "a-file").problems[0])


def test_a_field_of_a_hundred_thousand_characters_is_refused(tmp_path: Path) -> None:
    data = _raw()
    data["title"] = "x" * 100_000
    (msg,) = _problems(tmp_path, data)
    assert "title: is 100,000 characters: a pack's text is at most 10,000 a field" in msg


def test_a_long_pack_without_aliases_is_not_called_an_alias_bomb(tmp_path: Path) -> None:
    """Thirteenth sweep M4: 20,000 plain cards (1.2 MB, no alias) were refused as YAML that
    'repeats itself by reference'."""
    folder = tmp_path / "pack"
    folder.mkdir()
    cards = "".join(f"  - {{q: question {i}, a: answer {i}}}\n" for i in range(40_000))
    (folder / "day-01.yaml").write_text("format: 1\nday: 1\ncards:\n" + cards)
    _, problems = parse_pack(folder / "day-01.yaml")
    said = " ".join(p.message for p in problems)
    assert "holds more than 100,000 values: a pack is one day of course text" in said, said
    assert "alias" not in said


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("question: &a [*a]", "the alias *a refers to a value that holds it"),
        ("question: &a {k: *a}", "the alias *a refers to a value that holds it"),
        ("question: !!bool abc", "holds a YAML tag (!!bool)"),
        ("question: !!timestamp notadate", "holds a YAML tag (!!timestamp)"),
        ("question: !!float abc", "holds a YAML tag (!!float)"),
    ],
)
def test_a_recursive_alias_or_a_tag_is_refused_at_once(
    tmp_path: Path, body: str, said: str
) -> None:
    """Fifteenth sweep H6/H7/M5: `&a [*a]` spun the CPU for good; `!!bool abc` crashed
    (KeyError), `!!float abc` was called "a number of thousands of digits"."""
    (tmp_path / "day-01.yaml").write_text(f"format: 1\nday: 1\n{body}\n")
    _, problems = parse_pack(tmp_path / "day-01.yaml")
    assert [p.line for p in problems] == [3]
    assert said in problems[0].message


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("minutes: 10:00", "10:00 is read by YAML as the number 600 (base 60"),
        ("example: 44:6", "44:6 is read by YAML as the number 2646"),
        ("day: 0x2", "0x2 is read by YAML as the number 2"),
        ("day: 1_0", "1_0 is read by YAML as the number 10"),
        ("day: 012", "012 is read by YAML as the number 10"),
    ],
)
def test_a_number_yaml_reads_in_another_base_is_refused(
    tmp_path: Path, body: str, said: str
) -> None:
    """Sixteenth sweep (b) F22, fourteenth L5: `minutes: 10:00` was stored as 600 minutes and
    `example: 44:6` as 2646.0; `day: 0x2` and `1_0` were days 2 and 10."""
    (tmp_path / "day-01.yaml").write_text(f"format: 1\nday: 1\n{body}\n")
    _, problems = parse_pack(tmp_path / "day-01.yaml")
    assert [p.line for p in problems] == [3] and said in problems[0].message, problems


@pytest.mark.parametrize("body", ["title: '10:00'", 'title: "0x2"', "title: 9:30am", "day: 0"])
def test_quoted_or_plain_words_are_not_numbers(tmp_path: Path, body: str) -> None:
    (tmp_path / "day-01.yaml").write_text(f"format: 1\nday: 1\n{body}\n")
    _, problems = parse_pack(tmp_path / "day-01.yaml")
    assert not any("is read by YAML as the number" in p.message for p in problems), problems


@pytest.mark.parametrize(
    ("pattern", "value", "says"),
    [
        (r"(?m)^day: .*$", "day: yes", "day: expected a number, got true"),
        (r"(?m)^minutes: .*$", "minutes: yes", "minutes: expected a number, got true"),
        (r"(?m)^(\s+)example: 44\.6$", r"\1example: no", "example: expected a number, got false"),
    ],
    ids=["day", "minutes", "example"],
)
def test_a_yes_or_no_where_a_number_goes_is_said_as_yaml_reads_it(
    tmp_path: Path, pattern: str, value: str, says: str
) -> None:
    """Python's bool is an int: `minutes: yes` had been stored as 1 minute, and `day: yes`
    was refused as "Input should be a valid integer, got True"."""
    text = DAY2.read_text(encoding="utf-8")
    edited = re.sub(pattern, value, text, count=1)
    assert edited != text
    (msg,) = _problems(tmp_path, edited)
    assert msg.startswith(str(tmp_path / "day-02.yaml") + ":"), msg
    assert says in msg and "(YAML reads an unquoted yes/no/on/off as true/false)" in msg, msg
    key = says.split(":")[0]
    assert f"give the number, e.g. {key}: " in msg, msg


def test_a_prompt_of_on_seconds_is_refused_not_read_as_one(tmp_path: Path) -> None:
    data = _raw()
    data["prompts"] = [{"id": "d02.prompt.x", "question": "Why?", "answer": "So.", "seconds": True}]
    (msg,) = _problems(tmp_path, data)
    assert "prompts[0].seconds: expected a number, got true" in msg, msg
    assert "e.g. seconds: 20" in msg, msg


def test_a_quoted_whole_number_says_remove_the_quotes(tmp_path: Path) -> None:
    data = _raw()
    data["minutes"] = "10"
    (msg,) = _problems(tmp_path, data)
    assert "minutes: expected a whole number, got the text '10': remove the quotes" in msg, msg
