"""The ingest's rules (felab_core.jobs.ingest) on SQLite and PostgreSQL: signed, recent and
numbered events only; once an event is verified, anything wrong with it fails its job at once
with the reason; what each kept event is acknowledged with."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Forbidden
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code, remove_worker
from felab_core.jobs.queueing import queue_bench_job
from felab_core.settings import Settings
from tests.db_support import NOW
from tests.jobs.job_result import ARRIVED, job_record, job_row

AT = NOW.timestamp()
ROW = job_row(at=NOW)


def _machine(db: Session, member: m.Member) -> tuple[Identity, m.Worker, m.BenchJob]:
    key = new_private_key()
    code = issue_pair_code(db, member, "mac", now=NOW)
    w = redeem_pair_code(db, code, Identity(0, "mac", key).public_key, now=NOW)
    job = queue_bench_job(db, member, w, "mlx", "quick", now=NOW).job
    return Identity(w.id, "mac", key), w, job


def _result(ident: Identity, job: m.BenchJob, body: object, at: float = AT) -> dict[str, object]:
    ev = event(ident.worker_id, "result", job_id=job.id, attempt=job.attempt, at=at)
    return ident.sign({**ev, "body": body})


def test_old_future_and_replayed_events_are_refused(db: Session, student: m.Member) -> None:
    ident, w, _ = _machine(db, student)
    beat = ident.sign(event(w.id, "heartbeat", at=AT, body={"seq": 7}))
    assert ingest_event(db, beat, now=NOW).accepted and w.heartbeat_seq == 7
    with pytest.raises(Forbidden, match="replayed heartbeat"):
        ingest_event(db, beat, now=NOW)
    with pytest.raises(Forbidden, match="without a sequence"):
        ingest_event(db, ident.sign(event(w.id, "heartbeat", at=AT)), now=NOW)
    for skew in (-3601, 301):
        old = ident.sign(event(w.id, "heartbeat", at=AT + skew, body={"seq": 8}))
        with pytest.raises(Forbidden, match="old copy"):
            ingest_event(db, old, now=NOW)
    # sweep 24 LOW: "signed 7205 s from now" for one 2 h old, "-31535993 s from now" ahead
    now_s = NOW.timestamp()
    for at, says in ((now_s - 7205, "signed 2 h ago"), (now_s + 365 * 86400, "365 days ahead")):
        old = ident.sign(event(w.id, "heartbeat", at=at, body={"seq": 8}))
        with pytest.raises(Forbidden, match=says):
            ingest_event(db, old, now=NOW)
    unsigned_time = ident.sign({k: v for k, v in event(w.id, "heartbeat").items() if k != "at"})
    with pytest.raises(Forbidden, match="no time"):
        ingest_event(db, unsigned_time, now=NOW)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"rows": []}, "at least one CSV row"),
        ({"rows": ["nope"]}, "at least one CSV row"),
        (
            {"rows": [{**ROW, "server": "vllm"}], "record": job_record()},
            "asked for mlx but the row measured vllm",
        ),
        ({"rows": [{**ROW, "concurrency": "many"}]}, "ran at many user(s)"),
        ({"rows": [ROW] * 65}, "at most 64 runs"),
        # JSON from a machine may carry NaN; PostgreSQL's JSON cannot, and no figure can.
        ({"rows": [ROW], "record": {"runs": [{"ttft_s": float("nan")}]}}, "is nan, not a finite"),
        ({"rows": [{**ROW, "x": float("inf")}]}, "result.rows[0].x is inf"),
    ],
)
def test_a_verified_result_with_bad_content_fails_the_job_at_once(
    db: Session, student: m.Member, body: dict[str, object], reason: str
) -> None:
    ident, _, job = _machine(db, student)
    res = ingest_event(db, _result(ident, job, body), now=ARRIVED)
    assert not res.accepted and res.ack is not None  # the machine stops resending it
    assert job.status == "failed" and reason in (job.error or "")
    assert job.error is not None and job.error.startswith("the result was refused: ")
    assert db.query(m.BenchResult).filter_by(job_id=job.id).count() == 0  # nothing half-kept
    assert db.query(m.JobOutbox).filter_by(job_id=job.id).count() == 1  # and it is said once


def test_an_oversized_result_fails_with_the_limit(db: Session, student: m.Member) -> None:
    ident, _, job = _machine(db, student)
    body = {"rows": [ROW], "record": {"pad": "x" * 20_000}}
    res = ingest_event(
        db, _result(ident, job, body), now=ARRIVED, settings=Settings(result_max_bytes=10_000)
    )
    assert not res.accepted and job.status == "failed"
    assert "over the 10,000-byte limit (FELAB_RESULT_MAX_BYTES)" in (job.error or "")


def test_a_removed_machine_is_heard_no_more(db: Session, student: m.Member) -> None:
    ident, w, job = _machine(db, student)
    remove_worker(db, student, w)
    assert job.status == "cancelled" and "was removed" in (job.error or "")
    with pytest.raises(Forbidden, match="no paired worker"):
        ingest_event(db, ident.sign(event(w.id, "heartbeat", at=AT, body={"seq": 1})), now=NOW)
    assert db.query(m.BrokerUser).filter_by(worker_id=w.id).count() == 0


def test_progress_counts_from_a_machine_are_bounded(db: Session, student: m.Member) -> None:
    ident, _, job = _machine(db, student)
    for done in (-5, "3", 10**12, 2):
        ev = event(ident.worker_id, "progress", job_id=job.id, attempt=job.attempt, at=AT,
                   body={"done": done, "total": 3})  # fmt: skip
        ingest_event(db, ident.sign(ev), now=NOW + timedelta(seconds=1))
    assert job.progress_done == 2 and job.progress_total == 3


def test_a_progress_total_the_job_did_not_ask_for_is_refused(
    db: Session, student: m.Member
) -> None:
    """Seventeenth sweep (b) H12: a 3-request job was shown running 10000000/10000000."""
    ident, _, job = _machine(db, student)
    for done, total in ((10**7, 10**7), (1, 4)):
        ev = event(ident.worker_id, "progress", job_id=job.id, attempt=job.attempt, at=AT,
                   body={"done": done, "total": total})  # fmt: skip
        res = ingest_event(db, ident.sign(ev), now=NOW + timedelta(seconds=1))
        assert not res.accepted and "it asked for 3" in res.reason
    assert (job.progress_done, job.progress_total) == (0, None)


def test_a_heartbeat_naming_a_finished_job_shows_the_machine_idle(
    db: Session, student: m.Member
) -> None:
    """Sweep 20 (b) B17: a failed job named as running showed the machine busy on it."""
    ident, w, job = _machine(db, student)
    beat = ident.sign(event(w.id, "heartbeat", at=AT, body={"seq": 1, "running": job.id}))
    assert ingest_event(db, beat, now=NOW).accepted and w.running_job_id == job.id
    ingest_event(db, _result(ident, job, {"rows": []}), now=ARRIVED)  # refused: the job fails
    assert job.status == "failed"
    beat = ident.sign(event(w.id, "heartbeat", at=AT, body={"seq": 2, "running": job.id}))
    assert ingest_event(db, beat, now=NOW).accepted and w.running_job_id is None


def test_a_made_up_job_id_is_said_to_be_the_messages(db: Session, student: m.Member) -> None:
    """Sweep (fixer-73): the ingest's log read as the worker's fault for a job id it was never
    given; it names the message's job as one never made (or not that machine's)."""
    ident, _, job = _machine(db, student)
    ev = event(ident.worker_id, "progress", job_id=999_999, attempt=job.attempt, at=AT)
    res = ingest_event(db, ident.sign(ev), now=NOW)
    assert not res.accepted
    assert res.reason == "no job 999999: the event from machine 'mac' named a job never made"
