"""The drills cog's Discord glue without a network: its buttons, and the daily post's sending
(claim, header, one message per card, mark posted; a failed header gives the claim back)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from datetime import date, time
from typing import Any

import discord
import discord.http
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_bot import drills
from felab_bot.cogs import common
from felab_bot.cogs import drills as cog_module
from felab_bot.cogs.common import Out
from felab_bot.cogs.drills import CardButton, DrillsCog, card_view
from felab_bot.endpoints import DISCORD_API, use_api
from felab_core.db import models as m
from felab_core.errors import Forbidden
from felab_core.people.members import create_cohort
from tests.db_support import NOW

CHANNEL = 700000000000000010


def test_card_view_has_five_persistent_buttons() -> None:
    view = card_view(42)
    assert view.timeout is None and view.is_persistent()
    items = [c for c in view.children if isinstance(c, CardButton)]
    assert [i.custom_id for i in items] == [f"felab:card:42:{a}" for a in drills.ACTIONS]
    assert [i.item.style for i in items] == [  # type: ignore[attr-defined]
        discord.ButtonStyle.secondary,
        discord.ButtonStyle.danger,
        discord.ButtonStyle.secondary,
        discord.ButtonStyle.primary,
        discord.ButtonStyle.success,
    ]


async def test_a_custom_id_makes_its_button_again() -> None:
    match = re.fullmatch(CardButton.__discord_ui_compiled_template__, "felab:card:7:hard")
    assert match is not None
    item = await CardButton.from_custom_id(None, None, match)  # type: ignore[arg-type]
    assert (item.card_id, item.action) == (7, "hard")


def test_use_api_moves_every_route() -> None:
    try:
        assert use_api("http://127.0.0.1:9/api/v10/") == "http://127.0.0.1:9/api/v10"
        assert discord.http.Route("GET", "/users/@me").url == "http://127.0.0.1:9/api/v10/users/@me"
    finally:
        use_api(None)
    assert discord.http.Route.BASE == DISCORD_API


class _Channel:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.fail = fail

    async def send(self, text: str, view: Any = None, allowed_mentions: Any = None) -> Any:
        if self.fail:
            raise discord.HTTPException(_Response(), {"message": "Missing Access", "code": 50001})
        self.sent.append((text, view))
        return type("Msg", (), {"id": 9000 + len(self.sent)})()


class _Response:
    status = 403
    reason = "Forbidden"


class _Bot:
    """What the cog uses of the Host (felab_bot/host.py): db() on the test's own session, and
    channels."""

    run_loops = False

    def __init__(self, session: Session, channel: _Channel) -> None:
        self.session = session
        self.channel = channel

    async def db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(self.session, *args, **kwargs)

    def get_channel(self, channel_id: int) -> Any:
        assert channel_id == CHANNEL
        return self.channel


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


async def test_post_due_sends_header_then_cards_once(
    db: Session, chat_cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    monkeypatch.setattr(cog_module.discord.abc, "Messageable", _Channel)
    channel = _Channel()
    cog = DrillsCog(_Bot(db, channel))  # type: ignore[arg-type]
    assert await cog.post_due() == 1
    header, *cards = channel.sent
    assert header[0].startswith("**Day 2") and header[1] is None
    assert cards and all(isinstance(view, discord.ui.View) for _, view in cards)
    post = db.scalars(select(m.Post)).one()
    assert post.message_id == "9001"
    assert await cog.post_due() == 0  # claimed and posted: never twice
    assert len(channel.sent) == 1 + len(cards)


async def test_a_header_that_fails_gives_the_claim_back(
    db: Session, chat_cohort: m.Cohort, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cog_module, "now", lambda: NOW)
    monkeypatch.setattr(cog_module.discord.abc, "Messageable", _Channel)
    cog = DrillsCog(_Bot(db, _Channel(fail=True)))  # type: ignore[arg-type]
    assert await cog.post_due() == 0
    assert db.scalars(select(m.Post)).all() == []


class _Interaction:
    """Records how the cog answered: at once, or acknowledged first then followed up."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, dict[str, Any]]] = []
        outer = self

        class _Response:
            async def send_message(self, text: str, **kw: Any) -> None:
                outer.calls.append(("send_message", text, kw))

            async def defer(self, **kw: Any) -> None:
                outer.calls.append(("defer", None, kw))

        class _Followup:
            async def send(self, text: str, **kw: Any) -> None:
                outer.calls.append(("followup", text, kw))

        self.response = _Response()
        self.followup = _Followup()


async def _slow(text: str, delay: float) -> Out:
    await asyncio.sleep(delay)
    return Out(text)


async def _refused() -> Out:
    raise Forbidden("only the cohort's instructors can do this")


async def test_a_quick_answer_goes_out_at_once_and_ephemeral() -> None:
    it = _Interaction()
    await common.respond(it, _slow("done", 0))  # type: ignore[arg-type]
    assert it.calls == [("send_message", "done", {"ephemeral": True})]


async def test_a_slow_answer_is_acknowledged_then_followed_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(common, "ANSWER_WITHIN_S", 0.05)
    it = _Interaction()
    await common.respond(it, _slow("late", 0.3))  # type: ignore[arg-type]
    assert it.calls == [
        ("defer", None, {"ephemeral": True, "thinking": True}),
        ("followup", "late", {"ephemeral": True}),
    ]


async def test_a_service_refusal_is_the_answer() -> None:
    it = _Interaction()
    await common.respond(it, _refused())  # type: ignore[arg-type]
    assert it.calls == [
        ("send_message", "only the cohort's instructors can do this", {"ephemeral": True})
    ]
