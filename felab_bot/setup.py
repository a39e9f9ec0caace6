"""What `/setup` and `/join` say, and the service calls behind them: no Discord import here.

A cohort runs in one channel. Nobody is a member before it exists, so whoever may manage the
Discord server (Discord's Manage Server permission, passed in by the cog) sets it up there and
becomes its first instructor; after that, instructors add instructors
(felab_core.people.members.add_member checks it). `/join` is for cohorts that need a code;
open cohorts are joined on a member's first command.
"""

from __future__ import annotations

from datetime import date, datetime, time

from sqlalchemy.orm import Session

from felab_bot.drills import fit
from felab_bot.who import Who
from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid
from felab_core.people.cohort_settings import Change, CohortSettings, change_settings, settings_of
from felab_core.people.members import (
    add_member,
    cohort_for_channel,
    create_cohort,
    find_member,
    join_cohort,
    require_instructor,
)


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise Invalid(f"{text!r} is not a date: write it as 2026-03-02") from None


def _time(text: str) -> time:
    try:
        return time.fromisoformat(text.strip())
    except ValueError:
        raise Invalid(f"{text!r} is not a time of day: write it as 09:00") from None


def setup_cohort(
    session: Session,
    who: Who,
    *,
    can_manage_server: bool,
    name: str,
    timezone: str,
    start_date: str,
    post_time: str = "09:00",
    advance: str = "daily",
    join_mode: str = "open",
    now: datetime,
) -> str:
    """Make this channel's cohort, with the caller as its first instructor."""
    if who.guild_id is None or who.channel_id is None:
        raise Invalid("set a cohort up in a server's text channel, not in a direct message")
    if not can_manage_server:
        raise Forbidden("only someone who may manage this Discord server can set up a cohort")
    cohort = create_cohort(
        session,
        name,
        timezone=timezone,
        start_date=_date(start_date),
        post_time=_time(post_time),
        guild_id=str(who.guild_id),
        channel_id=str(who.channel_id),
        advance=advance,
        join_mode=join_mode,
        now=now,
    )
    add_member(
        session,
        cohort,
        str(who.user_id),
        role="instructor",
        display_name=who.display_name,
        now=now,
    )
    lines = [
        f"Cohort **{cohort.name}** runs in this channel: day 1 is {cohort.start_date}, the "
        f"daily drill is posted at {cohort.post_time:%H:%M} {cohort.timezone}, days advance "
        f"{cohort.advance}. You are its instructor."
    ]
    if cohort.join_code:
        lines.append(f"Members join with `/join code:{cohort.join_code}` (share it with them).")
    elif cohort.join_mode == "open":
        lines.append("Anyone in the channel joins with their first command or button press.")
    else:
        lines.append("Invitation only: add members with `/setup member`.")
    return fit("\n".join(lines))


def add_to_cohort(
    session: Session, who: Who, user_id: int, name: str, role: str, now: datetime
) -> str:
    """An instructor adds someone (any join mode), as a student or an instructor."""
    cohort = cohort_for_channel(session, str(who.guild_id or ""), str(who.channel_id or ""))
    me = find_member(session, cohort.id, str(who.user_id))
    if me is None:
        raise Forbidden("only the cohort's instructors can do this")
    member = add_member(session, cohort, str(user_id), role=role, display_name=name, by=me, now=now)
    return (
        f"<@{member.discord_id}> is a{'n' if role == 'instructor' else ''} {role} of {cohort.name}."
    )


def join(session: Session, who: Who, code: str | None, now: datetime) -> str:
    cohort = cohort_for_channel(session, str(who.guild_id or ""), str(who.channel_id or ""))
    member = join_cohort(
        session, cohort, str(who.user_id), display_name=who.display_name, code=code, now=now
    )
    return f"You are in **{cohort.name}** ({member.role}). `/drill` shows your cards."


def weekly(session: Session, who: Who, on: bool) -> str:
    """An instructor turns this channel's weekly summary post on or off."""
    from felab_core.reports.weekly import set_weekly_summary

    cohort = set_weekly_summary(
        session, str(who.guild_id or ""), str(who.channel_id or ""), str(who.user_id), on
    )
    if on:
        return (
            f"{cohort.name} gets a summary of its week here each Monday at "
            f"{cohort.post_time.strftime('%H:%M')} ({cohort.timezone})."
        )
    return f"{cohort.name} gets no weekly summary."


# ----------------------------------------------------------------------------- settings

CHANGE_HINT = (
    "Change them with `/setup change` (timezone, post_time, channel, daily_post, ping_role, "
    "no_ping, weekly)."
)


def _next_post(view: CohortSettings, now: datetime) -> str:
    if not view.daily_post:
        return "none: the daily post is off"
    if view.next_post is None:
        return "when the course moves on to its next day (paced by hand)"
    if view.next_post <= now:
        return "due now: the bot posts it at its next look"
    at = int(view.next_post.timestamp())
    return f"<t:{at}:F> (<t:{at}:R>)"


def settings_text(view: CohortSettings, now: datetime, head: str) -> str:
    """A cohort's settings as instructors read them, the next daily post included."""
    ping = f"pinging <@&{view.post_role_id}>" if view.post_role_id else "pinging no one"
    post = f"on, at {view.post_time:%H:%M} {view.timezone}, {ping}" if view.daily_post else "off"
    lines = [
        head,
        f"- Channel: <#{view.channel_id}>" if view.channel_id else "- Channel: none",
        f"- Time zone: {view.timezone}",
        f"- Daily post: {post}",
        f"- Next daily post: {_next_post(view, now)}",
        f"- Weekly summary: {'on, each Monday' if view.weekly_summary else 'off'}",
        f"- Days advance: {view.advance}; joining: {view.join_mode}",
        CHANGE_HINT,
    ]
    return fit("\n".join(lines))


def _instructor_here(session: Session, who: Who) -> tuple[m.Cohort, m.Member]:
    cohort = cohort_for_channel(session, str(who.guild_id or ""), str(who.channel_id or ""))
    me = find_member(session, cohort.id, str(who.user_id))
    if me is None:
        raise Forbidden("only the cohort's instructors can do this")
    require_instructor(me)
    return cohort, me


def show_settings(session: Session, who: Who, now: datetime) -> str:
    """`/setup show`, for the cohort's instructors."""
    cohort, _me = _instructor_here(session, who)
    return settings_text(settings_of(session, cohort, now), now, f"**{cohort.name}**: settings")


def change(session: Session, who: Who, wanted: Change, now: datetime) -> str:
    """`/setup change`, for the cohort's instructors: every value checked before any is kept."""
    cohort, me = _instructor_here(session, who)
    view = change_settings(session, cohort, me, wanted, now)
    return settings_text(view, now, f"Changed. **{cohort.name}** now:")
