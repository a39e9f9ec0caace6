"""`/leaderboard`, `/progress` (instructors, checked at run time) and `/me`: glue over
felab_bot/people.py. `/me delete` asks first: nothing is deleted until the member presses
Confirm; then the bot's messages about the member go from Discord too, and a loop removes
those of members deleted from a terminal."""

from __future__ import annotations

import logging
from typing import Any, cast

import discord
from discord import app_commands
from discord.ext import commands, tasks

from felab_bot import people
from felab_bot.cogs.common import Attachment, Out, now, respond, who
from felab_bot.host import Host, host_of
from felab_bot.who import Who

log = logging.getLogger(__name__)

_METRICS = [app_commands.Choice(name=m, value=m) for m in people.METRICS]


def _out(report: people.Report) -> Out:
    files = [Attachment(report.file_name, report.data)] if report.file_name else []
    return Out(report.text, files)


async def remove_posts(bot: Host, post_ids: list[int] | None = None) -> tuple[int, int, int]:
    """Delete the bot's messages about deleted members from Discord (these, or all waiting);
    returns (removed, refused: no access any more, left: to try again at the next look)."""
    removed = refused = left = 0
    for post in await bot.db(people.posts_to_remove, post_ids):
        channel = bot.get_partial_messageable(post.channel_id)
        try:
            await channel.get_partial_message(post.message_id).delete()
            removed += 1
        except discord.NotFound:  # gone already: deleted by a moderator, or its channel
            removed += 1
        except discord.Forbidden:
            log.warning("no access to remove message %s in %s", post.message_id, post.channel_id)
            refused += 1
        except discord.HTTPException:
            log.exception("could not remove message %s; trying again later", post.message_id)
            left += 1
            continue
        await bot.db(people.removed_post, post.post_id)
    return removed, refused, left


class ConfirmDelete(discord.ui.View):
    """Confirm / Keep, for the member who asked only; gone after two minutes."""

    def __init__(self, asker: Who) -> None:
        super().__init__(timeout=120)
        self.asker = asker

    async def interaction_check(self, interaction: discord.Interaction[Any]) -> bool:
        return interaction.user.id == self.asker.user_id

    @discord.ui.button(label="Delete everything", style=discord.ButtonStyle.danger)
    async def confirm(
        self, interaction: discord.Interaction[Any], button: discord.ui.Button[Any]
    ) -> None:
        bot = cast(Host, interaction.client)
        self.stop()

        async def work() -> Out:
            deleted = await bot.db(people.delete, self.asker)
            if not deleted.post_ids:
                return Out(deleted.text)
            counts = await remove_posts(bot, deleted.post_ids)
            return Out(f"{deleted.text}\n{people.removed_text(*counts)}")

        await respond(interaction, work())

    @discord.ui.button(label="Keep it", style=discord.ButtonStyle.secondary)
    async def keep(
        self, interaction: discord.Interaction[Any], button: discord.ui.Button[Any]
    ) -> None:
        self.stop()
        await interaction.response.send_message("Nothing was deleted.", ephemeral=True)


class PeopleCog(commands.Cog, name="People"):
    me_group = app_commands.Group(name="me", description="Your machine, privacy and data")

    def __init__(self, bot: Host) -> None:
        self.bot = bot

    async def cog_load(self) -> None:
        if self.bot.run_loops:
            self.tidy_loop.change_interval(seconds=self.bot.settings.discord_post_every_s)
            self.tidy_loop.start()

    async def cog_unload(self) -> None:
        self.tidy_loop.cancel()

    @tasks.loop(seconds=30)
    async def tidy_loop(self) -> None:
        """Remove the messages about members deleted from a terminal (or left over)."""
        try:
            await remove_posts(self.bot)
        except Exception:
            log.exception("removing deleted members' messages failed; trying at the next look")

    @tidy_loop.before_loop
    async def _wait_ready(self) -> None:
        await self.bot.wait_until_ready()

    # ------------------------------------------------------------------ instructors

    @app_commands.command(name="leaderboard", description="Instructors: the cohort's boards")
    @app_commands.describe(metric="streak, reviews, retention, or a server's writing speed")
    @app_commands.choices(metric=_METRICS)
    async def leaderboard(
        self, interaction: discord.Interaction[Any], metric: str = "streak"
    ) -> None:
        async def work() -> Out:
            return _out(
                await self.bot.db(people.leaderboard_report, who(interaction), metric, now())
            )

        await respond(interaction, work())

    @app_commands.command(name="progress", description="Instructors: the cohort's progress")
    @app_commands.describe(member="One member only (default: everyone)")
    async def progress(
        self, interaction: discord.Interaction[Any], member: discord.User | None = None
    ) -> None:
        member_id = member.id if member is not None else None

        async def work() -> Out:
            return _out(
                await self.bot.db(people.progress_report, who(interaction), member_id, now())
            )

        await respond(interaction, work())

    # ------------------------------------------------------------------ /me

    @me_group.command(name="show", description="Your machine and whether your numbers are public")
    async def show(self, interaction: discord.Interaction[Any]) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(people.me_text, who(interaction), now()))

        await respond(interaction, work())

    @me_group.command(name="hardware", description="Your Mac: a chip name or a bandwidth")
    @app_commands.describe(chip="Such as M4 Pro", bandwidth="Memory bandwidth in GB/s, such as 273")
    async def hardware(
        self,
        interaction: discord.Interaction[Any],
        chip: str | None = None,
        bandwidth: str | None = None,
    ) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(people.hardware, who(interaction), chip, bandwidth, now()))

        await respond(interaction, work())

    @me_group.command(name="privacy", description="Show your numbers on leaderboards, or not")
    async def privacy(self, interaction: discord.Interaction[Any], public: bool) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(people.privacy, who(interaction), public, now()))

        await respond(interaction, work())

    @me_group.command(name="export", description="Everything felab holds about you, as a file")
    async def export(self, interaction: discord.Interaction[Any]) -> None:
        async def work() -> Out:
            return _out(await self.bot.db(people.export, who(interaction), now()))

        await respond(interaction, work())

    @me_group.command(name="delete", description="Delete everything felab holds about you")
    async def delete(self, interaction: discord.Interaction[Any]) -> None:
        await interaction.response.send_message(
            "This deletes your numbers, runs, reviews, answers and machine, with no undo. "
            "Take a copy first with `/me export`.",
            view=ConfirmDelete(who(interaction)),
            ephemeral=True,
        )


async def setup(bot: commands.Bot) -> None:
    """Load this extension: its cog."""
    await bot.add_cog(PeopleCog(host_of(bot)))
