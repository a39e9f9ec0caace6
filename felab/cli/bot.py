"""`felab bot`: run the Discord bot, and register its slash commands when asked.

The bot package (and discord.py) is imported only inside the commands, so the rest of felab
starts without it. Commands are synced on purpose only (`felab bot sync`), never on every start:
Discord rate-limits command registration, and a global sync takes up to an hour to show.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from felab.cli.db import service_errors
from felab.cli.errors import EXIT_UNREACHABLE, EXIT_USAGE, err
from felab_core.jobs.lifecycle import Publisher
from felab_core.redact import redact
from felab_core.settings import Settings, get_settings

bot_app = typer.Typer(
    name="bot",
    help="The Discord bot: `felab bot` runs it (FELAB_DISCORD_TOKEN), `felab bot sync` "
    "registers its slash commands.",
    invoke_without_command=True,
)


@bot_app.callback()
def bot_main(ctx: typer.Context) -> None:
    """Run the bot until stopped (Ctrl-C), posting each cohort's daily drill at its time."""
    if ctx.invoked_subcommand is not None:
        return
    from felab_bot.app import run

    settings = get_settings()
    _check_api(settings)
    with service_errors(), _bot_errors():
        run(settings, lambda: _dispatcher(settings))


@contextmanager
def _bot_errors() -> Iterator[None]:
    """How `felab bot` and `felab bot sync` both say what stopped them: a setting to fix (exit
    2), or Discord's API not reached (exit 3), in the same words."""
    from felab_bot.app import BotConfigError, DiscordUnreachable

    try:
        yield
    except BotConfigError as exc:
        err(str(exc))
        raise typer.Exit(EXIT_USAGE) from None
    except DiscordUnreachable as exc:
        err(str(exc))
        raise typer.Exit(EXIT_UNREACHABLE) from None


#: Discord's API answers /gateway/bot in well under a second; a silent one is said in seconds.
_API_CHECK_S = 5.0


def _check_api(settings: Settings) -> None:
    """A FELAB_DISCORD_API_URL that is not Discord's API (a web page, a port that never
    answers) is said at once, in words, instead of a hang or discord.py's own traceback."""
    url = settings.discord_api_url
    if not url or settings.discord_token is None:
        return
    import httpx

    from felab_core.engine.request_errors import connect_failure
    from felab_core.redact import url_password_masked

    token = settings.discord_token.get_secret_value()
    where = f"FELAB_DISCORD_API_URL={url_password_masked(url)}"
    if not url.startswith(("http://", "https://")):
        err(f"{where} is not an http:// or https:// address: give the API's full URL, or unset it")
        raise typer.Exit(EXIT_USAGE)
    from felab_core.bounded_get import get_bounded

    try:
        with httpx.Client(
            timeout=_API_CHECK_S, headers={"Authorization": f"Bot {token}"}, trust_env=False
        ) as client:  # at most 8 MiB within the deadline: an endless body is no API
            answer = get_bounded(client, url.rstrip("/") + "/gateway/bot", deadline_s=_API_CHECK_S)
    except httpx.TimeoutException:
        err(
            f"{where} took no answer within {_API_CHECK_S:.0f} s: is it Discord's API? Unset it "
            "for Discord's own"
        )
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except httpx.ConnectError as exc:
        failure = connect_failure(exc, url)
        if failure.startswith("connection refused"):  # the advice there is for model servers
            failure = "connection refused: nothing listens there; start it, or unset it"
        err(f"{where}: {failure}")
        raise typer.Exit(EXIT_UNREACHABLE) from None
    except httpx.HTTPError as exc:  # the token is masked should an error quote the header
        err(f"{where}: {redact(connect_failure(exc, url))}")
        raise typer.Exit(EXIT_UNREACHABLE) from None
    if answer.status_code == 401:
        return  # the bot's own start says the token was refused
    if answer.status_code != 200:
        err(
            f"{where} answered HTTP {answer.status_code} to /gateway/bot: not Discord's API "
            "(or not at that path): check the address, or unset it for Discord's own"
        )
        raise typer.Exit(EXIT_UNREACHABLE)
    try:
        body = answer.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        err(
            f"{where} answered HTTP {answer.status_code} with something other than Discord's "
            "API (a web page?): check the address, or unset it for Discord's own"
        )
        raise typer.Exit(EXIT_UNREACHABLE)


def _dispatcher(settings: Settings) -> Publisher:
    """The broker client the bot sends jobs through: Celery is imported at the first /bench."""
    from felab_worker.dispatch import Dispatcher

    return Dispatcher(settings)


@bot_app.command("sync")
def sync_cmd(
    guild: int | None = typer.Option(
        None,
        "--guild",
        min=1,
        max=2**64 - 1,
        help="Register on this server (guild) id only: shows at once.",
    ),
) -> None:
    """Register the slash commands with Discord (global without --guild: up to an hour)."""
    from felab_bot.app import sync

    _check_api(get_settings())
    with _bot_errors():
        names = asyncio.run(sync(get_settings(), guild))
    where = f"guild {guild}" if guild is not None else "every guild (global)"
    typer.echo(f"synced {len(names)} command(s) to {where}: {', '.join(sorted(names))}")
