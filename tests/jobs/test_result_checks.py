"""A machine's result held to its own job (felab_core.jobs.result_checks): the rows the job's
workload and target, the record beside them figures felab measures; an honest run passes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import JobMessage, event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.jobs.result_checks import check_record, check_rows_are_the_jobs
from felab_core.jobs.run import execute
from felab_core.jobs.workload import Limits
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.db_support import NOW

ROW = {"server": "mlx", "model": "m", "preset": "quick", "concurrency": "1", "ok": "3",
       "failed": "0", "requests": "3", "max_tokens": "32", "writing_tps_p50": "40",
       "target": "mlx"}  # fmt: skip
GOOD = {"index": 0, "ok": True, "ttft_s": 0.1, "e2e_s": 0.9, "tpot_s": 0.025,
        "writing_tps": 40.0, "output_tokens": 32, "first_chunk_tokens": 1}  # fmt: skip


def _record(*runs: tuple[int, list[dict[str, Any]]], server: Any = None) -> dict[str, Any]:
    return {
        "server": server,
        "runs": [
            {"concurrency": c, "summary": {"duration_s": 10.0}, "requests": reqs}
            for c, reqs in runs
        ],
    }


def _job(db: Session, member: m.Member, **params: int) -> tuple[Identity, m.BenchJob]:
    key = new_private_key()
    code = issue_pair_code(db, member, "mac", now=NOW)
    w = redeem_pair_code(db, code, Identity(0, "mac", key).public_key, now=NOW)
    job = queue_bench_job(db, member, w, "mlx", "quick", params=params, now=NOW).job
    return Identity(w.id, "mac", key), job


def _send(db: Session, ident: Identity, job: m.BenchJob, body: dict[str, Any]) -> None:
    ev = event(ident.worker_id, "result", job_id=job.id, attempt=job.attempt, at=NOW.timestamp())
    assert not ingest_event(db, ident.sign({**ev, "body": body}), now=NOW).accepted


@pytest.mark.parametrize(
    ("params", "row", "says"),
    [
        ({"concurrency": 4}, {"preset": "day2"},
         "ran preset 'day2'; job 1 asked preset 'quick+custom', 4 user(s)"),
        ({"concurrency": 4}, {"preset": "quick+custom"}, "ran at 1 user(s); job 1 asked"),
        ({"requests": 5}, {"preset": "quick+custom"},
         "sent 3 requests; job 1 asked preset 'quick+custom', 1 user(s), 5 requests"),
        ({"max_tokens": 64}, {"preset": "quick+custom"}, "ran at max tokens 32"),
        ({}, {"target": "somebody-elses-gpu"},
         "measured target 'somebody-elses-gpu'; job 1 asked 'mlx'"),
        ({}, {"timestamp": "2025-01-02T00:00:00+00:00"}, "before job 1 was made"),
    ],
)  # fmt: skip
def test_a_row_of_another_workload_fails_the_job(
    db: Session, student: m.Member, params: dict[str, int], row: dict[str, str], says: str
) -> None:
    """Sweep 20 (b) B16: a one-user row was stored as the figure of a job that asked 64."""
    ident, job = _job(db, student, **params)
    _send(db, ident, job, {"rows": [{**ROW, **row}]})
    says = says.replace("job 1", f"job {job.id}")  # PostgreSQL's ids run on across tests
    assert job.status == "failed" and says in (job.error or ""), job.error
    assert db.query(m.BenchResult).filter_by(job_id=job.id).count() == 0


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (_record((1, [{**GOOD, "writing_tps": -1e300}])), "writing_tps = -1e+300"),
        (_record((1, [{**GOOD, "writing_tps": 1e300, "tpot_s": 1e-300}])), "not a speed felab"),
        (_record((1, [{**GOOD, "writing_tps": 41.0}])), "writes the speed as 1 / tpot_s"),
        (_record((1, [GOOD]), (999999, [GOOD])), "run 2 is at concurrency 999999"),
        (_record((1, [GOOD]), server="vllm"), "server is 'vllm', and the rows measured mlx"),
        (_record((1, [{**GOOD, "e2e_s": -5.0}])), "e2e_s = -5.0"),
    ],
)
def test_a_record_felab_could_not_write_fails_the_job_undrawn(
    db: Session, student: m.Member, record: dict[str, Any], says: str
) -> None:
    """Sweep 20 (b) B4: a chart of -1e300 to +1e300 tok/s and '999999 users' was posted."""
    ident, job = _job(db, student)
    _send(db, ident, job, {"rows": [ROW], "record": record})
    assert job.status == "failed" and says in (job.error or ""), job.error
    assert job.chart_png is None and job.record is None


def test_a_row_of_another_kind_than_its_machine_reported_fails_the_job(
    db: Session, student: m.Member
) -> None:
    """Sweep 20 (b) B8: target 'llama', reported llamacpp by its machine, was stored as mlx."""
    key = new_private_key()
    code = issue_pair_code(db, student, "mac", now=NOW)
    pub = Identity(0, "mac", key).public_key
    w = redeem_pair_code(db, code, pub, targets={"llama": "llamacpp"}, now=NOW)
    job = queue_bench_job(db, student, w, "llama", "quick", now=NOW).job
    assert job.server == "llamacpp"
    _send(db, Identity(w.id, "mac", key), job, {"rows": [{**ROW, "target": "llama"}]})
    assert job.error is not None and "asked for llamacpp but the row measured mlx" in job.error


def test_an_honest_runs_result_passes(tmp_path: Path) -> None:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.005, itl_s=0.002)).start_in_thread()
    tf = tmp_path / "targets.toml"
    tf.write_text(f'[targets.mlx]\nurl = "http://127.0.0.1:{srv.port}"\nmodel = "tiny"\n')
    events: list[dict[str, Any]] = []
    params = {"max_tokens": 8, "concurrency": 2}
    msg = JobMessage(job_id=1, attempt="a1", worker_id=7, target="mlx", preset="quick",
                     params=params)  # fmt: skip
    try:
        execute(msg, targets_file=tf, limits=Limits(4, 10, 64, 10), emit=events.append)
    finally:
        srv.stop_thread()
    body = events[-1]["body"]
    job = m.BenchJob(id=1, preset="quick", params=params, target="mlx",
                     created_at=datetime.now(UTC) - timedelta(seconds=5))  # fmt: skip
    check_rows_are_the_jobs(job, body["rows"])
    check_record(job, body["record"], body["rows"])
    with pytest.raises(Invalid, match=r"ran preset 'quick\+custom'"):
        check_rows_are_the_jobs(m.BenchJob(id=1, preset="quick", params={}), body["rows"])
