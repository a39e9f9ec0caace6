"""rate_card_once: two presses of the same button racing in two transactions record one review
(PostgreSQL: the member row lock; SQLite: one writer at a time)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from felab_core.content.store import load_folder
from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.drills.review import OnceOutcome, card_by_key, make_scheduler, rate_card_once
from felab_core.people.members import add_member, create_cohort
from tests.db_support import BACKENDS, CONTENT, NOW, empty_database_url


@pytest.fixture(params=BACKENDS)
def committed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """A database of its own whose rows are committed (two transactions must see them)."""
    url, drop = empty_database_url(request.param, tmp_path)
    engine = make_engine(url)
    upgrade(engine)
    sessions = session_factory(engine)
    with session_scope(sessions) as s:
        load_folder(s, CONTENT)
        cohort = create_cohort(
            s, "Spring", timezone="UTC", start_date=date(2026, 3, 2), guild_id="1", channel_id="2"
        )
        add_member(s, cohort, "1001", display_name="Ada")
    try:
        yield sessions
    finally:
        engine.dispose()
        drop()


def test_racing_presses_record_one_review(committed: sessionmaker[Session]) -> None:
    barrier = threading.Barrier(2)
    results: list[OnceOutcome] = []
    errors: list[BaseException] = []
    scheduler = make_scheduler(fuzz=False)

    def press() -> None:
        try:
            barrier.wait(5)
            with session_scope(committed) as s:
                member = s.scalars(select(m.Member).where(m.Member.discord_id == "1001")).one()
                card = card_by_key(s, "d02.card.slot-trap")
                results.append(rate_card_once(s, member, card, "good", NOW, scheduler=scheduler))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=press) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert sorted(r.outcome is None for r in results) == [False, True]
    assert results[0].due == results[1].due
    with session_scope(committed) as s:
        assert s.scalar(select(func.count(m.Review.id))) == 1
        member = s.scalars(select(m.Member)).one()
        assert member.reviews_total == 1
