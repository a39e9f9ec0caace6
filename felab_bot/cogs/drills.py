"""Drills on Discord: the daily post with each card's buttons, the buttons, and `/drill`.

Glue only: every callback hands its work to felab_bot/drills.py in one unit of work off the event
loop, and shows what comes back. Buttons are DynamicItems whose custom id carries the card id,
so a button on an old post still works after the bot restarts.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from typing import Any, cast

import discord
from aiolimiter import AsyncLimiter
from discord import app_commands
from discord.ext import commands, tasks

from felab_bot import drills
from felab_bot.cogs.common import Out, now, respond
from felab_bot.cogs.speak import prompt_view
from felab_bot.host import Host, host_of

log = logging.getLogger(__name__)

#: The daily post's pace: under Discord's global limit of 50 requests a second, with room for
#: the clicks that come in meanwhile (interaction answers are exempt, but fetches are not).
SENDS_PER_S = 40
#: Channels posted to side by side: each takes 5 messages per 5 s, so a post of ~10 messages
#: needs ~5 s per channel; 32 at once keep the global pace busy.
CHANNELS_AT_ONCE = 32

_STYLES = {
    "primary": discord.ButtonStyle.primary,
    "secondary": discord.ButtonStyle.secondary,
    "success": discord.ButtonStyle.success,
    "danger": discord.ButtonStyle.danger,
}
_BUTTONS = {action: (label, _STYLES[style]) for action, label, style in drills.BUTTONS}


class CardButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=drills.CUSTOM_ID):
    """One of a card's five buttons (reveal, again, hard, good, easy), alive across restarts."""

    def __init__(self, card_id: int, action: str) -> None:
        label, style = _BUTTONS[action]
        super().__init__(
            discord.ui.Button(label=label, style=style, custom_id=drills.custom_id(card_id, action))
        )
        self.card_id = card_id
        self.action = action

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> CardButton:
        return cls(int(match["card_id"]), match["action"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        bot = cast(Host, interaction.client)
        if self.action == "reveal":
            work = bot.db(drills.reveal_text, self.card_id)
        else:
            work = bot.db(
                drills.rate_text,
                guild_id=interaction.guild_id,
                channel_id=interaction.channel_id,
                user_id=interaction.user.id,
                display_name=interaction.user.display_name,
                card_id=self.card_id,
                grade=self.action,
                now=now(),
            )
        await respond(interaction, _text(work))


class BoardButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=drills.BOARD_ID):
    """The "Reveal the answer" button under a whiteboard: the worked answer, ephemerally,
    alive across restarts."""

    def __init__(self, board_id: int) -> None:
        super().__init__(
            discord.ui.Button(
                label=drills.BOARD_LABEL,
                style=discord.ButtonStyle.secondary,
                custom_id=drills.board_custom_id(board_id),
            )
        )
        self.board_id = board_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> BoardButton:
        return cls(int(match["board_id"]))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        bot = cast(Host, interaction.client)
        await respond(interaction, _text(bot.db(drills.board_reveal_text, self.board_id)))


async def _text(work: Awaitable[str]) -> Out:
    return Out(await work)


def board_view(board_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(BoardButton(board_id))
    return view


def card_view(card_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for action in drills.ACTIONS:
        view.add_item(CardButton(card_id, action))
    return view


class DrillsCog(commands.Cog, name="Drills"):
    def __init__(self, bot: Host) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        if self.bot.run_loops:
            self.post_loop.change_interval(seconds=self.bot.settings.discord_post_every_s)
            self.post_loop.start()

    async def cog_unload(self) -> None:
        self.post_loop.cancel()

    # ------------------------------------------------------------------ the daily post

    @tasks.loop(seconds=30)
    async def post_loop(self) -> None:
        try:
            await self.post_due()
            await self.post_weekly()
        except Exception:
            log.exception("the daily post failed; trying again at the next look")

    @post_loop.before_loop
    async def _wait_ready(self) -> None:
        await self.bot.wait_until_ready()

    async def _channel(self, channel_id: int) -> discord.abc.Messageable:
        channel = self.bot.get_channel(channel_id)
        if channel is None:
            channel = await self.bot.fetch_channel(channel_id)
        if not isinstance(channel, discord.abc.Messageable):
            raise TypeError(f"channel {channel_id} cannot hold messages")
        return channel

    async def post_weekly(self) -> int:
        """Post every claimed weekly summary (felab_core.reports.weekly); once per cohort and
        week, a failed send gives the claim back for the next look."""
        from felab_core.reports.weekly import claim_weekly_posts

        made = 0
        for post in await self.bot.db(claim_weekly_posts, now()):
            try:
                channel = await self._channel(post.channel_id)
                message = await channel.send(post.text)
            except discord.HTTPException:
                log.exception("could not post the weekly summary to %s", post.channel_id)
                await self.bot.db(drills.release, post.post_id)
                continue
            await self.bot.db(drills.posted, post.post_id, message.id, now())
            made += 1
        return made

    async def post_due(self) -> int:
        """Post every claimed daily post (the first look after a start catches up).

        Cohorts are posted side by side (each channel's messages in order), since Discord lets a
        channel take 5 messages per 5 s: one after another, 100 cohorts would take minutes. All
        sends share one pace under Discord's global 50 requests/s, so a large fleet of cohorts
        gets no 429 storm (benchmarks/bot_clicks.py --cohorts measures both)."""
        posts = await self.bot.db(drills.claim_due_posts, now())
        if not posts:
            return 0
        pace = AsyncLimiter(SENDS_PER_S / 10, 0.1)  # no burst past a tenth of a second's
        side_by_side = asyncio.Semaphore(CHANNELS_AT_ONCE)

        async def one(post: drills.DailyPost) -> bool:
            async with side_by_side:
                return await self._post_one(post, pace)

        done = await asyncio.gather(*(one(p) for p in posts))
        return sum(done)

    async def _post_one(self, post: drills.DailyPost, pace: AsyncLimiter) -> bool:
        try:
            channel = await self._channel(post.channel_id)
            # The one ping the bot means: the cohort's own role, when it set one.
            pings = discord.AllowedMentions.none()
            if post.ping_role_id is not None:
                pings = discord.AllowedMentions(
                    everyone=False, users=False, roles=[discord.Object(id=post.ping_role_id)]
                )
            async with pace:
                header = await channel.send(post.header, allowed_mentions=pings)
        except (discord.HTTPException, TypeError):
            log.exception("could not post to channel %s; giving the claim back", post.channel_id)
            await self.bot.db(drills.release, post.post_id)
            return False
        await self.bot.db(drills.posted, post.post_id, header.id, now())
        items = [
            *((card.text, card_view(card.card_id)) for card in post.cards),
            *((prompt.text, prompt_view(prompt.item_id)) for prompt in post.prompts),
            *((board.text, board_view(board.item_id)) for board in post.boards),
        ]
        try:
            for text, view in items:
                async with pace:
                    await channel.send(text, view=view)
        except discord.HTTPException:
            # the header is out and the post is marked: the rest is not sent twice
            log.exception("daily post %s: a card could not be posted", post.post_id)
            return False
        log.info(
            "daily post %s: %d cards, %d prompts, %d whiteboards in channel %s",
            post.post_id,
            len(post.cards),
            len(post.prompts),
            len(post.boards),
            post.channel_id,
        )
        return True

    # ------------------------------------------------------------------ commands

    @app_commands.command(name="drill", description="Your drill cards ready now")
    async def drill(self, interaction: discord.Interaction[Any]) -> None:
        await respond(interaction, self._drill(interaction))

    async def _drill(self, interaction: discord.Interaction[Any]) -> Out:
        reply = await self.bot.db(
            drills.drill_reply,
            guild_id=interaction.guild_id,
            channel_id=interaction.channel_id,
            user_id=interaction.user.id,
            display_name=interaction.user.display_name,
            now=now(),
        )
        return Out(reply.text, view=card_view(reply.card_id) if reply.card_id is not None else None)


async def setup(bot: commands.Bot) -> None:
    """Load this extension: its cog and its persistent buttons."""
    bot.add_dynamic_items(CardButton, BoardButton)
    await bot.add_cog(DrillsCog(host_of(bot)))
