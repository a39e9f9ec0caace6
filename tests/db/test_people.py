"""Cohorts and members; export and deletion of everything about a member; stored instants."""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import StatementError
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.drills.review import make_scheduler, rate_card
from felab_core.drills.speaking import rate_spoken_answer, record_spoken_answer
from felab_core.errors import Forbidden, Invalid
from felab_core.numbers.recording import create_job, record_entered, record_measured
from felab_core.people.members import (
    add_member,
    create_cohort,
    instructors,
    join_cohort,
    set_hardware,
    set_role,
    set_server_model,
)
from felab_core.people.privacy import delete_member, export_member
from tests.db_support import NOW
from tests.jobs.job_result import ARRIVED, job_body


def test_instants_come_back_aware_and_in_utc(db: Session, cohort: m.Cohort) -> None:
    paris = datetime(2026, 3, 3, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    member = add_member(db, cohort, "77", now=paris)
    db.flush()
    db.expire(member)
    assert member.joined_at == paris and member.joined_at.tzinfo == UTC
    with pytest.raises(StatementError, match="naive datetime"):
        member.joined_at = datetime(2026, 3, 3, 12)
        db.flush()


def test_join_modes(db: Session) -> None:
    start = date(2026, 3, 2)
    open_ = create_cohort(db, "Open", timezone="UTC", start_date=start)
    assert join_cohort(db, open_, "1").role == "student"
    assert join_cohort(db, open_, "1").id == join_cohort(db, open_, "1").id
    coded = create_cohort(db, "Coded", timezone="UTC", start_date=start, join_mode="code")
    assert coded.join_code
    with pytest.raises(Forbidden, match="join code"):
        join_cohort(db, coded, "2", code="wrong")
    assert join_cohort(db, coded, "2", code=coded.join_code).cohort_id == coded.id
    invite = create_cohort(db, "Invite", timezone="UTC", start_date=start, join_mode="invite")
    with pytest.raises(Forbidden, match="invitation only"):
        join_cohort(db, invite, "3")
    with pytest.raises(Invalid, match="join mode"):
        create_cohort(db, "Bad", timezone="UTC", start_date=start, join_mode="anyone")


def test_roles_and_instructors(
    db: Session, cohort: m.Cohort, student: m.Member, instructor: m.Member
) -> None:
    assert [i.id for i in instructors(db, cohort.id)] == [instructor.id]
    with pytest.raises(Forbidden):
        set_role(db, instructor, "student", by=student)
    with pytest.raises(Invalid, match="at least one instructor"):
        set_role(db, instructor, "student", by=instructor)
    # Adding the last instructor again as a student (`/setup member`) is a demotion too.
    with pytest.raises(Invalid, match="at least one instructor"):
        add_member(db, cohort, instructor.discord_id, role="student", by=instructor)
    assert instructor.role == "instructor"
    set_role(db, student, "instructor", by=instructor)
    set_role(db, instructor, "student", by=student)
    assert [i.id for i in instructors(db, cohort.id)] == [student.id]


def test_hardware_and_model_files(db: Session, student: m.Member) -> None:
    set_hardware(db, student, chip="m4 pro")
    assert student.chip == "M4 Pro" and student.bandwidth_gb_s is None
    set_hardware(db, student, bandwidth_gb_s="273 GB/s")
    assert student.chip is None and student.bandwidth_gb_s == 273
    with pytest.raises(Invalid, match="bandwidth table"):
        set_hardware(db, student, chip="Z80")
    with pytest.raises(Invalid, match="one way"):
        set_hardware(db, student)
    row = set_server_model(db, student, "MLX", "Llama-3.1-8B-4bit", model_bytes="4.5 GB")
    assert row.server == "mlx" and row.model_bytes == 4_500_000_000
    with pytest.raises(Invalid, match="size unit"):
        set_server_model(db, student, "mlx", "x", model_bytes="4.5 G")


def _fill(db: Session, student: m.Member, other: m.Member) -> None:
    sched = make_scheduler(fuzz=False)
    rate_card(db, student, "d02.card.slot-trap", "good", NOW, scheduler=sched)
    mine = record_spoken_answer(
        db, student, "d02.prompt.is-ollama-enough", duration_s=17.5, self_rating=4
    )
    theirs = record_spoken_answer(
        db, other, "d02.prompt.is-ollama-enough", duration_s=25, self_rating=2
    )
    rate_spoken_answer(db, other, mine.id, 5, note="clear")
    rate_spoken_answer(db, student, theirs.id, 3)
    record_entered(db, student, "ollama", "44.6")
    job = create_job(db, student, "mlx", "day2")
    record_measured(
        db,
        job,
        {
            "server": "mlx",
            "model": "m",
            "preset": "day2",
            "concurrency": "1",
            "writing_tps_p50": "60",
        },
    )
    set_server_model(db, student, "mlx", "m", model_bytes="4.5GB")
    _fill_fleet(db, student, other)


def _fill_fleet(db: Session, student: m.Member, other: m.Member) -> None:
    """A paired machine with a finished job (chart and outbox row), an unused pairing code,
    and a job `other` (an instructor the student allowed) asked for on the student's machine."""
    from felab_core.jobs.ingest import ingest_event
    from felab_core.jobs.keys import new_private_key, public_key_text, sign
    from felab_core.jobs.messages import event
    from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
    from felab_core.jobs.queueing import queue_bench_job

    key = new_private_key()
    worker = redeem_pair_code(db, issue_pair_code(db, student, "mac"), public_key_text(key))
    issue_pair_code(db, student, "spare")
    job = queue_bench_job(db, student, worker, "mlx", "quick", now=NOW).job
    body = job_body(at=NOW, writing_tps_p50="50")  # what a worker sends
    ev = event(  # sent when the run ended, minutes after the job was made
        worker.id, "result", at=ARRIVED.timestamp(), job_id=job.id, attempt=job.attempt, body=body
    )
    assert ingest_event(db, sign(ev, key), now=ARRIVED).accepted
    worker.allow_instructors = True
    queue_bench_job(db, other, worker, "mlx", "quick")


def test_export_holds_everything_about_the_member(
    db: Session, cohort: m.Cohort, student: m.Member, instructor: m.Member, day2: None
) -> None:
    _fill(db, student, instructor)
    data = export_member(db, student.id)
    json.dumps(data)  # JSON-ready as it is
    assert data["member"]["discord_id"] == "1001"
    assert len(data["reviews"]) == 1 and data["reviews"][0]["card_key"] == "d02.card.slot-trap"
    assert len(data["card_states"]) == 1
    assert data["spoken_answers"][0]["self_rating"] == 4
    assert data["ratings_received"][0]["rating"] == 5
    assert "rater_id" not in data["ratings_received"][0]  # who rated stays theirs
    assert data["ratings_given"][0]["rating"] == 3
    assert {n["source"] for n in data["numbers"]} == {"entered", "measured"}
    assert len(data["bench_jobs"]) == 3 and len(data["bench_results"]) == 2
    assert data["servers"][0]["model"] == "m"
    ran = next(j for j in data["bench_jobs"] if j["status"] == "done")
    assert base64.b64decode(ran["chart_png"]["base64"]).startswith(b"\x89PNG")
    assert [o["job_id"] for o in data["job_outbox"]] == [ran["id"]]
    assert [w["name"] for w in data["workers"]] == ["mac"]
    assert sorted(c["worker_name"] for c in data["pair_codes"]) == ["mac", "spare"]
    assert all("code_hash" not in c for c in data["pair_codes"])
    assert data["bench_jobs_requested"] == []


def test_export_and_delete_of_who_asked_for_a_job_on_another_machine(
    db: Session, cohort: m.Cohort, student: m.Member, instructor: m.Member, day2: None
) -> None:
    _fill(db, student, instructor)
    data = export_member(db, instructor.id)
    json.dumps(data)
    (asked,) = data["bench_jobs_requested"]
    assert asked["member_id"] == student.id and data["bench_jobs"] == []
    # The cohort's last instructor cannot leave it without one; with a second, they may.
    with pytest.raises(Invalid, match="keeps at least one instructor"):
        delete_member(db, instructor.id, confirm=instructor.discord_id)
    add_member(db, cohort, "3004", role="instructor", by=instructor)
    counts = delete_member(db, instructor.id, confirm=instructor.discord_id)
    assert counts["bench_jobs_requested"] == 1 and counts["bench_jobs"] == 0
    job = db.get(m.BenchJob, asked["id"])
    assert job is not None and job.requested_by_id is None  # still the student's job


def test_delete_removes_everything_and_nothing_else(
    db: Session, cohort: m.Cohort, student: m.Member, instructor: m.Member, day2: None
) -> None:
    _fill(db, student, instructor)
    with pytest.raises(Invalid, match="confirm"):
        delete_member(db, student.id, confirm="")
    other = add_member(db, cohort, "3003")
    with pytest.raises(Forbidden):
        delete_member(db, student.id, by=other, confirm="1001")
    sid = student.id
    counts = delete_member(db, sid, by=instructor, confirm="1001")
    assert counts["reviews"] == 1 and counts["peer_ratings"] == 1 and counts["bench_jobs"] == 3
    assert counts["workers"] == 1 and counts["pair_codes"] == 2 and counts["job_outbox"] == 1

    def left(model: type, column: object) -> int:
        return db.scalar(select(func.count()).select_from(model).where(column == sid)) or 0

    assert left(m.Member, m.Member.id) == 0
    for model, col in [
        (m.Review, m.Review.member_id),
        (m.CardState, m.CardState.member_id),
        (m.SpokenAnswer, m.SpokenAnswer.member_id),
        (m.PeerRating, m.PeerRating.rater_id),
        (m.Number, m.Number.member_id),
        (m.BenchJob, m.BenchJob.member_id),
        (m.MemberServer, m.MemberServer.member_id),
        (m.Worker, m.Worker.member_id),
        (m.PairCode, m.PairCode.member_id),
    ]:
        assert left(model, col) == 0, model
    # The instructor's own answer survives; only the rating the deleted member gave it went.
    assert db.scalar(select(func.count(m.SpokenAnswer.id))) == 1
    assert db.scalar(select(func.count(m.PeerRating.id))) == 0
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0
    assert db.scalar(select(func.count(m.JobOutbox.id))) == 0


def test_export_masks_secrets_in_rows_stored_before_they_were_refused(
    db: Session, student: m.Member
) -> None:
    """An older felab stored what it now refuses at the door (a key in a note, a password in a
    URL); the export, a file the member may share, masks them."""
    db.add(m.MemberServer(member_id=student.id, server="vllm", model="https://bob:hunter2@hf.co/x"))
    db.add(
        m.Number(
            member_id=student.id,
            server="vllm",
            metric="writing_tps",
            value=42.0,
            unit="tokens/s",
            source="entered",
            model="sk-abcdefghijklmnop1234",
            verdict_note="server at https://alice:S3cretPw@gpu.lab:8000/v1 said ok",
        )
    )
    db.flush()
    text = json.dumps(export_member(db, student.id))
    assert "hunter2" not in text and "S3cretPw" not in text and "sk-abcdefgh" not in text
    (number,) = export_member(db, student.id)["numbers"]
    assert number["model"] == "***"
    assert number["verdict_note"] == "server at https://alice:***@gpu.lab:8000/v1 said ok"
    assert export_member(db, student.id)["servers"][0]["model"] == "https://bob:***@hf.co/x"
