"""What `/speak` says and the service calls behind it (felab_core.drills.speaking): no Discord.

`/speak prompt` gives the member's say-it-aloud question and its time; `/speak answer` records
how long the spoken answer took and the member's own rating (a voice message's link may come
along), shows them the course's answer, and lays out a post for the channel with five rating
buttons, so cohort-mates rate it (once each; a second press replaces the first).

A Discord voice message in the cohort's channel is an answer too (`voice_answer`): its length
comes from the attachment, the answer is recorded without a self-rating, and the bot's reply
carries the same five buttons: the speaker's own press is their self-rating (and shows them the
course's answer), everyone else's a peer rating. Without the message-content intent Discord
sends the message with no attachment: the reply then points to `/speak answer`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from felab_bot.drills import fit
from felab_bot.who import Who, member_of
from felab_core.db import models as m
from felab_core.drills.speaking import (
    ADVICE,
    prompt_of_the_day,
    rate_spoken_answer,
    record_spoken_answer,
    set_self_rating,
)
from felab_core.errors import NotFound
from felab_core.people.members import cohort_for_channel
from felab_core.text import literal

IS_VOICE_MESSAGE = 1 << 13  # Discord's message flag
NO_INTENT = (
    "I can't hear voice messages here: felab runs without Discord's message-content intent, so "
    "Discord doesn't show me the recording. Time your answer and use "
    "`/speak answer seconds:… rating:1-5` instead (you can attach the voice message there)."
)
NO_LENGTH = (
    "I couldn't read this voice message's length. Time your answer and use "
    "`/speak answer seconds:… rating:1-5` instead."
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


def speaker(member: m.Member) -> str:
    """How a post names the member: their display name as typed (never a mention or markup),
    else a mention that shows their name (messages are sent with mentions disabled)."""
    return literal(member.display_name) if member.display_name else f"<@{member.discord_id}>"


def _prompt(session: Session, member: m.Member, now: datetime) -> m.SpeakPrompt:
    prompt = prompt_of_the_day(session, member, now)
    if prompt is None:
        raise NotFound("no day in the loaded course has a say-it-aloud prompt yet")
    return prompt


@dataclass(frozen=True)
class PromptReply:
    text: str
    prompt_id: int  # the reply carries this prompt's "Said it" button


def prompt_text(session: Session, who: Who, now: datetime, voice: bool = False) -> PromptReply:
    """`voice`: the bot reads voice messages (the message-content intent is on)."""
    prompt = _prompt(session, member_of(session, who, now), now)
    how = (
        "Answer with a voice message in this channel (felab reads its length), or answer aloud "
        "timing yourself and tell felab how it went: "
        if voice
        else "Answer aloud, timing yourself, then tell felab how it went: "
    )
    text = fit(
        f"**Say it out loud** ({prompt.seconds} s)\n{prompt.question}\n\n{ADVICE}\n{how}"
        "`/speak answer seconds:… rating:1-5` (5 = clear, correct and inside the time), or press "
        "Said it below as you finish: felab times you from this message to your click."
    )
    return PromptReply(text, prompt.id)


@dataclass(frozen=True)
class Spoken:
    private: str  # to the member: recorded, and the course's answer
    public: str  # to the channel: what to rate
    answer_id: int
    member_id: int  # the speaker: the channel's post is about them (deleted with their data)


def answer(
    session: Session,
    who: Who,
    seconds: float,
    rating: int,
    recording: str | None,
    now: datetime,
) -> Spoken:
    member = member_of(session, who, now)
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
    name = speaker(member)
    public = f"**{name}** answered aloud in {seconds:g} s: *{prompt.question}*"
    if recording:
        public += f"\n{recording}"
    public += "\nHow clear and correct was it? Rate 1 (lost) to 5 (clear, correct, in time)."
    return Spoken(private, fit(public), spoken.id, member.id)


@dataclass(frozen=True)
class VoiceReply:
    text: str  # the reply under the voice message, in the channel
    answer_id: int | None  # recorded: the reply carries the rating buttons
    member_id: int | None = None  # the speaker, when recorded: the reply is about them


def in_cohort_channel(session: Session, who: Who) -> bool:
    try:
        cohort_for_channel(session, str(who.guild_id or ""), str(who.channel_id or ""))
    except NotFound:
        return False
    return True


def voice_answer(
    session: Session, who: Who, seconds: float | None, link: str | None, now: datetime
) -> VoiceReply | None:
    """A voice message in a channel: None when no cohort runs there (the bot stays quiet);
    `seconds` None: Discord sent no attachment (no intent) or no length."""
    if not in_cohort_channel(session, who):
        return None
    if seconds is None:
        return VoiceReply(NO_INTENT if link is None else NO_LENGTH, None)
    member = member_of(session, who, now)
    prompt = _prompt(session, member, now)
    spoken = record_spoken_answer(
        session,
        member,
        prompt,
        duration_s=seconds,
        self_rating=None,
        recording_ref=link,
        timing="voice",
        now=now,
    )
    name = speaker(member)
    if seconds <= prompt.seconds:
        timing = f"in {seconds:g} s, inside the {prompt.seconds} s"
        nudge = ""
    else:
        timing = f"in {seconds:g} s"
        nudge = (
            f"\nThat's a little over the {prompt.seconds} s, and a fine start. Next time, try "
            "opening with the one-sentence answer and stopping once it has landed."
        )
    text = (
        f"**{name}** answered aloud {timing}: *{prompt.question}*{nudge}\n"
        "Cohort-mates: rate it 1 (lost) to 5 (clear, correct, in time). "
        f"{name}: press your own rating to record it and see the course's answer."
    )
    return VoiceReply(fit(text), spoken.id, member.id)


def rate(session: Session, who: Who, answer_id: int, rating: int, now: datetime) -> str:
    rater = member_of(session, who, now)
    own = session.get(m.SpokenAnswer, answer_id)
    if own is not None and own.member_id == rater.id and own.self_rating is None:
        set_self_rating(session, rater, answer_id, rating)
        prompt = session.get(m.SpeakPrompt, own.prompt_id)
        course = f"\n\n**The course's answer**\n{prompt.answer}" if prompt is not None else ""
        return fit(f"Recorded your own rating: {rating}/5.{course}")
    rate_spoken_answer(session, rater, answer_id, rating, now=now)
    return f"Thanks: you rated this answer {rating}/5 (pressing again changes your rating)."
