"""`/numbers enter` against the real bot process and the fake Discord: the form comes back
filled with what was typed, exactly as typed; sending it back unchanged records nothing, and
a figure typed in ms/token still reads 22.4 ms/token after five round trips."""

from __future__ import annotations

import subprocess
from typing import Any

from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from tests.e2e.test_bot_process import (  # noqa: F401 (the `world` fixture)
    ADA,
    FELAB,
    ROOT,
    BotWorld,
    answered,
    world,
)


def _reply_text(w: BotWorld, it: Any) -> str:
    first = answered(w, it)
    if first["type"] == 5:
        w.wait(lambda: it.followups, 10, "the followup")
        return str(it.followups[0]["content"])
    return str(first["data"]["content"])


def _form(w: BotWorld) -> tuple[Any, dict[str, str]]:
    """Open the form; what each box holds as Discord shows it (the bot's prefill)."""
    it = w.fake.slash("numbers", ADA, options=[{"type": 1, "name": "enter", "options": []}])
    modal = answered(w, it)
    assert modal["type"] == 9
    boxes = [row["components"][0] for row in modal["data"]["components"]]
    return it, {b["custom_id"]: b.get("value") or "" for b in boxes}


def test_an_unchanged_form_records_nothing_and_keeps_the_typing(world: BotWorld) -> None:  # noqa: F811
    out = subprocess.run(
        [FELAB, "bot", "sync", "--guild", world.fake.guild_id],
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    world.start_bot()
    world.wait(world.fake.connected, 20, "the bot to log in")

    it, boxes = _form(world)
    ollama, llamacpp, _mlx = boxes
    text = _reply_text(
        world, world.fake.submit_modal(it, {ollama: "44.6", llamacpp: "22.4 ms/token"}, ADA)
    )
    assert "recorded 22.4 ms/token (44.6 tok/s)" in text
    for _ in range(5):
        it, boxes = _form(world)
        assert boxes[llamacpp] == "22.4 ms/token" and boxes[ollama] == "44.6"
        text = _reply_text(world, world.fake.submit_modal(it, boxes, ADA))
        assert text.startswith("Nothing changed, so nothing new was recorded")
    with session_scope(world.sessions) as s:
        rows = s.execute(
            select(m.Number.server, m.Number.typed_value, m.Number.typed_unit).where(
                m.Number.source == "entered"
            )
        ).all()
    assert sorted(rows) == [("llamacpp", "22.4", "ms/token"), ("ollama", "44.6", "tok/s")]
    show = world.fake.slash("numbers", ADA, options=[{"type": 1, "name": "show", "options": []}])
    assert "typed as 22.4 ms/token (44.6 tok/s)" in _reply_text(world, show)
