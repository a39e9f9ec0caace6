"""The answer clock: one watcher times every interaction to its first answer."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import discord

from felab_bot import answer_clock
from felab_bot.answer_clock import AnswerClock
from felab_core.ops import metrics


def _interaction(age_s: float) -> Any:
    done = {"yes": False}
    it = SimpleNamespace(
        command=None,
        created_at=discord.utils.utcnow() - timedelta(seconds=age_s),
        response=SimpleNamespace(is_done=lambda: done["yes"]),
    )
    return it, done


def _count() -> float:
    return metrics.INTERACTION_SECONDS.labels("component")._sum.get()  # type: ignore[attr-defined]


async def test_one_watcher_times_each_answer_and_gives_up_on_the_unanswered(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr(answer_clock, "GIVE_UP_AFTER_S", 0.05)
    clock = AnswerClock(look_every_s=0.001)
    before = _count()
    answered, done = _interaction(age_s=0.5)
    never, _ = _interaction(age_s=0.0)
    tasks_before = len(asyncio.all_tasks())
    clock.watch(answered)
    clock.watch(never)
    assert len(asyncio.all_tasks()) == tasks_before + 1  # one watcher for both
    done["yes"] = True
    await asyncio.sleep(0.01)
    assert clock.waiting() == 1  # the answered one was timed (half a second and more)
    assert _count() - before >= 0.5
    await asyncio.sleep(0.1)
    assert clock.waiting() == 0 and _count() - before < 1.0  # the other was dropped, not timed
