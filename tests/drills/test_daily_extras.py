"""The daily post's extras in the service: a day's prompts and whiteboards, "Said it" once a day."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.drills.review import day_drill_items, drill_item_by_id, item_of
from felab_core.drills.speaking import day_prompts, prompt_by_id, said_it, set_self_rating
from felab_core.errors import NotFound
from tests.db_support import NOW


def _day2(db: Session) -> m.ContentDay:
    return db.scalars(select(m.ContentDay).where(m.ContentDay.number == 2)).one()


def test_day_prompts_and_whiteboards_in_pack_order(db: Session, day2: None) -> None:
    day = _day2(db)
    assert [p.key for p in day_prompts(db, day)] == ["d02.prompt.is-ollama-enough"]
    boards = day_drill_items(db, day)
    assert [b.key for b in boards] == ["d02.board.vllm-blocks", "d02.board.three-flags"]
    assert {b.kind for b in boards} == {"whiteboard"}
    item = item_of(drill_item_by_id(db, boards[0].id))
    assert item.body["given"].startswith("A block is") and len(item.body["working"]) == 6
    assert item.body["careful"] and item.body["source"] == "Serving With vLLM, 2:56"
    boards[1].retired = True
    db.flush()
    assert len(day_drill_items(db, day)) == 1
    with pytest.raises(NotFound, match="this whiteboard is no longer in the course"):
        drill_item_by_id(db, boards[1].id)
    with pytest.raises(NotFound):
        prompt_by_id(db, 10**9)


def test_said_it_records_one_answer_per_local_day(
    db: Session, student: m.Member, day2: None
) -> None:
    prompt = day_prompts(db, _day2(db))[0]
    first, new = said_it(db, student, prompt, NOW, shown_at=NOW - timedelta(seconds=14.25))
    assert new and first.self_rating is None
    # What was measured, labelled as such: never the prompt's 20 s limit.
    assert (first.duration_s, first.timing) == (14.2, "prompt-to-click")
    again, new_again = said_it(db, student, prompt, NOW + timedelta(hours=2))
    assert again.id == first.id and not new_again
    set_self_rating(db, student, first.id, 4)
    tomorrow, new_tomorrow = said_it(db, student, prompt, NOW + timedelta(days=1))
    assert new_tomorrow and tomorrow.id != first.id
    count = db.scalar(
        select(func.count(m.SpokenAnswer.id)).where(m.SpokenAnswer.member_id == student.id)
    )
    assert count == 2
    # Pressed hours after the prompt was posted (or with no prompt time): kept, untimed.
    assert (tomorrow.duration_s, tomorrow.timing) == (None, "untimed")
    later, _ = said_it(
        db, student, prompt, NOW + timedelta(days=2), shown_at=NOW + timedelta(days=1, hours=23)
    )
    assert (later.duration_s, later.timing) == (None, "untimed")
