"""Cohort settings from chat, against the real bot process and the fake Discord: a student is
refused; an instructor moves the daily post time and the next post follows it, pinging the
role they chose and nothing else."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    ADA,
    BOB,
    FELAB,
    ROOT,
    BotWorld,
    answered,
    world,
)

ROLE = "700000000000000555"


def _text(w: BotWorld, it: Any) -> str:
    first = answered(w, it)
    if first["type"] == 5:
        w.wait(lambda: it.followups, 10, "the followup")
        return str(it.followups[0]["content"])
    return str(first["data"]["content"])


def _change(**options: Any) -> list[dict[str, Any]]:
    kinds = {"post_time": 3, "timezone": 3, "ping_role": 8, "daily_post": 5}
    return [
        {
            "type": 1,
            "name": "change",
            "options": [{"type": kinds[k], "name": k, "value": v} for k, v in options.items()],
        }
    ]


def test_setup_moves_the_post_time_and_the_next_post_follows(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    now = datetime.now(UTC)
    ahead = 12 - now.hour  # a zone where it is about noon: post times either side stay today
    zone = "Etc/GMT" + (f"-{ahead}" if ahead > 0 else f"+{-ahead}" if ahead < 0 else "")
    local = now + timedelta(hours=ahead)
    later = (local + timedelta(hours=2)).strftime("%H:%M")
    with session_scope(world.sessions) as s:
        cohort = s.scalars(select(m.Cohort)).one()
        cohort.timezone = zone
        cohort.start_date = local.date() - timedelta(days=1)  # day 2 there
        cohort.post_time = datetime.strptime(later, "%H:%M").time()  # not due yet
        cohort_id = cohort.id
    out = subprocess.run(
        [FELAB, "bot", "sync", "--guild", fake.guild_id],
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    world.start_bot()
    world.wait(fake.connected, 20, "the bot to log in")

    # A student who finds /setup (Discord hides it from most) is refused when it runs.
    refused = _text(world, fake.slash("setup", BOB, options=_change(post_time="00:01")))
    assert refused == "only the cohort's instructors can do this"
    with session_scope(world.sessions) as s:
        assert s.get(m.Cohort, cohort_id).post_time.strftime("%H:%M") == later  # type: ignore[union-attr]
        ada = m.Member(
            cohort_id=cohort_id, discord_id=ADA.id, display_name="ada", role="instructor"
        )
        s.add(ada)
    time.sleep(1.0)  # several looks for due posts: none is due yet
    assert not world.channel()
    shown = _text(world, fake.slash("setup", ADA, options=[{"type": 1, "name": "show"}]))
    assert f"- Daily post: on, at {later} {zone}, pinging no one" in shown
    assert "- Next daily post: <t:" in shown

    # Moved to a minute ago, with a role to ping: due now, and the bot posts it.
    earlier = (local - timedelta(minutes=1)).strftime("%H:%M")
    changed = _text(
        world, fake.slash("setup", ADA, options=_change(post_time=earlier, ping_role=ROLE))
    )
    assert changed.startswith("Changed.") and "- Next daily post: due now" in changed
    assert f"pinging <@&{ROLE}>" in changed
    world.wait(world.post_done, 20, "the daily post at its new time")
    header = world.channel()[0]
    assert header["content"].startswith(f"<@&{ROLE}> **Day 2")
    assert fake.pings(header).roles == {ROLE} and not fake.pings(header).users
    assert not fake.pings(header).everyone
    others = [msg for msg in world.channel()[1:] if fake.pings(msg)]
    assert others == []  # the cards, prompts and whiteboards ping no one

    # Posted today: moving the time again puts the next post tomorrow at that time.
    changed = _text(world, fake.slash("setup", ADA, options=_change(post_time=later)))
    at = datetime.strptime(f"{(local + timedelta(days=1)).date()} {later}", "%Y-%m-%d %H:%M")
    ts = int((at - timedelta(hours=ahead)).replace(tzinfo=UTC).timestamp())
    assert f"- Next daily post: <t:{ts}:F>" in changed
    with session_scope(world.sessions) as s:
        assert s.scalar(select(func.count(m.Post.id))) == 1
