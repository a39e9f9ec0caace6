"""`felab db restore` holds each row of an SQLite backup to what felab itself stores, checked
with the functions felab uses when it stores that row (twenty-first sweep): a fleet job's
preset and params (job_workload), a typed-in speed (parse_speed), a run's row
(check_result_row), a ranked figure judged again against the member's speed limit, and the
counts, days and sizes felab keeps in their domains. Each had been restored."""

from __future__ import annotations

from datetime import date, time
from pathlib import Path

import pytest

from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.numbers.importing import import_results
from felab_core.numbers.recording import record_entered
from felab_core.ops.backup import backup, check_sqlite_backup
from felab_core.people.members import add_member, create_cohort, set_hardware, set_server_model
from tests.db_support import NOW
from tests.numbers.test_numbers import _row
from tests.ops.test_restore_checks import _refused_once_changed, live  # noqa: F401 (a fixture)


@pytest.fixture
def full(tmp_path: Path) -> Path:
    """A backup of a database as felab fills it: a machine and a model size (a speed limit of
    about 56 tok/s), a typed-in speed, an imported run, a queued fleet job."""
    url = f"sqlite:///{tmp_path / 'full.db'}"
    engine = make_engine(url)
    upgrade(engine)
    with session_scope(session_factory(engine)) as s:
        c = create_cohort(s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9))
        ada = add_member(s, c, "1", display_name="Ada")
        set_hardware(s, ada, chip="M4 Pro")
        set_server_model(s, ada, "ollama", "llama3.1:8b", model_bytes="4.9GB")
        record_entered(s, ada, "ollama", "44.6")
        import_results(s, ada, [_row("ollama", "llama3.1:8b", tps="41.5")], now=NOW)
        code = issue_pair_code(s, ada, "mac", now=NOW)
        w = redeem_pair_code(s, code, Identity(0, "mac", new_private_key()).public_key, now=NOW)
        queue_bench_job(s, ada, w, "mlx", now=NOW, params={"requests": 5})
        assert s.query(m.Number).filter(m.Number.verdict == "ok").count() == 2
    engine.dispose()
    return backup(url, tmp_path / "full.bak")


def test_a_backup_as_felab_fills_it_restores(full: Path) -> None:
    assert check_sqlite_backup(full)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        # a fleet job felab never queues: the reconciler had then failed every 5 s
        ("UPDATE bench_jobs SET params = '[1, 2]' WHERE target IS NOT NULL", "params [1, 2]"),
        ("UPDATE bench_jobs SET preset = 'banana' WHERE target IS NOT NULL", "preset 'banana'"),
        (
            "UPDATE bench_jobs SET params = '{\"concurrency\": 0}' WHERE target IS NOT NULL",
            "this job asks too much: concurrency must be at least 1;",
        ),
        # figures `numbers enter` and `numbers import` refuse (an 'ok' figure is not judged
        # again against today's limit, as felab keeps it: tests/ops/test_restore_sweep22.py)
        ("UPDATE numbers SET value = 1e-300 WHERE source = 'entered'", "numbers row 1 (value"),
        (
            "UPDATE numbers SET value = 1e-300 WHERE source = 'measured'",
            "measured figure no run gave: numbers row 2 (1e-300",
        ),
        (
            "UPDATE numbers SET value = 1e-300 WHERE source = 'measured'; "
            "UPDATE bench_results SET writing_tps_p50 = 1e-300, "
            "row = json_set(row, '$.writing_tps_p50', '1e-300')",
            "bench_results row 1 (result column writing_tps_p50 holds '1e-300'",
        ),
        ("UPDATE numbers SET value = 50 WHERE source = 'entered'", "typed '44.6'"),
        # counts, days and sizes felab keeps in their domains
        ("UPDATE members SET streak_current = -3", "members row 1 (its review streaks"),
        ("UPDATE members SET streak_best = -1", "members row 1 (its review streaks"),
        ("UPDATE members SET recall_tries = -2", "members row 1 (its review counts"),
        ("UPDATE cohorts SET manual_day = -3", "cohorts row 1 (manual_day: the course starts"),
        ("UPDATE member_servers SET model_bytes = 0", "member_servers row 1 (model_bytes, a size"),
        ("UPDATE member_servers SET model_bytes = 1", "`felab numbers model SERVER --bytes`"),
        ("UPDATE member_servers SET model_bytes = -5", "member_servers row 1 (model_bytes"),
        (
            "UPDATE members SET chip = 'Banana 9'",
            "members row 1 ('Banana 9' is not in felab's bandwidth table",
        ),
    ],
)
def test_a_row_felab_would_not_store_is_refused(
    live: str,  # noqa: F811 (the fixture)
    full: Path,
    change: str,
    says: str,
) -> None:
    _refused_once_changed(live, full, change, says)
