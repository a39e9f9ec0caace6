"""A stored job felab never queues (params [1, 2], a preset felab does not know) is failed by
the reconciler with the reason, logged once; the other jobs are reconciled as ever. It had
stopped every pass of the reconciler on a TypeError, every 5 s, for everyone."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.jobs.queueing import queue_bench_job
from felab_core.jobs.reconciler import reconcile
from tests.db_support import NOW
from tests.jobs.test_reconciler import S, _machine


@pytest.mark.parametrize(
    ("preset", "params", "says"),
    [
        ("quick", [1, 2], "its params [1, 2] are not names with whole numbers"),
        ("quick", {"concurrency": "5"}, "its params {'concurrency': '5'}"),
        ("banana", {}, "unknown preset 'banana'"),
        ("quick", {"n": 5}, "a job cannot set n"),
    ],
    ids=["list", "text-value", "preset", "unknown-param"],
)
def test_a_stored_job_felab_never_queues_is_failed_saying_why(
    db: Session,
    student: m.Member,
    caplog: pytest.LogCaptureFixture,
    preset: str,
    params: Any,
    says: str,
) -> None:
    _, w = _machine(db, student)
    bad = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    good = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    bad.preset, bad.params = preset, params  # as a changed backup restored it
    db.flush()
    t = NOW + timedelta(seconds=11)
    w.last_seen_at = t  # online and idle: the good job is sent again
    with caplog.at_level(logging.WARNING, logger="felab_core.jobs.reconciler"):
        out = reconcile(db, now=t, settings=S)
        assert out.failed == [bad.id] and bad.status == "failed"
        assert says in (bad.error or "") and "queue the benchmark again" in (bad.error or "")
        assert good.status == "queued"
        w.last_seen_at = t + timedelta(seconds=11)
        again = reconcile(db, now=t + timedelta(seconds=11), settings=S)
    assert again.failed == [] and [msg.job_id for msg in again.resend] == [good.id]
    logged = [r for r in caplog.records if f"job {bad.id} failed" in r.getMessage()]
    assert len(logged) == 1
