"""The day calendar: which course day it is, how it advances, no-pack days, once-only posts."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from felab_core.content.calendar import (
    advance_day,
    claim_daily_post,
    cohorts_due_for_post,
    course_day,
    course_day_on,
    mark_posted,
    today_plan,
    weekdays_between,
)
from felab_core.db import models as m
from felab_core.db.session import session_factory
from felab_core.errors import Invalid
from felab_core.people.members import create_cohort
from tests.db_support import NOW


def _cohort(advance: str = "daily", start: date = date(2026, 3, 2), tz: str = "UTC") -> m.Cohort:
    return m.Cohort(
        name="c", timezone=tz, start_date=start, advance=advance, manual_day=1, post_time=time(9)
    )


@given(st.dates(date(2020, 1, 1), date(2030, 1, 1)), st.integers(0, 800))
def test_weekdays_between_matches_counting_one_by_one(start: date, span: int) -> None:
    end = start + timedelta(days=span)
    brute = sum(1 for i in range(span + 1) if (start + timedelta(days=i)).weekday() < 5)
    assert weekdays_between(start, end) == brute


@given(st.sampled_from(["daily", "weekdays"]), st.dates(date(2024, 1, 1), date(2028, 1, 1)))
def test_days_never_go_back_and_move_at_most_one_a_day(advance: str, start: date) -> None:
    cohort = _cohort(advance, start)
    prev = course_day_on(cohort, start - timedelta(days=1))
    assert prev == 0
    for i in range(30):
        day = course_day_on(cohort, start + timedelta(days=i))
        assert prev <= day <= prev + 1
        assert day >= 1
        prev = day


def test_daily_counts_from_day_one_in_the_cohorts_zone() -> None:
    tokyo = _cohort(tz="Asia/Tokyo")
    # 2026-03-01 16:00 UTC is already 2 March in Tokyo: day 1 there, day 0 in UTC.
    instant = datetime(2026, 3, 1, 16, 0, tzinfo=UTC)
    assert course_day(tokyo, instant) == 1
    assert course_day(_cohort(), instant) == 0
    assert course_day(_cohort(), NOW) == 2


def test_weekdays_keep_fridays_day_over_the_weekend() -> None:
    cohort = _cohort("weekdays", date(2026, 3, 2))  # a Monday
    friday, saturday, monday = date(2026, 3, 6), date(2026, 3, 7), date(2026, 3, 9)
    assert course_day_on(cohort, friday) == 5
    assert course_day_on(cohort, saturday) == 5
    assert course_day_on(cohort, monday) == 6


def test_manual_pacing(db: Session) -> None:
    cohort = create_cohort(
        db, "Manual", timezone="UTC", start_date=date(2026, 3, 2), advance="manual"
    )
    assert course_day(cohort, NOW) == 1
    assert advance_day(db, cohort) == 2
    assert course_day(cohort, NOW) == 2
    with pytest.raises(Invalid, match="before day 1"):
        advance_day(db, cohort, -5)
    daily = create_cohort(db, "Daily", timezone="UTC", start_date=date(2026, 3, 2))
    with pytest.raises(Invalid, match="switch it to manual"):
        advance_day(db, daily)


def test_plans_for_drill_days_empty_days_and_before_the_start(
    db: Session, cohort: m.Cohort, day2: None
) -> None:
    plan = today_plan(db, cohort, NOW)
    assert (plan.day_number, plan.status) == (2, "drill")
    assert plan.day is not None and plan.day.number == 2
    empty = today_plan(db, cohort, NOW + timedelta(days=1))
    assert (empty.day_number, empty.status, empty.day) == (3, "no-drill", None)
    assert "no drill today" in empty.message
    early = today_plan(db, cohort, datetime(2026, 2, 1, tzinfo=UTC))
    assert early.status == "not-started" and "starts on 2026-03-02" in early.message


def test_bad_time_zone_says_what_to_give(db: Session) -> None:
    with pytest.raises(Invalid, match="IANA name such as Europe/London"):
        create_cohort(db, "x", timezone="Mars/Olympus", start_date=date(2026, 3, 2))


def test_daily_post_is_claimed_once(db: Session, cohort: m.Cohort) -> None:
    before_nine = datetime(2026, 3, 3, 8, 0, tzinfo=UTC)  # 08:00 in London
    assert cohort not in [c for c, _ in cohorts_due_for_post(db, before_nine)]
    assert (cohort, 2) in cohorts_due_for_post(db, NOW)
    post = claim_daily_post(db, cohort, NOW)
    assert post is not None and post.day_number == 2
    assert claim_daily_post(db, cohort, NOW + timedelta(hours=1)) is None
    assert cohort not in [c for c, _ in cohorts_due_for_post(db, NOW)]
    mark_posted(db, post.id, "msg-1", NOW)
    assert post.message_id == "msg-1"
    assert claim_daily_post(db, cohort, NOW + timedelta(days=1)) is not None  # day 3


def test_two_bots_claiming_at_once_post_once(db_engine: Engine) -> None:
    factory = session_factory(db_engine)
    with factory.begin() as setup:
        cohort = create_cohort(
            setup,
            "Race",
            timezone="UTC",
            start_date=date(2026, 3, 2),
            guild_id=f"race-{datetime.now(UTC).timestamp()}",
            channel_id="c",
        )
        cohort_id = cohort.id
    a, b = factory(), factory()
    try:
        # Each bot read its cohort in an earlier transaction of its own.
        ca = a.get(m.Cohort, cohort_id)
        a.commit()
        cb = b.get(m.Cohort, cohort_id)
        b.commit()
        assert ca is not None and cb is not None
        first = claim_daily_post(a, ca, NOW)  # not committed yet: b's claim has to wait
        outcome: list[object] = []

        def other_bot() -> None:
            outcome.append(claim_daily_post(b, cb, NOW))
            b.commit()

        racer = threading.Thread(target=other_bot)
        racer.start()
        racer.join(timeout=0.5)
        assert racer.is_alive() or outcome == [None]
        a.commit()
        racer.join(timeout=10)
        assert first is not None and outcome == [None]
    finally:
        a.rollback()
        b.rollback()
        a.close()
        b.close()
        with factory.begin() as cleanup:
            gone = cleanup.get(m.Cohort, cohort_id)
            cleanup.delete(gone)


def test_the_next_daily_post_follows_the_settings(db: Session) -> None:
    from felab_core.content.calendar import next_daily_post

    cohort = create_cohort(
        db, "c", timezone="Europe/Paris", start_date=date(2026, 3, 2), post_time=time(14, 0)
    )  # NOW is Tuesday 12:00 UTC, 13:00 in Paris: day 2
    assert next_daily_post(db, cohort, NOW) == datetime(2026, 3, 3, 13, 0, tzinfo=UTC)
    cohort.post_time = time(9, 0)  # already past today, and today's not posted: due now
    assert next_daily_post(db, cohort, NOW) == NOW
    claim_daily_post(db, cohort, NOW)  # posted: tomorrow at 09:00 Paris
    assert next_daily_post(db, cohort, NOW) == datetime(2026, 3, 4, 8, 0, tzinfo=UTC)
    cohort.advance = "weekdays"
    friday = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)
    claim_daily_post(db, cohort, friday)
    assert next_daily_post(db, cohort, friday) == datetime(2026, 3, 9, 8, 0, tzinfo=UTC)
    cohort.advance = "manual"  # day 1 of a manual cohort was never posted: due now
    assert next_daily_post(db, cohort, NOW) == NOW
    claim_daily_post(db, cohort, NOW)
    assert next_daily_post(db, cohort, NOW) is None  # waits for the day to be advanced
    cohort.advance, cohort.daily_post = "daily", False
    assert next_daily_post(db, cohort, NOW) is None
    assert cohorts_due_for_post(db, NOW + timedelta(days=3)) == []  # off: never due
