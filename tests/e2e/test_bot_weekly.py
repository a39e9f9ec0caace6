"""The weekly summary against the real bot process: an instructor turns it on with
`/setup weekly`, the bot posts it in the cohort's channel once for the week, and a restarted
bot does not post it again."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.people.members import add_member
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    ADA,
    FELAB,
    ROOT,
    BotWorld,
    answered,
    world,
)


def test_weekly_summary_posted_once(world: BotWorld) -> None:  # noqa: F811
    fake = world.fake
    with session_scope(world.sessions) as s:
        cohort = s.scalars(select(m.Cohort)).one()
        cohort.start_date = datetime.now(UTC).date() - timedelta(days=10)  # a week is behind it
        add_member(s, cohort, ADA.id, role="instructor", display_name="ada")
    out = subprocess.run(
        [FELAB, "bot", "sync", "--guild", fake.guild_id],
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    first = world.start_bot()
    world.wait(fake.connected, 20, "the bot to log in")
    on = {"type": 1, "name": "weekly", "options": [{"type": 5, "name": "on", "value": True}]}
    resp = answered(world, fake.slash("setup", ADA, options=[on]))
    assert "summary of its week here each Monday" in resp["data"]["content"]

    def weekly() -> list[dict[str, object]]:
        return [x for x in world.channel() if ": the seven days to " in str(x["content"])]

    [post] = world.wait(weekly, 10, "the weekly summary")
    assert "drilled cards" in str(post["content"])
    time.sleep(1.0)  # several more looks (every 0.3 s)
    world.kill(first)
    world.start_bot()
    world.wait(lambda: len(fake.identifies) >= 2, 20, "the restarted bot")
    time.sleep(1.0)
    assert len(weekly()) == 1
    with session_scope(world.sessions) as s:
        assert s.scalar(select(func.count(m.Post.id)).where(m.Post.kind == "weekly")) == 1
