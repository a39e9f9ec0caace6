"""Voice-message answers against the real bot process: with the message-content intent on (and
allowed in the portal) a voice message is a recorded spoken answer with rating buttons; with it
off Discord blanks the attachment and the bot points to `/speak answer`; asked for but not
allowed in the portal, `felab bot` stops with what to change."""

from __future__ import annotations

import subprocess
import time

from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    ADA,
    BOB,
    EPHEMERAL,
    FELAB,
    ROOT,
    BotWorld,
    answered,
    world,
)

GUILD_MESSAGES = 1 << 9
MESSAGE_CONTENT = 1 << 15


def _sync(w: BotWorld) -> None:
    out = subprocess.run(
        [FELAB, "bot", "sync", "--guild", w.fake.guild_id],
        env=w.env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr + out.stdout


def test_voice_message_is_a_spoken_answer_with_the_intent(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    fake.portal_message_content = True
    env = {**world.env(), "FELAB_DISCORD_MESSAGE_CONTENT": "true"}
    world.env = lambda: env  # type: ignore[method-assign]
    _sync(world)
    world.start_bot()
    world.wait(fake.connected, 20, "the bot to log in and identify")
    assert fake.intents() & GUILD_MESSAGES and fake.intents() & MESSAGE_CONTENT

    prompt = answered(world, fake.slash("speak", ADA, options=[{"type": 1, "name": "prompt"}]))
    assert "Answer with a voice message in this channel" in prompt["data"]["content"]

    over = fake.voice_message(ADA, 24.5)
    [reply] = world.wait(lambda: fake.replies_to(over["id"]), 10, "the reply to the voice message")
    text = reply["content"]
    assert "**ada** answered aloud in 24.5 s" in text and "good enough for customers" in text
    assert "a little over the 20 s" in text
    with session_scope(world.sessions) as s:
        row = s.scalars(select(m.SpokenAnswer)).one()
        assert (row.duration_s, row.timing, row.self_rating) == (24.5, "voice", None)
        assert row.recording_ref == "https://cdn.invalid/attachments/voice-message.ogg"
        answer_id = row.id
    ids = [c["custom_id"] for c in reply["components"][0]["components"]]
    assert ids == [f"felab:speak:{answer_id}:{r}" for r in range(1, 6)]

    # Her own press is her self-rating, and shows her the course's answer, privately.
    own = answered(world, fake.click(reply["id"], ids[3], ADA))
    assert own["data"]["flags"] & EPHEMERAL
    assert own["data"]["content"].startswith("Recorded your own rating: 4/5")
    assert "The course's answer" in own["data"]["content"]
    peer = answered(world, fake.click(reply["id"], ids[4], BOB))
    assert "rated this answer 5/5" in peer["data"]["content"]
    with session_scope(world.sessions) as s:
        assert s.scalars(select(m.SpokenAnswer.self_rating)).all() == [4]
        assert s.scalars(select(m.PeerRating.rating)).all() == [5]

    # Inside the time: no nudge. A member's plain message gets no answer.
    short = fake.voice_message(BOB, 17)
    [reply] = world.wait(lambda: fake.replies_to(short["id"]), 10, "the second reply")
    assert "in 17 s, inside the 20 s" in reply["content"] and "over" not in reply["content"]
    chat = fake.member_message(ADA, "nice one")
    time.sleep(0.5)
    assert fake.replies_to(chat["id"]) == []


def test_without_the_intent_the_bot_points_to_speak_answer(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    world.start_bot()
    world.wait(fake.connected, 20, "the bot to log in and identify")
    assert fake.intents() & GUILD_MESSAGES and not fake.intents() & MESSAGE_CONTENT
    voice = fake.voice_message(ADA, 18)
    assert voice["attachments"]  # the member did attach it; Discord does not show the bot
    [reply] = world.wait(lambda: fake.replies_to(voice["id"]), 10, "the reply")
    assert "without Discord's message-content intent" in reply["content"]
    assert "/speak answer" in reply["content"] and not reply["components"]
    with session_scope(world.sessions) as s:
        assert s.scalars(select(m.SpokenAnswer)).all() == []


def test_intent_not_allowed_in_the_portal_stops_with_what_to_do(world: BotWorld) -> None:  # noqa: F811
    env = {**world.env(), "FELAB_DISCORD_MESSAGE_CONTENT": "true"}
    out = subprocess.run(
        ["timeout", "-s", "KILL", "60", FELAB, "bot"],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Message Content Intent" in out.stderr and "Traceback" not in out.stderr
    assert world.fake.identifies == []
