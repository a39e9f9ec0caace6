"""`/speak`: the prompt of the day, a spoken answer recorded with the course's answer shown,
a channel post with five persistent rating buttons, and peers' ratings (not one's own)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from bot import speak
from bot.cogs.speak import RateButton, rating_view
from felab_core.db import models as m
from felab_core.db.errors import Forbidden, Invalid
from tests.bot.support import USER, chat_cohort, who_in
from tests.db_support import NOW


@pytest.fixture
def cohort(db: Session, day2: None) -> m.Cohort:
    return chat_cohort(db)


def test_prompt_answer_and_peer_rating(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    text = speak.prompt_text(db, who, NOW)
    assert "Say it out loud** (20 s)" in text and "good enough for customers" in text
    spoken = speak.answer(db, who, 18.5, 4, "https://cdn.invalid/voice.ogg", NOW)
    assert "18.5 s of 20: in time" in spoken.private
    assert "Ollama is llama.cpp with the flags hidden" in spoken.private
    assert "**Ada** answered aloud in 18.5 s" in spoken.public and "voice.ogg" in spoken.public
    row = db.get(m.SpokenAnswer, spoken.answer_id)
    assert row is not None and (row.duration_s, row.self_rating) == (18.5, 4)
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
