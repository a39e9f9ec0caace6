"""The bot process: settings, database, cogs; command sync only when asked (`felab bot sync`).

Intents: guilds and guild messages (not privileged: the bot sees that a voice message was posted,
and answers it). Only with FELAB_DISCORD_MESSAGE_CONTENT does it ask for the privileged
message-content intent, which Discord needs before it shows a bot a voice message's recording;
never the members intent.

Mentions: the client sends with `AllowedMentions.none()`, so no message pings anyone unless
its own send opts in (the member whose benchmark result is ready, say).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import discord
from discord.ext import commands
from sqlalchemy.orm import Session, sessionmaker

from felab_bot.answer_clock import AnswerClock
from felab_bot.endpoints import use_api, use_gateway_of
from felab_bot.gateway_reads import yield_between_events
from felab_bot.host import Host
from felab_core.db.session import default_sessions, session_scope
from felab_core.jobs.lifecycle import Publisher
from felab_core.ops import logs, metrics
from felab_core.ops.status import fleet_status
from felab_core.redact import redact
from felab_core.settings import Settings

log = logging.getLogger("felab.bot")

#: The bot's features, each an extension with its own `setup(bot)`, loaded by name.
EXTENSIONS = (
    "felab_bot.cogs.drills",
    "felab_bot.cogs.numbers",
    "felab_bot.cogs.bench",
    "felab_bot.cogs.people",
    "felab_bot.cogs.speak",
    "felab_bot.cogs.setup",
)


_REFUSED = (
    "Discord refused the token: copy it again from the developer portal (Bot > Reset Token) "
    "into FELAB_DISCORD_TOKEN"
)


class BotConfigError(RuntimeError):
    """The bot cannot start as configured; the message says what to set."""


class DiscordUnreachable(RuntimeError):
    """Discord's API could not be reached (no network, DNS, a port that closed); the message
    says so in the same words for `felab bot` and `felab bot sync`."""


#: What discord.py's login and REST calls raise when Discord's API is not reached.
_NETWORK_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def _unreachable(exc: BaseException) -> DiscordUnreachable:
    return DiscordUnreachable(
        f"could not reach Discord's API ({type(exc).__name__}: {redact(str(exc))[:160]}): "
        "check this machine's network (or FELAB_DISCORD_API_URL)"
    )


def token_of(settings: Settings) -> str:
    if settings.discord_token is None or not settings.discord_token.get_secret_value().strip():
        raise BotConfigError(
            "no Discord token: set FELAB_DISCORD_TOKEN to the bot's token (Discord developer "
            "portal > your application > Bot > Reset Token)"
        )
    return settings.discord_token.get_secret_value().strip()


class FelabBot(Host):
    """The bot process's client: intents, mentions, events; its features are extensions."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session] | None,
        *,
        run_loops: bool = True,
        publisher: Callable[[], Publisher] | None = None,
    ) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.message_content = settings.discord_message_content
        # No message pings anyone unless its send says so (discord.py applies this to every
        # send, interaction responses and followups included): a name typed by a member never
        # becomes a ping. The sends that mean to ping opt in with their own allowed_mentions.
        super().__init__(
            settings,
            sessions,
            run_loops=run_loops,
            publisher=publisher,
            command_prefix=commands.when_mentioned,
            intents=intents,
            help_command=None,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self.answer_clock = AnswerClock()

    async def setup_hook(self) -> None:
        await use_gateway_of(self)
        yield_between_events()
        for name in EXTENSIONS:
            await self.load_extension(name)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """Time each interaction to the bot's first answer (felab_interaction_seconds)."""
        self.answer_clock.watch(interaction)

    async def on_ready(self) -> None:
        log.info(
            "logged in as %s; %d guild(s): %s",
            self.user,
            len(self.guilds),
            ", ".join(str(g.id) for g in self.guilds),
        )


def _outbox_facts(sessions: sessionmaker[Session]) -> Callable[[], dict[str, Any]]:
    def read() -> dict[str, Any]:
        with session_scope(sessions) as session:
            status = fleet_status(session, discord.utils.utcnow())
        return {"pending": status.outbox_pending, "dead": status.outbox_dead}

    return read


def run(settings: Settings, publisher: Callable[[], Publisher] | None = None) -> None:
    """Start the bot and keep it running (Ctrl-C stops it); `publisher` makes what sends jobs
    to workers (the broker), on the first /bench. Logs go through felab's one setup (discord.py
    adds no handler of its own); with FELAB_METRICS_PORT it serves its metrics there."""
    token = token_of(settings)
    logs.add_secret(token)
    logs.setup(settings, level="WARNING")
    use_api(settings.discord_api_url)
    sessions = default_sessions(settings.resolved_database_url())
    if settings.metrics_port is not None:
        metrics.serve(
            settings.metrics_port,
            settings.metrics_addr,
            extra=metrics.FleetCollector(_outbox_facts(sessions)),
        )
    bot = FelabBot(settings, sessions, publisher=publisher)
    try:
        bot.run(token, log_handler=None)
    except discord.LoginFailure:
        raise BotConfigError(_REFUSED) from None
    except _NETWORK_ERRORS as exc:  # the login's first request: DNS, no route, a closed port
        raise _unreachable(exc) from None
    except discord.PrivilegedIntentsRequired:
        raise BotConfigError(
            "Discord refused the message-content intent: turn on Message Content Intent in the "
            "developer portal (your application > Bot > Privileged Gateway Intents), or set "
            "FELAB_DISCORD_MESSAGE_CONTENT=false (voice messages then point to /speak answer)"
        ) from None


async def sync(settings: Settings, guild_id: int | None) -> list[str]:
    """Register the bot's slash commands: on one guild (at once) or everywhere (global)."""
    token = token_of(settings)
    use_api(settings.discord_api_url)
    bot = FelabBot(settings, None, run_loops=False)
    try:
        async with bot:
            try:
                await bot.login(token)
            except discord.LoginFailure:
                raise BotConfigError(_REFUSED) from None
            try:
                if guild_id is not None:
                    guild = discord.Object(id=guild_id)
                    bot.tree.copy_global_to(guild=guild)
                    done = await bot.tree.sync(guild=guild)
                else:
                    done = await bot.tree.sync()
            except discord.Forbidden as exc:
                raise BotConfigError(
                    f"Discord refused the commands ({exc.text}): invite the bot to that server "
                    "with the applications.commands scope, and check the guild id"
                ) from None
    except _NETWORK_ERRORS as exc:  # as `felab bot` says it
        raise _unreachable(exc) from None
    return [c.name for c in done]
