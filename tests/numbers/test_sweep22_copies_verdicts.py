"""Twenty-second sweep (B1, B12, B6): a run copied with its throughputs or host edited, another
member's file imported unchanged, and a typed speed with no speed limit to hold it to had all
been stored and ranked."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.numbers.importing import import_results
from felab_core.numbers.recording import record_entered
from felab_core.numbers.verdict import rejudge_waiting, rejudged_text
from felab_core.people.members import add_member, set_hardware, set_server_model
from felab_core.reports.leaderboard import speed_boards
from tests.numbers.test_row_rates import SWEEP_ROW

_START = datetime.fromisoformat(SWEEP_ROW["timestamp"])
_FAILED = {"ok": "0", "failed": "10", "request_tps": "0", "output_tps": "0"} | dict.fromkeys(
    (
        "ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s", "itl_p50_s", "itl_p95_s",
        "writing_tps_p50", "e2e_p50_s", "e2e_p95_s", "token_source", "prompt_tokens_server",
    ),
    "",
)  # fmt: skip


def _at(seconds: float, **cells: str) -> dict[str, str]:
    when = (_START + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
    return {**SWEEP_ROW, "timestamp": when, **cells}


def _numbers(db: Session) -> int:
    return db.scalar(select(func.count(m.Number.id))) or 0


@pytest.mark.parametrize(
    "edit",
    [
        {"output_tps": "183.253"},  # one digit of a throughput (B1)
        {"request_tps": "5.72664"},
        {"host": "vm2"},  # the machine renamed
        {"host": "vm2", "target": "other", "output_tps": "183.251"},
    ],
)
def test_a_copy_with_its_throughputs_or_host_edited_is_refused(
    db: Session, student: m.Member, edit: dict[str, str]
) -> None:
    with pytest.raises(Invalid, match=r"line 3: .* measured every figure the run that is on l"):
        import_results(db, student, [_at(0), _at(-86_400, **edit)])
    import_results(db, student, [_at(0)])
    with pytest.raises(Invalid, match=r"line 2: .* measured every figure the run that was alr"):
        import_results(db, student, [_at(-86_400, **edit)])
    assert _numbers(db) == 1


def test_another_members_file_imported_unchanged_is_refused(
    db: Session, student: m.Member, cohort: m.Cohort
) -> None:
    bob = add_member(db, cohort, "2002", display_name="Bob")
    rows = [_at(0), _at(3600, **_FAILED)]
    assert [r.outcome for r in import_results(db, student, rows).rows] == [
        "recorded",
        "result only",
    ]
    for copied in (rows[:1], [_at(-86_400, host="bobs-mac", output_tps="183.253")]):
        with pytest.raises(Invalid, match="a run another member already imported did") as said:
            import_results(db, bob, copied)
        assert "Ada" not in str(said.value) and "1001" not in str(said.value)
    assert _numbers(db) == 1
    # Runs that all failed measure nothing: alike for two members honestly; the member's own
    # file again is "already imported", as before.
    assert [r.outcome for r in import_results(db, bob, [_at(7200, **_FAILED)]).rows] == [
        "result only"
    ]
    assert {r.outcome for r in import_results(db, student, rows).rows} == {"already imported"}
    # Bob's own run, its own figures, is his.
    own = import_results(db, bob, [_at(-86_400, host="bobs-mac", ttft_p50_s="0.0056531")])
    assert [r.outcome for r in own.rows] == ["recorded"]


@pytest.mark.parametrize("machine", ["none", "no model size", "another model"])
def test_a_typed_speed_with_no_limit_waits_unverified_off_the_boards(
    db: Session, student: m.Member, machine: str
) -> None:
    if machine != "none":
        set_hardware(db, student, chip="M4 Pro")  # 273 GB/s
    if machine == "another model":
        set_server_model(db, student, "mlx", "m", model_bytes="4.5GB")
    out = record_entered(db, student, "ollama", "9000")
    assert out.number.verdict == "unverified"
    assert (out.number.verdict_note or "").startswith("felab does not know ")
    assert speed_boards(db, student.cohort_id, "ollama", source="entered") == []
    # Once the limit can be computed, the figure is judged: 9,000 tok/s is past it.
    set_hardware(db, student, chip="M4 Pro")
    set_server_model(db, student, "ollama", "m", model_bytes="4.5GB")
    judged = rejudge_waiting(db, student)
    assert [n.verdict for n in judged] == ["flagged"]
    assert rejudged_text(judged).startswith("1 figure that waited for the speed limit checked")
    typed = record_entered(db, student, "ollama", "40")
    assert typed.number.verdict == "ok"
    boards = speed_boards(db, student.cohort_id, "ollama", source="entered")
    assert [r.value for b in boards for r in b.rows] == [40.0]
