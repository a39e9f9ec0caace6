"""What the cogs share: who ran a command, and answering with text, files and buttons.

`respond` answers ephemerally at once when the work is quick, else acknowledges first
("thinking") and follows up, as the drills cog's `answer` does, but can carry attachments.
A service refusal (felab_core.db.errors.ServiceError) is the answer, shown to the member only.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord

from bot.drills import fit
from bot.numbers import Who
from felab_core.db.errors import ServiceError

ANSWER_WITHIN_S = 2.0


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
    """Answer ephemerally; `defer` acknowledges at once (work that may take long)."""
    task = asyncio.ensure_future(_or_error(work))
    if not defer:
        done, _ = await asyncio.wait({task}, timeout=ANSWER_WITHIN_S)
        if task in done:
            out = task.result()
            await interaction.response.send_message(fit(out.text), **kwargs_of(out))
            return
    await interaction.response.defer(ephemeral=True, thinking=True)
    out = await task
    await interaction.followup.send(fit(out.text), **kwargs_of(out))
