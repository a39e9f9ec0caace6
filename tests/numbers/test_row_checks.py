"""A results row felab could not have written is refused, naming its column; a real one passes.

Each refused row is a real `felab bench` row with one cell changed (the independent tester's
findings): every check is one line that says which column and why.
"""

from __future__ import annotations

import asyncio
import csv
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab.cli.bench_plan import plan_run
from felab_core.db import models as m
from felab_core.engine.apis import Api
from felab_core.engine.metrics import Stats
from felab_core.engine.results import CSV_COLUMNS, csv_row
from felab_core.engine.runner import bench_target
from felab_core.engine.workloads import MAX_TOKENS, PRESETS
from felab_core.errors import Invalid
from felab_core.jobs.run import result_rows
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.numbers.importing import import_results
from felab_core.numbers.recording import create_job, record_measured
from felab_core.numbers.row_checks import check_result_row, row_counts
from felab_core.numbers.row_workload import check_preset_knobs

#: A `felab bench` row as it lands in results/01-latency.csv (Day 2 on llama.cpp).
BENCH_ROW = {
    "timestamp": "2026-03-03T10:00:00+00:00",
    "host": "studio-mbp",
    "target": "llamacpp",
    "server": "llamacpp",
    "server_version": "b4500",
    "model": "llama-3.1-8b-q4.gguf",
    "api": "openai-chat",
    "preset": "day2",
    "concurrency": "1",
    "rate": "",
    "burstiness": "",
    "requests": "8",
    "ok": "8",
    "failed": "0",
    "prompt_tokens": "",
    "prompt_tokens_server": "41",
    "shared_prefix_tokens": "0",
    "max_tokens": "256",
    "warmup": "1",
    "seed": "2",
    "ttft_p50_s": "0.211",
    "ttft_p95_s": "0.245",
    "tpot_p50_s": "0.0241",
    "tpot_p95_s": "0.0262",
    "itl_p50_s": "0.024",
    "itl_p95_s": "0.031",
    "writing_tps_p50": "41.5",
    "e2e_p50_s": "6.35",
    "e2e_p95_s": "6.61",
    "output_tps": "40.2",
    "request_tps": "0.157",
    "goodput_rps": "",
    "token_source": "usage",
    "server_tps_p50": "",
    "cold_starts": "0",
    "felab_version": "0.1.0",
}


def _changed(**cells: str) -> dict[str, str]:
    return {**BENCH_ROW, **cells}


def test_the_sample_row_is_a_whole_bench_row_and_passes() -> None:
    assert tuple(BENCH_ROW) == CSV_COLUMNS
    checked = check_result_row(BENCH_ROW)
    assert (checked.server, checked.preset, checked.concurrency) == ("llamacpp", "day2", 1)
    assert checked.gives_writing_speed


# ----------------------------------------------------------------------------- real rows pass


def _plan(url: str, folder: Path, **flags: Any) -> Any:
    """What `felab bench --url URL FLAGS` plans: the workload with the preset name it writes."""
    args: dict[str, Any] = dict.fromkeys(
        (
            "targets", "api", "model", "kind", "concurrency", "rate", "burstiness", "requests",
            "duration", "warmup", "max_tokens", "prompt_tokens", "shared_prefix_tokens", "seed",
            "trace", "trace_speed", "trace_block_size", "sessions", "turns", "think_time", "slo",
        )
    )  # fmt: skip
    args.update(
        targets_file=folder / "targets.toml",
        url=url,
        preset="quick",
        tools=False,
        ramp_up=0.0,
        ramp_down=0.0,
        stop_when_saturated=False,
        timeout=60.0,
        stall_timeout=30.0,
        processes="1",
    )
    args.update(flags)
    chosen, workload, limits, _, _ = plan_run(**args)
    return chosen[0], workload, limits


Rows = tuple[list[dict[str, str]], list[dict[str, str]]]


async def _bench_rows(folder: Path) -> Rows:
    """Rows of real runs against a scripted server, in every preset form felab writes: a preset,
    one changed by flags (an open loop at a rate), sessions NxM, trace:NAME and a sweep; the
    rows `felab bench` writes, and the rows a worker sends for the same runs."""
    (folder / "targets.toml").write_text("")
    trace = folder / "day.jsonl"
    trace.write_text(
        "".join(
            f'{{"timestamp": {i * 20}, "input_length": 40, "output_length": 8}}\n' for i in range(4)
        )
    )
    rows: list[dict[str, str]] = []
    sent: list[dict[str, str]] = []
    async with ScriptedServer(Script(persona="llamacpp", itl_s=0.002)) as server:
        for flags in (
            {},
            {"rate": 50.0, "requests": 4, "burstiness": 2.0},
            {"preset": "chat", "sessions": 2, "turns": 2},
            {"trace": trace},
            {"preset": "sweep", "concurrency": "1,2", "requests": 4, "max_tokens": 16},
        ):
            target, workload, limits = _plan(server.base_url, folder, **flags)
            result = await bench_target(target, workload, limits=limits)
            rows += [csv_row(result, run) for run in result.runs]
            # A worker's rows, with the host the ingest fills in (the worker's name).
            sent += [{**row, "host": "studio-mbp"} for row in result_rows(result)]
    return rows, sent


@pytest.fixture(scope="module")
def bench_rows(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    return asyncio.run(_bench_rows(tmp_path_factory.mktemp("bench")))


def test_rows_felab_bench_and_its_worker_write_pass(bench_rows: Rows) -> None:
    written, sent = bench_rows
    presets = {row["preset"] for row in written}
    assert presets == {"quick", "quick+custom", "sessions 2x2", "trace:day.jsonl", "sweep+custom"}
    assert len(sent) == len(written)
    for row in (*written, *sent):
        checked = check_result_row(row)
        assert checked.preset == row["preset"]
        check_preset_knobs(row, row_counts(row))  # a whole run holds what its preset fixes


def test_real_rows_import(db: Session, student: m.Member, bench_rows: Rows) -> None:
    written, _ = bench_rows
    report = import_results(db, student, written)
    # Concurrency 1 gives a writing speed; an open loop, 2 sessions or 2 users are results only.
    assert {r.outcome for r in report.rows} == {"recorded", "result only"}, report.rows
    assert len(report.rows) == len(written)


# ----------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        # whole numbers: not negative, not absurd, not a decimal where felab writes none
        ({"max_tokens": "-5"}, "result column max_tokens holds '-5': it cannot be negative"),
        ({"cold_starts": "-3"}, "result column cold_starts holds '-3': it cannot be negative"),
        ({"requests": "1" * 30}, "result column requests holds '111111111111111111111111111111'"),
        ({"seed": "9" * 30}, "result column seed holds '999999999999999999999999999999', above"),
        ({"seed": str(2**63)}, "result column seed holds '9223372036854775808', above"),
        ({"ok": "1" * 5000}, "result column ok holds '1111"),
        ({"failed": "1e3"}, "result column failed holds '1e3', not a whole number"),
        ({"warmup": "1.5"}, "result column warmup holds '1.5', not a whole number"),
        ({"requests": "+8"}, "result column requests holds '+8', not a whole number"),
        ({"shared_prefix_tokens": "-1"}, "shared_prefix_tokens holds '-1': it cannot be negative"),
        ({"max_tokens": "0"}, "result column max_tokens holds 0: felab writes at least 1"),
        ({"prompt_tokens": "0"}, "result column prompt_tokens holds 0: felab writes at least 1"),
        ({"max_tokens": str(MAX_TOKENS + 1)}, f"max_tokens holds '{MAX_TOKENS + 1}', above"),
        ({"warmup": "5000000"}, "result column warmup holds '5000000', above 1,000,000"),
        ({"prompt_tokens_server": "-3.5"}, "prompt_tokens_server holds '-3.5': it cannot be neg"),
        ({"prompt_tokens_server": "1e12"}, "prompt_tokens_server holds '1e12', above"),
        ({"burstiness": "1e9"}, "result column burstiness holds '1e9', above 1,000"),
        ({"writing_tps_p50": "9_6.0"}, "result column writing_tps_p50 holds '9_6.0', not a number"),
        # counts that agree
        ({"requests": "9"}, "ok 8 + failed 0 is not requests 9"),
        ({"cold_starts": "9"}, "cold_starts 9 of 8 requests: more than were sent"),
        # a median above its 95th percentile
        ({"ttft_p50_s": "0.3"}, "ttft_p50_s 0.3 is above ttft_p95_s 0.245"),
        ({"tpot_p95_s": "0.02"}, "tpot_p50_s 0.0241 is above tpot_p95_s 0.02"),
        ({"itl_p50_s": "0.05"}, "itl_p50_s 0.05 is above itl_p95_s 0.031"),
        ({"e2e_p95_s": "1"}, "e2e_p50_s 6.35 is above e2e_p95_s 1"),
        # a request ends after its first token
        ({"e2e_p50_s": "0.1", "e2e_p95_s": "0.2"}, "e2e_p50_s 0.1 is below ttft_p50_s 0.2"),
        ({"target": "t" * 100_000}, "the result row's target is longer than 64 characters"),
        # a writing speed that is not 1/TPOT within the spread of its requests (H6, M3): its
        # TPOTs (median 0.0241 s, p95 0.0262 s) allow 41.4 to 41.9 tok/s, not an edited 46
        ({"writing_tps_p50": "46"}, "writing speed 46 tok/s disagrees with its time per token"),
        ({"writing_tps_p50": "43"}, "(1/TPOT = 41.49 tok/s; the spread of its requests allows"),
        ({"writing_tps_p50": "41"}, "writing speed 41 tok/s disagrees with its time per token"),
        ({"writing_tps_p50": "0"}, "writing speed 0 tok/s disagrees with its time per token"),
        ({"tpot_p50_s": "0"}, "writing speed 41.5 tok/s beside a time per token of 0 s"),
        # without its p95, held to what runs like day2's show (1.05)
        ({"tpot_p95_s": "", "writing_tps_p50": "46"}, "writing speed 46 tok/s disagrees"),
        # 0 users with no rate: no felab run (M2)
        ({"concurrency": "0"}, "concurrency 0 with no rate: felab writes 0 users only for"),
        ({"concurrency": " 0 ", "rate": " "}, "concurrency 0 with no rate"),
        # words felab writes
        ({"api": "grpc"}, "api 'grpc' is not one felab speaks: openai-chat, openai-completions"),
        ({"preset": "day99"}, "preset 'day99' is not a name felab writes"),
        ({"preset": "day2+custom+custom"}, "preset 'day2+custom+custom' is not a name felab"),
        ({"preset": "custom"}, "preset 'custom' is not a name felab writes"),
        ({"preset": "max-rate 5"}, "preset 'max-rate 5' is not a name felab writes"),
        ({"preset": "sessions 0x4"}, "preset 'sessions 0x4' is not a name felab writes"),
        ({"preset": "sessions 8x0"}, "preset 'sessions 8x0' is not a name felab writes"),
        ({"preset": "sessions 8x1001"}, "preset 'sessions 8x1001' is not a name felab writes"),
        ({"preset": "sessions 2000000x1"}, "preset 'sessions 2000000x1' is not a name felab"),
        ({"preset": "sessions 08x4"}, "preset 'sessions 08x4' is not a name felab writes"),
        ({"preset": "trace:"}, "preset 'trace:' is not a name felab writes"),
        ({"host": ""}, "the result row's host is empty"),
        ({"host": "   "}, "the result row's host is empty"),
        ({"timestamp": "2026-03-03T10:00:00"}, "timestamp '2026-03-03T10:00:00' has no time zone"),
        ({"timestamp": "2026-03-03 10:00"}, "timestamp '2026-03-03 10:00' has no time zone"),
        # a spreadsheet formula
        ({"host": "=1+1"}, "the result row's host begins with '=', a spreadsheet formula"),
        ({"model": '=HYPERLINK("http://x","m")'}, "the result row's model begins with '='"),
        ({"target": " =cmd|' /C calc'!A0"}, "the result row's target begins with '='"),
        ({"server_version": "=2+5"}, "the result row's server_version begins with '='"),
        ({"writing_tps_p50": "44.6" + "0" * 5_000}, "not a number"),  # 14th L13: stored
        # fourteenth sweep M4: other scripts' digits were read (felab writes 0-9 only)
        ({"writing_tps_p50": "\u0664\u0661.\u0665"}, "writing_tps_p50 holds"),
        ({"writing_tps_p50": "\uff14\uff11.\uff15"}, "not a number"),
        # thirteenth sweep: + - @ start a formula too; a host or label "+cmd" was stored
        ({"host": "+cmd|' /C calc'!A0"}, "the result row's host begins with '+', a spreadsheet"),
        ({"model": "-2+3"}, "the result row's model begins with '-'"),
        ({"server_version": "@SUM(1)"}, "the result row's server_version begins with '@'"),
        ({"target": "@SUM(1)"}, "the result row's target begins with '@'"),
        # control and invisible characters
        ({"model": "llama\u202efoog"}, "the result row's model holds invisible or control char"),
        ({"model": "lla\u200bma"}, "the result row's model holds invisible or control characters"),
        ({"host": "\ufeffmac"}, "the result row's host holds invisible or control characters"),
        ({"server_version": "b1\u2066"}, "server_version holds invisible or control characters"),
        ({"model": "\x1b[31mevil"}, "the result row's model holds invisible or control character"),
        # fifteenth sweep H14: what felab bench refuses to run, hand-edited rows held
        ({"shared_prefix_tokens": "100", "prompt_tokens": "10"}, "is not shorter than prompt"),
        ({"burstiness": "0"}, "burstiness holds '0': felab bench takes --burstiness from 0.01"),
        # sixteenth session (fifteenth sweep H14): a throughput no run can have
        ({"output_tps": "1e-300"}, "output_tps holds '1e-300', not 0 and below 1e-12 a second"),
        ({"request_tps": "1e-20"}, "request_tps holds '1e-20', not 0 and below 1e-12"),
        ({"goodput_rps": "5e-13"}, "goodput_rps holds '5e-13'"),
    ],
)
def test_a_row_no_felab_run_writes_is_refused_naming_its_column(
    cells: dict[str, str], reason: str
) -> None:
    with pytest.raises(Invalid) as refused:
        check_result_row(_changed(**cells))
    message = str(refused.value)
    assert reason in message and "\n" not in message and len(message) < 300, message


@pytest.mark.parametrize(
    "cells",
    [{"preset": name} for name in (*PRESETS, "prefix+custom", "sessions 8x4", "sessions 1x1000")]
    + [
        {"preset": "trace:mooncake.jsonl"},
        {"preset": "trace:my day (2).jsonl"},
        {  # a mean of over a million, as felab writes it
            **{"prompt_tokens_server": "1.23457e+06", "prompt_tokens": "100000"},
            "preset": "day2+custom",
        },
        {"prompt_tokens_server": "40.5", "prompt_tokens": "40", "shared_prefix_tokens": "8"},
        {"seed": str(2**63 - 1), "warmup": "10000", "max_tokens": str(MAX_TOKENS)},
        {"ttft_p50_s": "0.245"},  # a median equal to its 95th percentile: one request
        {"ttft_p50_s": "0.245001"},  # above by the last of six digits: a tie rounded apart
        {"rate": "2", "burstiness": "0.5", "concurrency": "0"},
        {"preset": "trace:day.jsonl", "concurrency": "0"},  # a replay: no rate, no cap
        {"writing_tps_p50": "41.85"},  # within what its TPOTs' spread allows (41.49 to 41.9)
        {"writing_tps_p50": "", "tpot_p50_s": "0.0241"},  # no writing speed: nothing to agree
        {"requests": "10", "ok": "8", "failed": "2", "cold_starts": "1"},
        {"output_tps": "1.2e-11", "request_tps": "1.2e-11"},  # one in the longest run
        {"model": "@cf/meta/llama-3.1-8b", "server_version": "0.5.7 (build 1; =ok)"},
        {"model": "Llama-3.1-8B-Instruct-4bit", "host": "Ada's MacBook Pro"},
        *({"api": api.value} for api in Api),
    ],
)
def test_what_felab_writes_still_passes(cells: dict[str, str]) -> None:
    check_result_row(_changed(**cells))


def test_a_workers_row_without_a_host_column_passes_and_one_with_a_blank_host_does_not(
    db: Session, student: m.Member
) -> None:
    """The ingest fills in a worker's name; a row given to record_measured with no host column
    (a job's own figures) is checked as before, a blank host is refused."""
    job = create_job(db, student, "llamacpp", "day2")
    bare = {k: v for k, v in BENCH_ROW.items() if k != "host"}
    assert record_measured(db, job, bare).writing_tps_p50 == pytest.approx(41.5)
    with pytest.raises(Invalid, match="host is empty"):
        record_measured(db, job, {**bare, "host": ""})


def test_import_names_the_line_and_column_and_stores_nothing(
    db: Session, student: m.Member
) -> None:
    rows = [BENCH_ROW, _changed(api="grpc"), _changed(timestamp="2026-03-04")]
    with pytest.raises(Invalid) as refused:
        import_results(db, student, rows)
    message = str(refused.value)
    assert "line 3: api 'grpc' is not one felab speaks" in message, message
    assert "line 4: timestamp '2026-03-04' has no time zone" in message, message
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0
    report = import_results(db, student, rows, skip_invalid=True)
    assert [r.outcome for r in report.rows] == ["recorded", "skipped", "skipped"]
    assert db.scalar(select(func.count(m.Number.id))) == 1


# ----------------------------------------------------------------------------- writing = 1/TPOT

SAMPLE_CSV = Path(__file__).parents[1] / "reports" / "fixtures" / "sample-latency.csv"


def test_the_sample_csvs_rows_pass_and_an_edited_speed_in_one_does_not() -> None:
    """H6: 50 or 46 tok/s beside TPOT 0.0239234 s (1/TPOT = 41.8) was stored; only 500 was not."""
    with SAMPLE_CSV.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8
    for row in rows:
        check_result_row(row)
    first = rows[0]
    assert (first["writing_tps_p50"], first["tpot_p50_s"]) == ("41.8", "0.0239234")
    for edited in ("50", "46", "42", "41.7"):
        with pytest.raises(Invalid, match=f"writing speed {edited} tok/s disagrees"):
            check_result_row({**first, "writing_tps_p50": edited})


@pytest.mark.parametrize("spread", [0.01, 0.03, 0.1, 0.3])
@pytest.mark.parametrize("requests", [2, 3, 4, 7, 8, 16, 32])
def test_honest_medians_pass_however_their_requests_spread(requests: int, spread: float) -> None:
    """What felab computes: each request's writing speed is 1/its TPOT, both medians through
    Stats.of (an even count averages the middle two) and written to 6 digits as the CSV has
    them. Every such row passes the writing speed's check, however far its requests spread."""
    rng = np.random.default_rng(requests * 1000 + int(spread * 100))
    sigma = float(np.sqrt(np.log(1 + spread**2)))
    for _ in range(200):
        tpots = 0.024 * rng.lognormal(0.0, sigma, requests)
        tpot = Stats.of(float(t) for t in tpots)
        speed = Stats.of(float(1 / t) for t in tpots)
        assert tpot is not None and speed is not None
        row = _changed(
            tpot_p50_s=f"{tpot.p50:.6g}",
            tpot_p95_s=f"{tpot.p95:.6g}",
            writing_tps_p50=f"{speed.p50:.6g}",
            itl_p50_s="",
            itl_p95_s="",
            # each request streams its 256 tokens at its TPOT (sweep 22 B10 holds E2E to it)
            e2e_p50_s=f"{0.3 + 256 * tpot.p50:.6g}",
            e2e_p95_s=f"{0.4 + 256 * tpot.p95:.6g}",
        )
        if speed.p50 * tpot.p50 <= 1.5:  # beyond: the middle two 3.7x apart, refused as ever
            check_result_row(row)


def test_an_edited_speed_or_users_is_refused_by_the_import_with_its_line(
    db: Session, student: m.Member
) -> None:
    rows = [
        BENCH_ROW,
        _changed(timestamp="2026-03-03T10:05:00+00:00", writing_tps_p50="0"),  # M3
        _changed(timestamp="2026-03-03T10:10:00+00:00", concurrency="0"),  # M2
        _changed(timestamp="2026-03-03T10:15:00+00:00", writing_tps_p50="46"),  # H6
    ]
    with pytest.raises(Invalid) as refused:
        import_results(db, student, rows)
    message = str(refused.value)
    assert "line 3: writing speed 0 tok/s disagrees with its time per token" in message
    assert "line 4: concurrency 0 with no rate" in message
    assert "line 5: writing speed 46 tok/s disagrees with its time per token" in message
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0
    report = import_results(db, student, rows, skip_invalid=True)
    assert [r.outcome for r in report.rows] == ["recorded", "skipped", "skipped", "skipped"]
    assert db.scalar(select(func.count(m.BenchResult.id))) == 1


# ----------------------------------------------------------------------------- one run, once


def _blank_from(column: str) -> dict[str, str]:
    """The row with its columns from `column` on left empty (cut short, then padded)."""
    cut = CSV_COLUMNS.index(column)
    return {c: (v if i < cut else "") for i, (c, v) in enumerate(BENCH_ROW.items())}


@pytest.mark.parametrize(
    "again",
    [
        _changed(writing_tps_p50="4.15e1"),
        _changed(writing_tps_p50=" 41.5 "),
        _changed(writing_tps_p50="41.50", tpot_p50_s="2.41e-2"),
        _blank_from("e2e_p50_s"),
        _blank_from("token_source"),
        _changed(timestamp="2026-03-03T11:00:00+01:00"),  # the same instant
        _changed(host="Studio-MBP", target="LLAMACPP", server="LlamaCpp"),
    ],
)
def test_a_run_imported_is_not_stored_again_however_its_row_is_written(
    db: Session, student: m.Member, again: dict[str, str]
) -> None:
    """H5: the same run was stored again (six times) whenever its row's text differed."""
    first = import_results(db, student, [BENCH_ROW])
    assert [r.outcome for r in first.rows] == ["recorded"]
    report = import_results(db, student, [again])
    assert [r.outcome for r in report.rows] == ["already imported"] and not report.new
    # ... nor twice from one file
    both = import_results(db, student, [again, BENCH_ROW, again])
    assert [r.outcome for r in both.rows] == ["already imported"] * 3
    assert db.scalar(select(func.count(m.BenchResult.id))) == 1
    assert db.scalar(select(func.count(m.Number.id))) == 1


def test_a_run_once_in_a_file_is_recorded_once(db: Session, student: m.Member) -> None:
    rows = [BENCH_ROW, _changed(writing_tps_p50="4.15e1"), _blank_from("e2e_p50_s")]
    report = import_results(db, student, rows)
    assert [r.outcome for r in report.rows] == ["recorded", "already imported", "already imported"]
    assert db.scalar(select(func.count(m.Number.id))) == 1


def test_a_run_imported_with_other_figures_is_refused_as_edited(
    db: Session, student: m.Member
) -> None:
    import_results(db, student, [BENCH_ROW])
    edited = _changed(writing_tps_p50="41.7")  # within its TPOTs' spread: only the run tells
    with pytest.raises(Invalid) as refused:
        import_results(db, student, [BENCH_ROW, edited])
    message = str(refused.value)
    assert (
        "line 3: this run (timestamp 2026-03-03T10:00:00+00:00, host studio-mbp, target "
        "llamacpp, concurrency 1) was already imported with other figures (writing_tps_p50 "
        "'41.5' there, '41.7' here): the row was edited" in message
    ), message
    assert "\n" not in message
    report = import_results(db, student, [BENCH_ROW, edited], skip_invalid=True)
    assert [r.outcome for r in report.rows] == ["already imported", "skipped"]
    assert "was already imported with other figures" in report.rows[1].reason
    assert db.scalar(select(func.count(m.Number.id))) == 1
    assert db.scalar(select(func.count(m.BenchResult.id))) == 1


def test_a_run_twice_in_one_file_with_other_figures_is_refused(
    db: Session, student: m.Member
) -> None:
    rows = [BENCH_ROW, _changed(ok="7", failed="1")]
    with pytest.raises(Invalid, match=r"line 3: this run \(.*\) is on line 2 with other figures "):
        import_results(db, student, rows)
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0


def test_two_runs_of_one_second_are_two_runs(db: Session, student: m.Member) -> None:
    """A sweep's steps share their start: each is kept; and two starts of one second (--repeat
    on a fast server) are told apart by their milliseconds."""
    start = "2026-03-03T10:00:00.152+00:00"
    fast = {  # two requests of 0.1 s, a run of 0.25 s: two starts fit in one second (A2-7)
        **{"preset": "day2+custom", "timestamp": start, "requests": "2", "ok": "2"},
        **{"max_tokens": "32", "ttft_p50_s": "0.011", "ttft_p95_s": "0.012"},
        **{"tpot_p50_s": "0.00241", "tpot_p95_s": "0.00262", "writing_tps_p50": "415"},
        **{"itl_p50_s": "0.0024", "itl_p95_s": "0.0031", "e2e_p50_s": "0.1", "e2e_p95_s": "0.11"},
        **{"output_tps": "250", "request_tps": "8"},
    }
    no_writing_speed = ("writing_tps_p50", "tpot_p50_s", "tpot_p95_s")
    rows = [
        _changed(**fast),
        _changed(  # each load times its own requests (alike to 6 digits: a copy)
            **{**fast, "concurrency": "4", **dict.fromkeys(no_writing_speed, "")}
            | {"ttft_p50_s": "0.0115"}
        ),
        _changed(  # a run of its own, with its own figures (a copy's are refused)
            **{**fast, "timestamp": start.replace(".152", ".907"), "ok": "1", "failed": "1"}
            | {"ttft_p50_s": "0.0111"}
        ),
    ]
    report = import_results(db, student, rows)
    assert [r.outcome for r in report.rows] == ["recorded", "result only", "recorded"]


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ({"request_tps": "1000"}, "request_tps 1000 at 1 user(s) one request at a time"),
        ({"output_tps": "100000"}, "output_tps 100000 beside request_tps"),
    ],
)
def test_throughputs_its_own_requests_contradict_are_refused(
    cells: dict[str, str], said: str
) -> None:
    """Seventeenth sweep (a2) H8: 1,000 req/s at one user taking 6 s a request, and 100,000
    tok/s beside 0.16 req/s of 256-token answers, had been stored."""
    row = _changed(e2e_p50_s="6.0", e2e_p95_s="6.5", request_tps="0.16", output_tps="7.0")
    with pytest.raises(Invalid, match=re.escape(said)):
        check_result_row({**row, **cells})


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ({"max_tokens": "1"}, "writing_tps_p50 beside max_tokens 1"),
        ({"server_tps_p50": "9999999"}, "felab keeps no server's figure past 100,000"),
        ({"cold_starts": "8"}, "cold_starts 8 of 8 answered, beside latency figures"),
        (
            {"tpot_p50_s": "100", "tpot_p95_s": "100", "writing_tps_p50": "0.01"},
            "tpot_p50_s 100 beside e2e_p95_s",
        ),
        ({"itl_p50_s": "100", "itl_p95_s": "100"}, "itl_p50_s 100 beside e2e_p95_s"),
        ({"ttft_p50_s": "0"}, "ttft_p50_s 0: every request takes time"),
        ({"shared_prefix_tokens": "100", "prompt_tokens": ""}, "shared_prefix_tokens without"),
        ({"burstiness": "5"}, "burstiness without a rate"),
        ({"prompt_tokens_server": "0.0001"}, "prompt_tokens_server 0.0001: a prompt is a token"),
    ],
)
def test_what_bench_never_writes_together_is_refused(cells: dict[str, str], said: str) -> None:
    """Seventeenth sweep (a) H6, H7, L12: each had been stored as a measured row."""
    with pytest.raises(Invalid, match=re.escape(said)):
        check_result_row(_changed(**cells))


def test_a_results_file_without_its_header_line_is_said_so(tmp_path: Path) -> None:
    """Seventeenth sweep (a) M11: a CSV with its header cut off was blamed on "a header that
    names , 0, 5 twice: remove the extra column"."""
    from felab_core.engine.results import UnreadableResults, read_table

    path = tmp_path / "cut.csv"
    path.write_text(",".join(BENCH_ROW.values()) + "\n")
    with pytest.raises(UnreadableResults, match=r"line 1 is a row .* the header line was cut off"):
        read_table(path)


@pytest.mark.parametrize(
    ("cells", "shown"),
    [
        ({"target": "http://bob:S3cretPw@10.0.0.5:8000"}, "http://bob:***@10.0.0.5:8000"),
        ({"model": "m-sk-abcdefghijklmnopqrstuvwxyz12"}, "m-***"),
        ({"host": "box OPENAI_API_KEY=sk-live-123456"}, "box OPENAI_API_KEY=***"),
    ],
)
def test_a_name_holding_a_password_or_key_is_refused(cells: dict[str, str], shown: str) -> None:
    """Twenty-second sweep (a2) A2-12: a row's target http://bob:S3cretPw@... was stored and
    shown as typed (felab masks every URL and name it writes, so it was typed in after)."""
    with pytest.raises(Invalid, match="holds a password or key") as refused:
        check_result_row(_changed(**cells))
    assert shown in str(refused.value) and "S3cretPw" not in str(refused.value)
    assert "abcdefghijklmnop" not in str(refused.value) and "live-123456" not in str(refused.value)


def test_a_name_felab_masked_itself_is_kept() -> None:
    check_result_row(_changed(target="http://bob:***@10.0.0.5:8000", model="secret-llama-7b"))
