"""Pairing: a one-time code from the bot turns a machine into one of its owner's workers.

The database keeps only a hash of each code; a code works once, before it expires.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import Forbidden, Invalid
from felab_core.jobs.fleet import NAME, clean_targets
from felab_core.jobs.keys import load_public_key
from felab_core.settings import Settings, get_settings


def hash_code(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


def issue_pair_code(
    session: Session,
    member: m.Member,
    worker_name: str,
    *,
    allow_instructors: bool = False,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> str:
    """A one-time code that pairs one machine as `worker_name` for `member` (`/worker pair`)."""
    if not NAME.match(worker_name):
        raise Invalid(
            f"{worker_name!r} cannot name a worker: use letters, digits, '-', '_' or '.', "
            "such as studio-mbp"
        )
    now = now or utcnow()
    s = settings or get_settings()
    code = "-".join(secrets.token_hex(3).upper() for _ in range(3))
    session.add(
        m.PairCode(
            code_hash=hash_code(code),
            member_id=member.id,
            worker_name=worker_name,
            allow_instructors=allow_instructors,
            created_at=now,
            expires_at=now + timedelta(seconds=s.pair_code_ttl_s),
        )
    )
    session.flush()
    return code


def redeem_pair_code(
    session: Session,
    code: str,
    public_key: str,
    *,
    targets: Any = None,
    now: datetime | None = None,
) -> m.Worker:
    """Turn a code into a worker that holds `public_key`; a code works once, before it expires.

    Pairing a name again (a reinstalled Mac) replaces that worker's key: the old one stops being
    accepted at once. `targets` is what the machine reported of its targets file (name -> kind).
    """
    now = now or utcnow()
    public_key = load_public_key(public_key)
    row = session.scalar(
        select(m.PairCode).where(m.PairCode.code_hash == hash_code(code)).with_for_update()
    )
    if row is None or row.used_at is not None:
        raise Forbidden("that pairing code is unknown or already used: ask the bot for a new one")
    if row.expires_at <= now:
        raise Forbidden("that pairing code has expired: ask the bot (/worker pair) for a new one")
    row.used_at = now
    worker = session.scalar(
        select(m.Worker).where(
            m.Worker.member_id == row.member_id, m.Worker.name == row.worker_name
        )
    )
    if worker is None:
        worker = m.Worker(member_id=row.member_id, name=row.worker_name, created_at=now)
        session.add(worker)
    worker.public_key = public_key
    worker.status = "paired"
    worker.allow_instructors = row.allow_instructors
    reported = clean_targets(targets)
    if reported is not None:
        worker.targets = reported
    session.flush()
    return worker
