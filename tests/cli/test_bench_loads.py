"""A run's load named one way in bench's table, its --repeat summary and compare (sweep 24
M1-M3): a rate with several -c caps, a replayed trace, a trace replayed faster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer(Script(persona="vllm", itl_s=0.001, ttft_s=0.002)).start_in_thread()
    yield s
    s.stop_thread()


def _bench(server: ScriptedServer, *args: str) -> str:
    result = runner.invoke(
        app,
        ["bench", "vllm", "--url", server.base_url, "--no-csv", *args],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def _trace(path: Path, gap_ms: int) -> Path:
    line = {"input_length": 32, "output_length": 4, "hash_ids": [1]}
    path.write_text("".join(json.dumps({"timestamp": i * gap_ms, **line}) + "\n" for i in range(6)))
    return path


def test_a_rate_with_several_caps_names_each_cap_and_compares(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """M1: `-c 1,4 --rate 20` printed two rows "20/s" alike, and compare refused the fresh
    sealed record: "the record holds one load more than once: the file was edited or broken"."""
    record = tmp_path / "c14.json"
    out = _bench(
        server,
        "-c",
        "1,4",
        "--rate",
        "20",
        "-n",
        "6",
        "--max-tokens",
        "4",
        "--json",
        str(record),
        "-o",
        "json",
    )
    assert [row["users"] for row in json.loads(out)] == ["20 req/s, cap 1", "20 req/s, cap 4"]
    result = runner.invoke(app, ["compare", str(record), str(record), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "20 req/s, cap 1" in result.stdout and "20 req/s, cap 4" in result.stdout


def test_a_trace_is_as_traced_in_the_repeat_summary_and_compare(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """M2: a --trace run was "0 streams" in the --repeat summary and in compare; M3: one
    replayed 20 times faster was matched with it and given verdicts, with only a note."""
    trace = _trace(tmp_path / "tr.jsonl", 20)
    record = tmp_path / "tr.json"
    out = _bench(
        server, "--trace", str(trace), "--repeat", "2", "--json", str(record), "-o", "json"
    )
    assert {row["load"] for row in json.loads(out)} == {"as traced"}
    r1, r2 = tmp_path / "tr.r1.json", tmp_path / "tr.r2.json"
    same = runner.invoke(app, ["compare", str(r1), str(r2)], env={"COLUMNS": "200"})
    assert same.exit_code == 0, same.output
    assert "as traced: " in same.stdout and "streams" not in same.stdout
    fast = tmp_path / "fast.json"
    _bench(server, "--trace", str(trace), "--trace-speed", "20", "--json", str(fast))
    refused = runner.invoke(app, ["compare", str(r1), str(fast)], env={"COLUMNS": "200"})
    assert refused.exit_code == 2, refused.output
    assert "as traced is only in A; as traced x20 is only in B" in refused.output
    other = tmp_path / "other.json"
    _bench(server, "--trace", str(_trace(tmp_path / "tr2.jsonl", 30)), "--json", str(other))
    refused = runner.invoke(app, ["compare", str(r1), str(other)], env={"COLUMNS": "200"})
    assert refused.exit_code == 2, refused.output
    assert "replayed different traces" in refused.output
