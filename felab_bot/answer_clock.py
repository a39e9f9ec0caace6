"""How long each interaction waited for the bot's first answer (felab_interaction_seconds).

discord.py has no event for "answered", so the clock looks at the interactions still waiting.
One watcher looks at all of them every LOOK_EVERY_S: a task per interaction, each waking every
5 ms, was 200,000 wake-ups a second during a burst of 1,000 presses, on the loop that answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import discord

from felab_core.ops import metrics

LOOK_EVERY_S = 0.005
#: Discord shows the member an error after 3 s; an interaction unanswered by then is not timed.
GIVE_UP_AFTER_S = 3.0


class AnswerClock:
    def __init__(self, look_every_s: float = LOOK_EVERY_S) -> None:
        self.look_every_s = look_every_s
        self._waiting: list[tuple[discord.Interaction[Any], float]] = []
        self._watcher: asyncio.Task[None] | None = None

    def watch(self, interaction: discord.Interaction[Any]) -> None:
        loop = asyncio.get_running_loop()
        self._waiting.append((interaction, loop.time() + GIVE_UP_AFTER_S))
        if self._watcher is None or self._watcher.done():
            self._watcher = loop.create_task(self._watch())

    def waiting(self) -> int:
        return len(self._waiting)

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            await asyncio.sleep(self.look_every_s)
            now = loop.time()
            still: list[tuple[discord.Interaction[Any], float]] = []
            for interaction, give_up_at in self._waiting:
                if interaction.response.is_done():
                    _observe(interaction)
                elif now < give_up_at:
                    still.append((interaction, give_up_at))
            self._waiting = still


def _observe(interaction: discord.Interaction[Any]) -> None:
    command = interaction.command.qualified_name if interaction.command else "component"
    waited = (discord.utils.utcnow() - interaction.created_at).total_seconds()
    metrics.INTERACTION_SECONDS.labels(command).observe(max(0.0, waited))
