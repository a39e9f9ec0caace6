"""Twentieth sweep (a2) A2-7: one run's row copied 50 times, its start moved 1 ms each, had
been stored as 50 measured runs. `felab bench` times one target's runs one after another, so
two starts on one host and target are at least the earlier one's runs apart."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.numbers.importing import import_results
from tests.numbers.test_row_rates import SWEEP_ROW

_START = datetime.fromisoformat(SWEEP_ROW["timestamp"])


def _at(seconds: float, **cells: str) -> dict[str, str]:
    when = (_START + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
    return {**SWEEP_ROW, "timestamp": when, **cells}


def test_a_run_copied_with_its_start_moved_is_refused(db: Session, student: m.Member) -> None:
    copies = [_at(i / 1000) for i in range(50)]
    with pytest.raises(Invalid, match=re.escape("49 row(s) cannot be imported")) as refused:
        import_results(db, student, copies)
    assert re.search(
        r"line 3: this run \(timestamp 2026-12-05T22:56:43.194\+00:00, host vm, target custom, "
        r"concurrency 1\) begins 0.001 s after the run that is on line 2 \(.*\), which lasted "
        r"about 1.746 s on the same host and target \(ok / request_tps\): one felab bench on "
        r"one target times its runs one after another",
        str(refused.value),
    )
    with pytest.raises(Invalid, match=r"line 3: this run .* begins 1 s after the run that is"):
        import_results(db, student, [_at(0), _at(1)])  # a second apart: the run took 1.7 s
    assert db.scalar(select(func.count(m.Number.id))) == 0


def test_a_copy_placed_before_a_stored_run_is_refused(db: Session, student: m.Member) -> None:
    import_results(db, student, [_at(0)])
    with pytest.raises(Invalid, match=r"lasted about 1.746 s \(ok / request_tps\), but the run "):
        import_results(db, student, [_at(-1)])
    assert db.scalar(select(func.count(m.Number.id))) == 1


def test_runs_one_after_another_and_a_sweeps_loads_pass(db: Session, student: m.Member) -> None:
    users = {"concurrency": "4", "writing_tps_p50": "", "tpot_p50_s": "", "tpot_p95_s": ""}
    sweep = [_at(0), _at(0, **users, ttft_p50_s="0.0058")]  # each load its own figures
    rows = [
        *sweep,
        _at(3.5, ttft_p50_s="0.00565311"),  # after the sweep's two runs of 1.746 s
        _at(5.3, target="other", ttft_p50_s="0.0057"),  # another target, while that one ran
        _at(5.3, ttft_p50_s="0.00565412"),  # (each rerun measures its own figures)
        _at(1.0, host="laptop", ttft_p50_s="0.0059"),  # another machine
    ]
    report = import_results(db, student, rows)
    assert [r.outcome for r in report.rows] == [
        "recorded", "result only", "recorded", "recorded", "recorded", "recorded"
    ]  # fmt: skip
    with pytest.raises(Invalid, match=r"begins 2 s after the run that was already imported"):
        import_results(db, student, [_at(2.0, concurrency="4")])  # inside the sweep
