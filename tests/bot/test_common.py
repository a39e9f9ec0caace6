"""The cogs' shared answer: at once when quick, acknowledged first when asked or slow, with
attachments, and a service refusal shown to the member only."""

from __future__ import annotations

import asyncio
from typing import Any

import discord
import pytest

from bot.cogs import common
from bot.cogs.common import Attachment, Out, respond
from felab_core.db.errors import Forbidden


class _Interaction:
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


async def _out(out: Out, delay: float = 0) -> Out:
    await asyncio.sleep(delay)
    return out


async def _refused() -> Out:
    raise Forbidden("only the cohort's instructors can do this")


async def test_quick_answers_go_at_once_with_their_files() -> None:
    it = _Interaction()
    await respond(it, _out(Out("table", [Attachment("a.csv", b"x,y\n")])))  # type: ignore[arg-type]
    [(kind, text, kw)] = it.calls
    assert (kind, text, kw["ephemeral"]) == ("send_message", "table", True)
    [file] = kw["files"]
    assert isinstance(file, discord.File) and file.filename == "a.csv"


async def test_deferred_and_slow_answers_are_acknowledged_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    it = _Interaction()
    await respond(it, _out(Out("queued")), defer=True)  # type: ignore[arg-type]
    assert [c[0] for c in it.calls] == ["defer", "followup"]
    monkeypatch.setattr(common, "ANSWER_WITHIN_S", 0.05)
    it = _Interaction()
    await respond(it, _out(Out("late"), 0.3))  # type: ignore[arg-type]
    assert [(c[0], c[1]) for c in it.calls] == [("defer", None), ("followup", "late")]


async def test_a_refusal_is_the_answer() -> None:
    it = _Interaction()
    await respond(it, _refused())  # type: ignore[arg-type]
    assert it.calls == [
        ("send_message", "only the cohort's instructors can do this", {"ephemeral": True})
    ]
