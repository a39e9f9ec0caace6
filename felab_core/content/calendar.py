"""Which course day it is for a cohort, how days advance, and the once-only daily post.

A cohort's day is counted in the cohort's own time zone from its start date:
- `daily`: every calendar day is the next course day (start date = day 1);
- `weekdays`: Saturdays and Sundays do not count (a weekend keeps Friday's day);
- `manual`: an instructor advances the day with `advance_day`.
Before the start date the day is 0 ("not started"). A day with no content pack is a plain
"no drill today", never an error: reviews of earlier cards still come due.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid, NotFound

ADVANCE_MODES = ("daily", "weekdays", "manual")


def zone(name: str) -> ZoneInfo:
    """A time zone by IANA name ('Europe/Paris'), with an error saying what to give instead."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise Invalid(
            f"{name!r} is not a time zone name: give an IANA name such as Europe/London, "
            "America/New_York or UTC"
        ) from None


def local_date(now: datetime, tz_name: str) -> date:
    """The calendar date at instant `now` in time zone `tz_name`."""
    if now.tzinfo is None:
        raise Invalid("`now` must be an aware datetime (e.g. datetime.now(UTC))")
    return now.astimezone(zone(tz_name)).date()


def weekdays_between(start: date, end: date) -> int:
    """Monday-to-Friday dates in [start, end] (0 when end is before start)."""
    if end < start:
        return 0
    days = (end - start).days + 1
    weeks, extra = divmod(days, 7)
    count = weeks * 5
    first = start.weekday()
    count += sum(1 for i in range(extra) if (first + i) % 7 < 5)
    return count


def course_day_on(cohort: m.Cohort, today: date) -> int:
    """The cohort's course day on its local date `today` (0 before the start)."""
    if today < cohort.start_date:
        return 0
    if cohort.advance == "daily":
        return (today - cohort.start_date).days + 1
    if cohort.advance == "weekdays":
        return max(weekdays_between(cohort.start_date, today), 1)
    return max(cohort.manual_day, 1)


def course_day(cohort: m.Cohort, now: datetime) -> int:
    """The cohort's course day at instant `now`."""
    return course_day_on(cohort, local_date(now, cohort.timezone))


def advance_day(session: Session, cohort: m.Cohort, by: int = 1) -> int:
    """Move a manually paced cohort on (or back, with a negative `by`); returns the new day."""
    if cohort.advance != "manual":
        raise Invalid(
            f"cohort {cohort.name!r} advances by the calendar ({cohort.advance}); switch it to "
            "manual pacing first to move days by hand"
        )
    new = cohort.manual_day + by
    if new < 1:
        raise Invalid(f"day {new} is before day 1; the course starts at day 1")
    cohort.manual_day = new
    session.flush()
    return new


def set_manual_day(session: Session, cohort: m.Cohort, day: int) -> int:
    """Put a manually paced cohort on a given day (the terminal's own cohort uses this)."""
    return (
        advance_day(session, cohort, day - cohort.manual_day) if day != cohort.manual_day else day
    )


def last_content_day(session: Session) -> int | None:
    """The last day the loaded content has a pack for (None: nothing loaded)."""
    return session.scalar(
        select(func.max(m.ContentDay.number)).where(m.ContentDay.retired.is_(False))
    )


@dataclass(frozen=True)
class DayPlan:
    """What today holds for a cohort: a day with content, a day without, or not started."""

    day_number: int
    status: str  # "drill", "no-drill" or "not-started"
    day: m.ContentDay | None
    message: str


def day_for_number(session: Session, number: int) -> m.ContentDay | None:
    return session.scalar(
        select(m.ContentDay).where(m.ContentDay.number == number, m.ContentDay.retired.is_(False))
    )


def today_plan(session: Session, cohort: m.Cohort, now: datetime) -> DayPlan:
    """Today's plan for the cohort; a day with no pack says so plainly."""
    number = course_day(cohort, now)
    if number == 0:
        return DayPlan(
            0,
            "not-started",
            None,
            f"{cohort.name} starts on {cohort.start_date.isoformat()}; no drill before then.",
        )
    day = day_for_number(session, number)
    if day is None:
        return DayPlan(
            number,
            "no-drill",
            None,
            f"Day {number}: no drill today. Cards from earlier days still come back when due.",
        )
    return DayPlan(number, "drill", day, f"Day {number}: {day.title}")


# ----------------------------------------------------------------------------- daily posts


def post_due_at(cohort: m.Cohort, today: date) -> datetime:
    """The instant of the cohort's daily post on its local date `today`."""
    return datetime.combine(today, cohort.post_time, tzinfo=zone(cohort.timezone))


def cohorts_due_for_post(session: Session, now: datetime) -> list[tuple[m.Cohort, int]]:
    """Cohorts whose post time has passed today and whose day has no post yet."""
    out: list[tuple[m.Cohort, int]] = []
    posted = {
        (cid, day)
        for cid, day in session.execute(
            select(m.Post.cohort_id, m.Post.day_number).where(m.Post.kind == "daily")
        )
    }
    for cohort in session.scalars(select(m.Cohort).where(m.Cohort.daily_post.is_(True))):
        today = local_date(now, cohort.timezone)
        number = course_day_on(cohort, today)
        if number == 0 or (cohort.id, number) in posted:
            continue
        if now >= post_due_at(cohort, today):
            out.append((cohort, number))
    return out


def next_daily_post(session: Session, cohort: m.Cohort, now: datetime) -> datetime | None:
    """When the cohort's next daily post goes out: its post time on the first local date from
    today whose course day has no post yet (`now` itself when today's is due and not made);
    None while the post is off, or when a manually paced cohort waits for its next day."""
    if not cohort.daily_post:
        return None
    posted = set(
        session.scalars(
            select(m.Post.day_number).where(m.Post.cohort_id == cohort.id, m.Post.kind == "daily")
        )
    )
    today = local_date(now, cohort.timezone)
    for offset in range(15):  # two weeks reach past any weekend and the start date's week
        day = today + timedelta(days=offset)
        number = course_day_on(cohort, day)
        if number == 0 or number in posted:
            continue
        return max(post_due_at(cohort, day), now)
    return None


def claim_daily_post(
    session: Session, cohort: m.Cohort, now: datetime, *, kind: str = "daily"
) -> m.Post | None:
    """Claim today's post for the cohort; None when it was already claimed (by anyone).

    The unique (cohort, day, kind) row is the lock: two bots racing both try the insert and
    exactly one succeeds, so a post is made once per cohort and day.
    """
    number = course_day(cohort, now)
    if number == 0:
        return None
    post = m.Post(
        cohort_id=cohort.id,
        day_number=number,
        kind=kind,
        local_date=local_date(now, cohort.timezone),
        claimed_at=now,
    )
    try:
        with session.begin_nested():
            session.add(post)
    except IntegrityError:
        return None
    return post


def mark_posted(session: Session, post_id: int, message_id: str, now: datetime) -> m.Post:
    """Record the chat message that carried a claimed post."""
    post = session.get(m.Post, post_id)
    if post is None:
        raise NotFound(f"no post {post_id}; claim one with claim_daily_post first")
    post.message_id = message_id
    post.posted_at = now
    session.flush()
    return post


def parse_post_time(text: str) -> time:
    """'09:00' -> time(9, 0), refusing anything else with the expected form."""
    try:
        hour, minute = (int(x) for x in text.strip().split(":"))
        return time(hour, minute)
    except ValueError:
        raise Invalid(f"{text!r} is not a time of day: give HH:MM, such as 09:00") from None
