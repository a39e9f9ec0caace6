"""`felab db restore` after the twenty-second sweep (b B2-B5, B11): an untouched backup restores
after a member re-sizes a model (felab keeps an 'ok' figure's verdict then); an 'ok' figure needs
a speed limit behind it, a measured figure its job, no time is after the restore, and fleet and
model rows are held to what felab's own writers store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from felab_core.db.session import make_engine, session_factory, session_scope
from felab_core.ops.backup import backup, check_sqlite_backup
from felab_core.people.members import set_server_model
from tests.ops.test_restore_checks import _copy, _refused_once_changed, live  # noqa: F401 (a fixture)
from tests.ops.test_restore_rows import full  # noqa: F401 (a fixture)


def test_a_backup_made_after_a_model_is_resized_restores(full: Path, tmp_path: Path) -> None:  # noqa: F811
    url = f"sqlite:///{tmp_path / 'full.db'}"
    engine = make_engine(url)
    with session_scope(session_factory(engine)) as s:
        from felab_core.db import models as m

        ada = s.query(m.Member).one()
        # a bigger model on the same server: the 'ok' 44.6 tok/s typed in now exceeds its limit
        set_server_model(s, ada, "ollama", "llama3.1:70b", model_bytes="40GB")
    engine.dispose()
    again = backup(url, tmp_path / "again.bak")
    assert check_sqlite_backup(again)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        # B2/B3: a measured figure with no run behind it, a time after the restore
        (
            "INSERT INTO numbers (member_id, server, metric, value, unit, source, model, "
            "preset, job_id, recorded_at, verdict) VALUES (1, 'vllm', 'writing_tps', 9999.0, "
            "'tokens/s', 'measured', 'm', 'day2', NULL, '2026-03-02 09:00:00', 'approved')",
            "measured figure no run gave: numbers row 3 (9999.0 tok/s with no job",
        ),
        (
            "UPDATE numbers SET recorded_at = '2999-01-01 00:00:00'",
            "a time after this restore: numbers row 1 (recorded_at '2999-01-01",
        ),
        (
            "UPDATE bench_jobs SET created_at = '2999-01-01 00:00:00'",
            "a time after this restore: bench_jobs row",
        ),
        # B4: fleet rows felab never stores
        (
            "UPDATE bench_jobs SET status = 'running', worker_id = NULL",
            "bench_jobs row 1 ('running' on no machine)",
        ),
        ("UPDATE bench_jobs SET spread_of = id", "bench_jobs row 1 (a spread slice of itself)"),
        ("UPDATE bench_jobs SET server = 'banana'", "bench_jobs row 1 ('banana' is not a server"),
        ("UPDATE bench_jobs SET attempt = 'zz'", "bench_jobs row 1 (attempt 'zz'"),
        ("UPDATE workers SET running_job_id = 999", "workers row 1 (running job 999"),
        ("UPDATE workers SET targets = '{\"a\": 1}'", "workers row 1 (targets {'a': 1}"),
        ("UPDATE workers SET targets = '[1]'", "workers row 1 (targets [1]"),
        ("UPDATE workers SET public_key = 'not-a-key'", "workers row 1 (public_key 'not-a-key'"),
        # B11: models `felab numbers model` refuses
        (
            "UPDATE member_servers SET server = 'banana'",
            "member_servers row 1 ('banana' is not a server",
        ),
        (
            "UPDATE member_servers SET model = 'm' || char(10) || 'x'",
            "member_servers row 1 (the model name 'm\\nx' holds invisible",
        ),
        (
            "UPDATE member_servers SET model_label = char(27) || '[2J'",
            "member_servers row 1 (the label",
        ),
        # B2: an 'ok' figure with no speed limit behind it (its member's machine or its server's
        # model size unknown): felab stores such a figure 'unverified', and migration 0015
        # moved every older one there
        (
            "UPDATE members SET chip = NULL, bandwidth_gb_s = NULL",
            "holds a figure ranked with no speed limit behind it: numbers row 1 (felab does not "
            "know your machine yet",
        ),
        (
            "UPDATE member_servers SET model_bytes = NULL",
            "holds a figure ranked with no speed limit behind it: numbers row 1 (felab does not "
            "know the size of the model file ollama runs",
        ),
    ],
)
def test_rows_felab_never_stores_are_refused(
    live: str,  # noqa: F811 (the fixture)
    full: Path,  # noqa: F811 (the fixture)
    change: str,
    says: str,
) -> None:
    _refused_once_changed(live, full, change, says)


def test_a_running_job_on_its_machine_restores(full: Path) -> None:  # noqa: F811
    changed = _copy(full, "running.db")
    con = sqlite3.connect(changed)
    con.executescript(
        "UPDATE bench_jobs SET status = 'running', worker_id = 1; "
        "UPDATE workers SET running_job_id = 1"
    )
    con.commit()
    con.close()
    assert check_sqlite_backup(changed)
