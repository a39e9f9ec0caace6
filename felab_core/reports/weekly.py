"""The weekly summary a cohort may ask for (`cohorts.weekly_summary`): the past seven days in
its channel, each Monday at the cohort's post time, built from the reports package.

Claimed like the daily post: a `posts` row of kind "weekly" per cohort and week (`day_number`
is the ordinal of the week's local Monday), so two bots or a restart never post it twice, and
a bot that was down on Monday catches up later that week. Members who keep their numbers off
leaderboards (`public_numbers` False) are counted but never named.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from felab_core.content.calendar import local_date, post_due_at
from felab_core.db import models as m
from felab_core.errors import Forbidden
from felab_core.people.members import cohort_for_channel, find_member
from felab_core.reports.progress import cohort_progress
from felab_core.text import literal

KIND = "weekly"
TOP = 3


@dataclass(frozen=True)
class WeeklyPost:
    post_id: int
    cohort_id: int
    channel_id: int
    text: str


def week_monday(cohort: m.Cohort, now: datetime) -> date:
    """The local Monday of the cohort's current week."""
    today = local_date(now, cohort.timezone)
    return today - timedelta(days=today.weekday())


def weekly_due(cohort: m.Cohort, now: datetime) -> bool:
    """Enabled, in a channel, the course begun before this week, and Monday's post time passed."""
    if not cohort.weekly_summary or not cohort.channel_id or not cohort.channel_id.isdigit():
        return False
    monday = week_monday(cohort, now)
    return cohort.start_date < monday and now >= post_due_at(cohort, monday)


def weekly_summary(session: Session, cohort: m.Cohort, now: datetime) -> str:
    """The past seven days of the cohort in a few lines (cohort_progress for the whole table)."""
    since = now - timedelta(days=7)
    rows = cohort_progress(session, cohort.id, now)
    members = select(m.Member.id).where(m.Member.cohort_id == cohort.id)
    reviews, active = session.execute(
        select(func.count(m.Review.id), func.count(func.distinct(m.Review.member_id))).where(
            m.Review.member_id.in_(members), m.Review.reviewed_at >= since
        )
    ).one()
    spoken = session.scalar(
        select(func.count(m.SpokenAnswer.id)).where(
            m.SpokenAnswer.member_id.in_(members), m.SpokenAnswer.created_at >= since
        )
    )
    rated = session.scalar(
        select(func.count(m.PeerRating.id))
        .join(m.SpokenAnswer, m.SpokenAnswer.id == m.PeerRating.answer_id)
        .where(m.SpokenAnswer.member_id.in_(members), m.PeerRating.created_at >= since)
    )
    today = local_date(now, cohort.timezone)
    lines = [f"**{cohort.name}: the seven days to {today.isoformat()}**"]
    lines.append(
        f"{active} of {len(rows)} member{'s' if len(rows) != 1 else ''} drilled cards: "
        f"{reviews} review{'s' if reviews != 1 else ''} in all."
    )
    lines.append(f"{spoken or 0} spoken answers, {rated or 0} peer ratings.")
    due = sum(r.due_today for r in rows)
    overdue = sum(r.overdue for r in rows)
    lines.append(f"Cards due today across the cohort: {due} ({overdue} overdue).")
    streaks = sorted(
        (r for r in rows if r.public_numbers and r.streak > 0), key=lambda r: (-r.streak, r.name)
    )[:TOP]
    if streaks:
        named = ", ".join(
            f"{literal(r.name) if r.name else 'member ' + r.discord_id} {r.streak} d"
            for r in streaks
        )
        lines.append(f"Longest streaks: {named}.")
    lines.append("`/drill` shows what is ready for you now.")
    return "\n".join(lines)[:2000]


def claim_weekly_posts(session: Session, now: datetime) -> list[WeeklyPost]:
    """Claim every due weekly summary (once per cohort and week) and write it."""
    out: list[WeeklyPost] = []
    taken = {
        (cid, n)
        for cid, n in session.execute(
            select(m.Post.cohort_id, m.Post.day_number).where(m.Post.kind == KIND)
        )
    }
    for cohort in session.scalars(select(m.Cohort).where(m.Cohort.weekly_summary.is_(True))):
        if not weekly_due(cohort, now):
            continue
        monday = week_monday(cohort, now)
        if (cohort.id, monday.toordinal()) in taken:
            continue
        post = m.Post(
            cohort_id=cohort.id,
            day_number=monday.toordinal(),
            kind=KIND,
            local_date=monday,
            claimed_at=now,
        )
        try:
            with session.begin_nested():
                session.add(post)
        except IntegrityError:
            continue
        out.append(
            WeeklyPost(
                post.id,
                cohort.id,
                int(cohort.channel_id or 0),
                weekly_summary(session, cohort, now),
            )
        )
    return out


def set_weekly_summary(
    session: Session, guild_id: str, channel_id: str, user_id: str, on: bool
) -> m.Cohort:
    """An instructor turns the channel's weekly summary on or off."""
    cohort = cohort_for_channel(session, guild_id, channel_id)
    me = find_member(session, cohort.id, user_id)
    if me is None or me.role != "instructor":
        raise Forbidden("only the cohort's instructors can do this")
    cohort.weekly_summary = on
    session.flush()
    return cohort
