"""`/setup cohort`, `/setup member`, `/setup show`, `/setup change` and `/join`: glue over
felab_bot/setup.py.

`/setup` is shown by default only to members who may manage the server (Discord's
default_member_permissions); the caller's permission is checked again when it runs.
"""

from __future__ import annotations

from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from felab_bot import setup as cohort_setup
from felab_bot.cogs.common import Out, now, respond, who
from felab_bot.host import Host, host_of
from felab_core.content.calendar import ADVANCE_MODES
from felab_core.people.cohort_settings import Change
from felab_core.people.members import JOIN_MODES, ROLES


def _choices(values: tuple[str, ...]) -> list[app_commands.Choice[str]]:
    return [app_commands.Choice(name=v, value=v) for v in values]


class SetupCog(commands.Cog, name="Setup"):
    group = app_commands.Group(
        name="setup",
        description="Set up this channel's cohort",
        default_permissions=discord.Permissions(manage_guild=True),
        guild_only=True,
    )

    def __init__(self, bot: Host) -> None:
        self.bot = bot

    @group.command(name="cohort", description="Run a cohort in this channel; you instruct it")
    @app_commands.describe(
        name="Such as Spring 2026",
        timezone="The cohort's time zone, such as Europe/London",
        start_date="Day 1, as 2026-03-02",
        post_time="When the daily drill is posted, as 09:00 (default)",
        advance="How days move on: daily, weekdays or manual",
        join_mode="open (first command joins), code, or invite (instructors add people)",
    )
    @app_commands.choices(advance=_choices(ADVANCE_MODES), join_mode=_choices(JOIN_MODES))
    async def cohort(
        self,
        interaction: discord.Interaction[Any],
        name: str,
        timezone: str,
        start_date: str,
        post_time: str = "09:00",
        advance: str = "daily",
        join_mode: str = "open",
    ) -> None:
        can_manage = bool(interaction.permissions.manage_guild)

        async def work() -> Out:
            return Out(
                await self.bot.db(
                    cohort_setup.setup_cohort,
                    who(interaction),
                    can_manage_server=can_manage,
                    name=name,
                    timezone=timezone,
                    start_date=start_date,
                    post_time=post_time,
                    advance=advance,
                    join_mode=join_mode,
                    now=now(),
                )
            )

        await respond(interaction, work())

    @group.command(name="member", description="Instructors: add someone to this cohort")
    @app_commands.choices(role=_choices(ROLES))
    async def member(
        self, interaction: discord.Interaction[Any], user: discord.User, role: str = "student"
    ) -> None:
        async def work() -> Out:
            return Out(
                await self.bot.db(
                    cohort_setup.add_to_cohort,
                    who(interaction),
                    user.id,
                    user.display_name,
                    role,
                    now(),
                )
            )

        await respond(interaction, work())

    @group.command(name="weekly", description="Instructors: a summary of the week each Monday")
    @app_commands.describe(on="True: post the summary here each Monday; False: stop")
    async def weekly(self, interaction: discord.Interaction[Any], on: bool) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(cohort_setup.weekly, who(interaction), on))

        await respond(interaction, work())

    @group.command(name="show", description="Instructors: this cohort's settings")
    async def show(self, interaction: discord.Interaction[Any]) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(cohort_setup.show_settings, who(interaction), now()))

        await respond(interaction, work())

    @group.command(name="change", description="Instructors: change this cohort's settings")
    @app_commands.describe(
        timezone="The cohort's time zone, such as Europe/London",
        post_time="When the daily drill is posted, as 09:00",
        channel="Move the cohort to this channel",
        daily_post="True: post the daily drill; False: pause it",
        ping_role="A role the daily post pings",
        no_ping="True: the daily post pings no role",
        weekly="True: a summary of the week each Monday; False: none",
    )
    async def change(
        self,
        interaction: discord.Interaction[Any],
        timezone: str | None = None,
        post_time: str | None = None,
        channel: discord.TextChannel | None = None,
        daily_post: bool | None = None,
        ping_role: discord.Role | None = None,
        no_ping: bool = False,
        weekly: bool | None = None,
    ) -> None:
        role = str(ping_role.id) if ping_role is not None else ("" if no_ping else None)
        wanted = Change(
            timezone=timezone,
            post_time=post_time,
            channel_id=str(channel.id) if channel is not None else None,
            daily_post=daily_post,
            post_role_id=role,
            weekly_summary=weekly,
        )

        async def work() -> Out:
            return Out(await self.bot.db(cohort_setup.change, who(interaction), wanted, now()))

        await respond(interaction, work())

    @app_commands.command(name="join", description="Join this channel's cohort")
    @app_commands.describe(code="The join code your instructor gave you, if it needs one")
    async def join(self, interaction: discord.Interaction[Any], code: str | None = None) -> None:
        async def work() -> Out:
            return Out(await self.bot.db(cohort_setup.join, who(interaction), code, now()))

        await respond(interaction, work())


async def setup(bot: commands.Bot) -> None:
    """Load this extension: its cog."""
    await bot.add_cog(SetupCog(host_of(bot)))
