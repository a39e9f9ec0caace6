"""`/setup` and `/join`: a cohort made in a channel by someone who may manage the server (its
first instructor), instructors adding people, and join codes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_bot import setup
from felab_bot.who import Who
from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid, NotFound
from tests.db_support import NOW

CHANNEL = 700000000000000077
PROF, ADA, BEA = 100000000000002001, 100000000000002002, 100000000000002003


@pytest.fixture
def guild() -> int:
    return uuid.uuid4().int % 10**18


def _who(guild: int, user: int, name: str = "someone") -> Who:
    return Who(guild, CHANNEL, user, name)


def _setup(db: Session, guild: int, **kw: object) -> str:
    args: dict[str, object] = {
        "can_manage_server": True,
        "name": "Spring",
        "timezone": "Europe/London",
        "start_date": "2026-03-02",
        "now": NOW,
    }
    args.update(kw)
    return setup.setup_cohort(db, _who(guild, PROF, "Prof"), **args)  # type: ignore[arg-type]


def test_setup_makes_the_cohort_and_its_instructor(db: Session, guild: int) -> None:
    text = _setup(db, guild, post_time="08:30")
    assert "Cohort **Spring** runs in this channel" in text and "08:30 Europe/London" in text
    cohort = db.scalars(select(m.Cohort).where(m.Cohort.guild_id == str(guild))).one()
    assert cohort.channel_id == str(CHANNEL)
    [prof] = cohort.members
    assert (prof.discord_id, prof.role) == (str(PROF), "instructor")
    with pytest.raises(Invalid, match="already hosts"):
        _setup(db, guild)


def test_setup_refusals(db: Session, guild: int) -> None:
    with pytest.raises(Forbidden, match="manage this Discord server"):
        _setup(db, guild, can_manage_server=False)
    with pytest.raises(Invalid, match="not a date"):
        _setup(db, guild, start_date="March 2")
    with pytest.raises(Invalid, match="not a time"):
        _setup(db, guild, post_time="9am")
    with pytest.raises(Invalid):
        _setup(db, guild, timezone="Mars/Olympus")
    assert db.scalars(select(m.Cohort).where(m.Cohort.guild_id == str(guild))).all() == []


def test_join_codes_and_members(db: Session, guild: int) -> None:
    text = _setup(db, guild, join_mode="code")
    code = text.split("/join code:")[1].split("`")[0]
    with pytest.raises(Forbidden, match="join code"):
        setup.join(db, _who(guild, ADA, "Ada"), None, NOW)
    assert "You are in **Spring** (student)" in setup.join(db, _who(guild, ADA, "Ada"), code, NOW)
    with pytest.raises(Forbidden, match="instructors"):
        setup.add_to_cohort(db, _who(guild, ADA), BEA, "Bea", "student", NOW)
    with pytest.raises(Forbidden, match="instructors"):
        setup.add_to_cohort(db, _who(guild, BEA), ADA, "Ada", "instructor", NOW)
    added = setup.add_to_cohort(db, _who(guild, PROF), BEA, "Bea", "instructor", NOW)
    assert added == f"<@{BEA}> is an instructor of Spring."
    with pytest.raises(NotFound, match="no cohort runs in this channel"):
        setup.join(db, Who(guild, CHANNEL + 1, ADA, "Ada"), code, NOW)


def test_weekly_summary_on_and_off_by_instructors(db: Session, guild: int) -> None:
    _setup(db, guild)
    on = setup.weekly(db, _who(guild, PROF), True)
    assert on == "Spring gets a summary of its week here each Monday at 09:00 (Europe/London)."
    cohort = db.scalars(select(m.Cohort).where(m.Cohort.guild_id == str(guild))).one()
    assert cohort.weekly_summary
    with pytest.raises(Forbidden, match="instructors"):
        setup.weekly(db, _who(guild, ADA), False)
    assert setup.weekly(db, _who(guild, PROF), False) == "Spring gets no weekly summary."
    assert not cohort.weekly_summary


def _cohort(db: Session, guild: int) -> m.Cohort:
    return db.scalars(select(m.Cohort).where(m.Cohort.guild_id == str(guild))).one()


def test_instructors_see_and_change_the_settings_from_chat(db: Session, guild: int) -> None:
    from felab_core.people.cohort_settings import Change

    _setup(db, guild, post_time="09:00")  # NOW is 12:00 UTC, 12:00 in London: today's is due
    setup.join(db, _who(guild, ADA, "Ada"), None, NOW)
    shown = setup.show_settings(db, _who(guild, PROF), NOW)
    assert "**Spring**: settings" in shown and "- Time zone: Europe/London" in shown
    assert "- Daily post: on, at 09:00 Europe/London, pinging no one" in shown
    assert "- Next daily post: due now" in shown
    for refused in (
        lambda: setup.show_settings(db, _who(guild, ADA), NOW),
        lambda: setup.change(db, _who(guild, ADA), Change(post_time="10:00"), NOW),
        lambda: setup.change(db, _who(guild, BEA), Change(post_time="10:00"), NOW),
    ):
        with pytest.raises(Forbidden, match="only the cohort's instructors"):
            refused()
    # One bad value changes nothing.
    for bad, why in (
        (Change(post_time="13:00", timezone="Mars/Olympus"), "not a time zone"),
        (Change(post_time="1pm"), "not a time of day"),
        (Change(post_role_id=str(guild)), "@everyone"),
        (Change(), "name a setting"),
    ):
        with pytest.raises(Invalid, match=why):
            setup.change(db, _who(guild, PROF), bad, NOW)
    assert _cohort(db, guild).post_time.hour == 9
    # A later time today: the next post follows it, today at 15:30 London (UTC+0 in March).
    text = setup.change(db, _who(guild, PROF), Change(post_time="15:30", post_role_id="4242"), NOW)
    at = int(datetime(2026, 3, 3, 15, 30, tzinfo=UTC).timestamp())
    assert text.startswith("Changed. **Spring** now:") and f"<t:{at}:F>" in text
    assert "pinging <@&4242>" in text
    # Moved to a channel of its own; a channel hosting another cohort is refused.
    other = setup.setup_cohort(
        db,
        Who(guild, CHANNEL + 5, PROF, "Prof"),
        can_manage_server=True,
        name="Autumn",
        timezone="UTC",
        start_date="2026-09-07",
        now=NOW,
    )
    assert "Autumn" in other
    with pytest.raises(Invalid, match="already hosts cohort 'Autumn'"):
        setup.change(db, _who(guild, PROF), Change(channel_id=str(CHANNEL + 5)), NOW)
    setup.change(db, _who(guild, PROF), Change(channel_id=str(CHANNEL + 6), daily_post=False), NOW)
    moved = Who(guild, CHANNEL + 6, PROF, "Prof")
    assert "- Daily post: off" in setup.show_settings(db, moved, NOW)
    assert "- Next daily post: none: the daily post is off" in setup.show_settings(db, moved, NOW)
