"""`/speak`: the prompt of the day, a spoken answer recorded with the course's answer shown,
a channel post with five persistent rating buttons, and peers' ratings (not one's own)."""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace
from typing import Any

import discord
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_bot import speak
from felab_bot.cogs.speak import RateButton, SpeakCog, rating_view
from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid
from tests.bot.support import USER, FakeBot, chat_cohort, who_in
from tests.db_support import NOW


@pytest.fixture
def cohort(db: Session, day2: None) -> m.Cohort:
    return chat_cohort(db)


def test_prompt_answer_and_peer_rating(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    reply = speak.prompt_text(db, who, NOW)
    text = reply.text
    assert "Say it out loud** (20 s)" in text and "good enough for customers" in text
    assert "Record yourself once and listen back." in text
    assert db.get(m.SpeakPrompt, reply.prompt_id) is not None  # its Said it button's prompt
    spoken = speak.answer(db, who, 18.5, 4, "https://cdn.invalid/voice.ogg", NOW)
    assert "18.5 s of 20: in time" in spoken.private
    assert "Ollama is llama.cpp with the flags hidden" in spoken.private
    assert "**Ada** answered aloud in 18.5 s" in spoken.public and "voice.ogg" in spoken.public
    row = db.get(m.SpokenAnswer, spoken.answer_id)
    assert row is not None and (row.duration_s, row.timing, row.self_rating) == (
        18.5,
        "self-timed",
        4,
    )
    over = speak.answer(db, who, 31, 2, None, NOW)
    assert "over the 20 s" in over.private

    with pytest.raises(Forbidden, match="self-rating"):
        speak.rate(db, who, spoken.answer_id, 5, NOW)
    peer = who_in(cohort, user=USER + 1, name="Bea")
    assert "rated this answer 3/5" in speak.rate(db, peer, spoken.answer_id, 3, NOW)
    speak.rate(db, peer, spoken.answer_id, 5, NOW)
    ratings = db.scalars(select(m.PeerRating.rating)).all()
    assert ratings == [5]  # a second press replaces the first


def test_bad_values_are_refused(db: Session, cohort: m.Cohort) -> None:
    with pytest.raises(Invalid, match="between 0 and 600"):
        speak.answer(db, who_in(cohort), 900, 3, None, NOW)
    with pytest.raises(Invalid, match="1 to 5"):
        speak.answer(db, who_in(cohort), 10, 7, None, NOW)
    assert db.scalars(select(m.SpokenAnswer)).all() == []


async def test_rating_buttons_are_persistent_and_round_trip() -> None:
    view = rating_view(12)
    assert view.timeout is None and view.is_persistent()
    ids = [c.custom_id for c in view.children if isinstance(c, RateButton)]
    assert ids == [f"felab:speak:12:{r}" for r in range(1, 6)]
    assert all(speak.parse_custom_id(i) == (12, r) for i, r in zip(ids, range(1, 6), strict=True))
    match = re.fullmatch(RateButton.__discord_ui_compiled_template__, "felab:speak:7:2")
    assert match is not None
    item = await RateButton.from_custom_id(None, None, match)  # type: ignore[arg-type]
    assert (item.answer_id, item.rating) == (7, 2)
    with pytest.raises(ValueError):
        speak.custom_id(1, 6)


def test_voice_answer_recorded_nudged_and_self_rated(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    link = "https://cdn.invalid/voice-message.ogg"
    over = speak.voice_answer(db, who, 24.5, link, NOW)
    assert over is not None and over.answer_id is not None
    assert "**Ada** answered aloud in 24.5 s" in over.text
    assert "a little over the 20 s" in over.text
    row = db.get(m.SpokenAnswer, over.answer_id)
    assert row is not None and (row.duration_s, row.self_rating, row.recording_ref) == (
        24.5,
        None,
        link,
    )
    own = speak.rate(db, who, over.answer_id, 3, NOW)
    assert own.startswith("Recorded your own rating: 3/5") and "The course's answer" in own
    assert row.self_rating == 3
    with pytest.raises(Forbidden, match="self-rating"):  # once; after that it is a peer press
        speak.rate(db, who, over.answer_id, 5, NOW)
    peer = who_in(cohort, user=USER + 1, name="Bea")
    assert "rated this answer 4/5" in speak.rate(db, peer, over.answer_id, 4, NOW)

    short = speak.voice_answer(db, who, 19, link, NOW)
    assert short is not None and "inside the 20 s" in short.text and "over" not in short.text


def test_voice_without_intent_or_cohort(db: Session, cohort: m.Cohort) -> None:
    no_intent = speak.voice_answer(db, who_in(cohort), None, None, NOW)
    assert no_intent is not None and no_intent.answer_id is None
    assert "message-content intent" in no_intent.text and "/speak answer" in no_intent.text
    no_length = speak.voice_answer(db, who_in(cohort), None, "https://cdn.invalid/x.ogg", NOW)
    assert no_length is not None and "couldn't read" in no_length.text
    elsewhere = dataclasses.replace(who_in(cohort), channel_id=1)
    assert speak.voice_answer(db, elsewhere, 12, None, NOW) is None  # no cohort there: quiet
    assert db.scalars(select(m.SpokenAnswer)).all() == []


def test_prompt_mentions_voice_messages_only_with_the_intent(db: Session, cohort: m.Cohort) -> None:
    assert "voice message" not in speak.prompt_text(db, who_in(cohort), NOW).text
    assert "Answer with a voice message" in speak.prompt_text(db, who_in(cohort), NOW, True).text


class _Message:
    """What SpeakCog.on_message reads of a discord.Message; records the reply."""

    def __init__(self, cohort: m.Cohort, flags: int, attachments: list[Any]) -> None:
        self.author = SimpleNamespace(bot=False, id=USER, display_name="Ada")
        self.guild = SimpleNamespace(id=int(cohort.guild_id or 0))
        self.channel = SimpleNamespace(id=int(cohort.channel_id or 0))
        self.flags = SimpleNamespace(value=flags)
        self.attachments = attachments
        self.replies: list[tuple[str, dict[str, Any]]] = []

    async def reply(self, text: str, **kw: Any) -> Any:
        self.replies.append((text, kw))
        return SimpleNamespace(id=8000 + len(self.replies), channel=self.channel)


async def test_cog_reads_the_voice_message(db: Session, cohort: m.Cohort) -> None:
    cog = SpeakCog(FakeBot(db))  # type: ignore[arg-type]
    audio = SimpleNamespace(duration=21.0, url="https://cdn.invalid/voice-message.ogg")
    voice = _Message(cohort, speak.IS_VOICE_MESSAGE, [audio])
    await cog.on_message(voice)  # type: ignore[arg-type]
    [(text, kw)] = voice.replies
    assert "answered aloud in 21 s" in text and "a little over the 20 s" in text
    assert isinstance(kw["view"], discord.ui.View) and kw["mention_author"] is False
    blank = _Message(cohort, speak.IS_VOICE_MESSAGE, [])  # no intent: Discord blanked it
    await cog.on_message(blank)  # type: ignore[arg-type]
    assert "message-content intent" in blank.replies[0][0] and "view" not in blank.replies[0][1]
    plain = _Message(cohort, 0, [])
    await cog.on_message(plain)  # type: ignore[arg-type]
    assert plain.replies == []
    assert len(db.scalars(select(m.SpokenAnswer)).all()) == 1
    # The reply about Ada is remembered (her deletion removes it); the no-intent one is not.
    [post] = db.scalars(select(m.ChatPost)).all()
    assert (post.message_id, post.about) == ("8001", "spoken answer")


def test_rating_a_deleted_answer_names_the_answer_not_its_id(db: Session, cohort: m.Cohort) -> None:
    from felab_core.errors import NotFound

    spoken = speak.answer(db, who_in(cohort), 18.5, 4, None, NOW)
    db.delete(db.get(m.SpokenAnswer, spoken.answer_id))
    db.flush()
    peer = who_in(cohort, user=USER + 1, name="Bea")
    with pytest.raises(NotFound) as gone:
        speak.rate(db, peer, spoken.answer_id, 3, NOW)
    assert str(gone.value).startswith("this spoken answer is no longer here")
    assert str(spoken.answer_id) not in str(gone.value)
