"""The daily post's say-it-aloud prompt and whiteboards, end to end: the real bot process
against the fake Discord (which enforces the 2,000-character limit), killed at teardown.

"Said it" records one spoken answer per member and day and asks for a self-rating (the
/speak rating buttons, persistent); "Reveal the answer" shows a whiteboard's worked answer
ephemerally; both buttons keep working after a restart.
"""

from __future__ import annotations

import time

from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from tests.e2e.test_bot_process import (
    ADA,
    BOB,
    EPHEMERAL,
    BotWorld,
    answered,
    buttons,
    world,  # noqa: F401  (the fixture)
)


def _ids(data: dict[str, object]) -> list[str]:
    rows = data.get("components") or []
    return [c["custom_id"] for row in rows for c in row["components"]]  # type: ignore[attr-defined,index,union-attr]


def _spoken(w: BotWorld) -> list[tuple[str, str, int | None]]:
    """(who, how the length was measured, self-rating) of each answer; every length is what was
    measured, from the post to the click: seconds here, never the prompt's 20 s limit."""
    with session_scope(w.sessions) as s:
        rows = s.execute(
            select(
                m.Member.discord_id,
                m.SpokenAnswer.duration_s,
                m.SpokenAnswer.timing,
                m.SpokenAnswer.self_rating,
            )
            .join(m.Member, m.Member.id == m.SpokenAnswer.member_id)
            .order_by(m.SpokenAnswer.id)
        ).all()
    for r in rows:
        assert r[1] is not None and 0 < r[1] < 30 and r[1] != 20.0, r
    return [(r[0], r[2], r[3]) for r in rows]


def test_said_it_self_rating_and_whiteboard_reveal(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    world.start_bot()
    world.wait(world.post_done, 30, "the daily post with its prompt and whiteboards")
    channel = world.channel()
    (prompt_msg,) = world.messages_with("felab:prompt:")
    boards = world.messages_with("felab:board:")
    assert len(boards) == 2
    cards = world.card_messages()
    order = [msg["id"] for msg in channel]
    assert (
        order.index(cards[-1]["id"]) < order.index(prompt_msg["id"]) < order.index(boards[0]["id"])
    )
    assert prompt_msg["content"].startswith("**Day 2 · say it out loud**")
    (said_id,) = _ids(prompt_msg)
    assert said_id.endswith(":said") and len(said_id) <= 100
    assert prompt_msg["components"][0]["components"][0]["label"] == "Said it"
    assert "**Given**" in boards[0]["content"]
    with session_scope(world.sessions) as s:
        board_rows = s.scalars(select(m.DrillItem).order_by(m.DrillItem.position)).all()
        answers = {f"felab:board:{b.id}:reveal": b.answer for b in board_rows}
        notes = {f"felab:board:{b.id}:reveal": b.body["careful"] for b in board_rows}

    # "Said it": one answer, ephemeral, asking for a self-rating with five persistent buttons.
    one = fake.click(prompt_msg["id"], said_id, ADA)
    two = fake.click(prompt_msg["id"], said_id, ADA)  # a double click, racing the first
    replies = sorted((answered(world, it) for it in (one, two)), key=lambda r: r["data"]["content"])
    already, recorded = replies
    for reply in replies:
        assert reply["type"] == 4 and reply["data"]["flags"] & EPHEMERAL
    assert already["data"]["content"].startswith("Already recorded today")
    assert recorded["data"]["content"].startswith("Recorded: you said it out loud, ")
    assert " s from the prompt to your click" in recorded["data"]["content"]
    assert _spoken(world) == [(ADA.id, "prompt-to-click", None)]
    with session_scope(world.sessions) as s:
        answer_id = s.scalars(select(m.SpokenAnswer.id)).one()
    rate_ids = _ids(recorded["data"])
    assert rate_ids == [f"felab:speak:{answer_id}:{r}" for r in range(1, 6)]

    # The self-rating, pressed on the ephemeral reply: recorded, with the course's answer.
    first = one if one.response is recorded else two
    assert first.message_id is not None
    rated = answered(world, fake.click(first.message_id, rate_ids[3], ADA))
    assert rated["data"]["flags"] & EPHEMERAL
    assert rated["data"]["content"].startswith("Recorded your own rating: 4/5")
    assert "The course's answer" in rated["data"]["content"]
    assert _spoken(world) == [(ADA.id, "prompt-to-click", 4)]

    # Said it again the same day: nothing recorded twice, the rating and answer shown.
    again = answered(world, fake.click(prompt_msg["id"], said_id, ADA))
    assert again["data"]["content"].startswith("Already recorded today, rated 4/5")
    assert not again["data"].get("components")
    # Another member's press is their own answer.
    bob = answered(world, fake.click(prompt_msg["id"], said_id, BOB))
    assert bob["data"]["content"].startswith("Recorded: you said it out loud, ")
    assert _spoken(world) == [(ADA.id, "prompt-to-click", 4), (BOB.id, "prompt-to-click", None)]

    # Reveal a whiteboard: the answer, the working and the careful note, ephemerally.
    for board in boards:
        (reveal_id,) = _ids(board)
        shown = answered(world, fake.click(board["id"], reveal_id, BOB))
        text = shown["data"]["content"]
        assert shown["data"]["flags"] & EPHEMERAL and len(text) <= 2000
        assert text.startswith("**The answer**\n" + answers[reveal_id][:40])
        assert "**Working, step by step**\n1. " in text
        assert "**Careful**\n" + notes[reveal_id][:40] in text


def test_prompt_and_board_buttons_survive_a_restart(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    first_bot = world.start_bot()
    world.wait(world.post_done, 30, "the daily post")
    before = len(world.channel())
    world.kill(first_bot)

    world.start_bot()
    world.wait(lambda: len(fake.identifies) >= 2, 30, "the restarted bot to identify")
    time.sleep(1.5)  # several looks for due posts (every 0.3 s)
    assert len(world.channel()) == before  # not posted twice
    (prompt_msg,) = world.messages_with("felab:prompt:")
    said = answered(world, fake.click(prompt_msg["id"], _ids(prompt_msg)[0], ADA))
    assert said["data"]["content"].startswith("Recorded: you said it out loud, ")
    board = world.messages_with("felab:board:")[-1]
    shown = answered(world, fake.click(board["id"], buttons(board)["reveal"], ADA))
    assert shown["data"]["content"].startswith("**The answer**")
    assert _spoken(world) == [(ADA.id, "prompt-to-click", None)]
