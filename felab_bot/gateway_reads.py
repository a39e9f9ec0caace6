"""Let each gateway event's handlers start before the next event is read.

discord.py reads the gateway in a loop (`DiscordWebSocket.poll_event`); when many events are
already buffered (a burst of button presses), each `receive` returns without giving the event
loop a turn, so the handlers of the first press only start once the last press has been read
and parsed: a burst of 1,000 presses was answered in one band, every answer after the whole
burst. One `sleep(0)` after each event lets the handlers it started run (and acknowledge) in
between, so the first presses are answered first. The cost is one loop turn per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from discord.gateway import DiscordWebSocket

_PATCHED = "_felab_yields_between_events"


def yield_between_events() -> None:
    """Wrap `DiscordWebSocket.poll_event` once (the class is shared by every connection)."""
    if getattr(DiscordWebSocket, _PATCHED, False):
        return
    read_one: Callable[[DiscordWebSocket], Awaitable[Any]] = DiscordWebSocket.poll_event

    async def poll_event(self: DiscordWebSocket) -> None:
        await read_one(self)
        await asyncio.sleep(0)

    DiscordWebSocket.poll_event = poll_event  # type: ignore[method-assign]
    setattr(DiscordWebSocket, _PATCHED, True)
