"""The bot's features are extensions loaded by name, each with its own setup(bot)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
import time
from pathlib import Path

import discord
import pytest
from discord.ext import commands
from sqlalchemy import text
from sqlalchemy.orm import Session

from felab_bot.app import EXTENSIONS, FelabBot
from felab_bot.host import SERVER_DB_THREADS, SQLITE_DB_THREADS
from felab_core.db.session import make_engine, session_factory
from felab_core.settings import Settings
from tests.db_support import empty_database_url


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


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_database_work_runs_on_one_thread_for_sqlite_and_several_for_postgresql(
    backend: str, tmp_path: Path
) -> None:
    """SQLite takes one writer at a time: a second thread would only sleep in its busy
    handler, so the bot's SQLite work runs on one thread; PostgreSQL's side by side."""
    url, drop = empty_database_url(backend, tmp_path)
    engine = make_engine(url)

    def slow_name(session: Session) -> str:
        session.execute(text("SELECT 1"))
        time.sleep(0.05)
        return threading.current_thread().name

    async def names() -> set[str]:
        bot = FelabBot(Settings(), session_factory(engine), run_loops=False)
        try:
            return set(await asyncio.gather(*(bot.db(slow_name) for _ in range(8))))
        finally:
            await bot.close()

    try:
        threads = asyncio.run(names())
    finally:
        engine.dispose()
        drop()
    want = SQLITE_DB_THREADS if backend == "sqlite" else SERVER_DB_THREADS
    assert len(threads) == want and all(n.startswith("felab-db") for n in threads)
