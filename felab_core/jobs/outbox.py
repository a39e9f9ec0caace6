"""Finished jobs handed to the bot to post, each once, even with two bots running.

A post Discord refuses is tried again with growing waits (30 s, 1 min, 2 min...), then set
aside as a dead letter after FELAB_OUTBOX_MAX_ATTEMPTS tries: `felab worker outbox` lists those
with the last error, and `--retry` hands one back.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import NotFound
from felab_core.settings import Settings, get_settings


def claim_outbox(
    session: Session, *, now: datetime | None = None, lease_s: float = 60.0, limit: int = 20
) -> list[m.JobOutbox]:
    """Finished jobs for the bot to post, claimed so a second bot skips them.

    A claim not marked posted within `lease_s` (the bot died mid-post) is handed out again.
    """
    now = now or utcnow()
    q = (
        select(m.JobOutbox)
        .where(
            m.JobOutbox.posted_at.is_(None),
            m.JobOutbox.dead_at.is_(None),
            (m.JobOutbox.next_try_at.is_(None)) | (m.JobOutbox.next_try_at <= now),
            (m.JobOutbox.claimed_at.is_(None))
            | (m.JobOutbox.claimed_at < now - timedelta(seconds=lease_s)),
        )
        .order_by(m.JobOutbox.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = list(session.scalars(q).all())
    for row in rows:
        row.claimed_at = now
    session.flush()
    return rows


def mark_posted(
    session: Session, outbox_id: int, *, message_ref: str | None = None, now: datetime | None = None
) -> None:
    """Record that the result was posted; it is never handed out again."""
    row = session.get(m.JobOutbox, outbox_id)
    if row is None:
        raise NotFound(f"no outbox entry {outbox_id}")
    row.posted_at = now or utcnow()
    row.message_ref = message_ref
    session.flush()


#: The first wait after a refused post; each later one doubles, up to an hour.
FIRST_RETRY_S = 30.0


def post_failed(
    session: Session,
    outbox_id: int,
    error: str,
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> bool:
    """Record a refused post: tried again later, or set aside (returns True) once it has been
    tried FELAB_OUTBOX_MAX_ATTEMPTS times."""
    s = settings or get_settings()
    now = now or utcnow()
    row = session.get(m.JobOutbox, outbox_id)
    if row is None:
        raise NotFound(f"no outbox entry {outbox_id}")
    row.attempts += 1
    row.last_error = error[:1000]
    row.claimed_at = None
    if row.attempts >= s.outbox_max_attempts:
        row.dead_at = now
    else:
        wait = min(FIRST_RETRY_S * 2 ** (row.attempts - 1), 3600.0)
        row.next_try_at = now + timedelta(seconds=wait)
    session.flush()
    return row.dead_at is not None


def dead_letters(session: Session) -> list[m.JobOutbox]:
    """Posts set aside after every try failed, oldest first."""
    return list(
        session.scalars(
            select(m.JobOutbox).where(m.JobOutbox.dead_at.is_not(None)).order_by(m.JobOutbox.id)
        )
    )


def retry_dead(session: Session, outbox_id: int) -> None:
    """Hand a dead letter back to the bot, with a fresh count of tries."""
    row = session.get(m.JobOutbox, outbox_id)
    if row is None or row.dead_at is None:
        raise NotFound(f"no dead letter {outbox_id}: `felab worker outbox` lists them")
    row.dead_at = None
    row.attempts = 0
    row.next_try_at = None
    row.claimed_at = None
    session.flush()
