"""`/numbers enter` (a modal with the day's fields) and `/numbers show`: glue over
felab_bot/numbers.py.

Discord allows no command that is both runnable and a group, so `/numbers` is a group of two.
"""

from __future__ import annotations

from typing import Any, cast

import discord
from discord import app_commands
from discord.ext import commands

from felab_bot import numbers
from felab_bot.cogs.common import Out, now, respond, who
from felab_bot.host import Host, host_of
from felab_core.errors import ServiceError


class NumbersModal(discord.ui.Modal):
    """One text input per field of the day (at most five), the sample figure as placeholder."""

    def __init__(self, form: numbers.NumbersForm) -> None:
        super().__init__(title=f"Day {form.day}: your numbers", timeout=15 * 60)
        self.inputs: dict[str, discord.ui.TextInput[Any]] = {}
        for f in form.fields:
            box: discord.ui.TextInput[Any] = discord.ui.TextInput(
                label=f.label,
                placeholder=f.placeholder,
                default=f.current or None,
                required=False,
                max_length=40,
                custom_id=f"felab:numbers:{f.key}"[:100],
            )
            self.inputs[f.key] = box
            self.add_item(box)

    def values(self) -> dict[str, str]:
        return {key: box.value or "" for key, box in self.inputs.items()}

    async def on_submit(self, interaction: discord.Interaction[Any]) -> None:
        bot = cast(Host, interaction.client)
        values = self.values()

        async def work() -> Out:
            return Out(await bot.db(numbers.enter_numbers, who(interaction), values, now()))

        await respond(interaction, work())


class NumbersCog(commands.Cog, name="Numbers"):
    group = app_commands.Group(name="numbers", description="Your measured numbers")

    def __init__(self, bot: Host) -> None:
        self.bot = bot

    @group.command(name="enter", description="Type in today's writing speeds (a form)")
    async def enter(self, interaction: discord.Interaction[Any]) -> None:
        try:
            form = await self.bot.db(numbers.numbers_form, who(interaction), now())
        except ServiceError as exc:
            await interaction.response.send_message(str(exc), ephemeral=True)
            return
        if not form.fields:
            await interaction.response.send_message(form.message, ephemeral=True)
            return
        await interaction.response.send_modal(NumbersModal(form))

    @group.command(name="show", description="Your numbers for the day and whether it is done")
    @app_commands.describe(day="The course day (default: the day that asks for numbers)")
    async def show(
        self,
        interaction: discord.Interaction[Any],
        day: app_commands.Range[int, 1, 366] | None = None,
    ) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(numbers.show_numbers, who(interaction), now(), day))

        await respond(interaction, work())


async def setup(bot: commands.Bot) -> None:
    """Load this extension: its cog."""
    await bot.add_cog(NumbersCog(host_of(bot)))
