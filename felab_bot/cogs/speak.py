"""`/speak prompt`, `/speak answer`, voice messages in a cohort's channel and the rating buttons
under an answer, and the "Said it" button under the day's prompt: glue over felab_bot/speak.py
and felab_bot/drills.py. The buttons are DynamicItems (the ids in the
custom id), alive across restarts."""

from __future__ import annotations

import logging
import re
from typing import Any, cast

import discord
from discord import app_commands
from discord.ext import commands

from felab_bot import drills, people, speak
from felab_bot.cogs.common import Out, now, respond, who
from felab_bot.host import Host, host_of
from felab_bot.who import Who
from felab_core.errors import ServiceError

log = logging.getLogger(__name__)
SPOKEN = "spoken answer"  # what the channel's post about a member shows


class RateButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=speak.CUSTOM_ID):
    def __init__(self, answer_id: int, rating: int) -> None:
        super().__init__(
            discord.ui.Button(
                label=str(rating),
                style=discord.ButtonStyle.secondary,
                custom_id=speak.custom_id(answer_id, rating),
            )
        )
        self.answer_id = answer_id
        self.rating = rating

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> RateButton:
        return cls(int(match["answer_id"]), int(match["rating"]))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        bot = cast(Host, interaction.client)

        async def work() -> Out:
            return Out(
                await bot.db(speak.rate, who(interaction), self.answer_id, self.rating, now())
            )

        await respond(interaction, work())


def rating_view(answer_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    for rating in range(1, 6):
        view.add_item(RateButton(answer_id, rating))
    return view


class PromptButton(discord.ui.DynamicItem[discord.ui.Button[Any]], template=drills.PROMPT_ID):
    """The "Said it" button under the day's say-it-aloud prompt: records the clicker's answer
    and asks for their self-rating (the rating buttons below), alive across
    restarts."""

    def __init__(self, prompt_id: int) -> None:
        super().__init__(
            discord.ui.Button(
                label=drills.SAID_LABEL,
                style=discord.ButtonStyle.primary,
                custom_id=drills.prompt_custom_id(prompt_id),
            )
        )
        self.prompt_id = prompt_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> PromptButton:
        return cls(int(match["prompt_id"]))

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        bot = cast(Host, interaction.client)

        async def work() -> Out:
            reply = await bot.db(
                drills.said_text,
                guild_id=interaction.guild_id,
                channel_id=interaction.channel_id,
                user_id=interaction.user.id,
                display_name=interaction.user.display_name,
                prompt_id=self.prompt_id,
                now=now(),
                shown_at=interaction.message.created_at if interaction.message else None,
            )
            view = rating_view(reply.answer_id) if reply.answer_id is not None else None
            return Out(reply.text, view=view)

        await respond(interaction, work())


def prompt_view(prompt_id: int) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(PromptButton(prompt_id))
    return view


class SpeakCog(commands.Cog, name="Speak"):
    group = app_commands.Group(name="speak", description="Say it out loud")

    def __init__(self, bot: Host) -> None:
        self.bot = bot

    @group.command(name="prompt", description="Your say-it-aloud question and its time")
    async def prompt(self, interaction: discord.Interaction[Any]) -> None:
        async def work() -> Out:
            voice = self.bot.settings.discord_message_content
            reply = await self.bot.db(speak.prompt_text, who(interaction), now(), voice)
            return Out(reply.text, view=prompt_view(reply.prompt_id))

        await respond(interaction, work())

    @group.command(name="answer", description="Record your spoken answer for peers to rate")
    @app_commands.describe(
        seconds="How long your answer took",
        rating="Your own rating: 5 = clear, correct and inside the time",
        recording="Your voice message or recording, for cohort-mates to hear (optional)",
    )
    async def answer(
        self,
        interaction: discord.Interaction[Any],
        seconds: app_commands.Range[float, 0.5, 600.0],
        rating: app_commands.Range[int, 1, 5],
        recording: discord.Attachment | None = None,
    ) -> None:
        url = recording.url if recording is not None else None
        posted: list[speak.Spoken] = []

        async def work() -> Out:
            spoken = await self.bot.db(speak.answer, who(interaction), seconds, rating, url, now())
            posted.append(spoken)
            return Out(spoken.private)

        await respond(interaction, work())
        if posted:
            spoken = posted[0]
            msg = await interaction.followup.send(
                spoken.public, view=rating_view(spoken.answer_id), ephemeral=False, wait=True
            )
            await self.bot.db(
                people.posted_about, spoken.member_id, msg.channel.id, msg.id, SPOKEN, now()
            )

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        """A voice message in a cohort's channel is a spoken answer (Discord sends its attachment
        only to a bot with the message-content intent)."""
        if message.author.bot or message.guild is None:
            return
        if not message.flags.value & speak.IS_VOICE_MESSAGE:
            return
        audio = next((a for a in message.attachments if a.duration is not None), None)
        link = message.attachments[0].url if message.attachments else None
        seconds = float(audio.duration) if audio is not None and audio.duration else None
        author = message.author
        speaker = Who(message.guild.id, message.channel.id, author.id, author.display_name)
        try:
            reply = await self.bot.db(speak.voice_answer, speaker, seconds, link, now())
        except ServiceError as exc:
            reply = speak.VoiceReply(str(exc), None)
        if reply is None:
            return
        view = rating_view(reply.answer_id) if reply.answer_id is not None else None
        kw: dict[str, Any] = {"mention_author": False}
        if view is not None:
            kw["view"] = view
        try:
            sent = await message.reply(reply.text, **kw)
        except discord.HTTPException:  # no Send Messages here, say: the answer stays recorded
            log.exception("could not reply to voice message %s", message.id)
            return
        if reply.member_id is not None:
            await self.bot.db(
                people.posted_about, reply.member_id, sent.channel.id, sent.id, SPOKEN, now()
            )


async def setup(bot: commands.Bot) -> None:
    """Load this extension: its cog and its persistent buttons."""
    bot.add_dynamic_items(RateButton, PromptButton)
    await bot.add_cog(SpeakCog(host_of(bot)))
