"""A finished job as the bot posts it (felab_core.jobs.post), on SQLite and PostgreSQL."""

from __future__ import annotations

import base64

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.post import MAX_MESSAGE, result_post
from felab_core.jobs.queueing import cancel_job, queue_bench_job
from tests.db_support import NOW

PNG = b"\x89PNG\r\n\x1a\nfake"


def _job(db: Session, member: m.Member) -> tuple[Identity, m.BenchJob]:
    code = issue_pair_code(db, member, "studio", now=NOW)
    key = new_private_key()
    w = redeem_pair_code(db, code, Identity(0, "studio", key).public_key, now=NOW)
    job = queue_bench_job(db, member, w, "mlx", "quick", now=NOW).job
    return Identity(w.id, "studio", key), job


def test_a_done_job_posts_its_table_and_chart(db: Session, student: m.Member) -> None:
    ident, job = _job(db, student)
    row = {
        "server": "mlx",
        "server_version": "0.26",
        "model": "tiny",
        "host": "studio.local",
        "preset": "quick",
        "concurrency": "1",
        "ok": "3",
        "failed": "0",
        "writing_tps_p50": "44.61",
        "ttft_p50_s": "0.2104",
        "ttft_p95_s": "0.26",
        "e2e_p50_s": "1.234",
    }
    body = {"rows": [row], "summary": "s", "png": base64.b64encode(PNG).decode()}
    ev = event(ident.worker_id, "result", job_id=job.id, attempt=job.attempt, body=body)
    assert ingest_event(db, ident.sign(ev), now=NOW).accepted
    post = result_post(db, job)
    assert post.status == "done" and post.chart_png == PNG
    assert post.chart_name == f"job-{job.id}-mlx.png"
    assert post.rows == [row]
    lines = post.text.splitlines()
    assert lines[0] == f"**Benchmark {job.id}** on studio: `mlx`, preset `quick`: done"
    assert lines[1] == "mlx 0.26 serving `tiny` on studio.local"
    table = post.text.split("```")[1].strip().splitlines()
    assert table[0].split() == [
        "users",
        "ok",
        "failed",
        "writing",
        "tok/s",
        "TTFT",
        "p50",
        "ms",
        "TTFT",
        "p95",
        "ms",
        "E2E",
        "p50",
        "s",
    ]
    assert table[1].split() == ["1", "3", "0", "44.6", "210.4", "260.0", "1.23"]
    assert len(post.text) <= MAX_MESSAGE


def test_a_job_that_did_not_run_posts_the_reason(db: Session, student: m.Member) -> None:
    _, job = _job(db, student)
    cancel_job(db, student, job.id, now=NOW)
    post = result_post(db, job)
    assert post.status == "cancelled" and post.chart_png is None and post.rows == []
    assert post.text.splitlines()[1] == "cancelled on request"
