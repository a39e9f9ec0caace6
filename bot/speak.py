"""What `/speak` says and the service calls behind it (felab_core.drills.speaking): no Discord.

`/speak prompt` gives the member's say-it-aloud question and its time; `/speak answer` records
how long the spoken answer took and the member's own rating (a voice message's link may come
along), shows them the course's answer, and lays out a post for the channel with five rating
buttons, so cohort-mates rate it (once each; a second press replaces the first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from bot.drills import fit, member_for
from bot.numbers import Who
from felab_core.db import models as m
from felab_core.db.errors import NotFound
from felab_core.drills.speaking import (
    prompt_of_the_day,
    rate_spoken_answer,
    record_spoken_answer,
)

CUSTOM_ID = r"felab:speak:(?P<answer_id>[0-9]{1,18}):(?P<rating>[1-5])"
_CUSTOM_ID = re.compile(CUSTOM_ID)


def custom_id(answer_id: int, rating: int) -> str:
    if not 1 <= rating <= 5:
        raise ValueError(f"a rating is 1 to 5, got {rating}")
    return f"felab:speak:{answer_id}:{rating}"


def parse_custom_id(value: str) -> tuple[int, int] | None:
    match = _CUSTOM_ID.fullmatch(value)
    return (int(match["answer_id"]), int(match["rating"])) if match else None


def _member(session: Session, who: Who, now: datetime) -> m.Member:
    return member_for(session, who.guild_id, who.channel_id, who.user_id, who.display_name, now)


def _prompt(session: Session, member: m.Member, now: datetime) -> m.SpeakPrompt:
    prompt = prompt_of_the_day(session, member, now)
    if prompt is None:
        raise NotFound("no day in the loaded course has a say-it-aloud prompt yet")
    return prompt


def prompt_text(session: Session, who: Who, now: datetime) -> str:
    prompt = _prompt(session, _member(session, who, now), now)
    return fit(
        f"**Say it out loud** ({prompt.seconds} s)\n{prompt.question}\n\n"
        "Answer aloud, timing yourself (a voice message works too), then tell felab how it "
        "went: `/speak answer seconds:… rating:1-5` (5 = clear, correct and inside the time)."
    )


@dataclass(frozen=True)
class Spoken:
    private: str  # to the member: recorded, and the course's answer
    public: str  # to the channel: what to rate
    answer_id: int


def answer(
    session: Session,
    who: Who,
    seconds: float,
    rating: int,
    recording: str | None,
    now: datetime,
) -> Spoken:
    member = _member(session, who, now)
    prompt = _prompt(session, member, now)
    spoken = record_spoken_answer(
        session,
        member,
        prompt,
        duration_s=seconds,
        self_rating=rating,
        recording_ref=recording,
        now=now,
    )
    timing = (
        f"{seconds:g} s of {prompt.seconds}: in time"
        if seconds <= prompt.seconds
        else f"{seconds:g} s, over the {prompt.seconds} s: say it shorter next time"
    )
    private = fit(
        f"Recorded: {timing}; your rating {rating}/5.\n\n**The course's answer**\n{prompt.answer}"
    )
    name = member.display_name or f"<@{member.discord_id}>"
    public = f"**{name}** answered aloud in {seconds:g} s: *{prompt.question}*"
    if recording:
        public += f"\n{recording}"
    public += "\nHow clear and correct was it? Rate 1 (lost) to 5 (clear, correct, in time)."
    return Spoken(private, fit(public), spoken.id)


def rate(session: Session, who: Who, answer_id: int, rating: int, now: datetime) -> str:
    rater = _member(session, who, now)
    rate_spoken_answer(session, rater, answer_id, rating, now=now)
    return f"Thanks: you rated this answer {rating}/5 (pressing again changes your rating)."
