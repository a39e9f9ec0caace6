"""FSRS drills: what is due and in what order, ratings, streaks in members' own zones, retention."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.content.loader import parse_pack
from felab_core.content.store import LoadReport, load_packs
from felab_core.db import models as m
from felab_core.drills.review import (
    Grade,
    _streak_step,
    card_retention,
    cards_due,
    end_of_local_day,
    make_scheduler,
    member_retention,
    parse_grade,
    rate_card,
    recompute_stats,
    streak,
)
from felab_core.errors import Invalid
from felab_core.people.members import add_member, set_timezone
from tests.db_support import NOW

SCHED = make_scheduler(fuzz=False)


def _rate(db: Session, member: m.Member, key: str, grade: str, when: datetime) -> None:
    rate_card(db, member, key, grade, when, scheduler=SCHED)


def _day1(db: Session) -> None:
    """A one-card Day 1 pack, so catch-up and reviews have something from an earlier day."""
    import tempfile
    from pathlib import Path

    text = (
        "format: felab.content/1\nid: course.day-01\nday: 1\ntitle: Day one\n"
        "cards:\n  - id: d01.card.tokens\n    question: What is a token?\n"
        "    answer: A piece of text, about three quarters of a word.\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "day-01.yaml"
        path.write_text(text)
        parsed, problems = parse_pack(path)
        assert parsed is not None, problems
        load_packs(db, [parsed], LoadReport())


def test_parse_grade_words_letters_and_numbers() -> None:
    assert parse_grade("Again") is Grade.AGAIN and parse_grade("e") is Grade.EASY
    assert parse_grade(3) is Grade.GOOD
    with pytest.raises(Invalid, match="again, hard, good or easy"):
        parse_grade("meh")


def test_an_empty_or_undecodable_rating_is_said_in_words() -> None:
    """Twelfth sweep: Enter alone said "'' is not a rating"; bytes that are not UTF-8 were
    echoed as '\\udcff\\udcfe' (or as '' where the terminal dropped them)."""
    with pytest.raises(Invalid, match=r"^no rating given: answer again, hard, good or easy"):
        parse_grade("  ")
    with pytest.raises(Invalid) as caught:
        parse_grade(b"\xff\xfe".decode("utf-8", "surrogateescape"))
    said = str(caught.value)
    assert said.startswith("'\\xff\\xfe' (bytes that are not UTF-8) is not a rating"), said


def test_new_cards_of_today_come_first_then_reviews_then_catch_up(
    db: Session, cohort: m.Cohort, student: m.Member, day2: None
) -> None:
    _day1(db)
    day2_keys = ["d02.card.slot-trap", "d02.card.ollama-in-production"]
    due = cards_due(db, student, NOW)
    assert [(d.card.key, d.kind) for d in due] == [
        (day2_keys[0], "new"),
        (day2_keys[1], "new"),
        ("d01.card.tokens", "catch-up"),
    ]
    # Missed the day 1 card three days ago: it is overdue now, a review, after today's new cards.
    _rate(db, student, "d01.card.tokens", "again", NOW - timedelta(days=3))
    assert cards_due(db, student, NOW)[2].kind == "review"
    _rate(db, student, day2_keys[0], "good", NOW)
    kinds = [d.kind for d in cards_due(db, student, NOW)]
    assert kinds == ["new", "review"]
    # The 10-minute learning step comes due within today, not yet now.
    later = cards_due(db, student, NOW, until=end_of_local_day(NOW, student.timezone))
    assert {d.card.key for d in later} >= {day2_keys[0]}


def test_rating_updates_the_card_and_logs_the_review(
    db: Session, student: m.Member, day2: None
) -> None:
    out = rate_card(
        db, student, "d02.card.slot-trap", "good", NOW, duration_ms=4200, scheduler=SCHED
    )
    assert out.state == "learning" and out.due == NOW + timedelta(minutes=10)
    state = db.scalar(select(m.CardState).where(m.CardState.member_id == student.id))
    assert state is not None and state.reps == 1 and state.due.tzinfo is not None
    out = rate_card(db, student, "d02.card.slot-trap", "good", out.due, scheduler=SCHED)
    assert out.state == "review" and out.due > NOW + timedelta(days=1)
    reviews = db.scalars(select(m.Review).order_by(m.Review.id)).all()
    assert [(r.rating, r.state_before, r.duration_ms) for r in reviews] == [
        (3, 0, 4200),
        (3, 1, None),
    ]
    assert reviews[0].reviewed_at == NOW


def test_a_day_without_a_pack_still_brings_reviews(
    db: Session, student: m.Member, day2: None
) -> None:
    _rate(db, student, "d02.card.slot-trap", "again", NOW)
    tomorrow = NOW + timedelta(days=1)  # day 3: no pack
    due = cards_due(db, student, tomorrow)
    assert [d.kind for d in due] == ["review", "catch-up"]


def test_retired_cards_and_later_days_never_show(
    db: Session, student: m.Member, day2: None
) -> None:
    card = db.scalar(select(m.Card).where(m.Card.key == "d02.card.slot-trap"))
    assert card is not None
    card.retired = True
    db.flush()
    assert [d.card.key for d in cards_due(db, student, NOW)] == ["d02.card.ollama-in-production"]
    with pytest.raises(Invalid, match="removed from the course"):
        rate_card(db, student, card, "good", NOW)
    assert cards_due(db, student, NOW - timedelta(days=1)) == []  # day 1: Day 2 not yet open


def test_streak_counts_the_members_own_days(db: Session, cohort: m.Cohort, day2: None) -> None:
    # 23:30 and 00:30 in New York are two days there, one UTC day apart in the other direction.
    nyc = add_member(db, cohort, "2002", timezone="America/New_York")
    evening = datetime(2026, 3, 4, 4, 30, tzinfo=UTC)  # 3 March 23:30 in New York
    _rate(db, nyc, "d02.card.slot-trap", "good", evening)
    _rate(db, nyc, "d02.card.ollama-in-production", "good", evening + timedelta(hours=1))
    assert (nyc.streak_current, nyc.streak_best) == (2, 2)
    assert streak(nyc, evening + timedelta(hours=2)).reviewed_today
    # Alive through the next local day, gone the day after.
    assert streak(nyc, datetime(2026, 3, 6, 3, 0, tzinfo=UTC)).current == 2
    assert streak(nyc, datetime(2026, 3, 6, 6, 0, tzinfo=UTC)).current == 0
    # Same two instants for a London member: one local day.
    ldn = add_member(db, cohort, "2003", timezone="Europe/London")
    _rate(db, ldn, "d02.card.slot-trap", "good", evening)
    _rate(db, ldn, "d02.card.ollama-in-production", "good", evening + timedelta(hours=1))
    assert ldn.streak_current == 1


def test_moving_west_does_not_break_or_double_a_streak(
    db: Session, student: m.Member, day2: None
) -> None:
    _rate(db, student, "d02.card.slot-trap", "good", datetime(2026, 3, 4, 0, 30, tzinfo=UTC))
    set_timezone(db, student, "America/Los_Angeles")  # now it is 3 March there again
    _rate(db, student, "d02.card.slot-trap", "good", datetime(2026, 3, 4, 0, 45, tzinfo=UTC))
    assert student.streak_current == 1 and student.last_review_day == date(2026, 3, 4)


def test_retention_per_member_and_per_card(db: Session, student: m.Member, day2: None) -> None:
    key = "d02.card.slot-trap"
    t = NOW
    _rate(db, student, key, "good", t)  # first sighting: not a recall
    assert member_retention(student) is None
    _rate(db, student, key, "again", t + timedelta(minutes=10))
    _rate(db, student, key, "good", t + timedelta(minutes=20))
    _rate(db, student, key, "good", t + timedelta(minutes=30))
    assert member_retention(student) == pytest.approx(2 / 3)
    (row,) = card_retention(db, member_id=student.id)
    assert (row.card_key, row.tries, row.recalled) == (key, 3, 2)
    assert card_retention(db, cohort_id=student.cohort_id)[0].retention == pytest.approx(2 / 3)


def test_recompute_matches_what_each_rating_kept(
    db: Session, student: m.Member, day2: None
) -> None:
    keys = ["d02.card.slot-trap", "d02.card.ollama-in-production"]
    grades = ["good", "again", "hard", "easy", "good", "again", "good"]
    gaps = [0, 1, 1, 3, 4, 4, 9]
    for i, (g, d) in enumerate(zip(grades, gaps, strict=True)):
        _rate(db, student, keys[i % 2], g, NOW + timedelta(days=d, minutes=i))
    kept = (
        student.streak_current,
        student.streak_best,
        student.last_review_day,
        student.reviews_total,
        student.recall_tries,
        student.recalled,
    )
    recompute_stats(db, student)
    assert kept == (
        student.streak_current,
        student.streak_best,
        student.last_review_day,
        student.reviews_total,
        student.recall_tries,
        student.recalled,
    )
    assert kept[0] == 1 and kept[1] == 2 and kept[3] == 7
    assert db.scalar(select(func.count(m.Review.id))) == 7


@given(st.lists(st.integers(0, 60), min_size=1, max_size=40))
def test_streak_fold_equals_longest_and_last_runs(offsets: list[int]) -> None:
    days = sorted(date(2026, 1, 1) + timedelta(days=o) for o in offsets)
    cur, best, last = 0, 0, None
    for d in days:
        cur, best, last = _streak_step(cur, best, last, d)
    distinct = sorted(set(days))
    runs, run = [], 1
    for a, b in itertools.pairwise(distinct):
        if b == a + timedelta(days=1):
            run += 1
        else:
            runs.append(run)
            run = 1
    runs.append(run)
    assert (cur, best, last) == (runs[-1], max(runs), distinct[-1])


def test_naive_time_is_refused(db: Session, student: m.Member, day2: None) -> None:
    with pytest.raises(Invalid, match="aware datetime"):
        rate_card(db, student, "d02.card.slot-trap", "good", datetime(2026, 3, 3, 12))
