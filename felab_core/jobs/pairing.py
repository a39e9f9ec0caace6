"""Pairing: a one-time code from the bot turns a machine into one of its owner's workers, with
broker credentials of its own; removing a worker revokes them.

The database keeps only a hash of each code and of each machine's broker password. A code works
once, before it expires; the request that redeems it must prove it came from the code's holder
(felab_core.jobs.handshake), so a copied request pairs nothing.
"""

from __future__ import annotations

import hashlib
import math
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import Forbidden, Invalid
from felab_core.jobs.fleet import clean_targets
from felab_core.jobs.handshake import check_request, code_secret, lookup_of
from felab_core.jobs.keys import check_worker_name, load_public_key
from felab_core.jobs.lifecycle import TERMINAL, finish
from felab_core.settings import Settings, get_settings
from felab_core.text import with_hidden_shown

hash_code = code_secret  # what the pair_codes table keeps of a code


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
    check_worker_name(worker_name)
    now = now or utcnow()
    s = settings or get_settings()
    code = "-".join(secrets.token_hex(3).upper() for _ in range(3))
    secret = code_secret(code)
    session.add(
        m.PairCode(
            code_hash=secret,
            lookup=lookup_of(secret),
            member_id=member.id,
            worker_name=worker_name,
            allow_instructors=allow_instructors,
            created_at=now,
            expires_at=now + timedelta(seconds=s.pair_code_ttl_s),
        )
    )
    session.flush()
    return code


def _usable(row: m.PairCode | None, now: datetime) -> m.PairCode:
    if row is None or row.used_at is not None:
        raise Forbidden("that pairing code is unknown or already used: ask the bot for a new one")
    if row.expires_at <= now:
        raise Forbidden("that pairing code has expired: ask the bot (/worker pair) for a new one")
    return row


def _redeem(
    session: Session, row: m.PairCode, public_key: str, targets: Any, now: datetime
) -> m.Worker:
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
    worker.heartbeat_seq = 0
    worker.allow_instructors = row.allow_instructors
    reported = clean_targets(targets)
    if reported is not None:
        worker.targets = reported
    session.flush()
    return worker


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
        select(m.PairCode).where(m.PairCode.code_hash == code_secret(code)).with_for_update()
    )
    return _redeem(session, _usable(row, now), public_key, targets, now)


@dataclass(frozen=True)
class Paired:
    """A redeemed request: the worker, its broker password (said once, in the sealed answer;
    only its hash is kept) and the code's secret the answer is sealed with."""

    worker: m.Worker
    broker_password: str
    secret: str


def lookup_pair_code(session: Session, lookup: str) -> m.PairCode | None:
    """The code a pairing request names, locked for the redeem."""
    return session.scalar(select(m.PairCode).where(m.PairCode.lookup == lookup).with_for_update())


class PairRequestLate(Forbidden):
    """The request reached the ingest after its sender had stopped waiting for the answer (the
    ingest was stopped meanwhile): redeeming it would spend the code on a key nobody holds, and
    the student's next try with the same code would be told it is used."""

    def __init__(self, late_s: float) -> None:
        super().__init__(
            f"the pairing request came {late_s:.0f} s after its sender stopped waiting: the "
            "code was not used, and pairs the machine when it tries again",
            reason="late",
        )
        self.late_s = late_s


def check_still_awaited(payload: dict[str, Any], now_s: float) -> None:
    """Refuse a request whose sender has given up (`until`, seconds on the broker's clock, which
    `now_s` reads too). A request without `until` is an older felab's: it names no deadline."""
    until = payload.get("until")
    if until is None:
        return
    if isinstance(until, bool) or not isinstance(until, int | float) or not math.isfinite(until):
        raise Invalid("the pairing request's deadline is not a time: it was refused")
    if now_s > until:
        raise PairRequestLate(now_s - until)


def redeem_pair_request(
    session: Session,
    payload: dict[str, Any],
    *,
    now: datetime | None = None,
    now_s: float | None = None,
) -> Paired:
    """Redeem a machine's pairing request (felab_core.jobs.handshake.make_request).

    Only the trusted ingest calls this. The request must prove it was made with the code and be
    signed by the key it carries, and its sender must still be waiting (`now_s`: the broker's
    clock; PairRequestLate leaves the code unspent). The machine gets a new broker password (the
    old one, if the name was paired before, stops working once the broker's users are brought
    up to date).
    """
    now = now or utcnow()
    lookup = payload.get("lookup")
    if not isinstance(lookup, str):
        raise Invalid("not a felab pairing request")
    row = _usable(lookup_pair_code(session, lookup), now)
    check_request(payload, row.code_hash)
    check_still_awaited(payload, now.timestamp() if now_s is None else now_s)
    public_key = load_public_key(str(payload.get("public_key")))
    worker = _redeem(session, row, public_key, payload.get("targets"), now)
    return Paired(worker, new_broker_secret(session, worker, now=now), row.code_hash)


#: A broker password's hash as Redis's ACL takes it (`#<hash>`): SHA-256, 64 lower-case hex.
SECRET_HASH = re.compile(r"[0-9a-f]{64}")


def secret_hash(password: str) -> str:
    """What is kept of a broker password: SHA-256, the form Redis's ACL accepts as `#<hash>`."""
    return hashlib.sha256(password.encode()).hexdigest()


def new_broker_secret(session: Session, worker: m.Worker, *, now: datetime | None = None) -> str:
    """A new broker password for `worker`; only its hash is kept."""
    password = secrets.token_urlsafe(32)
    row = session.scalar(select(m.BrokerUser).where(m.BrokerUser.worker_id == worker.id))
    if row is None:
        row = m.BrokerUser(role="machine", worker_id=worker.id, created_at=now or utcnow())
        session.add(row)
    row.secret_hash = secret_hash(password)
    session.flush()
    return password


def pairing_password(session: Session, *, rotate: bool = False) -> str:
    """The fleet's pairing password (every unpaired machine is given it), made on first use.

    It is kept as it is, unlike a machine's: it is the cohort's shared entry ticket, and lets its
    holder push a pairing request and read an answer only its code can open.
    """
    row = session.scalar(select(m.BrokerUser).where(m.BrokerUser.role == "pairing"))
    if row is None:
        row = _first_pairing_row(session)
        rotate = not row.shared_secret
    if rotate or not row.shared_secret:
        row.shared_secret = secrets.token_urlsafe(24)
        row.secret_hash = secret_hash(row.shared_secret)
    session.flush()
    return row.shared_secret


def _first_pairing_row(session: Session) -> m.BrokerUser:
    """Make the pairing row, or take the one another process made a moment ago (the ingest and
    `felab broker setup` can start together; a unique index lets only one row in)."""
    secret = secrets.token_urlsafe(24)
    try:
        with session.begin_nested():
            row = m.BrokerUser(
                role="pairing",
                worker_id=None,
                secret_hash=secret_hash(secret),
                shared_secret=secret,
                created_at=utcnow(),
            )
            session.add(row)
        return row
    except IntegrityError:
        theirs = session.scalar(select(m.BrokerUser).where(m.BrokerUser.role == "pairing"))
        assert theirs is not None
        return theirs


def pairing_secret_hash(session: Session) -> str:
    """The hash of the fleet's pairing password (made on first use), for the broker's user."""
    pairing_password(session)
    row = session.scalar(select(m.BrokerUser).where(m.BrokerUser.role == "pairing"))
    assert row is not None
    if not SECRET_HASH.fullmatch(row.secret_hash or ""):  # changed by hand: made again from
        row.secret_hash = secret_hash(row.shared_secret or "")  # the password it hashes
        session.flush()
    return row.secret_hash


@dataclass(frozen=True)
class MachineCredential:
    worker_id: int
    secret_hash: str


def machine_credentials(session: Session) -> list[MachineCredential]:
    """Every paired machine's broker credential (hashes only), to recreate the broker's users."""
    rows = session.execute(
        select(m.BrokerUser.worker_id, m.BrokerUser.secret_hash)
        .join(m.Worker, m.Worker.id == m.BrokerUser.worker_id)
        .where(m.BrokerUser.role == "machine", m.Worker.status == "paired")
        .order_by(m.BrokerUser.worker_id)
    ).all()
    # a hash Redis would refuse (a database changed by hand) had failed every machine's user
    # with it, blamed on the broker's port: that machine alone is left out (it cannot log in;
    # `felab broker setup` names it, check_credentials)
    return [
        MachineCredential(int(wid), h)
        for wid, h in rows
        if wid is not None and SECRET_HASH.fullmatch(str(h))
    ]


def check_credentials(session: Session) -> None:
    """Refuse a paired machine whose stored broker password hash Redis could not take (not
    SHA-256 hex: a database changed by hand, twentieth sweep b B12), naming the machine."""
    rows = session.execute(
        select(m.Worker.id, m.Worker.name, m.BrokerUser.id, m.BrokerUser.secret_hash)
        .join(m.Worker, m.Worker.id == m.BrokerUser.worker_id)
        .where(m.BrokerUser.role == "machine", m.Worker.status == "paired")
        .order_by(m.BrokerUser.worker_id)
    ).all()
    for worker_id, name, row_id, stored in rows:
        if not SECRET_HASH.fullmatch(str(stored)):
            raise Invalid(
                f"machine {with_hidden_shown(str(name))[:40]} (worker {worker_id})'s stored "
                f"broker password hash (broker_users row {row_id}) is not SHA-256 hex: the "
                "database was changed by hand; remove the machine (`felab worker remove`) and "
                "pair it again, or restore another backup"
            )


def remove_worker(session: Session, member: m.Member, worker: m.Worker) -> None:
    """Revoke a machine: its key and broker credential are dropped, its queued jobs cancelled.

    The owner or an instructor of the owner's cohort may do it (a lost laptop, a student who
    left). The broker user itself is deleted by the caller's transport right after the commit.
    """
    owner = session.get(m.Member, worker.member_id)
    allowed = worker.member_id == member.id or (
        member.role == "instructor" and owner is not None and owner.cohort_id == member.cohort_id
    )
    if not allowed:
        raise Forbidden("only the machine's owner or an instructor of their cohort can remove it")
    now = utcnow()
    jobs = session.scalars(
        select(m.BenchJob).where(
            m.BenchJob.worker_id == worker.id, m.BenchJob.status.not_in(TERMINAL)
        )
    ).all()
    for job in jobs:
        finish(session, job, "cancelled", now, error=f"the machine {worker.name} was removed")
    cred = session.scalar(select(m.BrokerUser).where(m.BrokerUser.worker_id == worker.id))
    if cred is not None:
        session.delete(cred)
    worker.public_key = None
    worker.status = "removed"
    worker.running_job_id = None
    session.flush()
