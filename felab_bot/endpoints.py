"""Where Discord is: its REST API base and, from the API's /gateway/bot, its gateway.

discord.py keeps both in class attributes (`discord.http.Route.BASE`, the gateway websocket's
`DEFAULT_GATEWAY`). The bot always asks /gateway/bot for the gateway, as Discord recommends, so
pointing `FELAB_DISCORD_API_URL` at a fake Discord moves the whole conversation there.
"""

from __future__ import annotations

import discord
import discord.gateway
import discord.http
import yarl

DISCORD_API = "https://discord.com/api/v10"


def use_api(url: str | None) -> str:
    """Send every REST call to `url` (None: Discord itself); returns the base in use."""
    base = (url or DISCORD_API).rstrip("/")
    discord.http.Route.BASE = base
    return base


async def use_gateway_of(client: discord.Client) -> str:
    """Connect the gateway where the API says it is (a logged-in client's /gateway/bot)."""
    _shards, url, _limits = await client.http.get_bot_gateway()
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
    return url
