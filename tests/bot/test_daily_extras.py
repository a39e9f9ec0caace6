"""The daily post's say-it-aloud prompt ("Said it", then a self-rating) and its whiteboards
("Reveal the answer"): felab_bot/drills.py's service calls and the cog's persistent buttons."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import date, time, timedelta
from typing import Any

import discord
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_bot import drills, speak
from felab_bot.cogs import drills as cog_module
from felab_bot.cogs import speak as speak_cog
from felab_bot.cogs.drills import BoardButton, DrillsCog, board_view
from felab_bot.cogs.speak import PromptButton, RateButton, prompt_view
from felab_core.db import models as m
from felab_core.errors import NotFound
from felab_core.people.members import create_cohort
from tests.db_support import NOW

CHANNEL = 700000000000000010
USER = 100000000000001001


@pytest.fixture
def chat_cohort(db: Session, day2: None) -> m.Cohort:
    return create_cohort(
        db,
        "Spring",
        timezone="Europe/London",
        start_date=date(2026, 3, 2),
        post_time=time(9, 0),
        guild_id=str(uuid.uuid4().int % 10**18),
        channel_id=str(CHANNEL),
    )


def _said(
    db: Session, cohort: m.Cohort, prompt_id: int, when: Any = NOW, shown_at: Any = None
) -> drills.SaidReply:
    return drills.said_text(
        db,
        guild_id=int(cohort.guild_id or 0),
        channel_id=CHANNEL,
        user_id=USER,
        display_name="Ada",
        prompt_id=prompt_id,
        now=when,
        shown_at=shown_at,
    )


def _answers(db: Session) -> list[m.SpokenAnswer]:
    return list(db.scalars(select(m.SpokenAnswer).order_by(m.SpokenAnswer.id)))


def test_custom_ids_fit_discord_and_match_their_templates() -> None:
    big = 10**18 - 1
    for cid, template in (
        (drills.prompt_custom_id(big), drills.PROMPT_ID),
        (drills.board_custom_id(big), drills.BOARD_ID),
    ):
        assert len(cid) <= 100 and re.fullmatch(template, cid)
    assert not re.fullmatch(drills.PROMPT_ID, "felab:prompt:1:reveal")
    assert not re.fullmatch(drills.BOARD_ID, "felab:card:1:reveal")


def test_the_daily_post_carries_the_prompt_and_each_whiteboard(
    db: Session, chat_cohort: m.Cohort
) -> None:
    (post,) = drills.claim_due_posts(db, NOW)
    assert len(post.prompts) == 1 and len(post.boards) == 2
    prompt = db.get(m.SpeakPrompt, post.prompts[0].item_id)
    assert prompt is not None and prompt.key == "d02.prompt.is-ollama-enough"
    assert post.prompts[0].text.startswith("**Day 2 · say it out loud** (20 s)")
    assert prompt.question in post.prompts[0].text and "Said it" in post.prompts[0].text
    assert "Record yourself once and listen back." in post.prompts[0].text
    first = post.boards[0].text
    assert first.startswith("**Day 2 · whiteboard 1 of 2** (Serving With vLLM, 2:56)")
    assert "**Given**\nA block is" in first and "Reveal the answer" in first
    board = db.get(m.DrillItem, post.boards[0].item_id)
    assert board is not None and board.answer not in first  # the answer waits for the button
    assert all(len(p.text) <= 2000 for p in post.prompts + post.boards)
    assert drills.claim_due_posts(db, NOW) == []  # still claimed once


def test_said_it_records_once_a_day_and_asks_for_a_rating(
    db: Session, chat_cohort: m.Cohort
) -> None:
    (post,) = drills.claim_due_posts(db, NOW)
    prompt_id = post.prompts[0].item_id
    reply = _said(db, chat_cohort, prompt_id, shown_at=NOW - timedelta(seconds=16))
    assert reply.text.startswith(
        "Recorded: you said it out loud, 16 s from the prompt to your click (reading the "
        "question included)."
    )
    assert "1 (lost)" in reply.text
    (answer,) = _answers(db)
    assert reply.answer_id == answer.id and answer.self_rating is None
    assert (answer.duration_s, answer.timing) == (16, "prompt-to-click")
    again = _said(db, chat_cohort, prompt_id, NOW + timedelta(minutes=5))
    assert again.text.startswith("Already recorded today") and again.answer_id == answer.id
    assert len(_answers(db)) == 1
    # The rating buttons are /speak's: the speaker's own press is the self-rating.
    who = speak.Who(int(chat_cohort.guild_id or 0), CHANNEL, USER, "Ada")
    rated = speak.rate(db, who, answer.id, 4, NOW)
    assert rated.startswith("Recorded your own rating: 4/5.") and "course's answer" in rated
    done = _said(db, chat_cohort, prompt_id, NOW + timedelta(minutes=9))
    assert done.answer_id is None and "rated 4/5" in done.text and "course's answer" in done.text
    assert [a.self_rating for a in _answers(db)] == [4]
    with pytest.raises(NotFound) as gone:
        _said(db, chat_cohort, 10**9)
    assert str(10**9) not in str(gone.value)  # named as the member knows it, not by its id


def test_a_whiteboard_reveal_shows_answer_working_and_note_within_the_limit(
    db: Session, chat_cohort: m.Cohort
) -> None:
    board = db.scalars(select(m.DrillItem).where(m.DrillItem.key == "d02.board.vllm-blocks")).one()
    text = drills.board_reveal_text(db, board.id)
    assert text.startswith("**The answer**\n" + board.answer[:40])
    assert "**Working, step by step**\n1. " in text and "\n6. " in text
    assert text.index("Working") < text.index("**Careful**")
    board.body = {**board.body, "working": ["a long step " * 200] * 6}
    board.answer = "long answer " * 300
    db.flush()
    long = drills.board_reveal_text(db, board.id)
    assert len(long) <= 2000 and "…" in long
    assert "**Careful**\nThe video names neither" in long  # the note is never pushed out
    with pytest.raises(NotFound):
        drills.board_reveal_text(db, 10**9)


# ----------------------------------------------------------------------------- the cog


async def test_views_are_persistent_and_ids_make_their_buttons_again() -> None:
    for view, kind in ((prompt_view(5), PromptButton), (board_view(6), BoardButton)):
        assert view.timeout is None and view.is_persistent()
        assert [type(c) for c in view.children] == [kind]
    said = re.fullmatch(PromptButton.__discord_ui_compiled_template__, "felab:prompt:5:said")
    shown = re.fullmatch(BoardButton.__discord_ui_compiled_template__, "felab:board:6:reveal")
    assert said is not None and shown is not None
    assert (await PromptButton.from_custom_id(None, None, said)).prompt_id == 5  # type: ignore[arg-type]
    assert (await BoardButton.from_custom_id(None, None, shown)).board_id == 6  # type: ignore[arg-type]


class _Channel:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def send(self, text: str, view: Any = None, allowed_mentions: Any = None) -> Any:
        self.sent.append((text, view))
        return type("Msg", (), {"id": 9000 + len(self.sent)})()


class _Bot:
    run_loops = False

    def __init__(self, session: Session, channel: _Channel | None = None) -> None:
        self.session = session
        self.channel = channel

    async def db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(self.session, *args, **kwargs)

    def get_channel(self, channel_id: int) -> Any:
        return self.channel


class _Interaction:
    def __init__(self, bot: _Bot, guild_id: int) -> None:
        self.client = bot
        self.guild_id = guild_id
        self.channel_id = CHANNEL
        self.user = type("U", (), {"id": USER, "display_name": "Ada"})()
        # the message the button is on: the daily post, made 12 s before the press
        self.message = type("M", (), {"created_at": NOW - timedelta(seconds=12)})()
        self.sent: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class _Response:
            async def send_message(self, text: str, **kw: Any) -> None:
                outer.sent.append((text, kw))

        self.response = _Response()


async def test_post_due_sends_the_extras_after_the_cards_and_they_answer(
    db: Session, chat_cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    monkeypatch.setattr(speak_cog, "now", lambda: NOW)  # the "Said it" button is speak's
    monkeypatch.setattr(cog_module.discord.abc, "Messageable", _Channel)
    channel = _Channel()
    bot = _Bot(db, channel)
    assert await DrillsCog(bot).post_due() == 1  # type: ignore[arg-type]
    kinds = [
        type(view.children[0]).__name__ if view is not None else None for _, view in channel.sent
    ]
    cards = db.scalar(
        select(func.count(m.Card.id)).join(m.ContentDay).where(m.ContentDay.number == 2)
    )
    assert kinds == [None] + ["CardButton"] * (cards or 0) + ["PromptButton"] + ["BoardButton"] * 2
    prompt_button = channel.sent[-3][1].children[0]
    board_button = channel.sent[-1][1].children[0]

    it = _Interaction(bot, int(chat_cohort.guild_id or 0))
    await prompt_button.callback(it)
    text, kw = it.sent[-1]
    assert text.startswith("Recorded: you said it out loud, 12 s from the prompt to your click")
    assert kw["ephemeral"] is True
    rates = [c for c in kw["view"].children if isinstance(c, RateButton)]
    (answer,) = db.scalars(select(m.SpokenAnswer)).all()
    assert [r.custom_id for r in rates] == [f"felab:speak:{answer.id}:{i}" for i in range(1, 6)]
    await board_button.callback(it)
    text, kw = it.sent[-1]
    assert text.startswith("**The answer**") and "**Careful**" in text and kw == {"ephemeral": True}
    assert isinstance(kw, dict) and not isinstance(kw.get("view"), discord.ui.View)
