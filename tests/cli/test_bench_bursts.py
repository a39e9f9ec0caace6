"""Answers whose tokens came in a burst (sent whole, buffered, or flushed a millisecond apart)
have no ITL, TPOT or writing speed: blank, never 0, and said in the table, the record and on
stderr for -o json/csv (twenty-second sweep, a A1, A7, A17)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.cli.burst_server import BurstServer

runner = CliRunner()

BURSTS = {
    # A1: twenty tokens in one write
    "whole": [(20, 1)],
    # A17: 3,000 tokens sent whole arrive over several reads
    "long-whole": [(3000, 1)],
    # A7: five messages of 100 tokens, a millisecond apart: 100,000 tok/s for one stream (the
    # sweep's 50 a message read 31,000; 100 keeps it a burst on a busy box's slower sleeps)
    "flushed": [(1, 100)] * 5,
}


@pytest.fixture(params=sorted(BURSTS))
def bursty(request: pytest.FixtureRequest) -> Iterator[tuple[BurstServer, int]]:
    server = BurstServer(BURSTS[request.param], gap_s=0.001)
    yield server, server.tokens()
    server.stop()


def _bench(url: str, tokens: int, *more: str) -> list[str]:
    base = ["bench", "--url", url, "--api", "openai-chat", "--model", "m"]
    return [*base, "-c", "1", "-n", "3", "--max-tokens", str(tokens), *more]


def test_a_burst_has_no_per_token_figures_anywhere(
    tmp_path: Path, bursty: tuple[BurstServer, int]
) -> None:
    server, tokens = bursty
    csv_path, json_path = tmp_path / "b.csv", tmp_path / "b.json"
    args = _bench(server.base_url, tokens, "--csv", str(csv_path), "--json", str(json_path))
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "arrived in one read or one burst" in result.output
    (row,) = list(csv.DictReader(csv_path.open()))
    for blank in ("itl_p50_s", "itl_p95_s", "tpot_p50_s", "writing_tps_p50"):
        assert row[blank] == "", (blank, row[blank])
    record = json.loads(json_path.read_text())
    summary = record["runs"][0]["summary"]
    assert summary["itl_s"] is None and summary["tpot_s"] is None
    assert summary["writing_tps"] is None
    assert any("one burst" in note for note in record["notes"])


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_a_burst_is_said_on_stderr_for_machine_output(
    fmt: str, bursty: tuple[BurstServer, int]
) -> None:
    server, tokens = bursty
    result = runner.invoke(app, _bench(server.base_url, tokens, "--no-csv", "-o", fmt))
    assert result.exit_code == 0, result.output
    assert "one burst" in result.stderr and "one burst" not in result.stdout
    if fmt == "json":
        (row,) = json.loads(result.stdout)
        assert row["itl_p50_ms"] is None and row["writing_tps_p50"] is None


def test_an_honest_stream_with_several_tokens_a_message_keeps_its_figures(tmp_path: Path) -> None:
    """Speculative decoding: four tokens a message, 5 ms apart, is 800 tok/s: measured."""
    server = ScriptedServer(
        Script(persona="vllm", itl_s=0.005, tokens_per_chunk=4, model="m")
    ).start_in_thread()
    try:
        json_path = tmp_path / "s.json"
        args = _bench(server.base_url, 40, "--no-csv", "--json", str(json_path))
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    assert "one burst" not in result.output
    summary = json.loads(json_path.read_text())["runs"][0]["summary"]
    assert 500 < summary["writing_tps"]["p50"] < 1000
    assert 0.004 < summary["itl_s"]["p50"] < 0.01
