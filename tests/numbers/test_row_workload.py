"""Eighteenth sweep (a2) H5, H6, H8, H9, L7, L9: rows `felab numbers import` had stored that no
`felab bench` run writes: one run again under a cut timestamp or a rate of 0, throughputs of 0
beside answered requests, knobs its preset does not have, one start under two servers."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.numbers.importing import import_results
from felab_core.numbers.row_checks import check_result_row, row_counts
from felab_core.numbers.row_workload import check_preset_knobs
from tests.numbers.test_row_checks import BENCH_ROW, _changed


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ({"rate": "0", "concurrency": "0"}, "rate holds '0': felab bench takes --rate from 0.01"),
        ({"rate": "1e-300"}, "rate holds '1e-300': felab bench takes --rate from 0.01"),
        ({"rate": "0.001"}, "rate holds '0.001'"),
        ({"rate": "5", "burstiness": "0.001"}, "takes --burstiness from 0.01"),
        ({"ttft_p50_s": "1e-320"}, "ttft_p50_s 9.99989e-321: no request of felab's is timed"),
        ({"e2e_p50_s": "1e-9", "ttft_p50_s": "1e-9", "ttft_p95_s": "1e-9"}, "under 1e-06 s"),
        ({"request_tps": "0"}, "request_tps 0 beside 8 answered request(s)"),
        ({"output_tps": "0"}, "output_tps 0 beside a writing speed"),
        ({"server_tps_p50": "0"}, "server_tps_p50 0: felab keeps no server's speed of 0"),
        ({"target": " "}, "the result row's target is empty"),
        ({"token_source": "eval_count"}, "token_source eval_count beside api openai-chat"),
        (
            {"prompt_tokens": "10", "prompt_tokens_server": "100000"},
            "prompt_tokens_server 100000 beside prompt_tokens 10: such a prompt is counted",
        ),
        (  # A2-12: felab's own prompt when prompt_tokens is blank
            {"prompt_tokens_server": "999999999"},
            "prompt_tokens_server 1e+09 beside prompt_tokens blank (felab's own prompt of 211 "
            "bytes): such a prompt is counted as at most about 8,403 tokens by any server",
        ),
    ],
)
def test_a_row_bench_cannot_write_is_refused(cells: dict[str, str], said: str) -> None:
    with pytest.raises(Invalid, match=re.escape(said)):
        check_result_row(_changed(**cells))


@pytest.mark.parametrize(
    "cells",
    [
        {"rate": "0.01", "burstiness": "0.01", "concurrency": "0", "preset": "day2+custom"},
        {"itl_p50_s": "0"},  # chunks read at once: a gap of no time
        {"api": "ollama", "token_source": "eval_count"},
        {"api": "ollama", "token_source": "usage"},  # the sample CSV's, kept
        {"prompt_tokens": "10", "prompt_tokens_server": "4000", "preset": "day2+custom"},
        {"prompt_tokens_server": "4000"},  # felab's own prompt, under a long template
        {"preset": "trace:day.jsonl", "prompt_tokens_server": "100000"},  # the trace's lengths
        {  # a history resent
            "preset": "sessions 8x4",
            **{"requests": "32", "ok": "32", "prompt_tokens_server": "100000"},
        },
    ],
)
def test_what_bench_writes_at_its_bounds_passes(cells: dict[str, str]) -> None:
    row = _changed(**cells)
    check_result_row(row)
    check_preset_knobs(row, row_counts(row))


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ({"max_tokens": "32"}, "max_tokens 32 under preset day2, which runs max_tokens 256"),
        ({"requests": "500", "ok": "500"}, "requests 500 under preset day2, which runs requests 8"),
        (
            {"preset": "quick", "seed": "1", "max_tokens": "32"},
            "requests 8 under preset quick, which runs requests 3",
        ),
        (
            {
                **{"preset": "prefix", "seed": "4", "max_tokens": "64", "requests": "32"},
                **{"ok": "32", "prompt_tokens": "1280", "shared_prefix_tokens": "1024"},
            },
            "concurrency 1 under preset prefix, which runs concurrency 4",
        ),
        ({"prompt_tokens": "100"}, "prompt_tokens 100 under preset day2, which runs "),
        ({"concurrency": "4"}, "concurrency 4 under preset day2, which runs concurrency 1"),
        (
            {"preset": "sweep", "seed": "3", "max_tokens": "128", "prompt_tokens": "256"},
            "requests 8 under preset sweep",
        ),
        (
            {"rate": "2", "concurrency": "1"},
            "rate 2 under preset day2, which runs rate blank (felab presets): a run changed by a "
            "flag is written day2+custom",
        ),
        (
            {"preset": "sessions 8x4"},
            "requests 8 under preset sessions 8x4: 8 conversation(s) of 4 turns send 32 "
            "requests (none failed)",
        ),
        (
            {"preset": "sessions 2x4", "requests": "9", "ok": "9"},
            "2 conversation(s) of 4 turns send 8 requests",
        ),
        (
            {"preset": "sessions 8x4", "requests": "7", "ok": "1", "failed": "6"},
            "send 8 to 32 requests (each sends its first turn)",
        ),
    ],
)
def test_a_row_that_is_not_the_run_its_preset_makes_is_refused(
    cells: dict[str, str], said: str
) -> None:
    row = _changed(**cells)
    with pytest.raises(Invalid, match=re.escape(said)):
        check_preset_knobs(row, row_counts(row))


def test_the_preset_is_checked_on_import_and_a_sessions_run_with_failures_passes(
    db: Session, student: m.Member
) -> None:
    with pytest.raises(Invalid, match=r"line 2: max_tokens 32 under preset day2"):
        import_results(db, student, [_changed(max_tokens="32")])
    ended = _changed(preset="sessions 8x4", requests="20", ok="18", failed="2", ttft_p50_s="0.22")
    report = import_results(db, student, [ended, _changed(timestamp="2026-03-03T11:00:00+00:00")])
    assert [r.outcome for r in report.rows] == ["recorded", "recorded"]


@pytest.mark.parametrize(
    "stamp",
    ["2026-03-03T10:00:00+00:00", "2026-03-03T11:00:00+01:00", "2026-03-03T10:00:00.000Z"],
)
def test_a_run_with_its_milliseconds_cut_is_the_run_already_imported(
    db: Session, student: m.Member, stamp: str
) -> None:
    """H5: the key compares the start to the second; a cut time read as another run."""
    first = _changed(timestamp="2026-03-03T10:00:00.152+00:00")
    import_results(db, student, [first])
    if stamp.endswith(".000Z"):  # its own milliseconds, other than .152: another start, but
        # one that runs 51 s into the run begun 0.152 s after it on the same target (A2-7)
        with pytest.raises(Invalid, match=r"lasted about 50.96 s \(ok / request_tps\), but"):
            import_results(db, student, [_changed(timestamp=stamp)])
        return
    report = import_results(db, student, [_changed(timestamp=stamp)])
    assert [r.outcome for r in report.rows] == ["already imported"]
    edited = _changed(timestamp=stamp, writing_tps_p50="41.7")
    with pytest.raises(Invalid, match="was already imported with other figures"):
        import_results(db, student, [edited])
    assert db.scalar(select(func.count(m.Number.id))) == 1


def test_one_start_under_two_servers_or_presets_is_refused(db: Session, student: m.Member) -> None:
    """H9: one start on one target times one server, one model and one preset."""
    ollama = _changed(server="ollama", concurrency="1", ok="7", failed="1")
    custom = _changed(preset="day2+custom", ok="7", failed="1")
    for other, said in (
        (ollama, "line 3: this run (timestamp 2026-03-03T10:00:00+00:00, host studio-mbp, "),
        (custom, "is on line 2 as llamacpp llama-3.1-8b-q4.gguf under preset day2: one felab"),
    ):
        with pytest.raises(Invalid, match=re.escape(said)):
            import_results(db, student, [BENCH_ROW, other])
    import_results(db, student, [BENCH_ROW])
    with pytest.raises(Invalid, match="was already imported as llamacpp"):
        import_results(db, student, [{**ollama, "timestamp": "2026-03-03T10:00:00.5+00:00"}])
    other_target = {**ollama, "target": "ollama", "ttft_p50_s": "0.22"}  # two targets started
    # together: two runs, each timing its own requests
    assert [r.outcome for r in import_results(db, student, [other_target]).rows] == ["recorded"]
