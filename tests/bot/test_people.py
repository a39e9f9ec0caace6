"""Instructors' `/leaderboard` and `/progress` (checked at run time: a student is refused) and
`/me`: machine, privacy, export as a file, delete only after the confirmation press."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_bot import numbers, people
from felab_bot.cogs.people import ConfirmDelete
from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid, NotFound
from felab_core.people.members import find_member
from tests.bot.support import CHANNEL, USER, FakeBot, chat_cohort, who_in
from tests.db_support import NOW

OLLAMA = "d02.num.ollama-writing"


@pytest.fixture
def cohort(db: Session, day2: None) -> m.Cohort:
    return chat_cohort(db)


def _instructor(db: Session, cohort: m.Cohort) -> Any:
    who = who_in(cohort, user=USER + 100, name="Prof")
    people.me_text(db, who, NOW)
    member = find_member(db, cohort.id, str(who.user_id))
    assert member is not None
    member.role = "instructor"
    db.flush()
    return who


def test_a_student_is_refused(db: Session, cohort: m.Cohort) -> None:
    with pytest.raises(Forbidden, match="only the cohort's instructors"):
        people.leaderboard_report(db, who_in(cohort), "streak", NOW)
    with pytest.raises(Forbidden, match="only the cohort's instructors"):
        people.progress_report(db, who_in(cohort), None, NOW)


def test_progress_table_and_csv(db: Session, cohort: m.Cohort) -> None:
    numbers.enter_numbers(db, who_in(cohort), {OLLAMA: "44.6"}, NOW)
    prof = _instructor(db, cohort)
    report = people.progress_report(db, prof, None, NOW)
    assert report.text.startswith("```") and "Ada" in report.text
    rows = list(csv.DictReader(io.StringIO(report.data.decode())))
    assert {r["name"] for r in rows} == {"Ada", "Prof"}
    one = people.progress_report(db, prof, USER, NOW)
    assert "Ada" in one.text and "Prof" not in one.text
    with pytest.raises(NotFound):
        people.progress_report(db, prof, 42, NOW)


def test_leaderboards_with_private_members_shown_to_instructors(
    db: Session, cohort: m.Cohort
) -> None:
    who = who_in(cohort)
    numbers.enter_numbers(db, who, {OLLAMA: "44.6"}, NOW)
    people.privacy(db, who, False, NOW)
    prof = _instructor(db, cohort)
    streak = people.leaderboard_report(db, prof, "streak", NOW)
    assert streak.file_name == "leaderboard-streak.csv"
    assert people.leaderboard_report(db, prof, "speed-ollama", NOW).text.startswith(
        "No speed-ollama"
    )  # typed-in figures are not measured ones
    with pytest.raises(Invalid, match="leaderboards are by"):
        people.leaderboard_report(db, prof, "height", NOW)


def test_me_hardware_privacy(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    assert "not set" in people.me_text(db, who, NOW)
    assert "M4 Pro" in people.hardware(db, who, "M4 Pro", None, NOW)
    assert "273 GB/s" in people.hardware(db, who, None, "273", NOW)
    with pytest.raises(Invalid):
        people.hardware(db, who, "M4 Pro", "273", NOW)
    with pytest.raises(Invalid):
        people.hardware(db, who, None, "-5", NOW)
    assert "private now" in people.privacy(db, who, False, NOW)
    assert "private" in people.me_text(db, who, NOW)


def test_export_is_json_with_the_numbers(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    numbers.enter_numbers(db, who, {OLLAMA: "44.6"}, NOW)
    report = people.export(db, who, NOW)
    data = json.loads(report.data)
    assert report.file_name == "felab-export.json"
    assert json.dumps(data).count("44.6") >= 1


def test_delete_removes_the_member(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    numbers.enter_numbers(db, who, {OLLAMA: "44.6"}, NOW)
    member = find_member(db, cohort.id, str(USER))
    assert member is not None
    people.posted_about(db, member.id, CHANNEL, 5551, "spoken answer", NOW)
    assert people.export(db, who, NOW).data.count(b'"message_id": "5551"') == 1
    deleted = people.delete(db, who)
    assert deleted.text.startswith("Deleted everything") and "1 numbers" in deleted.text
    assert find_member(db, cohort.id, str(USER)) is None
    assert (db.scalar(select(func.count(m.Number.id))) or 0) == 0
    # The post is no longer anyone's, and waits for the bot to remove it from Discord.
    [waiting] = people.posts_to_remove(db, deleted.post_ids)
    assert (waiting.channel_id, waiting.message_id) == (CHANNEL, 5551)
    people.removed_post(db, waiting.post_id)
    assert people.posts_to_remove(db) == []
    assert "holds nothing" in people.delete(db, who).text
    assert people.removed_text(2, 0, 1).startswith("Removed 2 of 3 messages")


async def test_delete_asks_first_and_only_the_asker_may_confirm(
    db: Session, cohort: m.Cohort
) -> None:
    who = who_in(cohort)
    people.me_text(db, who, NOW)
    view = ConfirmDelete(who)
    stranger: Any = type("I", (), {"user": type("U", (), {"id": USER + 1})()})()
    assert await view.interaction_check(stranger) is False
    sent: list[str] = []

    class _Response:
        async def send_message(self, text: str, **kw: Any) -> None:
            sent.append(text)

    press: Any = type(
        "I",
        (),
        {"client": FakeBot(db), "user": type("U", (), {"id": USER})(), "response": _Response()},
    )()
    assert await view.interaction_check(press) is True
    await view.keep.callback(press)
    assert sent == ["Nothing was deleted."] and find_member(db, cohort.id, str(USER))
    await ConfirmDelete(who).confirm.callback(press)
    assert sent[-1].startswith("Deleted everything")
    assert find_member(db, cohort.id, str(USER)) is None
