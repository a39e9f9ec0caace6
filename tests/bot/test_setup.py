"""`/setup` and `/join`: a cohort made in a channel by someone who may manage the server (its
first instructor), instructors adding people, and join codes."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_bot import setup
from felab_bot.numbers import Who
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
