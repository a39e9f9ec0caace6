"""The fleet's one pairing password (felab_core.jobs.pairing): two processes making it at once,
the ingest starting and `felab broker setup`, end up agreeing on the same one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select

from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.jobs.pairing import pairing_password, pairing_secret_hash, secret_hash
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
