"""The gateway reader gives each event's handlers a turn before it reads the next event."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import aiohttp
from discord.gateway import DiscordWebSocket

from felab_bot.gateway_reads import yield_between_events


class _Buffered:
    """A websocket with a burst already in its buffer: `receive` never suspends."""

    async def receive(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - its API
        return SimpleNamespace(type=aiohttp.WSMsgType.TEXT, data="{}")


async def test_a_buffered_burst_lets_handlers_run_between_events() -> None:
    yield_between_events()
    yield_between_events()  # twice is once: the reader is wrapped one time only
    ran: list[str] = []
    ws = DiscordWebSocket.__new__(DiscordWebSocket)
    ws.socket = _Buffered()  # type: ignore[assignment]
    ws._max_heartbeat_timeout = 60.0

    async def received_message(msg: Any) -> None:  # dispatching starts the handler's task
        n = len(ran)
        asyncio.get_running_loop().create_task(_handler(ran, n))
        ran.append(f"read {n}")

    ws.received_message = received_message  # type: ignore[method-assign]
    for _ in range(3):
        await ws.poll_event()
    # each press's handler started before the next press was read, not after the whole burst
    assert ran[:5] == ["read 0", "handled 0", "read 2", "handled 2", "read 4"]


async def _handler(ran: list[str], n: int) -> None:
    ran.append(f"handled {n}")
