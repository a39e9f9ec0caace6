"""Sweep 23 s2: a bench JSON record given as the results CSV is named as one (M2: "line 2: 2
cells where the header has 1 ... fix or remove it"), in `felab memo` and `felab numbers import`
alike; a newest run whose every request failed no longer hides the good run before it (L5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.measure import SCHEMA
from felab_core.engine.record_seal import sealed_text
from felab_core.reports.memo import build_memo, render_markdown
from tests.reports.conftest import MAC_INPUTS, blank_row

runner = CliRunner()
WIDE = {"COLUMNS": "220"}
MAC = ["--chip", "M4 Pro", "--model", "llama-3.1-8b", "--model-bytes", "4.9GB"]


def _record(path: Path) -> Path:
    """A record as `felab bench --json` writes it: sealed, its schema first."""
    path.write_text(
        sealed_text({"schema": SCHEMA, "felab_version": "0.1.0", "host": "vm", "runs": []}),
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["memo", *MAC, "--kv-memory", "16GiB", "--out", "-", "--csv"],
        ["numbers", "import"],
    ],
    ids=["memo", "numbers import"],
)
def test_a_bench_record_given_for_the_results_csv_is_named(
    tmp_path: Path, command: list[str]
) -> None:
    record = _record(tmp_path / "a.json")
    result = runner.invoke(app, [*command, str(record)], env=WIDE)
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"{record} is a felab bench record, not the results CSV" in said
    assert "01-latency.csv" in said
    assert "line 2" not in said and "cells" not in said


@pytest.mark.parametrize("text", ['[{"a": 1}, {"b": 2}]\n', '  {\n "a": 1,\n "b": 2\n}\n'])
def test_other_json_given_for_the_results_csv_is_named(tmp_path: Path, text: str) -> None:
    path = tmp_path / "results.csv"
    path.write_text(text, encoding="utf-8")
    result = runner.invoke(app, ["memo", *MAC, "--kv-memory", "16GiB", "--csv", str(path)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "is JSON, not the results CSV" in said
    assert "line 2" not in said


def _row(stamp: str, tps: str, ok: str = "8") -> dict[str, str]:
    return blank_row(
        timestamp=stamp,
        host="mac",
        target="ollama",
        server="ollama",
        model="llama3.1:8b",
        preset="day2",
        concurrency="1",
        requests="8",
        ok=ok,
        failed=str(8 - int(ok)),
        writing_tps_p50=tps,
    )


def test_a_failed_newest_run_shows_the_one_before_and_says_so() -> None:
    rows = [
        _row("2025-06-09T10:00:00+00:00", "44.6"),
        _row("2025-06-09T11:30:00+00:00", "", ok="0"),  # the server was stopped
    ]
    memo = build_memo(rows, MAC_INPUTS)
    (row,) = memo.rows
    assert str(row.writing_tps) == "223/5"  # 44.6, judged against the limit
    assert row.check is not None and row.verdict != "no writing speed"
    text = " ".join(render_markdown(memo).split())
    assert (
        "Ollama on mac: the newest run, 2025-06-09 11:30, had every request fail: shown is the "
        "one before it (2025-06-09 10:00)"
    ) in text


def test_a_server_whose_every_run_failed_says_its_requests_failed() -> None:
    rows = [
        _row("2025-06-09T10:00:00+00:00", "", ok="0"),
        _row("2025-06-09T11:30:00+00:00", "", ok="0"),
    ]
    memo = build_memo(rows, MAC_INPUTS)
    (row,) = memo.rows
    assert row.measured_at.hour == 11  # the newest, as before
    assert row.failed_after is None
    assert row.verdict == "every request failed"
    assert "every request failed" in render_markdown(memo)


def test_a_newer_good_run_is_shown_without_a_note() -> None:
    rows = [
        _row("2025-06-09T10:00:00+00:00", "", ok="0"),
        _row("2025-06-09T11:30:00+00:00", "40"),
    ]
    memo = build_memo(rows, MAC_INPUTS)
    (row,) = memo.rows
    assert str(row.writing_tps) == "40" and row.failed_after is None
    assert "had every request fail" not in render_markdown(memo)
