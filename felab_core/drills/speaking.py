"""Say it out loud: spoken answers, their self-rating and the ratings peers give them.

Ratings are 1 to 5 (5 = clear, correct and inside the time). Felab keeps how long the answer
took, not the recording itself: a Discord attachment link may be kept as a reference. An answer
given as a voice message has no self-rating at first (`self_rating=None`): the speaker gives it
later with `set_self_rating`, once.

A length is stored only as measured, with how (`timing`): the voice message's own length, the
seconds the member timed and typed, or the time from the prompt being shown to their "Said it"
click (an upper bound: it includes reading the question). A button pressed long after the
prompt was posted measures nothing, and the answer is kept untimed: never the prompt's limit.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import Forbidden, Invalid, NotFound

MAX_SECONDS = 600
# The course's advice for every say-it-aloud prompt, shown with it.
ADVICE = "Record yourself once and listen back."
# How an answer's length was measured, and how a reply names it.
TIMINGS = {
    "voice": "the length of your voice message",
    "self-timed": "as you timed it",
    "prompt-to-click": "from the prompt to your click",
    "untimed": "not timed",
}


_GONE = (
    "this spoken answer is no longer here: its speaker may have deleted their data. Nothing "
    "was recorded."
)


def prompt_by_key(session: Session, key: str) -> m.SpeakPrompt:
    prompt = session.scalar(select(m.SpeakPrompt).where(m.SpeakPrompt.key == key))
    if prompt is None or prompt.retired:
        raise NotFound(f"no say-it-aloud prompt {key!r} in the loaded content")
    return prompt


def _rating(value: int, who: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise Invalid(f"{who} must be a whole number from 1 to 5, got {value!r}")
    return value


def record_spoken_answer(
    session: Session,
    member: m.Member,
    prompt: m.SpeakPrompt | str,
    *,
    duration_s: float | None,
    self_rating: int | None,
    recording_ref: str | None = None,
    timing: str = "self-timed",
    now: datetime | None = None,
) -> m.SpokenAnswer:
    """Store one attempt; the answer is over time if it ran past the prompt's seconds.
    `self_rating` None: the speaker rates it later (`set_self_rating`). `timing` says how the
    length was measured (TIMINGS); an "untimed" answer has no length."""
    if isinstance(prompt, str):
        prompt = prompt_by_key(session, prompt)
    if timing not in TIMINGS:
        raise Invalid(f"timing must be one of {', '.join(TIMINGS)}, got {timing!r}")
    if (duration_s is None) != (timing == "untimed"):
        raise Invalid("an untimed answer has no length, and a timed one needs its length")
    if duration_s is not None and (
        not math.isfinite(duration_s) or not 0 < duration_s <= MAX_SECONDS
    ):
        raise Invalid(
            f"an answer's length must be between 0 and {MAX_SECONDS} seconds, got {duration_s}"
        )
    answer = m.SpokenAnswer(
        member_id=member.id,
        prompt_id=prompt.id,
        duration_s=None if duration_s is None else float(duration_s),
        timing=timing,
        self_rating=None if self_rating is None else _rating(self_rating, "a self-rating"),
        recording_ref=recording_ref,
        created_at=now or utcnow(),
    )
    session.add(answer)
    session.flush()
    return answer


def set_self_rating(
    session: Session, member: m.Member, answer_id: int, rating: int
) -> m.SpokenAnswer:
    """The speaker rates their own answer that has no self-rating yet (a voice answer); once."""
    answer = session.get(m.SpokenAnswer, answer_id)
    if answer is None:
        raise NotFound(_GONE)
    if answer.member_id != member.id:
        raise Forbidden("only the speaker gives an answer its self-rating")
    if answer.self_rating is not None:
        raise Invalid(f"you rated this answer {answer.self_rating}/5 already")
    answer.self_rating = _rating(rating, "a self-rating")
    session.flush()
    return answer


def rate_spoken_answer(
    session: Session,
    rater: m.Member,
    answer_id: int,
    rating: int,
    *,
    note: str = "",
    now: datetime | None = None,
) -> m.PeerRating:
    """A cohort-mate rates an answer; rating it again replaces their earlier rating."""
    answer = session.get(m.SpokenAnswer, answer_id)
    if answer is None:
        raise NotFound(_GONE)
    if answer.member_id == rater.id:
        raise Forbidden("rate your own answer with the self-rating; peers rate it here")
    author = session.get(m.Member, answer.member_id)
    if author is None or author.cohort_id != rater.cohort_id:
        raise Forbidden("only members of the same cohort can rate this answer")
    value = _rating(rating, "a rating")
    existing = session.scalar(
        select(m.PeerRating).where(
            m.PeerRating.answer_id == answer_id, m.PeerRating.rater_id == rater.id
        )
    )
    if existing is None:
        existing = m.PeerRating(answer_id=answer_id, rater_id=rater.id, rating=value)
        session.add(existing)
    existing.rating = value
    existing.note = note.strip()[:1000]
    existing.created_at = now or utcnow()
    session.flush()
    return existing


def prompt_of_the_day(session: Session, member: m.Member, now: datetime) -> m.SpeakPrompt | None:
    """The say-it-aloud prompt for the member now (`/speak`): from the latest course day up to
    the cohort's day that has prompts (the first day that has any, before the course reaches
    it), the first prompt the member has not answered yet, else that day's first prompt."""
    from felab_core.content.calendar import course_day

    days = session.scalars(
        select(m.ContentDay.number)
        .join(m.SpeakPrompt, m.SpeakPrompt.day_id == m.ContentDay.id)
        .where(m.ContentDay.retired.is_(False), m.SpeakPrompt.retired.is_(False))
        .distinct()
        .order_by(m.ContentDay.number)
    ).all()
    if not days:
        return None
    today = course_day(member.cohort, now)
    reached = [d for d in days if d <= today]
    number = reached[-1] if reached else days[0]
    prompts = session.scalars(
        select(m.SpeakPrompt)
        .join(m.ContentDay, m.SpeakPrompt.day_id == m.ContentDay.id)
        .where(m.ContentDay.number == number, m.SpeakPrompt.retired.is_(False))
        .order_by(m.SpeakPrompt.position, m.SpeakPrompt.id)
    ).all()
    answered = set(
        session.scalars(
            select(m.SpokenAnswer.prompt_id).where(m.SpokenAnswer.member_id == member.id)
        )
    )
    return next((p for p in prompts if p.id not in answered), prompts[0] if prompts else None)


def day_prompts(session: Session, day: m.ContentDay) -> list[m.SpeakPrompt]:
    """A day's live say-it-aloud prompts in the pack's order (the daily post shows each one)."""
    return list(
        session.scalars(
            select(m.SpeakPrompt)
            .where(m.SpeakPrompt.day_id == day.id, m.SpeakPrompt.retired.is_(False))
            .order_by(m.SpeakPrompt.position, m.SpeakPrompt.id)
        )
    )


def prompt_by_id(session: Session, prompt_id: int) -> m.SpeakPrompt:
    prompt = session.get(m.SpeakPrompt, prompt_id)
    if prompt is None or prompt.retired:
        raise NotFound(
            "this say-it-aloud question is no longer in the course: `/speak prompt` gives today's"
        )
    return prompt


def prompt_to_click(shown_at: datetime | None, now: datetime) -> float | None:
    """Seconds from the prompt being shown to the click, when that measures an answer: None
    when the prompt is unknown or was shown more than MAX_SECONDS before."""
    if shown_at is None:
        return None
    at = shown_at if shown_at.tzinfo is not None else shown_at.replace(tzinfo=UTC)
    seconds = (now - at).total_seconds()
    if not 0 < seconds <= MAX_SECONDS:
        return None
    return max(round(seconds, 1), 0.1)  # to the tenth (Discord stamps messages to the ms)


def said_it(
    session: Session,
    member: m.Member,
    prompt: m.SpeakPrompt,
    now: datetime,
    shown_at: datetime | None = None,
) -> tuple[m.SpokenAnswer, bool]:
    """The "Said it" button: one answer per member, prompt and local day (the member's
    timezone), checked under the member's row lock. Its length is the time from the prompt
    being shown (`shown_at`, the message the button is on) to the click, labelled as such, or
    none at all when that is unknown or too long to be an answer; never the prompt's limit.
    Unrated: the speaker rates it with `set_self_rating`. Returns (answer, recorded now): a
    second press the same day returns the first answer and records nothing."""
    from felab_core.content.calendar import zone

    # Under the member's row lock (as rate_card_once), so two presses racing record one answer.
    locked = session.get(m.Member, member.id, with_for_update=True, populate_existing=True)
    member = locked if locked is not None else member
    tz = zone(member.timezone)
    today = now.astimezone(tz).date()
    start = datetime(today.year, today.month, today.day, tzinfo=tz)
    earlier = session.scalars(
        select(m.SpokenAnswer)
        .where(m.SpokenAnswer.member_id == member.id, m.SpokenAnswer.prompt_id == prompt.id)
        .order_by(m.SpokenAnswer.created_at.desc(), m.SpokenAnswer.id.desc())
    ).first()
    if earlier is not None:
        at = earlier.created_at
        at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        if at >= start:
            return earlier, False
    seconds = prompt_to_click(shown_at, now)
    answer = record_spoken_answer(
        session,
        member,
        prompt,
        duration_s=seconds,
        self_rating=None,
        timing="untimed" if seconds is None else "prompt-to-click",
        now=now,
    )
    return answer, True
