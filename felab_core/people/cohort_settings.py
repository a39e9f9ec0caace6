"""A cohort's settings, seen and changed by its instructors: from chat as from a terminal.

Time zone, daily post time, the channel it runs in, the daily post on or off (and a role the
post pings), the weekly summary. Every change is checked before anything is stored (one bad
value changes nothing), and the answer says when the next daily post now goes out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.content.calendar import next_daily_post, parse_post_time, zone
from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.people.members import require_instructor


@dataclass(frozen=True)
class CohortSettings:
    name: str
    timezone: str
    post_time: time
    channel_id: str | None
    daily_post: bool
    post_role_id: str | None
    weekly_summary: bool
    advance: str
    join_mode: str
    next_post: datetime | None  # None: no daily post is coming (off, or waiting for a day)


def settings_of(session: Session, cohort: m.Cohort, now: datetime) -> CohortSettings:
    return CohortSettings(
        name=cohort.name,
        timezone=cohort.timezone,
        post_time=cohort.post_time,
        channel_id=cohort.channel_id,
        daily_post=cohort.daily_post,
        post_role_id=cohort.post_role_id,
        weekly_summary=cohort.weekly_summary,
        advance=cohort.advance,
        join_mode=cohort.join_mode,
        next_post=next_daily_post(session, cohort, now),
    )


@dataclass(frozen=True)
class Change:
    """What to change; None leaves a setting as it is. `post_role_id` "" removes the role."""

    timezone: str | None = None
    post_time: str | None = None
    channel_id: str | None = None
    daily_post: bool | None = None
    post_role_id: str | None = None
    weekly_summary: bool | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, f) is None for f in self.__dataclass_fields__)


def change_settings(
    session: Session, cohort: m.Cohort, by: m.Member, change: Change, now: datetime
) -> CohortSettings:
    """An instructor of the cohort changes its settings: all of them checked first, then stored
    together. Moving to another channel needs a channel of the same server that hosts no other
    cohort; the guild is the cohort's own."""
    require_instructor(by)
    if by.cohort_id != cohort.id:
        raise Invalid("only this cohort's own instructors change its settings")
    if change.empty:
        raise Invalid(
            "name a setting to change: timezone, post_time, channel, daily_post, ping_role or "
            "weekly (`/setup show` lists them)"
        )
    post_time = parse_post_time(change.post_time) if change.post_time is not None else None
    if change.timezone is not None:
        zone(change.timezone)
    if change.post_role_id:
        if not change.post_role_id.isdigit():
            raise Invalid(f"{change.post_role_id!r} is not a Discord role id")
        if change.post_role_id == cohort.guild_id:  # Discord's @everyone role has the guild's id
            raise Invalid(
                "the daily post does not ping @everyone: make a role for the cohort's members "
                "and pick that"
            )
    if change.channel_id is not None and change.channel_id != cohort.channel_id:
        if not change.channel_id.isdigit():
            raise Invalid(f"{change.channel_id!r} is not a Discord channel id")
        taken = session.scalar(
            select(m.Cohort).where(
                m.Cohort.guild_id == cohort.guild_id,
                m.Cohort.channel_id == change.channel_id,
                m.Cohort.id != cohort.id,
            )
        )
        if taken is not None:
            raise Invalid(
                f"that channel already hosts cohort {taken.name!r}; pick a channel of its own"
            )
        cohort.channel_id = change.channel_id
    if change.timezone is not None:
        cohort.timezone = change.timezone
    if post_time is not None:
        cohort.post_time = post_time
    if change.daily_post is not None:
        cohort.daily_post = change.daily_post
    if change.post_role_id is not None:
        cohort.post_role_id = change.post_role_id or None
    if change.weekly_summary is not None:
        cohort.weekly_summary = change.weekly_summary
    session.flush()
    return settings_of(session, cohort, now)
