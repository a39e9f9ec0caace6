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


async def test_in_a_burst_every_press_is_acknowledged_before_any_work_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More than BUSY_AFTER in flight: each press is acknowledged at once, and no press's work
    starts while another press is still waiting for its acknowledgement."""
    order = common.AcknowledgeFirst(at_once=2)
    monkeypatch.setattr(common, "ACKNOWLEDGE_FIRST", order)
    log: list[str] = []
    gate = asyncio.Event()  # holds the last press's acknowledgement back

    class _Slow(_Interaction):
        def __init__(self, name: str, hold: bool) -> None:
            super().__init__()
            outer_defer = self.response.defer

            async def defer(**kw: Any) -> None:
                if hold:
                    await gate.wait()
                log.append(f"ack {name}")
                await outer_defer(**kw)

            self.response.defer = defer  # type: ignore[method-assign]

    async def work(name: str) -> Out:
        log.append(f"work {name}")
        return Out(name)

    presses = [_Slow(f"p{i}", hold=i == 11) for i in range(12)]
    tasks = [asyncio.ensure_future(respond(p, work(f"p{i}"))) for i, p in enumerate(presses)]  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    started = [e for e in log if e.startswith("work")]
    # the first BUSY_AFTER presses started their work at once (no burst yet); after that,
    # nothing starts while p11 waits for its acknowledgement
    assert len(started) == common.BUSY_AFTER
    assert order.unanswered == 1 and order.running == 0
    gate.set()
    await asyncio.gather(*tasks)
    after = [log.index(f"work p{i}") for i in (8, 9, 10)]
    assert log.index("ack p11") < after[0] < after[1] < after[2]
    for p in presses[common.BUSY_AFTER :]:
        assert [c[0] for c in p.calls] == ["defer", "followup"]
    assert order.unanswered == 0 and order.running == 0 and common._in_flight == 0


async def test_acknowledge_first_runs_few_at_once_and_none_waits_forever() -> None:
    order = common.AcknowledgeFirst(at_once=2, waits_at_most_s=0.05)
    running: list[int] = []
    peak = 0

    async def work(i: int) -> int:
        nonlocal peak
        running.append(i)
        peak = max(peak, len(running))
        await asyncio.sleep(0.01)
        running.remove(i)
        return i

    assert await asyncio.gather(*(order.run(work(i)) for i in range(6))) == list(range(6))
    assert peak == 2 and order.running == 0
    # a press that never gets its acknowledgement out does not hold the others' work forever
    with order.answering():
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await order.run(work(9)) == 9
        assert 0.04 < loop.time() - start < 1.0


async def test_work_cancelled_while_waiting_gives_its_turn_away() -> None:
    order = common.AcknowledgeFirst(at_once=1)
    with order.answering():
        waiting = asyncio.ensure_future(order.run(_out(Out("never"))))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    assert order.running == 0 and order.unanswered == 0
    assert (await order.run(_out(Out("next")))).text == "next"
