"""What the cog tests share: a Discord cohort on Day 2, who ran a command, a fake bot."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import date, time
from typing import Any

from sqlalchemy.orm import Session

from felab_bot.who import Who
from felab_core.db import models as m
from felab_core.people.members import create_cohort

CHANNEL = 700000000000000010
USER = 100000000000001001


def chat_cohort(db: Session) -> m.Cohort:
    """A Discord cohort on day 2 at tests.db_support.NOW."""
    return create_cohort(
        db,
        "Spring",
        timezone="Europe/London",
        start_date=date(2026, 3, 2),
        post_time=time(9, 0),
        guild_id=str(uuid.uuid4().int % 10**18),
        channel_id=str(CHANNEL),
    )


def who_in(cohort: m.Cohort, user: int = USER, name: str = "Ada") -> Who:
    return Who(int(cohort.guild_id or 0), int(cohort.channel_id or 0), user, name)


class FakeBot:
    """What the cogs use of the Host (felab_bot/host.py): db() on the test's own session,
    channels and users."""

    run_loops = False

    def __init__(self, session: Session) -> None:
        self.session = session
        self.sent: list[Any] = []  # job messages published
        self.cancelled: list[tuple[int, int | None]] = []
        self.places: dict[int, Any] = {}

    async def db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(self.session, *args, **kwargs)

    def job_sender(self) -> Callable[[Any], None]:
        return self.sent.append

    def cancel_job(self, job_id: int, worker_id: int | None) -> None:
        self.cancelled.append((job_id, worker_id))

    def get_channel(self, channel_id: int) -> Any:
        return self.places.get(channel_id)

    def get_user(self, user_id: int) -> Any:
        return self.places.get(user_id)


class Place:
    """A channel or a user: records what was sent there."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any]]] = []
        self.mentions: list[Any] = []  # each send's allowed_mentions

    async def send(self, text: str, files: Any = None, **kw: Any) -> Any:
        self.sent.append((text, list(files or [])))
        self.mentions.append(kw.get("allowed_mentions"))
        channel = type("Channel", (), {"id": 7000})()
        return type("Msg", (), {"id": 9000 + len(self.sent), "channel": channel})()
