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
from felab_core.jobs.lifecycle import new_attempt
from felab_core.jobs.messages import JobMessage, event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.jobs.result_checks import ROW_FIELDS, check_result, check_rows_are_the_jobs
from felab_core.jobs.run import execute
from felab_core.jobs.spread import queue_spread_job
from felab_core.jobs.workload import Limits
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.db_support import NOW
from tests.jobs.job_result import ARRIVED, job_body, job_record, job_row

ROW = job_row(at=NOW)
GOOD = {"index": 0, "ok": True, "ttft_s": 0.1, "e2e_s": 0.9, "tpot_s": 0.025,
        "writing_tps": 40.0, "output_tokens": 32, "first_chunk_tokens": 1}  # fmt: skip


def _record(*runs: tuple[int, list[dict[str, Any]]], server: Any = None) -> dict[str, Any]:
    return {
        **job_record(),
        "server": server,
        "runs": [
            {"concurrency": c, "summary": {"duration_s": 10.0}, "requests": reqs}
            for c, reqs in runs
        ],
    }


def _job(
    db: Session, member: m.Member, preset: str = "quick", **params: int
) -> tuple[Identity, m.BenchJob]:
    key = new_private_key()
    code = issue_pair_code(db, member, "mac", now=NOW)
    w = redeem_pair_code(db, code, Identity(0, "mac", key).public_key, now=NOW)
    job = queue_bench_job(db, member, w, "mlx", preset, params=params, now=NOW).job
    return Identity(w.id, "mac", key), job


def _send(
    db: Session, ident: Identity, job: m.BenchJob, body: dict[str, Any], *, kept: bool = False
) -> None:
    ev = event(ident.worker_id, "result", job_id=job.id, attempt=job.attempt, at=NOW.timestamp())
    at = ARRIVED  # minutes after the job was made
    assert ingest_event(db, ident.sign({**ev, "body": body}), now=at).accepted is kept, job.error


def _refused(db: Session, job: m.BenchJob, says: str) -> None:
    says = says.replace("job 1", f"job {job.id}")  # PostgreSQL's ids run on across tests
    assert job.status == "failed" and says in (job.error or ""), job.error
    assert db.query(m.BenchResult).filter_by(job_id=job.id).count() == 0


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
    _send(db, ident, job, {"rows": [{**ROW, **row}], "record": job_record()})
    says = says.replace("job 1", f"job {job.id}")  # PostgreSQL's ids run on across tests
    assert job.status == "failed" and says in (job.error or ""), job.error
    assert db.query(m.BenchResult).filter_by(job_id=job.id).count() == 0


def _send_signed(
    db: Session, ident: Identity, job: m.BenchJob, body: dict[str, Any], signed_s: float
) -> bool:
    """Send `body` as the machine does, signed `signed_s` after the job was made on its own
    clock; it arrives 30 s after the job was made on the server's."""
    at = (NOW + timedelta(seconds=signed_s)).timestamp()
    ev = event(ident.worker_id, "result", job_id=job.id, attempt=job.attempt, at=at)
    arrived = NOW + timedelta(seconds=30)
    return ingest_event(db, ident.sign({**ev, "body": body}), now=arrived).accepted


@pytest.mark.parametrize(
    ("row_s", "started_s", "sent_s", "says"),
    [
        (-152, None, None, "row 1 of the result was timed at 2026-03-03T11:57:28+00:00, before "
         "job 1 was made (2026-03-03T12:00:00+00:00): its machine signed the result 182 s after"),
        (5, -152, None, "job 1's record was timed at 2026-03-03T11:57:28+00:00, before job 1 "
         "was made"),
        (10, None, 20, "row 1 of the result was timed at 2026-03-03T12:00:10+00:00, before job 1 "
         "was sent to its machine (2026-03-03T12:00:20+00:00)"),
    ],
)  # fmt: skip
def test_a_run_timed_before_its_job_was_made_or_sent_fails_it(
    db: Session,
    student: m.Member,
    row_s: float,
    started_s: float | None,
    sent_s: float | None,
    says: str,
) -> None:
    """Sweep 24 M3: a run kept from 152 s before its job was made (inside the 300 s a machine's
    clock may be off) was signed afresh as the job's result and stored as its figure."""
    ident, job = _job(db, student)
    if sent_s is not None:  # sent again (the machine had not taken it): the run is that send's
        new_attempt(job, NOW + timedelta(seconds=sent_s), resend=True)
    body = job_body("quick", at=NOW + timedelta(seconds=row_s))
    if started_s is not None:
        body["record"]["started_at"] = (NOW + timedelta(seconds=started_s)).isoformat()
    assert not _send_signed(db, ident, job, body, signed_s=30)
    _refused(db, job, says)


@pytest.mark.parametrize("behind_s", [-240, 0, 240])
def test_a_fresh_run_on_a_clock_minutes_off_is_kept(
    db: Session, student: m.Member, behind_s: float
) -> None:
    """A machine's clock minutes off the server's: its run and its signing are on that clock."""
    ident, job = _job(db, student)
    body = job_body("quick", at=NOW + timedelta(seconds=2 - behind_s))
    body["record"]["started_at"] = body["rows"][0]["timestamp"]
    assert _send_signed(db, ident, job, body, signed_s=29 - behind_s), job.error
    assert job.status == "done", job.error


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
    body = {"rows": [{**ROW, "target": "llama"}], "record": job_record()}
    _send(db, Identity(w.id, "mac", key), job, body)
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
    check_result(job, body["rows"], body["record"], datetime.now(UTC))
    with pytest.raises(Invalid, match=r"ran preset 'quick\+custom'"):
        check_rows_are_the_jobs(m.BenchJob(id=1, preset="quick", params={}), body["rows"])


def test_an_honest_body_of_each_preset_is_kept(db: Session, student: m.Member) -> None:
    for preset in ("day2", "sweep", "chat"):
        ident, job = _job(db, student, preset)
        _send(db, ident, job, job_body(preset, at=NOW), kept=True)
        assert job.status == "done", job.error


@pytest.mark.parametrize("field", ROW_FIELDS)
def test_a_row_without_a_field_felab_writes_fails_the_job(
    db: Session, student: m.Member, field: str
) -> None:
    """Sweep (fixer-73) 1: a day2 row without requests and ok was stored as one request."""
    ident, job = _job(db, student, "day2")
    body = job_body("day2", at=NOW)
    body["rows"][0].pop(field)
    _send(db, ident, job, body)
    _refused(db, job, f"row 1 of the result has no {field}: felab writes it in every row")


@pytest.mark.parametrize(
    ("cells", "duration", "says"),
    [
        (
            {"ttft_p50_s": "9000", "e2e_p50_s": "9001", "request_tps": ""},
            None,
            "ttft_p50_s = 9,000 s, longer than its run could last",
        ),
        ({"ok": "8", "request_tps": "0.000111111"}, None, "0.000111111 req/s, a run of 72,000"),
        ({}, 72_000.0, "run 1 lasted 72,000 s, and job 1 was made at"),
        ({"timestamp": (NOW + timedelta(days=1)).isoformat()}, None, "after its result arrived"),
    ],
)
def test_a_run_longer_than_the_job_has_existed_fails_it(
    db: Session, student: m.Member, cells: dict[str, str], duration: float | None, says: str
) -> None:
    """Sweep (fixer-73) 2: a 20-hour run with TTFT 9,000 s arrived 1 s after its job began."""
    ident, job = _job(db, student, "day2")
    body = job_body("day2", at=NOW, **cells)
    if duration is not None:
        body["record"]["runs"][0]["summary"]["duration_s"] = duration
    _send(db, ident, job, body)
    _refused(db, job, says)


def test_runs_the_job_did_not_ask_for_fail_it(db: Session, student: m.Member) -> None:
    """Sweep (fixer-73) 3: a record of 64 runs was stored for a one-run job."""
    ident, job = _job(db, student, "day2")
    body = job_body("day2", at=NOW)
    body["record"]["runs"] *= 64
    _send(db, ident, job, body)
    _refused(db, job, "record holds 64 run(s), at concurrency 1; the job asked one run at each")
    ident, job = _job(db, student, "day2")
    body = job_body("day2", at=NOW)
    body["rows"] *= 2
    _send(db, ident, job, body)
    _refused(db, job, "the result has 2 row(s), at concurrency 1; job 1 asked one run")
    ident, job = _job(db, student, "day2")
    body = job_body("day2", at=NOW)
    body["record"]["runs"][0]["requests"] = body["record"]["runs"][0]["requests"][:1]
    _send(db, ident, job, body)
    _refused(db, job, "run 1 lists 1 request(s), and its row says 8")
    ident, job = _job(db, student, "day2")
    _send(db, ident, job, {"rows": job_body("day2", at=NOW)["rows"]})
    _refused(db, job, "result has no record: felab sends the run's record with its rows")


@pytest.mark.parametrize(
    ("preset", "cells", "knob", "says"),
    [
        ("day2", {"rate": "50", "burstiness": "1"}, None, "ran at rate '50'; job 1 asked rate"),
        ("day2", {"warmup": "0"}, None, "ran at warmup '0'; job 1 asked warmup '1'"),
        ("day2", {}, ("rate", 50.0), "record ran at rate 50.0; the job asked rate None"),
        ("day2", {}, ("warmup", 0), "record ran at warmup 0; the job asked warmup 1"),
        ("sweep", {}, ("temperature", 1.5), "ran at temperature 1.5; the job asked temperature 0"),
    ],
)
def test_a_run_of_another_load_fails_the_job(
    db: Session,
    student: m.Member,
    preset: str,
    cells: dict[str, str],
    knob: tuple[str, Any] | None,
    says: str,
) -> None:
    """Sweep (fixer-73) 4: a day2 row at 50 req/s with no warm-up, and a sweep record at
    temperature 1.5, were stored as the jobs' figures."""
    ident, job = _job(db, student, preset)
    body = job_body(preset, at=NOW, **cells)
    if knob is not None:
        body["record"]["workload"][knob[0]] = knob[1]
    _send(db, ident, job, body)
    _refused(db, job, says)


def _spread(
    db: Session, student: m.Member, params: dict[str, int]
) -> tuple[list[Identity], list[m.BenchJob]]:
    machines = []
    for name in ("mac1", "mac2"):
        key = new_private_key()
        code = issue_pair_code(db, student, name, now=NOW)
        w = redeem_pair_code(db, code, Identity(0, name, key).public_key, now=NOW)
        w.last_seen_at = NOW
        machines.append((Identity(w.id, name, key), w))
    db.flush()
    spread = queue_spread_job(
        db, student, [w for _, w in machines], "mlx", "quick", params=params, now=NOW
    )
    return [i for i, _ in machines], spread.slices


def test_a_slice_is_held_to_its_job(db: Session, student: m.Member) -> None:
    """Sweep (fixer-73) 5: a spread run's slices skipped the job's checks."""
    params = {"concurrency": 2, "requests": 4}
    idents, slices = _spread(db, student, params)
    body = job_body("quick", params, at=NOW, requests="2", ok="2")  # its share: 2 of 4
    body["rows"][0].pop("ok")
    body["shard"] = {"index": 0, "count": 2, "requests": [{}, {}]}
    _send(db, idents[0], slices[0], body)
    _refused(db, slices[0], "row 1 of the result has no ok: felab writes it in every row")
    part = slices[1]
    body = job_body("quick", params, at=NOW, requests="2", ok="2", warmup="0")
    body["shard"] = {"index": 1, "count": 2, "requests": [{}, {}]}
    _send(db, idents[1], part, body)
    _refused(db, part, "ran at warmup '0'; job 1 asked warmup '1'")


def test_a_slices_own_list_is_held_to_its_row_and_the_time(db: Session, student: m.Member) -> None:
    """Sweep (fixer-73) 5: what the merge reads of a slice (its list, its length) counted as
    the row's requests and within the time since the job was made."""
    params = {"concurrency": 2, "requests": 4}
    idents, slices = _spread(db, student, params)
    body = job_body("quick", params, at=NOW, requests="2", ok="2")
    body["shard"] = {"index": 0, "count": 2, "requests": [], "duration_s": 1.0}
    _send(db, idents[0], slices[0], body)
    _refused(db, slices[0], "slice 1 of 2 lists 0 request(s) in its records, and its row says 2")
    body["shard"] = {"index": 1, "count": 2, "requests": [{}, {}], "duration_s": 72_000}
    _send(db, idents[1], slices[1], body)
    _refused(db, slices[1], "slice 2 of 2 lasted 72000 s, and job 1 was made 600 s before")
