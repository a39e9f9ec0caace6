"""The bot's messages about a member, remembered so that deleting the member deletes them.

A post that shows a member's answer, result or numbers to the channel is recorded here when the
bot sends it (`remember_post`). Deleting the member (felab_core.people.privacy) keeps only
where each such message is, marked for removal and no longer tied to anyone; the bot removes
the messages (at once after `/me delete`, at its next look after a terminal deletion) and then
forgets them (`forget_post`). An export lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow


@dataclass(frozen=True)
class PostToDelete:
    """A message the bot is to remove: the row's id and where the message is."""

    post_id: int
    channel_id: int
    message_id: int


def remember_post(
    session: Session,
    member_id: int,
    channel_id: int | str,
    message_id: int | str,
    about: str,
    *,
    now: datetime | None = None,
) -> m.ChatPost | None:
    """Record a message the bot posted about the member (`about` names what it shows, such as
    "spoken answer"); the same message twice is recorded once (None the second time)."""
    post = m.ChatPost(
        member_id=member_id,
        channel_id=str(channel_id),
        message_id=str(message_id),
        about=about[:32],
        created_at=now or utcnow(),
    )
    try:
        with session.begin_nested():
            session.add(post)
    except IntegrityError:
        return None
    return post


def post_ids_of(session: Session, member_id: int) -> list[int]:
    """The posts about a member (their ids), oldest first."""
    return list(
        session.scalars(
            select(m.ChatPost.id).where(m.ChatPost.member_id == member_id).order_by(m.ChatPost.id)
        )
    )


def mark_for_deletion(session: Session, member_id: int, now: datetime | None = None) -> list[int]:
    """On the member's deletion: every post about them loses its tie to them and waits for the
    bot to remove it. Returns the posts' ids (the bot removes these at once)."""
    ids = post_ids_of(session, member_id)
    if ids:
        session.execute(
            update(m.ChatPost)
            .where(m.ChatPost.id.in_(ids))
            .values(member_id=None, delete_requested_at=now or utcnow()),
            execution_options={"synchronize_session": False},
        )
    return ids


def posts_to_delete(
    session: Session, post_ids: list[int] | None = None, limit: int = 50
) -> list[PostToDelete]:
    """Messages waiting to be removed: these ids only, or the oldest `limit` of them."""
    q = select(m.ChatPost).where(m.ChatPost.delete_requested_at.is_not(None))
    if post_ids is not None:
        q = q.where(m.ChatPost.id.in_(post_ids))
    rows = session.scalars(q.order_by(m.ChatPost.id).limit(limit)).all()
    return [
        PostToDelete(r.id, int(r.channel_id), int(r.message_id))
        for r in rows
        if r.channel_id.isdigit() and r.message_id.isdigit()
    ]


def forget_post(session: Session, post_id: int) -> None:
    """The message is gone from Discord (removed, or already not there): forget where it was."""
    row = session.get(m.ChatPost, post_id)
    if row is not None:
        session.delete(row)
        session.flush()
