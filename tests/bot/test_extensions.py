"""The bot's features are extensions loaded by name, each with its own setup(bot)."""

from __future__ import annotations

import asyncio
import importlib
import inspect

import discord
import pytest
from discord.ext import commands

from felab_bot.app import EXTENSIONS, FelabBot
from felab_core.settings import Settings


def test_every_extension_has_its_setup() -> None:
    for name in EXTENSIONS:
        module = importlib.import_module(name)
        assert inspect.iscoroutinefunction(module.setup), name


def test_the_bot_loads_them_all_and_they_refuse_another_bot() -> None:
    async def load() -> tuple[set[str], int]:
        bot = FelabBot(Settings(), None, run_loops=False)
        for name in EXTENSIONS:
            await bot.load_extension(name)
        cogs = set(bot.cogs)
        items = len(bot._connection._view_store._dynamic_items)  # the persistent buttons
        other = commands.Bot(command_prefix="!", intents=discord.Intents.none())
        with pytest.raises(commands.ExtensionFailed, match="felab's bot"):
            await other.load_extension(EXTENSIONS[0])
        await bot.close()
        await other.close()
        return cogs, items

    cogs, items = asyncio.run(load())
    assert len(cogs) == len(EXTENSIONS)
    assert items == 4  # card, prompt, whiteboard and spoken-answer rating buttons
