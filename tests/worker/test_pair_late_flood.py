"""The ingest's side of a late pairing request (felab_worker.ingest.Ingest.pair): dropped with
no answer written and the code left unspent, said in one line however many come (a flood of
them is counted, felab_core.ops.repeats)."""

from __future__ import annotations

import logging
import time
from datetime import date
from datetime import time as dtime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.jobs.handshake import make_request
from felab_core.jobs.keys import new_private_key
from felab_core.jobs.pairing import issue_pair_code
from felab_core.ops.repeats import Repeated
from felab_core.people.members import add_member, create_cohort
from felab_core.settings import Settings
from felab_worker import ingest as ingest_module
from felab_worker.ingest import Ingest
from felab_worker.names import Names
from tests.db_support import empty_database_url


class _Store:
    def __init__(self, now: float) -> None:
        self.now, self.written = now, 0

    def clock(self) -> float:
        return self.now

    def set(self, key: str, value: str, ttl_s: int) -> None:
        self.written += 1


def test_a_flood_of_late_requests_is_one_line_and_spends_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, drop = empty_database_url("sqlite", tmp_path)
    engine = make_engine(url)
    try:
        upgrade(engine)
        sessions = session_factory(engine)
        with session_scope(sessions) as s:
            c = create_cohort(
                s, "P", timezone="UTC", start_date=date(2026, 3, 2), post_time=dtime(9, 0),
                guild_id="g", channel_id="c",
            )  # fmt: skip
            code = issue_pair_code(s, add_member(s, c, "1", display_name="Ada"), "mac")
        store = _Store(time.time())
        dispatcher: Any = SimpleNamespace(store=store, names=Names("felab:"), redis=True)
        state = Ingest(Settings(), dispatcher, outage=None)  # type: ignore[arg-type]
        state.__dict__["sessions"] = sessions
        monkeypatch.setattr(ingest_module, "_SAID", Repeated(logging.getLogger("felab.ingest")))
        with caplog.at_level(logging.INFO, "felab.ingest"):
            for _ in range(200):
                state.pair(make_request(code, new_private_key(), None, until=store.now - 90))
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1, said
        assert "came 90 s after its sender stopped waiting" in said[0]
        assert "its code was not used" in said[0]
        assert store.written == 0  # nobody waits for an answer
        with session_scope(sessions) as s:
            assert s.query(m.PairCode).one().used_at is None
            assert s.query(m.Worker).count() == 0
    finally:
        engine.dispose()
        drop()
