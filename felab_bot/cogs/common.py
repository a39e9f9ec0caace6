"""What the cogs share: who ran a command, and answering with text, files and buttons.

`respond` answers ephemerally at once when the work is quick, else acknowledges first
("thinking") and follows up, as the drills cog's `answer` does, but can carry attachments.
A service refusal (felab_core.errors.ServiceError) is the answer, shown to the member only.
"""

from __future__ import annotations

import asyncio
import io
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import discord

from felab_bot.drills import fit
from felab_bot.who import Who
from felab_core.errors import ServiceError

ANSWER_WITHIN_S = 2.0  # an idle bot answers directly when the work is done this soon
BUSY_AFTER = 8  # more interactions in flight than this at once: a burst
# In a burst, acknowledge this soon after the event, then follow up: the work queues behind the
# others' (about 10 ms each, one writer at a time), so a longer wait rarely saves the followup
# and holds every acknowledgement back (0.3 s here answered 238-485 of 1,000 within 1 s; 0.05 s,
# 621-681: benchmarks/bot_clicks.py, 2026-12-04).
BUSY_ANSWER_WITHIN_S = 0.05
#: In a burst, how many acknowledged presses' work runs at once (the rest wait their turn) and
#: the longest a press's work waits for the others' acknowledgements before it runs anyway.
WORK_AT_ONCE = 2
WORK_WAITS_AT_MOST_S = 2.0
_in_flight = 0
T = TypeVar("T")


class AcknowledgeFirst:
    """In a burst, every press is acknowledged before any press's work starts.

    The work runs in database threads that take the interpreter lock (and, on SQLite, the one
    write lock) from the event loop that acknowledges: started side by side with the
    acknowledgements, they pushed a third of 1,000 presses past 1 s. So while any interaction
    is waiting for its first answer, acknowledged work waits too, then runs WORK_AT_ONCE at a
    time in arrival order; none waits longer than WORK_WAITS_AT_MOST_S (a steady stream of
    presses must not starve the followups).
    """

    def __init__(self, at_once: int = WORK_AT_ONCE, waits_at_most_s: float = WORK_WAITS_AT_MOST_S):
        self.at_once = at_once
        self.waits_at_most_s = waits_at_most_s
        self.unanswered = 0  # interactions that have not sent their first answer yet
        self.running = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Count an interaction as unanswered until its first answer (or its failure)."""
        self.unanswered += 1
        try:
            yield
        finally:
            self.unanswered -= 1
            self._wake()

    def _start(self, turn: asyncio.Future[None]) -> None:
        if not turn.done():
            turn.set_result(None)
            self.running += 1

    def _wake(self) -> None:
        while self._waiting and self.running < self.at_once and not self.unanswered:
            self._start(self._waiting.popleft())

    def _overdue(self, turn: asyncio.Future[None]) -> None:
        if not turn.done():
            self._waiting.remove(turn)
            self._start(turn)

    async def run(self, work: Awaitable[T]) -> T:
        """Await `work` when its turn comes (at once when nothing waits)."""
        if self._waiting or self.running >= self.at_once or self.unanswered:
            loop = asyncio.get_running_loop()
            turn: asyncio.Future[None] = loop.create_future()
            self._waiting.append(turn)
            timer = loop.call_later(self.waits_at_most_s, self._overdue, turn)
            try:
                await turn
            except asyncio.CancelledError:
                if isinstance(work, Coroutine):
                    work.close()  # never started: no "never awaited" warning
                if turn in self._waiting:
                    self._waiting.remove(turn)
                elif not turn.cancelled():  # its turn had come: give it to the next
                    self.running -= 1
                    self._wake()
                raise
            finally:
                timer.cancel()
        else:
            self.running += 1
        try:
            return await work
        finally:
            self.running -= 1
            self._wake()


ACKNOWLEDGE_FIRST = AcknowledgeFirst()


def wait_for_work_s(
    interaction: discord.Interaction[Any], within: float, waited: float = 0.0
) -> float:
    """How long to wait for the work before acknowledging first ("thinking", then a followup).

    Counted from the event (its snowflake time), so an event that queued in a busy bot waits
    less; in a burst (more than BUSY_AFTER interactions in flight) the bot acknowledges within
    BUSY_ANSWER_WITHIN_S instead, so no press waits seconds behind the others' database work.
    `waited`: how long the bot has waited already (the floor of the event's age).
    """
    limit = min(within, BUSY_ANSWER_WITHIN_S) if _in_flight > BUSY_AFTER else within
    age = waited
    created = getattr(interaction, "created_at", None)
    if isinstance(created, datetime):
        age = max(age, (now() - created).total_seconds())
    return max(0.0, limit - age)


async def done_in_time(
    interaction: discord.Interaction[Any], task: asyncio.Future[Any], within: float
) -> bool:
    """Wait for the work while `wait_for_work_s` allows, looking again every 50 ms (a burst
    that starts meanwhile shortens the wait); True when it finished in time."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not task.done():
        wait_s = wait_for_work_s(interaction, within, loop.time() - start)
        if wait_s <= 0:
            return False
        await asyncio.wait({task}, timeout=min(wait_s, 0.05))
    return True


@asynccontextmanager
async def in_flight() -> AsyncIterator[None]:
    """Count an interaction as in flight until its work is done."""
    global _in_flight
    _in_flight += 1
    try:
        yield
    finally:
        _in_flight -= 1


def now() -> datetime:
    return datetime.now(UTC)


def who(interaction: discord.Interaction[Any]) -> Who:
    return Who(
        interaction.guild_id,
        interaction.channel_id,
        interaction.user.id,
        interaction.user.display_name,
    )


@dataclass(frozen=True)
class Attachment:
    name: str
    data: bytes

    def file(self) -> discord.File:
        return discord.File(io.BytesIO(self.data), filename=self.name)


@dataclass(frozen=True)
class Out:
    text: str
    files: list[Attachment] = field(default_factory=list)
    view: discord.ui.View | None = None


def kwargs_of(out: Out) -> dict[str, Any]:
    kw: dict[str, Any] = {"ephemeral": True}
    if out.files:
        kw["files"] = [a.file() for a in out.files]
    if out.view is not None:
        kw["view"] = out.view
    return kw


async def _or_error(work: Awaitable[Out]) -> Out:
    try:
        return await work
    except ServiceError as exc:
        return Out(str(exc))


async def respond(
    interaction: discord.Interaction[Any], work: Awaitable[Out], *, defer: bool = False
) -> None:
    """Answer ephemerally; `defer` acknowledges at once (work that may take long), as does a
    burst, whose work then waits for every press to be acknowledged (AcknowledgeFirst)."""
    async with in_flight():
        task: asyncio.Future[Out] | None = None
        with ACKNOWLEDGE_FIRST.answering():
            if not defer and _in_flight <= BUSY_AFTER:
                task = asyncio.ensure_future(_or_error(work))
                if await done_in_time(interaction, task, ANSWER_WITHIN_S):
                    out = task.result()
                    await interaction.response.send_message(fit(out.text), **kwargs_of(out))
                    return
            await interaction.response.defer(ephemeral=True, thinking=True)
        out = await (task if task is not None else ACKNOWLEDGE_FIRST.run(_or_error(work)))
    await interaction.followup.send(fit(out.text), **kwargs_of(out))
