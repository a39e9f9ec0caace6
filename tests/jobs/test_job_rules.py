"""The job service's rules on SQLite and PostgreSQL: pairing, who may queue what, limits,
signatures, late attempts, the reconciler and the outbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import event
from felab_core.jobs.outbox import claim_outbox, mark_posted
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.jobs.reconciler import reconcile
from felab_core.jobs.workload import progress_total
from felab_core.settings import Settings
from tests.db_support import NOW
from tests.jobs.job_result import ARRIVED, job_record, job_row

S = Settings(job_max_per_hour=3, job_resend_after_s=10, worker_offline_after_s=20)


def _paired(db: Session, member: m.Member, name: str = "mac", **kw: object) -> Identity:
    code = issue_pair_code(db, member, name, now=NOW, **kw)  # type: ignore[arg-type]
    key = new_private_key()
    ident = Identity(0, name, key)
    w = redeem_pair_code(db, code, ident.public_key, now=NOW)
    return Identity(w.id, name, key)


def _worker(db: Session, ident: Identity) -> m.Worker:
    w = db.get(m.Worker, ident.worker_id)
    assert w is not None
    return w


def test_a_code_pairs_once_and_expires(db: Session, student: m.Member) -> None:
    code = issue_pair_code(db, student, "mac", now=NOW)
    pub = Identity(0, "x", new_private_key()).public_key
    w = redeem_pair_code(db, code, pub, now=NOW)
    assert w.public_key == pub and w.member_id == student.id
    with pytest.raises(Forbidden, match="already used"):
        redeem_pair_code(db, code, pub, now=NOW)
    late = issue_pair_code(db, student, "mac2", now=NOW)
    with pytest.raises(Forbidden, match="expired"):
        redeem_pair_code(db, late, pub, now=NOW + timedelta(hours=1))


def test_queue_refuses_urls_strangers_and_excess(
    db: Session, student: m.Member, instructor: m.Member, cohort: m.Cohort
) -> None:
    from felab_core.people.members import add_member

    w = _worker(db, _paired(db, student))
    for bad in ("http://169.254.169.254", "127.0.0.1:8080", "../etc"):
        with pytest.raises(Invalid, match="not a target name"):
            queue_bench_job(db, student, w, bad, now=NOW, settings=S)
    other = add_member(db, cohort, "2002")
    with pytest.raises(Forbidden):
        queue_bench_job(db, other, w, "mlx", now=NOW, settings=S)
    with pytest.raises(Forbidden):  # instructors only with the owner's consent
        queue_bench_job(db, instructor, w, "mlx", now=NOW, settings=S)
    w.allow_instructors = True
    q = queue_bench_job(db, instructor, w, "mlx", now=NOW, settings=S)
    assert q.job.member_id == student.id and q.job.requested_by_id == instructor.id
    assert "offline" in q.notice
    for params in ({"concurrency": 65}, {"requests": 501}, {"max_tokens": 4097}, {"rate": 1}):
        with pytest.raises(Invalid):
            queue_bench_job(db, student, w, "mlx", params=params, now=NOW, settings=S)
    queue_bench_job(db, student, w, "mlx", params={"concurrency": 64}, now=NOW, settings=S)
    queue_bench_job(db, student, w, "mlx", now=NOW, settings=S)
    queue_bench_job(db, student, w, "mlx", now=NOW, settings=S)
    with pytest.raises(Forbidden, match="last hour"):
        queue_bench_job(db, student, w, "mlx", now=NOW, settings=S)


def _row(tps: str = "40") -> dict[str, str]:
    return job_row(at=NOW, model="tiny", writing_tps_p50=tps)


def _body(tps: str = "40") -> dict[str, object]:
    return {"rows": [_row(tps)], "record": job_record()}


def test_ingest_checks_signature_worker_and_attempt(
    db: Session, student: m.Member, cohort: m.Cohort
) -> None:
    from felab_core.people.members import add_member

    ident = _paired(db, student)
    w = _worker(db, ident)
    bob = _paired(db, add_member(db, cohort, "2003"), "bobmac")
    job = queue_bench_job(db, student, w, "mlx", "quick", now=NOW, settings=S).job
    first = job.attempt
    ev = event(ident.worker_id, "started", at=NOW.timestamp(), job_id=job.id, attempt=first)
    with pytest.raises(Forbidden, match="signature"):
        ingest_event(db, Identity(ident.worker_id, "mac", new_private_key()).sign(ev), now=NOW)
    with pytest.raises(Forbidden, match="which that machine was not given"):
        ingest_event(
            db,
            bob.sign(
                event(
                    bob.worker_id,
                    "result",
                    at=NOW.timestamp(),
                    job_id=job.id,
                    attempt=first,
                    body=_body(),
                )
            ),
            now=NOW,
        )
    assert ingest_event(db, ident.sign(ev), now=NOW).accepted and job.status == "running"
    # The worker goes silent: the reconciler sends the job again under a new attempt.
    out = reconcile(db, now=NOW + timedelta(seconds=30), settings=S)
    assert out.requeued == [job.id] and job.attempt != first and job.status == "queued"
    # A late progress report of the first attempt changes nothing...
    stale = event(
        ident.worker_id, "progress", at=NOW.timestamp(), job_id=job.id, attempt=first,
        body={"done": 1, "total": 3},
    )  # fmt: skip
    assert not ingest_event(db, ident.sign(stale), now=NOW).accepted and job.status == "queued"
    # ...but its result, arriving before the new attempt started, is the run that happened: it
    # counts (the job is never run twice), and the new send is withdrawn.
    late = ident.sign(
        event(
            ident.worker_id,
            "result",
            at=NOW.timestamp(),
            job_id=job.id,
            attempt=first,
            body=_body(),
        )
    )
    res = ingest_event(db, late, now=ARRIVED)
    assert res.accepted and job.status == "done" and res.withdraw == [(w.id, job.id)]
    assert res.ack is not None and res.ack.attempt == first
    second = ident.sign(
        event(
            ident.worker_id,
            "result",
            at=NOW.timestamp(),
            job_id=job.id,
            attempt="another",
            body=_body(),
        )
    )
    res = ingest_event(db, second, now=NOW)
    assert not res.accepted and "already done" in res.reason and res.ack is not None
    # The outbox hands the finished job out once; a crashed bot's claim comes back later.
    (item,) = claim_outbox(db, now=NOW)
    assert item.job_id == job.id and claim_outbox(db, now=NOW) == []
    assert [i.id for i in claim_outbox(db, now=NOW + timedelta(minutes=5))] == [item.id]
    mark_posted(db, item.id, message_ref="m1", now=NOW)
    assert claim_outbox(db, now=NOW + timedelta(hours=1)) == []


def test_reconciler_resends_lost_messages_fails_and_expires(db: Session, student: m.Member) -> None:
    ident = _paired(db, student)
    w = _worker(db, ident)
    job = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    w.last_seen_at = NOW + timedelta(seconds=15)  # online and idle, job not started
    out = reconcile(db, now=NOW + timedelta(seconds=16), settings=S)
    # A lost message is sent again: a resend, not an attempt (no run was lost).
    assert [msg.job_id for msg in out.resend] == [job.id]
    assert job.attempts == 1 and job.resends == 1

    def started(at: timedelta) -> None:
        ev = event(
            ident.worker_id, "started", at=NOW.timestamp(), job_id=job.id, attempt=job.attempt
        )
        assert ingest_event(db, ident.sign(ev), now=NOW + at).accepted

    started(timedelta(seconds=17))
    out = reconcile(db, now=NOW + timedelta(seconds=60), settings=S)
    assert out.requeued == [job.id] and job.attempts == 2  # the run was lost: attempt 2
    started(timedelta(seconds=61))
    out = reconcile(db, now=NOW + timedelta(seconds=120), settings=S)
    assert out.failed == [job.id] and "stopped heartbeating" in (job.error or "")
    job2 = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    reconcile(db, now=NOW + timedelta(seconds=S.job_queue_expire_s + 1), settings=S)
    assert job2.status == "expired" and "felab worker start --name mac" in (job2.error or "")


def test_list_jobs_and_cancel(
    db: Session, student: m.Member, instructor: m.Member, cohort: m.Cohort
) -> None:
    from felab_core.jobs.queueing import cancel_job, list_jobs
    from felab_core.people.members import add_member

    ident = _paired(db, student)
    w = _worker(db, ident)
    w.allow_instructors = True
    mine = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    asked = queue_bench_job(db, instructor, w, "mlx", now=NOW, settings=S).job
    ev = event(
        w.id,
        "progress",
        at=NOW.timestamp(),
        job_id=asked.id,
        attempt=asked.attempt,
        body={"done": 2, "total": (total := progress_total(asked.preset, {}, None, 1))},
    )
    ingest_event(db, ident.sign(ev), now=NOW, settings=S)
    views = list_jobs(db, student)
    assert [(v.job.id, v.worker, v.progress) for v in views] == [
        (asked.id, "mac", f"2/{total}"),
        (mine.id, "mac", "-"),
    ]
    assert [v.job.id for v in list_jobs(db, instructor)] == [asked.id]
    with pytest.raises(Forbidden):
        cancel_job(db, add_member(db, cohort, "2003"), mine.id, now=NOW)
    attempt = asked.attempt
    assert cancel_job(db, instructor, asked.id, now=NOW).status == "cancelled"
    late = event(
        w.id, "failed", at=NOW.timestamp(), job_id=asked.id, attempt=attempt, body={"reason": "x"}
    )
    got = ingest_event(db, ident.sign(late), now=NOW, settings=S)
    assert (
        not got.accepted and asked.status == "cancelled" and asked.error == "cancelled on request"
    )
    with pytest.raises(Invalid, match="already cancelled"):
        cancel_job(db, student, asked.id, now=NOW)


def test_workers_report_their_targets_and_a_missing_one_is_refused_at_queue_time(
    db: Session, student: m.Member, instructor: m.Member
) -> None:
    from felab_core.jobs.fleet import worker_targets

    # Pairing with a report: names and kinds only; anything else in it is dropped.
    code = issue_pair_code(db, student, "mac", now=NOW)
    key = new_private_key()
    reported = {"mlx": "mlx", "gpu": "vllm", "bad name!": "mlx", "odd": "nginx", "x": 3}
    w = redeem_pair_code(db, code, Identity(0, "mac", key).public_key, targets=reported, now=NOW)
    ident = Identity(w.id, "mac", key)
    assert worker_targets(w) == {"gpu": "vllm", "mlx": "mlx"}
    q = queue_bench_job(db, student, w, "gpu", now=NOW, settings=S)
    assert q.job.target == "gpu" and q.job.server == "vllm"  # its machine's word (B8)
    with pytest.raises(Invalid) as refused:
        queue_bench_job(db, student, w, "llamacpp", now=NOW, settings=S)
    assert "your machine mac has no target llamacpp; it has: gpu, mlx" in str(refused.value)
    w.allow_instructors = True
    with pytest.raises(Invalid, match=r"^machine mac has no target sglang"):
        queue_bench_job(db, instructor, w, "sglang", now=NOW, settings=S)
    # A signed heartbeat replaces the list (the file was edited); a forged one changes nothing.
    beat = event(
        ident.worker_id,
        "heartbeat",
        at=NOW.timestamp(),
        body={"seq": 1, "targets": {"llamacpp": "llamacpp"}},
    )
    forged = Identity(w.id, "mac", new_private_key()).sign(beat)
    with pytest.raises(Forbidden, match="signature"):
        ingest_event(db, forged, now=NOW)
    assert worker_targets(w) == {"gpu": "vllm", "mlx": "mlx"}
    assert ingest_event(db, ident.sign(beat), now=NOW).accepted
    db.expire_all()
    w = _worker(db, ident)
    assert w.targets == {"llamacpp": "llamacpp"} and w.last_seen_at is not None
    queue_bench_job(db, student, w, "llamacpp", now=NOW, settings=S)
    with pytest.raises(Invalid, match="it has: llamacpp"):
        queue_bench_job(db, student, w, "gpu", now=NOW, settings=S)
    # A heartbeat without a report (the file unreadable) keeps the last list.
    bare = event(ident.worker_id, "heartbeat", at=NOW.timestamp(), body={"seq": 2})
    assert ingest_event(db, ident.sign(bare), now=NOW).accepted
    assert worker_targets(w) == {"llamacpp": "llamacpp"}


def test_a_worker_that_never_reported_takes_any_target_name(db: Session, student: m.Member) -> None:
    from felab_core.jobs.fleet import worker_targets

    w = _worker(db, _paired(db, student))
    assert worker_targets(w) is None
    assert queue_bench_job(db, student, w, "anything", now=NOW, settings=S).job.target == "anything"


def test_an_instructor_naming_a_shared_machine_name_is_asked_which(
    db: Session, student: m.Member, instructor: m.Member, cohort: m.Cohort
) -> None:
    from felab_core.jobs.fleet import find_worker
    from felab_core.people.members import add_member

    bob = add_member(db, cohort, "2004", display_name="Bob")
    mine = _worker(db, _paired(db, student, "mac"))
    bobs = _worker(db, _paired(db, bob, "mac"))
    assert find_worker(db, student, "mac").id == mine.id  # a student's own, always
    with pytest.raises(Invalid, match=r"2 machines are named 'mac'.*Ada/mac, Bob/mac"):
        find_worker(db, instructor, "mac")
    assert find_worker(db, instructor, "Bob/mac").id == bobs.id


def test_the_machine_is_the_one_named_or_the_only_one(db: Session, student: m.Member) -> None:
    """One rule for /bench run and `felab worker run`: each adapter words the refusals."""
    from felab_core.errors import NotFound
    from felab_core.jobs.fleet import NoMachine, SeveralMachines, the_machine

    with pytest.raises(NoMachine):
        the_machine(db, student, None, now=NOW)
    mac = _worker(db, _paired(db, student, "mac"))
    assert the_machine(db, student, None, now=NOW) is mac
    box = _worker(db, _paired(db, student, "box"))
    with pytest.raises(SeveralMachines) as several:
        the_machine(db, student, None, now=NOW)
    assert several.value.names == ["box", "mac"]
    assert the_machine(db, student, "box", now=NOW) is box
    with pytest.raises(NotFound):
        the_machine(db, student, "nope", now=NOW)


@pytest.mark.parametrize(
    ("reason", "stored"),
    [
        (
            "\x1b[2J\x1b[31mPWNED\x1b[0m [bold]m[/] \u202eevil\r\rX",
            "?[2J?[31mPWNED?[0m [bold]m[/] ?evil??X",
        ),
        ({"nested": ["\x1b[31m"]}, "the worker reported a failure without a reason in words"),
        ("  ", "the worker reported a failure without a reason in words"),
        (
            "POST https://ada:hunter2-pass@api.example/v1 said 401 for key "
            "sk-proj-Zq8rT2vX9wL4mN7pK3sJ6hF1dG5cB0aE",
            "POST https://ada:***@api.example/v1 said 401 for key ***",
        ),
    ],
    ids=["escape-codes", "not-text", "blank", "a-secret"],
)
def test_a_machines_failure_is_stored_as_words_only(
    db: Session, student: m.Member, reason: object, stored: str
) -> None:
    """Sixteenth sweep (b) F7: a machine's failure reached `felab worker jobs` with escape codes
    that cleared the instructor's screen; a non-text reason was stored as Python's repr. A
    secret in a signed reason (a machine's own words, honest or not) is masked before it is
    stored and posted."""
    ident = _paired(db, student)
    job = queue_bench_job(db, student, _worker(db, ident), "mlx", now=NOW, settings=S).job
    ev = event(
        ident.worker_id, "failed", at=NOW.timestamp(), job_id=job.id, attempt=job.attempt,
        body={"reason": reason},
    )  # fmt: skip
    assert ingest_event(db, ident.sign(ev), now=NOW, settings=S).accepted
    assert job.status == "failed" and job.error == stored


def test_progress_past_its_total_and_a_made_up_attempt_are_refused(
    db: Session, student: m.Member
) -> None:
    """Sixteenth sweep (b) F7/F8: progress 9999999/3 was shown; an attempt felab never sent
    ("wrong-attempt") failed a queued job as an old attempt's failure."""
    ident = _paired(db, student)
    job = queue_bench_job(db, student, _worker(db, ident), "mlx", now=NOW, settings=S).job

    def send(attempt: str, kind: str, body: dict[str, object]) -> object:
        ev = event(
            ident.worker_id, kind, at=NOW.timestamp(), job_id=job.id, attempt=attempt, body=body
        )
        return ingest_event(db, ident.sign(ev), now=NOW, settings=S)

    with pytest.raises(Invalid, match="attempt is not one felab sends"):
        send("wrong-attempt", "failed", {"reason": "x"})
    assert job.status == "queued"
    total = progress_total(job.preset, {}, None, 1)
    assert send(job.attempt or "", "progress", {"done": 2, "total": total}).accepted  # type: ignore[attr-defined]
    refused = send(job.attempt or "", "progress", {"done": 9_999_999, "total": total})
    assert not refused.accepted and "more than all" in refused.reason  # type: ignore[attr-defined]
    assert (job.progress_done, job.progress_total) == (2, total)


@pytest.mark.parametrize("worker_id", [1e309, 10**30, -1, "5", True], ids=str)
def test_an_id_no_database_holds_is_malformed_not_a_traceback(
    db: Session, worker_id: object
) -> None:
    """Sixteenth sweep (b) F9: 1e309 and 10**30 ended in an OverflowError traceback on the
    ingest's output (before the signature was checked)."""
    payload = {"worker_id": worker_id, "kind": "heartbeat", "at": NOW.timestamp(), "body": {}}
    with pytest.raises(Invalid, match="not a felab worker event"):
        ingest_event(db, payload, now=NOW, settings=S)


def test_huge_numbers_and_a_nan_time_in_a_signed_event_are_refused(
    db: Session, student: m.Member
) -> None:
    """F9/F11: a heartbeat's sequence 2**70 or a job id 2**70 overflowed; `at` NaN passed the
    freshness check (both comparisons are False)."""
    ident = _paired(db, student)
    job = queue_bench_job(db, student, _worker(db, ident), "mlx", now=NOW, settings=S).job
    beat = event(ident.worker_id, "heartbeat", at=NOW.timestamp(), body={"seq": 2**70})
    with pytest.raises(Forbidden, match="without a sequence number"):
        ingest_event(db, ident.sign(beat), now=NOW, settings=S)
    far = event(ident.worker_id, "started", at=NOW.timestamp(), job_id=2**70, attempt="a")
    assert not ingest_event(db, ident.sign(far), now=NOW, settings=S).accepted
    nan = event(
        ident.worker_id, "failed", at=float("nan"), job_id=job.id, attempt=job.attempt,
        body={"reason": "x"},
    )  # fmt: skip
    with pytest.raises(Forbidden, match="carries no time it was signed"):
        ingest_event(db, ident.sign(nan), now=NOW, settings=S)
    assert job.status == "queued"


@pytest.mark.parametrize(
    ("tps", "says"),
    [("999999", "above 100,000"), ("0.0000001", "one token in more than a day")],
)
def test_a_forged_speed_fails_the_job_not_the_board(
    db: Session, student: m.Member, tps: str, says: str
) -> None:
    """F12/F14: 999,999 tok/s from a machine was stored and posted unflagged (above what the
    judge reads); 1e-07 was shown as 0.0."""
    ident = _paired(db, student)
    job = queue_bench_job(db, student, _worker(db, ident), "mlx", "quick", now=NOW, settings=S).job
    ev = event(
        ident.worker_id, "result", at=NOW.timestamp(), job_id=job.id, attempt=job.attempt,
        body=_body(tps),
    )  # fmt: skip
    assert not ingest_event(db, ident.sign(ev), now=ARRIVED, settings=S).accepted
    assert job.status == "failed" and says in (job.error or ""), job.error
    assert db.query(m.BenchResult).filter_by(job_id=job.id).count() == 0


def test_a_rows_made_up_keys_are_not_kept(db: Session, student: m.Member) -> None:
    """F13: '=HYPERLINK(...)' and escape codes as keys became the posted CSV's header."""
    ident = _paired(db, student)
    job = queue_bench_job(db, student, _worker(db, ident), "mlx", "quick", now=NOW, settings=S).job
    row = {
        **_row(),
        '=HYPERLINK("http://evil","x")': "1",
        "\x1b[31mkey": "2",
        "cached_share": "0.5",
    }
    ev = event(
        ident.worker_id, "result", at=NOW.timestamp(), job_id=job.id, attempt=job.attempt,
        body={**_body(), "rows": [row]},
    )  # fmt: skip
    assert ingest_event(db, ident.sign(ev), now=ARRIVED, settings=S).accepted
    (stored,) = db.query(m.BenchResult).filter_by(job_id=job.id).all()
    assert set(stored.row) == {*_row(), "host", "cached_share"}
