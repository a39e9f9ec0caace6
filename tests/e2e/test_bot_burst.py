"""A burst of button presses against the real bot process: every press is answered within
Discord's 3 s (acknowledged first when the bot is busy, then followed up) and every review is
written once. benchmarks/bot_clicks.py measures the same path with 200 presses."""

from __future__ import annotations

from sqlalchemy import func, select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    EPHEMERAL,
    BotWorld,
    buttons,
    world,
)
from tests.fakediscord import User

PRESSES = 60


def test_a_burst_of_presses_is_answered_in_time(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    world.start_bot()
    world.wait(world.post_done, 30, "the daily post")
    card = world.card_messages()[0]
    users = [User(str(500000000000000000 + i), f"p{i}") for i in range(PRESSES)]
    made = fake.click_burst([(card["id"], buttons(card)["good"], u) for u in users])
    world.wait(lambda: all(it.responded_at is not None for it in made), 10, "every first answer")
    assert all(it.responded_at - it.created < 3.0 for it in made)  # type: ignore[operator]
    for it in made:
        assert it.response is not None and it.response["data"]["flags"] & EPHEMERAL
        if it.response["type"] == 5:  # busy: acknowledged first, the answer follows
            world.wait(lambda it=it: it.followups, 15, "a followup")
            text = it.followups[0]["content"]
        else:
            text = it.response["data"]["content"]
        assert text.startswith("Recorded **Good"), text
    with session_scope(world.sessions) as s:
        assert s.scalar(select(func.count(m.Review.id))) == PRESSES
