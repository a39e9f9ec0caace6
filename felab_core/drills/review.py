"""Spaced-repetition drills on FSRS: what is due today, rating a card, streaks and retention.

Order of today's cards: new cards of the cohort's current day first, then reviews that have come
due (oldest first), then cards from earlier days the member has never seen (someone who joined
late catches up). Cards of later days and retired cards never show.

Retention counts every rating except a card's first sighting (nothing to remember yet): the
share rated hard, good or easy rather than again. Streaks count the member's own calendar days,
in their own time zone, with at least one rating.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum

import fsrs
from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from felab_core.content.calendar import course_day, local_date, zone
from felab_core.db import models as m
from felab_core.db.readable import Unreadable, bound_problem
from felab_core.drills.kinds import KINDS, Item
from felab_core.errors import Invalid, NotFound
from felab_core.settings import get_settings
from felab_core.text import echo_of


class Grade(StrEnum):
    """The four answers a member gives after seeing the answer."""

    AGAIN = "again"
    HARD = "hard"
    GOOD = "good"
    EASY = "easy"

    @property
    def fsrs(self) -> fsrs.Rating:
        return fsrs.Rating[self.value.capitalize()]

    @property
    def value_int(self) -> int:
        return int(self.fsrs)


_GRADE_WORDS = {
    "again": Grade.AGAIN,
    "a": Grade.AGAIN,
    "1": Grade.AGAIN,
    "hard": Grade.HARD,
    "h": Grade.HARD,
    "2": Grade.HARD,
    "good": Grade.GOOD,
    "g": Grade.GOOD,
    "3": Grade.GOOD,
    "easy": Grade.EASY,
    "e": Grade.EASY,
    "4": Grade.EASY,
}


# What a member reads when their own row went away mid-press (deleted a moment before).
_NO_MEMBER = (
    "felab holds nothing about you any more (your data was deleted): press again to start afresh"
)


def parse_grade(text: str | int | Grade) -> Grade:
    """'again'/'a'/1 ... 'easy'/'e'/4 -> Grade."""
    if isinstance(text, Grade):
        return text
    grade = _GRADE_WORDS.get(str(text).strip().lower())
    if grade is None and not str(text).strip():  # Enter alone: "'' is not a rating" said little
        raise Invalid("no rating given: answer again, hard, good or easy (or 1-4)")
    if grade is None:
        raise Invalid(
            f"{echo_of(str(text))} is not a rating: answer again, hard, good or easy (or 1-4)"
        )
    return grade


def make_scheduler(*, retention: float | None = None, fuzz: bool | None = None) -> fsrs.Scheduler:
    """The FSRS scheduler with the settings' target retention and fuzz."""
    settings = get_settings()
    return fsrs.Scheduler(
        desired_retention=retention if retention is not None else settings.drill_retention,
        enable_fuzzing=settings.drill_fuzz if fuzz is None else fuzz,
    )


# ----------------------------------------------------------------------------- due cards


@dataclass(frozen=True)
class DueCard:
    """A card to show now: `kind` is 'new', 'review' or 'catch-up'."""

    card: m.Card
    kind: str
    day_number: int
    due: datetime | None


def end_of_local_day(now: datetime, tz_name: str) -> datetime:
    """The first instant of the member's next calendar day, in UTC."""
    tz = zone(tz_name)
    tomorrow = now.astimezone(tz).date() + timedelta(days=1)
    return datetime(tomorrow.year, tomorrow.month, tomorrow.day, tzinfo=tz).astimezone(UTC)


def cards_due(
    session: Session,
    member: m.Member,
    now: datetime,
    *,
    until: datetime | None = None,
) -> list[DueCard]:
    """Today's cards for the member, in the order to show them.

    Reviews due by `until` (default: now) are included; pass `end_of_local_day(...)` for "due
    today" counts. A cohort on a day with no pack still gets its reviews.
    """
    cohort = member.cohort
    today = course_day(cohort, now)
    until = until or now
    seen = select(m.CardState.card_id).where(m.CardState.member_id == member.id)
    unseen_rows = session.execute(
        select(m.Card, m.ContentDay.number)
        .join(m.ContentDay, m.ContentDay.id == m.Card.day_id)
        .where(
            m.ContentDay.number <= today,
            m.ContentDay.retired.is_(False),
            m.Card.retired.is_(False),
            m.Card.id.not_in(seen),
        )
        .order_by(m.ContentDay.number.desc(), m.Card.position)
    ).all()
    review_rows = session.execute(
        select(m.Card, m.ContentDay.number, m.CardState.due)
        .join(m.CardState, m.CardState.card_id == m.Card.id)
        .join(m.ContentDay, m.ContentDay.id == m.Card.day_id)
        .where(
            m.CardState.member_id == member.id,
            m.CardState.due <= until,
            m.Card.retired.is_(False),
            m.ContentDay.retired.is_(False),
        )
        .order_by(m.CardState.due, m.Card.id)
    ).all()
    new = [DueCard(c, "new", n, None) for c, n in unseen_rows if n == today]
    catch_up = sorted(
        (DueCard(c, "catch-up", n, None) for c, n in unseen_rows if n != today),
        key=lambda d: (d.day_number, d.card.position),
    )
    reviews = [DueCard(c, "review", n, due) for c, n, due in review_rows]
    return [*new, *reviews, *catch_up]


def next_due_at(session: Session, member: m.Member) -> datetime | None:
    """When the member's next review comes due (None when they have seen no card)."""
    return session.scalar(
        select(func.min(m.CardState.due))
        .join(m.Card, m.Card.id == m.CardState.card_id)
        .where(m.CardState.member_id == member.id, m.Card.retired.is_(False))
    )


def card_by_key(session: Session, key: str) -> m.Card:
    card = session.scalar(select(m.Card).where(m.Card.key == key))
    if card is None:
        raise NotFound(f"no card with id {key!r}; load the content with `felab content load`")
    return card


# ----------------------------------------------------------------------------- rating


@dataclass(frozen=True)
class RateOutcome:
    """What a rating did: when the card comes back, and the member's streak after it."""

    card: m.Card
    grade: Grade
    due: datetime
    state: str
    streak: int


def _streak_step(current: int, best: int, last: date | None, day: date) -> tuple[int, int, date]:
    """Fold one review's local day into (current streak, best streak, last review day)."""
    if last is None or day > last + timedelta(days=1):
        current = 1
    elif day == last + timedelta(days=1):
        current += 1
    elif day < last:
        # A clock moved west (new time zone): the day is already counted.
        return current, best, last
    return current, max(best, current), day


def _checked(state: m.CardState) -> m.CardState:
    """A stored FSRS state held to what FSRS keeps (db/readable's BOUNDS, as `felab db restore`
    holds a backup to): a stability of -5 edited into the database had stopped the review as
    "a bug in felab"; the row is named instead, as for any value felab cannot use."""
    for column in ("state", "step", "stability", "difficulty"):
        value = getattr(state, column)
        why = bound_problem("card_states", column, value)
        if value is None and (column != "step" or state.state == 3) and state.state in (2, 3):
            why = "empty, where FSRS keeps a value for a card past its first review"
        if why is not None:
            raise Invalid(
                f"the database holds a value felab cannot use: "
                f"{Unreadable('card_states', column, state.id, why)} (changed outside felab?): "
                "restore a backup (`felab db restore FILE --yes`), or correct that value"
            )
    return state


def rate_card(
    session: Session,
    member: m.Member,
    card: m.Card | str,
    grade: Grade | str | int,
    now: datetime,
    *,
    duration_ms: int | None = None,
    source: str = "cli",
    scheduler: fsrs.Scheduler | None = None,
) -> RateOutcome:
    """Rate a card for a member: update its FSRS state, log the review, count the streak."""
    if now.tzinfo is None:
        raise Invalid("`now` must be an aware datetime (e.g. datetime.now(UTC))")
    grade = parse_grade(grade)
    if isinstance(card, str):
        card = card_by_key(session, card)
    if card.retired:
        raise Invalid(
            "this card was removed from the course, so it can no longer be rated: `/drill` "
            "shows the cards you have now"
        )
    if duration_ms is not None and duration_ms < 0:
        raise Invalid("a review cannot take negative time")
    now = now.astimezone(UTC)
    scheduler = scheduler or make_scheduler()
    # Lock the member row (PostgreSQL): one rating at a time per member keeps streaks exact.
    locked = session.get(m.Member, member.id, with_for_update=True, populate_existing=True)
    if locked is None:
        raise NotFound(_NO_MEMBER)
    member = locked
    state = session.scalar(
        select(m.CardState)
        .where(m.CardState.member_id == member.id, m.CardState.card_id == card.id)
        .with_for_update()
    )
    if state is None:
        before = 0
        fcard = fsrs.Card(card_id=card.id, due=now)
        state = m.CardState(member_id=member.id, card_id=card.id, reps=0, lapses=0)
        session.add(state)
    else:
        before = _checked(state).state
        fcard = fsrs.Card(
            card_id=card.id,
            state=fsrs.State(state.state),
            step=state.step,
            stability=state.stability,
            difficulty=state.difficulty,
            due=state.due,
            last_review=state.last_review,
        )
    fcard, _log = scheduler.review_card(fcard, grade.fsrs, now, duration_ms)
    state.state = int(fcard.state)
    state.step = fcard.step
    state.stability = fcard.stability
    state.difficulty = fcard.difficulty
    state.due = fcard.due
    state.last_review = now
    state.reps = (state.reps or 0) + 1
    if grade is Grade.AGAIN and before == int(fsrs.State.Review):
        state.lapses = (state.lapses or 0) + 1
    day = local_date(now, member.timezone)
    session.add(
        m.Review(
            member_id=member.id,
            card_id=card.id,
            rating=grade.value_int,
            reviewed_at=now,
            local_day=day,
            state_before=before,
            due_after=fcard.due,
            duration_ms=duration_ms,
            source=source,
        )
    )
    member.streak_current, member.streak_best, member.last_review_day = _streak_step(
        member.streak_current, member.streak_best, member.last_review_day, day
    )
    member.reviews_total += 1
    if before != 0:
        member.recall_tries += 1
        member.recalled += grade is not Grade.AGAIN
    session.flush()
    return RateOutcome(
        card=card,
        grade=grade,
        due=fcard.due,
        state=fsrs.State(state.state).name.lower(),
        streak=member.streak_current,
    )


# ----------------------------------------------------------------------------- streaks, retention


@dataclass(frozen=True)
class Streak:
    current: int
    best: int
    reviewed_today: bool


def live_streak(current: int, last: date | None, today: date) -> int:
    """A kept streak as it stands on the member's `today`: alive if rated today or yesterday."""
    return current if last is not None and last >= today - timedelta(days=1) else 0


def streak(member: m.Member, now: datetime) -> Streak:
    """The streak as of `now` in the member's time zone: alive if they rated today or yesterday."""
    today = local_date(now, member.timezone)
    last = member.last_review_day
    return Streak(
        current=live_streak(member.streak_current, last, today),
        best=member.streak_best,
        reviewed_today=last is not None and last >= today,
    )


def retention_of(recalled: int, tries: int) -> float | None:
    return recalled / tries if tries else None


def member_retention(member: m.Member) -> float | None:
    """Share of the member's recall attempts (all but first sightings) not rated again."""
    return retention_of(member.recalled, member.recall_tries)


@dataclass(frozen=True)
class CardRetention:
    card_key: str
    tries: int
    recalled: int

    @property
    def retention(self) -> float | None:
        return retention_of(self.recalled, self.tries)


def card_retention(
    session: Session, *, member_id: int | None = None, cohort_id: int | None = None
) -> list[CardRetention]:
    """Retention per card, for one member or a whole cohort (or everyone)."""
    tried = and_(m.Review.state_before != 0)
    query = (
        select(
            m.Card.key,
            func.count(m.Review.id).filter(tried),
            func.count(m.Review.id).filter(tried, m.Review.rating > 1),
        )
        .join(m.Review, m.Review.card_id == m.Card.id)
        .group_by(m.Card.key)
        .order_by(m.Card.key)
    )
    if member_id is not None:
        query = query.where(m.Review.member_id == member_id)
    if cohort_id is not None:
        query = query.join(m.Member, m.Member.id == m.Review.member_id).where(
            m.Member.cohort_id == cohort_id
        )
    return [CardRetention(key, tries, rec) for key, tries, rec in session.execute(query)]


def recompute_stats(session: Session, member: m.Member) -> m.Member:
    """Rebuild the member's streak and review counters from the review log."""
    current, best, last = 0, 0, None
    total = tries = recalled = 0
    rows = session.execute(
        select(m.Review.local_day, m.Review.state_before, m.Review.rating)
        .where(m.Review.member_id == member.id)
        .order_by(m.Review.reviewed_at, m.Review.id)
    )
    for day, before, rating in rows:
        current, best, last = _streak_step(current, best, last, day)
        total += 1
        if before != 0:
            tries += 1
            recalled += rating > 1
    member.streak_current, member.streak_best, member.last_review_day = current, best, last
    member.reviews_total, member.recall_tries, member.recalled = total, tries, recalled
    session.flush()
    return member


# ----------------------------------------------------------------------------- chat buttons


def day_cards(session: Session, day: m.ContentDay) -> list[m.Card]:
    """A day's live cards in the pack's order (the daily post shows each one)."""
    return list(
        session.scalars(
            select(m.Card)
            .where(m.Card.day_id == day.id, m.Card.retired.is_(False))
            .order_by(m.Card.position)
        )
    )


def card_by_id(session: Session, card_id: int) -> m.Card:
    card = session.get(m.Card, card_id)
    if card is None:
        raise NotFound(
            "this card is no longer in the course: `/drill` shows the cards you have now"
        )
    return card


@dataclass(frozen=True)
class OnceOutcome:
    """A rating given from a shared button: `outcome` is None when nothing was recorded because
    the member already rated the card and it is not due again before `due`."""

    outcome: RateOutcome | None
    due: datetime


def rate_card_once(
    session: Session,
    member: m.Member,
    card: m.Card,
    grade: Grade | str | int,
    now: datetime,
    *,
    source: str = "discord",
    scheduler: fsrs.Scheduler | None = None,
) -> OnceOutcome:
    """Rate a card from a button that stays on screen (a daily post, a double click).

    A card is rated only when it is new or due: a second press before it comes back records
    nothing and says when it does. Checked under the member's row lock (rate_card takes the
    same lock), so two presses racing each other still record one review.
    """
    if now.tzinfo is None:
        raise Invalid("`now` must be an aware datetime (e.g. datetime.now(UTC))")
    grade = parse_grade(grade)
    locked = session.get(m.Member, member.id, with_for_update=True, populate_existing=True)
    if locked is None:
        raise NotFound(_NO_MEMBER)
    state = session.scalar(
        select(m.CardState).where(
            m.CardState.member_id == locked.id, m.CardState.card_id == card.id
        )
    )
    if state is not None and state.due > now:
        return OnceOutcome(None, state.due)
    outcome = rate_card(session, locked, card, grade, now, source=source, scheduler=scheduler)
    return OnceOutcome(outcome, outcome.due)


def day_drill_items(session: Session, day: m.ContentDay) -> list[m.DrillItem]:
    """A day's live drill items (whiteboards and the other kinds), kind by kind in the pack's
    order: the daily post shows each one."""
    order = {name: i for i, name in enumerate(KINDS)}
    items = session.scalars(
        select(m.DrillItem)
        .where(m.DrillItem.day_id == day.id, m.DrillItem.retired.is_(False))
        .order_by(m.DrillItem.position, m.DrillItem.id)
    ).all()
    return sorted(items, key=lambda item: order.get(item.kind, len(order)))


def drill_item_by_id(session: Session, item_id: int) -> m.DrillItem:
    item = session.get(m.DrillItem, item_id)
    if item is None or item.retired or item.kind not in KINDS:
        what = item.kind if item is not None else "item"
        raise NotFound(f"this {what} is no longer in the course; today's post has the current ones")
    return item


def item_of(row: m.DrillItem) -> Item:
    """A stored drill item as its kind's module reads it."""
    return Item(key=row.key, question=row.question, answer=row.answer, body=dict(row.body or {}))
