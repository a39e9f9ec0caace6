"""What a burst-only run writes besides ITL, TPOT and writing speed (sweep 22, noticed): its
goodput against an SLO's TPOT bound had read 0 % (every burst "missed" a TPOT it has none of);
it is blank, and said. Total tok/s, tokens over the run's wall time, stays: it reads no gap."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.cli.burst_server import BurstServer

runner = CliRunner()


def _bench(url: str, tmp_path: Path, slo: str) -> tuple[str, dict[str, str], dict[str, object]]:
    csv_path, json_path = tmp_path / "b.csv", tmp_path / "b.json"
    args = ["bench", "--url", url, "--api", "openai-chat", "--model", "m", "-c", "1", "-n", "3"]
    args += ["--max-tokens", "20", "--slo", slo, "--csv", str(csv_path), "--json", str(json_path)]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    (row,) = list(csv.DictReader(csv_path.open()))
    record = json.loads(json_path.read_text())
    return " ".join(result.output.split()), row, record


def test_a_burst_leaves_goodput_on_tpot_blank_and_keeps_total_throughput(tmp_path: Path) -> None:
    server = BurstServer([(20, 1)], gap_s=0.001)  # the whole answer in one write
    try:
        out, row, record = _bench(server.base_url, tmp_path, "ttft=5,tpot=1")
    finally:
        server.stop()
    summary = record["runs"][0]["summary"]  # type: ignore[index]
    assert row["goodput_rps"] == "" and summary["goodput_rps"] is None
    assert summary["goodput_fraction"] is None and summary["slo"] == "ttft<=5s,tpot<=1s"
    assert "0% of requests met" not in out and "nor goodput against --slo's tpot bound" in out
    assert float(row["output_tps"]) > 0 and row["request_tps"] != ""  # over the wall time
    assert "total tok/s is over the run's wall time" in out
    assert row["ttft_p50_s"] != "" and row["e2e_p50_s"] != ""


def test_a_burst_keeps_goodput_when_the_slo_bounds_no_tpot(tmp_path: Path) -> None:
    server = BurstServer([(20, 1)], gap_s=0.001)
    try:
        out, row, _ = _bench(server.base_url, tmp_path, "ttft=5,e2e=5")
    finally:
        server.stop()
    assert float(row["goodput_rps"]) > 0 and "100% of requests met" in out


def test_an_honest_stream_keeps_goodput_on_tpot(tmp_path: Path) -> None:
    server = ScriptedServer(Script(persona="vllm", itl_s=0.002, model="m")).start_in_thread()
    try:
        out, row, _ = _bench(server.base_url, tmp_path, "ttft=5,tpot=1")
    finally:
        server.stop_thread()
    assert float(row["goodput_rps"]) > 0 and "one burst" not in out
