"""The cogs' shared answer: at once when quick, acknowledged first when asked or slow, with
attachments, and a service refusal shown to the member only."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import discord
import pytest

from felab_bot.cogs import common
from felab_bot.cogs.common import Attachment, Out, respond
from felab_core.errors import Forbidden


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


async def test_a_burst_is_acknowledged_sooner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted from the event: an idle bot waits up to ANSWER_WITHIN_S for the work, a busy one
    (more than BUSY_AFTER interactions in flight) only BUSY_ANSWER_WITHIN_S."""
    fresh = SimpleNamespace(created_at=common.now() - timedelta(seconds=0.1))
    assert 1.85 < common.wait_for_work_s(fresh, 2.0) <= 1.9  # type: ignore[arg-type]
    stale = SimpleNamespace(created_at=common.now() - timedelta(seconds=5))
    assert common.wait_for_work_s(stale, 2.0) == 0  # type: ignore[arg-type]
    monkeypatch.setattr(common, "_in_flight", common.BUSY_AFTER + 1)
    assert common.wait_for_work_s(fresh, 2.0) == 0  # type: ignore[arg-type]  # 0.1 s old
    young = SimpleNamespace(created_at=common.now() - timedelta(seconds=0.01))
    busy_wait = common.wait_for_work_s(young, 2.0)  # type: ignore[arg-type]
    assert 0 < busy_wait <= common.BUSY_ANSWER_WITHIN_S - 0.01 < 1.0
    monkeypatch.setattr(common, "_in_flight", 0)
    it = _Interaction()
    await respond(it, _out(Out("quick")))  # type: ignore[arg-type]
    assert common._in_flight == 0 and it.calls[0][0] == "send_message"
