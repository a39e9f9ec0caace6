"""The fleet's one pairing password (felab_core.jobs.pairing): two processes making it at once,
the ingest starting and `felab broker setup`, end up agreeing on the same one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.errors import Invalid
from felab_core.jobs.keys import new_private_key, public_key_text
from felab_core.jobs.pairing import (
    check_credentials,
    issue_pair_code,
    machine_credentials,
    new_broker_secret,
    pairing_password,
    pairing_secret_hash,
    redeem_pair_code,
    secret_hash,
)
from tests.db_support import BACKENDS, empty_database_url


@pytest.mark.parametrize("backend", BACKENDS)
def test_racing_first_uses_agree_on_one_password(backend: str, tmp_path: Path) -> None:
    url, drop = empty_database_url(backend, tmp_path)
    engine = make_engine(url)
    try:
        upgrade(engine)
        sessions = session_factory(engine)
        start = threading.Barrier(4)
        seen: list[str] = []
        errors: list[BaseException] = []

        def first_use() -> None:
            try:
                start.wait()
                with session_scope(sessions) as s:
                    seen.append(pairing_password(s))
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=first_use) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert len(seen) == 4 and len(set(seen)) == 1, seen
        with session_scope(sessions) as s:
            rows = s.scalar(
                select(func.count()).select_from(m.BrokerUser).where(m.BrokerUser.role == "pairing")
            )
            assert rows == 1
            assert pairing_secret_hash(s) == secret_hash(seen[0])
            rotated = pairing_password(s, rotate=True)
            assert rotated != seen[0] and pairing_secret_hash(s) == secret_hash(rotated)
    finally:
        engine.dispose()
        drop()


def _key() -> str:
    return public_key_text(new_private_key())


def test_a_broker_password_hash_redis_would_refuse_is_named(db: Session, student: m.Member) -> None:
    """Twentieth sweep (b) B12: a restored database with a machine's secret_hash 'zz' had failed
    `felab broker setup` as "not Redis's answer: is FELAB_BROKER_URL's port Redis's?", and
    every beat of the ingest's user sync; the pairing row's is made again from its password."""
    good = redeem_pair_code(db, issue_pair_code(db, student, "good-mac"), _key())
    bad = redeem_pair_code(db, issue_pair_code(db, student, "bad-mac"), _key())
    new_broker_secret(db, good)
    new_broker_secret(db, bad)
    pairing_password(db)
    for row in db.scalars(select(m.BrokerUser)):
        if row.worker_id == bad.id or row.role == "pairing":
            row.secret_hash = "zz"
    db.flush()
    assert [c.worker_id for c in machine_credentials(db)] == [good.id]
    with pytest.raises(Invalid, match=r"machine bad-mac \(worker \d+\)'s stored broker password"):
        check_credentials(db)
    assert pairing_secret_hash(db) == secret_hash(pairing_password(db))
