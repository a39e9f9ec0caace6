"""The drills cog's logic (felab_bot/drills.py) on SQLite and PostgreSQL: the daily post claimed
once, what a reveal shows, one rating per press, who may press, and `/drill`."""

from __future__ import annotations

import uuid
from datetime import date, time, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_bot import drills
from felab_core.db import models as m
from felab_core.drills.review import card_by_key
from felab_core.errors import Forbidden, NotFound
from felab_core.people.members import create_cohort, ensure_local_member
from tests.db_support import NOW

CHANNEL = 700000000000000010
USER = 100000000000001001


@pytest.fixture
def chat_cohort(db: Session, day2: None) -> m.Cohort:
    """A Discord cohort on day 2 at NOW (post time 09:00 London has passed at 12:00 UTC)."""
    return create_cohort(
        db,
        "Spring",
        timezone="Europe/London",
        start_date=date(2026, 3, 2),
        post_time=time(9, 0),
        guild_id=str(uuid.uuid4().int % 10**18),
        channel_id=str(CHANNEL),
    )


def _press(db: Session, cohort: m.Cohort, card: m.Card, grade: str, when: object = NOW) -> str:
    return drills.rate_text(
        db,
        guild_id=int(cohort.guild_id or 0),
        channel_id=int(cohort.channel_id or 0),
        user_id=USER,
        display_name="Ada",
        card_id=card.id,
        grade=grade,
        now=when,  # type: ignore[arg-type]
    )


def _reviews(db: Session) -> int:
    return db.scalar(select(func.count(m.Review.id))) or 0


def test_custom_ids_round_trip_and_fit_discord() -> None:
    for action in drills.ACTIONS:
        cid = drills.custom_id(10**18 - 1, action)
        assert len(cid) <= 100
        assert drills.parse_custom_id(cid) == (10**18 - 1, action)
    assert drills.parse_custom_id("felab:card:12:maybe") is None
    assert drills.parse_custom_id("other:card:12:good") is None
    with pytest.raises(ValueError):
        drills.custom_id(1, "delete")


def test_button_wording_keeps_hard_a_pass() -> None:
    assert "got it" in drills.GRADE_LABEL["hard"]
    assert "forgot" in drills.GRADE_LABEL["again"]
    assert all(len(label) <= 80 for _, label, _ in drills.BUTTONS)


def test_fit_cuts_to_discords_limit() -> None:
    assert drills.fit("short") == "short"
    cut = drills.fit("x" * 5000)
    assert len(cut) == 2000 and cut.endswith("…")
    parts = ["a" * 3000, "short", "b" * 3000]
    joined = drills.fit_parts(parts)
    assert len(joined) <= 2000 and "\n\nshort\n\n" in joined


def test_daily_post_is_claimed_once_and_lays_out_every_card(
    db: Session, chat_cohort: m.Cohort
) -> None:
    ensure_local_member(db, now=NOW)  # the terminal's cohort has no channel: never posted
    posts = drills.claim_due_posts(db, NOW)
    assert len(posts) == 1
    post = posts[0]
    assert post.channel_id == CHANNEL and post.cohort_id == chat_cohort.id
    assert post.header.startswith("**Day 2: Wrap-up and drill**")
    day_cards = db.scalar(
        select(func.count(m.Card.id)).join(m.ContentDay).where(m.ContentDay.number == 2)
    )
    assert len(post.cards) == day_cards
    assert post.cards[0].text.startswith(f"**Day 2 · card 1 of {day_cards}**")
    assert all(len(c.text) <= 2000 for c in post.cards)
    assert drills.claim_due_posts(db, NOW) == []  # claimed: a second look posts nothing
    assert drills.claim_due_posts(db, NOW + timedelta(hours=3)) == []
    drills.posted(db, post.post_id, 555, NOW)
    row = db.get(m.Post, post.post_id)
    assert row is not None and row.message_id == "555"


def test_before_post_time_nothing_is_due(db: Session, chat_cohort: m.Cohort) -> None:
    early = NOW.replace(hour=8, minute=0)  # 08:00 London, post at 09:00
    assert drills.claim_due_posts(db, early) == []


def test_a_released_claim_is_posted_at_the_next_look(db: Session, chat_cohort: m.Cohort) -> None:
    (post,) = drills.claim_due_posts(db, NOW)
    drills.release(db, post.post_id)
    again = drills.claim_due_posts(db, NOW)
    assert len(again) == 1
    drills.posted(db, again[0].post_id, 1, NOW)
    drills.release(db, again[0].post_id)  # a sent post is never given back
    assert drills.claim_due_posts(db, NOW) == []


def test_reveal_shows_plain_answer_then_engineer_version(
    db: Session, chat_cohort: m.Cohort
) -> None:
    card = card_by_key(db, "d02.card.slot-trap")
    text = drills.reveal_text(db, card.id)
    assert text.startswith("**In plain words**\n" + card.answer[:40])
    assert "**Engineer version**" in text
    assert text.index("In plain words") < text.index("Engineer version")
    card.answer = "very long " * 400
    db.flush()
    long = drills.reveal_text(db, card.id)
    assert len(long) <= 2000 and "…" in long
    assert "**Engineer version**" in long  # a long answer does not push it out
    with pytest.raises(NotFound):
        drills.reveal_text(db, 10**9)


def test_a_double_press_records_one_review(db: Session, chat_cohort: m.Cohort) -> None:
    card = card_by_key(db, "d02.card.slot-trap")
    first = _press(db, chat_cohort, card, "hard")
    assert first.startswith("Recorded **Hard: got it, with effort**")
    assert "Streak: 1 day." in first
    second = _press(db, chat_cohort, card, "easy", NOW + timedelta(seconds=1))
    assert second.startswith("Already rated")
    assert _reviews(db) == 1
    # Once the card comes back, a press counts again.
    state = db.scalars(select(m.CardState)).one()
    later = _press(db, chat_cohort, card, "good", state.due + timedelta(seconds=1))
    assert later.startswith("Recorded **Good")
    assert _reviews(db) == 2


def test_pressing_joins_an_open_cohort_and_refuses_elsewhere(
    db: Session, chat_cohort: m.Cohort
) -> None:
    card = card_by_key(db, "d02.card.slot-trap")
    _press(db, chat_cohort, card, "good")
    member = db.scalars(select(m.Member).where(m.Member.discord_id == str(USER))).one()
    assert member.cohort_id == chat_cohort.id and member.display_name == "Ada"
    with pytest.raises(NotFound, match="no cohort runs in this channel"):
        drills.rate_text(
            db,
            guild_id=1,
            channel_id=2,
            user_id=USER,
            display_name="Ada",
            card_id=card.id,
            grade="good",
            now=NOW,
        )
    chat_cohort.join_mode = "invite"
    db.flush()
    with pytest.raises(Forbidden, match="invitation only"):
        drills.rate_text(
            db,
            guild_id=int(chat_cohort.guild_id or 0),
            channel_id=CHANNEL,
            user_id=USER + 1,
            display_name="Bob",
            card_id=card.id,
            grade="good",
            now=NOW,
        )


def test_drill_command_counts_ready_cards_and_shows_the_first(
    db: Session, chat_cohort: m.Cohort
) -> None:
    args = dict(
        guild_id=int(chat_cohort.guild_id or 0),
        channel_id=CHANNEL,
        user_id=USER,
        display_name="Ada",
    )
    reply = drills.drill_reply(db, now=NOW, **args)  # type: ignore[arg-type]
    assert reply.card_id is not None
    total = int(reply.text.split(" ", 1)[0])
    assert total >= 2 and "ready for you now" in reply.text
    for card_id in [reply.card_id]:
        drills.rate_text(db, card_id=card_id, grade="good", now=NOW, **args)  # type: ignore[arg-type]
    after = drills.drill_reply(db, now=NOW, **args)  # type: ignore[arg-type]
    assert after.text.startswith(f"{total - 1} card")
    assert after.card_id != reply.card_id
