"""`/leaderboard`, `/progress` (instructors, checked at run time) and `/me`: glue over
felab_bot/people.py. `/me delete` asks first: nothing is deleted until the member presses
Confirm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import discord
from discord import app_commands
from discord.ext import commands

from felab_bot import people
from felab_bot.cogs.common import Attachment, Out, now, respond, who
from felab_bot.numbers import Who

if TYPE_CHECKING:
    from felab_bot.app import FelabBot

_METRICS = [app_commands.Choice(name=m, value=m) for m in people.METRICS]


def _out(report: people.Report) -> Out:
    files = [Attachment(report.file_name, report.data)] if report.file_name else []
    return Out(report.text, files)


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
        bot = cast("FelabBot", interaction.client)
        self.stop()

        async def work() -> Out:
            return Out(await bot.db(people.delete, self.asker))

        await respond(interaction, work())

    @discord.ui.button(label="Keep it", style=discord.ButtonStyle.secondary)
    async def keep(
        self, interaction: discord.Interaction[Any], button: discord.ui.Button[Any]
    ) -> None:
        self.stop()
        await interaction.response.send_message("Nothing was deleted.", ephemeral=True)


class PeopleCog(commands.Cog, name="People"):
    me_group = app_commands.Group(name="me", description="Your machine, privacy and data")

    def __init__(self, bot: FelabBot) -> None:
        self.bot = bot

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
