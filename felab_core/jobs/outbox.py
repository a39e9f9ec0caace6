"""Finished jobs handed to the bot to post, each once, even with two bots running."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import NotFound


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
