"""What an extension may use of the bot: its settings, its database, the job publisher.

The extensions (felab_bot/cogs/*) import this and never the process that loads them
(felab_bot/app.py), so there is no import circle: app.py builds a `Host` and loads the
extensions by name; each extension's `setup(bot)` adds its cog and its persistent buttons.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

from discord.ext import commands
from sqlalchemy.orm import Session, sessionmaker

from felab_core.db.session import session_scope
from felab_core.jobs.lifecycle import Publisher
from felab_core.jobs.messages import JobMessage
from felab_core.settings import Settings

log = logging.getLogger("felab.bot")
P = ParamSpec("P")
T = TypeVar("T")

#: Threads for the bot's database work. Every SQLite unit of work takes the one write lock up
#: front (BEGIN IMMEDIATE), so a second thread only waits in SQLite's busy handler, which sleeps
#: in steps of up to 100 ms: six threads on a burst of 1,000 presses spent most of their time
#: there. PostgreSQL runs units side by side.
SQLITE_DB_THREADS = 1
SERVER_DB_THREADS = 4


class Host(commands.Bot):
    """The bot as its extensions see it (app.FelabBot adds intents, events and start-up)."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session] | None,
        *,
        run_loops: bool = True,
        publisher: Callable[[], Publisher] | None = None,
        **bot_options: object,
    ) -> None:
        super().__init__(**bot_options)  # type: ignore[arg-type]
        self.settings = settings
        self.sessions = sessions
        self.run_loops = run_loops
        self._make_publisher = publisher
        self._publisher: Publisher | None = None  # made on first use: the broker client is heavy
        self._db_threads: ThreadPoolExecutor | None = None

    def _dispatch(self) -> Publisher:
        if self._publisher is None:
            if self._make_publisher is None:
                raise RuntimeError("this bot was started without a broker to send jobs through")
            self._publisher = self._make_publisher()
        return self._publisher

    def job_sender(self) -> Callable[[JobMessage], None]:
        """What publishes a queued job to its worker, once the job's row is committed."""

        def send(msg: JobMessage) -> None:
            try:
                self._dispatch().send(msg)
            except Exception:  # the broker down: the ingest's reconciler sends it again
                log.exception("could not publish job %s; the reconciler resends it", msg.job_id)

        return send

    def cancel_job(self, job_id: int, worker_id: int | None) -> None:
        """Drop a cancelled job's message and stop its run on the machine (best effort: the
        ingest drops a cancelled job's events anyway)."""
        try:
            self._dispatch().cancel(job_id, worker_id)
        except Exception:
            log.exception("could not send the cancel of job %s to its machine", job_id)

    async def db(
        self, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run `fn(session, ...)` in one unit of work, off the event loop."""
        sessions = self.sessions
        if sessions is None:
            raise RuntimeError("this bot was started without a database")

        def work() -> T:
            with session_scope(sessions) as session:
                return fn(session, *args, **kwargs)

        if self._db_threads is None:
            bind = sessions.kw.get("bind")
            sqlite = getattr(getattr(bind, "dialect", None), "name", "") == "sqlite"
            self._db_threads = ThreadPoolExecutor(
                SQLITE_DB_THREADS if sqlite else SERVER_DB_THREADS, thread_name_prefix="felab-db"
            )
        in_context = functools.partial(contextvars.copy_context().run, work)
        return await asyncio.get_running_loop().run_in_executor(self._db_threads, in_context)

    async def close(self) -> None:
        await super().close()
        threads, self._db_threads = self._db_threads, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)


def host_of(bot: commands.Bot) -> Host:
    """The bot an extension is loaded into, as a Host (felab loads its extensions into no other)."""
    if not isinstance(bot, Host):
        raise TypeError(f"felab's extensions load into felab's bot, not {type(bot).__name__}")
    return bot
