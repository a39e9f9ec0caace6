"""Which measured speeds may be ranked (felab_core.numbers.verdict), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid
from felab_core.numbers.verdict import (
    against_record,
    approve,
    judge,
    rejudge_waiting,
    rejudged_text,
)
from felab_core.people.members import set_hardware, set_server_model


def _record(speeds: list[float], *, tokens: int = 16, e2e: float = 1.0) -> dict[str, object]:
    return {"runs": [{"concurrency": 1, "requests": [
        {"index": i, "ok": True, "writing_tps": v, "output_tokens": tokens, "tpot_s": 1 / v,
         "ttft_s": 0.1, "e2e_s": e2e} for i, v in enumerate(speeds)]}]}  # fmt: skip


def test_figures_that_disagree_with_their_own_records() -> None:
    assert against_record(40.0, 3, _record([39.0, 40.0, 41.0]), 1) == ""
    assert "records show 3" in against_record(40.0, 5, _record([39.0, 40.0, 41.0]), 1)
    assert "do not agree" in against_record(99_999.0, 3, _record([39.0, 40.0, 41.0]), 1)
    # 16 tokens at 1 ms each cannot come out of a 5 ms stream.
    wrong = against_record(1000.0, 1, _record([1000.0], e2e=0.105), 1)
    assert "impossible" in wrong
    assert "no request records" in against_record(40.0, 1, {"runs": []}, 1)


def test_the_speed_limit_decides_ok_flagged_or_unverified(
    db: Session, student: m.Member, instructor: m.Member
) -> None:
    verdict = judge(db, student, "mlx", 40.0, ok=3, record=_record([40.0] * 3))
    assert verdict.verdict == "unverified" and "set your chip" in verdict.note
    set_hardware(db, student, chip="M4 Pro")  # 273 GB/s
    set_server_model(db, student, "mlx", "m", model_bytes="4.5GB")  # about 61 tokens/s
    assert judge(db, student, "mlx", 40.0, ok=3, record=_record([40.0] * 3)).verdict == "ok"
    fast = judge(db, student, "mlx", 500.0, ok=3, record=_record([500.0] * 3))
    assert fast.verdict == "flagged" and "this machine can reach" in fast.note
    # A worker's run of another model than the one whose size is recorded waits for its size.
    other = judge(db, student, "mlx", 40.0, ok=3, record=_record([40.0] * 3), model="org/big")
    assert other.verdict == "unverified" and "the size recorded is m's" in other.note
    assert (
        judge(db, student, "mlx", 40.0, ok=3, record=_record([40.0] * 3), model="M").verdict == "ok"
    )


def test_only_an_instructor_of_the_cohort_approves_a_flagged_figure(
    db: Session, student: m.Member, instructor: m.Member
) -> None:
    number = m.Number(
        member_id=student.id, server="mlx", metric="writing_tps", value=500.0, unit="tokens/s",
        source="measured", verdict="flagged", verdict_note="fast",
    )  # fmt: skip
    db.add(number)
    db.flush()
    with pytest.raises(Forbidden):
        approve(db, student, number.id)
    assert approve(db, instructor, number.id).verdict == "approved"
    with pytest.raises(Invalid, match="nothing to approve"):
        approve(db, instructor, number.id)


def test_speeds_that_waited_for_the_limit_are_judged_once_it_is_known(
    db: Session, student: m.Member
) -> None:
    """Eleventh sweep (M4): figures measured before the chip and the model's size were set
    stayed "unverified" for good, never ranked and never flagged. A partial spread run stays
    unverified: its job says why."""

    def measured(value: float, *, partial: bool = False) -> m.Number:
        job = m.BenchJob(
            member_id=student.id, server="mlx", preset="day2", status="done",
            created_at=datetime.now(UTC), error="slice 2 of 2 was lost" if partial else None,
        )  # fmt: skip
        db.add(job)
        db.flush()
        waiting = judge(db, student, "mlx", value)
        number = m.Number(
            member_id=student.id, server="mlx", metric="writing_tps", value=value,
            unit="tokens/s", source="measured", job_id=job.id, verdict=waiting.verdict,
            verdict_note=waiting.note,
        )  # fmt: skip
        db.add(number)
        db.flush()
        return number

    sound, fast, partial = measured(40.0), measured(500.0), measured(41.0, partial=True)
    assert {n.verdict for n in (sound, fast, partial)} == {"unverified"}
    set_hardware(db, student, chip="M4 Pro")
    assert rejudge_waiting(db, student) == []  # the model's size is still missing, and said
    assert "size of the model file" in (sound.verdict_note or "")
    set_server_model(db, student, "mlx", "m", model_bytes="4.5GB")  # about 61 tokens/s
    changed = rejudge_waiting(db, student)
    assert changed == [sound, fast]
    assert (sound.verdict, fast.verdict, partial.verdict) == ("ok", "flagged", "unverified")
    assert "1 ok (ranked), 1 above the speed limit" in rejudged_text(changed)
    assert rejudge_waiting(db, student) == []  # judged once


def test_a_forged_speed_in_a_note_is_not_hundreds_of_digits() -> None:
    """Twentieth sweep (b) B5: a request record of 1e300 tok/s put 301 digits in the note."""
    from felab_core.numbers.verdict import _speed

    assert _speed(1e300) == "1e+300" and _speed(44.56) == "44.6" and _speed(12345.0) == "12,345.0"
