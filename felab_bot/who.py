"""Who pressed or typed, where: and the member that is, found once for every feature."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.people.members import cohort_for_channel, join_cohort


@dataclass(frozen=True)
class Who:
    """Whoever ran the command, where."""

    guild_id: int | None
    channel_id: int | None
    user_id: int
    display_name: str


def member_for(
    session: Session,
    guild_id: int | None,
    channel_id: int | None,
    user_id: int,
    display_name: str,
    now: datetime,
) -> m.Member:
    """The member behind a press in a cohort's channel (joining an open cohort on first use)."""
    cohort = cohort_for_channel(session, str(guild_id or ""), str(channel_id or ""))
    return join_cohort(session, cohort, str(user_id), display_name=display_name, now=now)


def member_of(session: Session, who: Who, now: datetime) -> m.Member:
    """The member who ran a command (see member_for)."""
    return member_for(session, who.guild_id, who.channel_id, who.user_id, who.display_name, now)
