"""The weekly summary: built from the reports, claimed once per cohort and week from the local
Monday's post time, only for cohorts that ask for it; private members counted, never named."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.drills.review import rate_card
from felab_core.drills.speaking import record_spoken_answer
from felab_core.errors import Forbidden
from felab_core.people.members import add_member, set_public_numbers
from felab_core.reports.weekly import claim_weekly_posts, set_weekly_summary, weekly_due
from tests.bot.support import chat_cohort

# The cohort (Europe/London, Day 1 Monday 2026-03-02, posts at 09:00); its second Monday:
MONDAY_0859 = datetime(2026, 3, 9, 8, 59, tzinfo=UTC)
MONDAY_0901 = datetime(2026, 3, 9, 9, 1, tzinfo=UTC)


@pytest.fixture
def cohort(db: Session, day2: None) -> m.Cohort:
    cohort = chat_cohort(db)
    teacher = add_member(db, cohort, "1", role="instructor", display_name="Teach")
    ada = add_member(db, cohort, "2", display_name="Ada")
    bo = add_member(db, cohort, "3", display_name="Bo")
    add_member(db, cohort, "4", display_name="Cy")
    card = db.scalars(select(m.Card)).first()
    assert card is not None
    for day in (5, 6, 7, 8):
        at = datetime(2026, 3, day, 10, 0, tzinfo=UTC)
        rate_card(db, ada, card, "good", at)
        rate_card(db, bo, card, "good", at)
    record_spoken_answer(db, ada, "d02.prompt.is-ollama-enough", duration_s=19, self_rating=4)
    set_public_numbers(db, bo, False)
    assert teacher.role == "instructor"
    return cohort


def test_claimed_once_a_week_from_mondays_post_time(db: Session, cohort: m.Cohort) -> None:
    assert claim_weekly_posts(db, MONDAY_0901) == []  # not asked for
    set_weekly_summary(db, cohort.guild_id or "", cohort.channel_id or "", "1", True)
    assert not weekly_due(cohort, datetime(2026, 3, 5, 12, tzinfo=UTC))  # the first week
    assert claim_weekly_posts(db, MONDAY_0859) == []
    [post] = claim_weekly_posts(db, MONDAY_0901)
    assert post.channel_id == int(cohort.channel_id or 0)
    text = post.text
    assert text.startswith(f"**{cohort.name}: the seven days to 2026-03-09**")
    assert "2 of 4 members drilled cards: 8 reviews in all." in text
    assert "1 spoken answers" in text
    assert "Longest streaks: Ada 4 d." in text and "Bo" not in text  # Bo keeps hers private
    assert claim_weekly_posts(db, MONDAY_0901 + timedelta(hours=5)) == []  # once a week
    row = db.scalars(select(m.Post).where(m.Post.kind == "weekly")).one()
    assert row.local_date.isoformat() == "2026-03-09"
    # The next week, a bot that was down on Monday catches up on Wednesday.
    assert len(claim_weekly_posts(db, MONDAY_0901 + timedelta(days=9))) == 1


def test_only_instructors_turn_it_on(db: Session, cohort: m.Cohort) -> None:
    with pytest.raises(Forbidden, match="instructors"):
        set_weekly_summary(db, cohort.guild_id or "", cohort.channel_id or "", "2", True)
    assert not cohort.weekly_summary
