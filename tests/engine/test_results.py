"""The CSV contract and the felab.bench/1 JSON contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from felab_core.engine.measure import TargetResult
from felab_core.engine.results import (
    CSV_COLUMNS,
    ResultsFileError,
    append_csv,
    check_destinations,
    csv_row,
    read_csv,
    write_json,
)
from felab_core.engine.runner import bench_target
from felab_core.engine.targets import DEFAULT_TARGETS, resolve_target
from felab_core.engine.workloads import PRESETS
from felab_core.lab.scripted_server import Script, ScriptedServer

STATS_KEYS = {"mean", "p50", "p90", "p95", "p99", "max"}


@pytest.fixture
async def result() -> TargetResult:
    async with ScriptedServer(Script(persona="llamacpp", itl_s=0.002)) as server:
        target = resolve_target("llamacpp", targets=DEFAULT_TARGETS, url=server.base_url)
        wl = PRESETS["quick"].workload
        return await bench_target(target, wl)


def test_csv_columns_are_the_published_list() -> None:
    # Appending is allowed; renaming or reordering breaks every reader of old files.
    assert CSV_COLUMNS[:8] == (
        "timestamp",
        "host",
        "target",
        "server",
        "server_version",
        "model",
        "api",
        "preset",
    )
    for needed in (
        "concurrency",
        "rate",
        "requests",
        "ok",
        "failed",
        "ttft_p50_s",
        "ttft_p95_s",
        "tpot_p50_s",
        "tpot_p95_s",
        "itl_p50_s",
        "itl_p95_s",
        "writing_tps_p50",
        "e2e_p50_s",
        "e2e_p95_s",
        "output_tps",
        "token_source",
        "prompt_tokens",
        "max_tokens",
        "warmup",
        "seed",
        "felab_version",
        "server_version",
    ):
        assert needed in CSV_COLUMNS


def test_csv_rows_append_under_one_header(tmp_path: Path, result: TargetResult) -> None:
    path = tmp_path / "results" / "01-latency.csv"
    row = csv_row(result, result.runs[0])
    append_csv(path, [row])
    append_csv(path, [row])
    rows = read_csv(path)
    assert len(rows) == 2
    assert rows[0]["preset"] == "quick"
    assert rows[0]["server"] == "llamacpp"
    assert float(rows[0]["writing_tps_p50"]) > 0
    assert rows[0]["token_source"] == "usage"
    assert path.read_text().count("timestamp,") == 1


def test_csv_with_other_columns_is_not_touched(tmp_path: Path, result: TargetResult) -> None:
    path = tmp_path / "r.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ResultsFileError, match="other columns"):
        append_csv(path, [csv_row(result, result.runs[0])])
    assert path.read_text() == "a,b\n1,2\n"


def test_a_last_row_without_a_line_end_gets_one_first(tmp_path: Path, result: TargetResult) -> None:
    """An editor may save the file without its final line end: the next row must start a line
    of its own, not be glued onto the last one (71 cells, both rows lost)."""
    path = tmp_path / "r.csv"
    row = csv_row(result, result.runs[0])
    append_csv(path, [row])
    path.write_bytes(path.read_bytes().rstrip(b"\r\n"))
    append_csv(path, [row])
    rows = read_csv(path)
    assert len(rows) == 2 and rows[1]["timestamp"] == rows[0]["timestamp"]


def test_a_last_row_cut_short_is_refused_before_a_run(tmp_path: Path, result: TargetResult) -> None:
    path = tmp_path / "r.csv"
    append_csv(path, [csv_row(result, result.runs[0])])
    cut = path.read_bytes()[:-40]
    path.write_bytes(cut)
    with pytest.raises(ResultsFileError, match="last line is cut short"):
        check_destinations(path, None)
    with pytest.raises(ResultsFileError, match="last line is cut short"):
        append_csv(path, [csv_row(result, result.runs[0])])
    assert path.read_bytes() == cut


def test_json_record_meets_the_contract(tmp_path: Path, result: TargetResult) -> None:
    path = tmp_path / "bench.json"
    write_json(path, result)
    record = json.loads(path.read_text())
    assert record["schema"] == "felab.bench/1"
    assert set(record["target"]) >= {"name", "url", "api", "model"}
    run = record["runs"][0]
    assert {"concurrency", "rate", "summary", "requests"} <= set(run)
    summary = run["summary"]
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s", "writing_tps"):
        assert set(summary[key]) == STATS_KEYS
    assert {"ok", "failed", "output_tps", "request_tps"} <= set(summary)
    req = run["requests"][0]
    assert {
        "ok",
        "error",
        "ttft_s",
        "e2e_s",
        "output_tokens",
        "token_source",
        "chunk_times_s",
    } <= set(req)
    assert len(req["chunk_times_s"]) == req["output_tokens"] == 32


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_an_output_under_a_file_names_the_file_at_any_depth(tmp_path: Path, depth: int) -> None:
    """Sweep 23 (s3, fx99): two or more folders below a regular file had been told "does not
    exist ... make the folder first (mkdir -p)", which would fail there too."""
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    out = blocker.joinpath(*["sub"] * depth, "run.json")
    with pytest.raises(ResultsFileError) as said:
        check_destinations(None, out)
    assert f"{blocker} is a file, not a folder" in str(said.value)
    assert "mkdir -p" not in str(said.value)
