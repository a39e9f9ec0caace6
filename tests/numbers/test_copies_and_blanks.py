"""Twentieth sweep (an independent tester acting as a dishonest cohort member): rows accepted
by `felab numbers import` that no `felab bench` run writes. A run copied with its start moved
back by its own length or a day; a blank request_tps (the start-moved and p95 checks off); a
server's prompt of 999,999,999 tokens under a trace or sessions preset; an open loop finishing
30 to 20,000 times its rate; output_tps 1.6 million beside no answered request."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.numbers.importing import import_results
from felab_core.numbers.row_checks import check_result_row
from tests.numbers.test_row_rates import SWEEP_ROW

_START = datetime.fromisoformat(SWEEP_ROW["timestamp"])


def _at(seconds: float, **cells: str) -> dict[str, str]:
    when = (_START + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
    return {**SWEEP_ROW, "timestamp": when, **cells}


# ----------------------------------------------------------------------------- 1: copies


@pytest.mark.parametrize(
    "moved",
    [-1.747, -3.5, -86_400.0, 7.0],  # back by the run's length (1.746 s), two, a day; later
)
def test_a_copy_with_its_start_moved_anywhere_is_refused(
    db: Session, student: m.Member, moved: float
) -> None:
    with pytest.raises(Invalid, match=r"line 3: this run \(.*\) measured every figure the run "):
        import_results(db, student, [_at(0), _at(moved)])
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0
    import_results(db, student, [_at(0)])  # a copy of a stored run, in a later file
    with pytest.raises(Invalid, match=r"line 2: .* the run that was already imported .* did, to"):
        import_results(db, student, [_at(moved, ttft_p50_s="5.65265e-3")])  # as written
    assert db.scalar(select(func.count(m.Number.id))) == 1


def test_reruns_a_file_again_and_failed_runs_are_not_copies(db: Session, student: m.Member) -> None:
    failed = {"ok": "0", "failed": "10", "request_tps": "0", "output_tps": "0"}
    failed |= dict.fromkeys(
        (
            "ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s", "itl_p50_s", "itl_p95_s",
            "writing_tps_p50", "e2e_p50_s", "e2e_p95_s", "token_source", "prompt_tokens_server",
        ),
        "",
    )  # fmt: skip
    rows = [
        _at(0),
        _at(-86_400, ttft_p50_s="0.00565266"),  # a rerun a day before: its own TTFT
        _at(3600, **failed),  # two runs that all failed measure nothing, alike
        _at(7200, **failed),
    ]
    report = import_results(db, student, rows)
    assert [r.outcome for r in report.rows] == [
        "recorded", "recorded", "result only", "result only"
    ]  # fmt: skip
    again = import_results(db, student, rows)  # the same file again: nothing new, no refusal
    assert {r.outcome for r in again.rows} == {"already imported"} and not again.new


# ----------------------------------------------------------------------------- 2: blanks


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ({"request_tps": ""}, "line 2: a writing speed with request_tps blank: felab bench"),
        ({"output_tps": " "}, "line 2: a writing speed with output_tps blank"),
        ({"failed": ""}, "line 2: a writing speed with failed blank"),
        (
            {"writing_tps_p50": "", "tpot_p50_s": "", "tpot_p95_s": "", "request_tps": ""},
            "line 2: request_tps blank: felab bench writes it in every row it times",
        ),
        (
            {"rate": "5", "concurrency": "0"},
            "line 2: burstiness blank: felab bench writes it in every row it times",
        ),
    ],
)
def test_a_column_bench_always_writes_left_blank_is_refused(
    db: Session, student: m.Member, cells: dict[str, str], said: str
) -> None:
    with pytest.raises(Invalid, match=re.escape(said)):
        import_results(db, student, [_at(0, **cells)])
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0


def test_a_row_without_a_preset_is_still_skipped_with_its_reason(
    db: Session, student: m.Member
) -> None:
    report = import_results(db, student, [_at(0, preset="", request_tps="", output_tps="")])
    assert [r.outcome for r in report.rows] == ["skipped"]
    assert "no preset named" in report.rows[0].reason


def test_a_named_presets_knob_left_blank_is_refused(db: Session, student: m.Member) -> None:
    row = _at(0, preset="day2", max_tokens="", requests="8", ok="8", prompt_tokens_server="41")
    with pytest.raises(Invalid, match=r"max_tokens blank under preset day2, which runs max_tok"):
        import_results(db, student, [row])


# ----------------------------------------------------------------------------- 3: prompts


@pytest.mark.parametrize(
    ("preset", "said"),
    [
        ("trace:day.jsonl", "beside preset trace:day.jsonl (a trace's line asks at most 262,144"),
        ("sessions 2x5", "beside preset sessions 2x5 (each turn resends the conversation so far)"),
    ],
)
def test_a_servers_prompt_past_any_is_refused_under_a_trace_or_sessions(
    preset: str, said: str
) -> None:
    with pytest.raises(Invalid, match=re.escape(f"prompt_tokens_server 1e+09 {said}")):
        check_result_row(_at(0, preset=preset, prompt_tokens_server="999999999"))
    check_result_row(_at(0, preset=preset, prompt_tokens_server="9000"))


# ----------------------------------------------------------------------------- 4: open loop


@pytest.mark.parametrize(
    ("cells", "said"),
    [  # 30 times its rate, 570 times, and 20,000 times over a million requests
        ({"rate": "0.19"}, "request_tps 5.72663 beside rate 0.19 (burstiness 1): 10 requests"),
        ({"rate": "0.01"}, "request_tps 5.72663 beside rate 0.01 (burstiness 1)"),
        (
            {"rate": "1", "request_tps": "20000", "requests": "1000000", "ok": "1000000"},
            "request_tps 20000 beside rate 1 (burstiness 1): 1,000,000 requests sent at that "
            "rate span about 1e+06 s, and all in 50 s (ok / request_tps) happens less than once",
        ),
    ],
)
def test_an_open_loop_far_above_its_rate_is_refused(cells: dict[str, str], said: str) -> None:
    row = _at(0, concurrency="0", burstiness="1", **cells)
    with pytest.raises(Invalid, match=re.escape(said)):
        check_result_row(row)


@pytest.mark.parametrize(
    "cells",
    [
        {"rate": "5", "burstiness": "1"},  # near its rate
        {"rate": "0.5", "burstiness": "1"},  # 10 requests at 0.5/s in 1.7 s: rare, not absurd
        {"rate": "0.19", "burstiness": "0.01"},  # bursty: all ten may come at once
        {"rate": "0.01", "burstiness": "1", "requests": "1", "ok": "1"},  # one request: no span
    ],
)
def test_an_open_loop_near_its_rate_or_tiny_or_bursty_passes(cells: dict[str, str]) -> None:
    cells = {"concurrency": "0", **cells}
    if cells.get("requests") == "1":
        cells |= {"request_tps": "0.57", "output_tps": "18.3"}
    check_result_row(_at(0, **cells))


# ----------------------------------------------------------------------------- 5: tokens


def test_output_tps_beside_no_answered_request_is_refused() -> None:
    failed = {"ok": "0", "failed": "10", "request_tps": "0", "output_tps": "1600000"}
    failed |= dict.fromkeys(
        ("ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s", "itl_p50_s", "itl_p95_s"), ""
    )
    failed |= dict.fromkeys(("writing_tps_p50", "e2e_p50_s", "e2e_p95_s"), "")
    with pytest.raises(Invalid, match=r"output_tps 1.6e\+06 beside ok 0: no request was answered"):
        check_result_row(_at(0, **failed))
    check_result_row(_at(0, **(failed | {"output_tps": "0"})))


def test_output_tps_is_held_to_tokens_over_time_by_one_function() -> None:
    from felab_core.numbers.row_rates import check_output_tps  # new: imported here

    check_output_tps(100.0, 1000, 10.0, "x")
    with pytest.raises(Invalid, match=r"output_tps 101 beside x \(1,000 over 10 s is 100 a sec"):
        check_output_tps(101.0, 1000, 10.0, "x")
    with pytest.raises(Invalid, match=r"output_tps 5 beside no tokens; the row was edited"):
        check_output_tps(5.0, 0, None, "no tokens")
