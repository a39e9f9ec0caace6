"""Say it out loud: attempts with their length and self-rating, and peers' ratings."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.drills.speaking import rate_spoken_answer, record_spoken_answer
from felab_core.errors import Forbidden, Invalid, NotFound
from felab_core.people.members import add_member, create_cohort
from tests.db_support import NOW

PROMPT = "d02.prompt.is-ollama-enough"


def test_record_and_rate(db: Session, cohort: m.Cohort, student: m.Member, day2: None) -> None:
    answer = record_spoken_answer(db, student, PROMPT, duration_s=18.2, self_rating=4, now=NOW)
    assert answer.created_at == NOW
    peer = add_member(db, cohort, "2002")
    first = rate_spoken_answer(db, peer, answer.id, 3)
    again = rate_spoken_answer(db, peer, answer.id, 5, note="crisp")
    assert first.id == again.id and again.rating == 5
    with pytest.raises(Forbidden, match="self-rating"):
        rate_spoken_answer(db, student, answer.id, 5)


def test_checks(db: Session, cohort: m.Cohort, student: m.Member, day2: None) -> None:
    with pytest.raises(Invalid, match="between 0 and 600"):
        record_spoken_answer(db, student, PROMPT, duration_s=0, self_rating=3)
    with pytest.raises(Invalid, match="1 to 5"):
        record_spoken_answer(db, student, PROMPT, duration_s=10, self_rating=6)
    with pytest.raises(NotFound):
        record_spoken_answer(db, student, "nope", duration_s=10, self_rating=3)
    answer = record_spoken_answer(db, student, PROMPT, duration_s=10, self_rating=3)
    elsewhere = create_cohort(db, "Other", timezone="UTC", start_date=cohort.start_date)
    stranger = add_member(db, elsewhere, "5005")
    with pytest.raises(Forbidden, match="same cohort"):
        rate_spoken_answer(db, stranger, answer.id, 4)


def test_prompt_of_the_day(db: Session, cohort: m.Cohort, student: m.Member, day2: None) -> None:
    from datetime import timedelta

    from felab_core.drills.speaking import prompt_of_the_day

    prompt = prompt_of_the_day(db, student, NOW)
    assert prompt is not None and prompt.key == PROMPT
    before = prompt_of_the_day(db, student, NOW - timedelta(days=30))  # Day 2's before day 2
    assert before is not None and before.key == PROMPT
    record_spoken_answer(db, student, PROMPT, duration_s=10, self_rating=3)
    again = prompt_of_the_day(db, student, NOW)  # the only prompt, answered: offered again
    assert again is not None and again.key == PROMPT
