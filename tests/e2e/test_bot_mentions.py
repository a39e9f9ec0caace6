"""No message the bot sends can ping anyone by accident: the real bot process against the fake
Discord, which resolves mentions as Discord does (no `allowed_mentions`: everything in the
content pings). A member who named themselves `<@&1> x` runs through the daily post, its
buttons, /drill, /numbers, /speak (a voice message too), /setup, /leaderboard and /progress;
every payload carries `allowed_mentions` that pings no user, role or @everyone, and the name
reads as typed."""

from __future__ import annotations

import subprocess
from typing import Any

from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    BOB,
    FELAB,
    ROOT,
    BotWorld,
    answered,
    buttons,
    world,
)
from tests.fakediscord import Payload, User

SNEAKY = User("100000000000001003", "<@&1> x @everyone")


def sub(name: str, *options: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": 1, "name": name, "options": list(options)}]


def opt(name: str, value: Any, kind: int = 3) -> dict[str, Any]:
    return {"type": kind, "name": name, "value": value}


def cannot_ping(payload: Payload) -> bool:
    """Its allowed_mentions lets nothing ping: no parse, no listed users or roles, no reply."""
    am = payload.allowed_mentions
    return (
        am is not None
        and not am.get("parse")
        and not am.get("users")
        and not am.get("roles")
        and not am.get("replied_user")
    )


def test_no_payload_pings_anyone(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    fake.portal_message_content = True
    env = {**world.env(), "FELAB_DISCORD_MESSAGE_CONTENT": "true"}
    world.env = lambda: env  # type: ignore[method-assign]
    out = subprocess.run(
        [FELAB, "bot", "sync", "--guild", fake.guild_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    world.start_bot()
    world.wait(world.post_done, 30, "the daily post")

    # The daily post's buttons: a card's reveal and rating, Said it, a whiteboard's reveal.
    card = world.card_messages()[0]
    for action in ("reveal", "good"):
        answered(world, fake.click(card["id"], buttons(card)[action], SNEAKY))
    (prompt,) = world.messages_with("felab:prompt:")
    answered(world, fake.click(prompt["id"], buttons(prompt)["said"], SNEAKY))
    board = world.messages_with("felab:board:")[0]
    answered(world, fake.click(board["id"], buttons(board)["reveal"], SNEAKY))

    # Slash commands; /speak answer posts the name in the channel.
    answered(world, fake.slash("drill", SNEAKY))
    it = fake.slash("numbers", SNEAKY, options=sub("enter"))
    modal = answered(world, it)["data"]
    ids = [row["components"][0]["custom_id"] for row in modal["components"]]
    answered(world, fake.submit_modal(it, {ids[0]: "44.6"}, SNEAKY))
    answered(world, fake.slash("numbers", SNEAKY, options=sub("show")))
    answered(world, fake.slash("speak", SNEAKY, options=sub("prompt")))
    it = fake.slash(
        "speak", SNEAKY, options=sub("answer", opt("seconds", 18.5, 10), opt("rating", 4, 4))
    )
    world.wait(lambda: it.followups, 10, "the spoken answer's post in the channel")
    post = it.followups[-1]
    assert "answered aloud in 18.5 s" in post["content"]
    three = post["components"][0]["components"][2]["custom_id"]
    answered(world, fake.click(post["id"], three, BOB))
    voice = fake.voice_message(SNEAKY, 17)
    [reply] = world.wait(lambda: fake.replies_to(voice["id"]), 10, "the voice message's reply")

    # Instructors' commands, with the sneaky name in their tables.
    with session_scope(world.sessions) as s:
        sneaky = s.scalars(select(m.Member).where(m.Member.discord_id == SNEAKY.id)).one()
        sneaky.role = "instructor"
    answered(world, fake.slash("leaderboard", SNEAKY))
    answered(world, fake.slash("progress", SNEAKY))
    answered(world, fake.slash("setup", SNEAKY, options=sub("member", opt("user", BOB.id, 6))))
    other = fake.channel_ids[0][:-2] + "11"
    answered(
        world,
        fake.slash(
            "setup",
            SNEAKY,
            options=sub(
                "cohort",
                opt("name", "<@&1> Autumn"),
                opt("timezone", "UTC"),
                opt("start_date", "2026-09-07"),
            ),
            channel_id=other,
        ),
    )

    payloads = fake.message_payloads()
    assert len(payloads) >= 20, [p.route for p in payloads]
    loud = [p for p in payloads if not cannot_ping(p)]
    assert loud == [], f"{len(loud)} of {len(payloads)} payloads could ping"
    made = [fake.messages[p.message_id] for p in payloads if p.message_id in fake.messages]
    pinged = [(msg["content"][:60], fake.pings(msg)) for msg in made if fake.pings(msg)]
    assert pinged == []
    # The name reads as typed, and is not even a mention in the text.
    for text in (post["content"], reply["content"]):
        assert "<@&1>" not in text and "@everyone" not in text
        assert text.replace("\u200b", "").replace("\\", "").startswith(f"**{SNEAKY.username}**")
