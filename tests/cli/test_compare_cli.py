"""`felab compare` on real runs of scripted servers whose speeds are known."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


def _bench(server: ScriptedServer, out: Path) -> Path:
    result = runner.invoke(
        app,
        [
            "bench",
            "llamacpp",
            "--url",
            server.base_url,
            "-c",
            "4",
            "-n",
            "60",
            "--warmup",
            "2",
            "--max-tokens",
            "12",
            "--no-csv",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return out


def _rows(output: str) -> dict[str, dict[str, object]]:
    return {row["figure"]: row for row in json.loads(output)}


def test_two_runs_of_one_server_differ_by_nothing_worth_naming(tmp_path: Path) -> None:
    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.060, itl_s=0.012)).start_in_thread()
    try:
        a = _bench(server, tmp_path / "a.json")
        b = _bench(server, tmp_path / "b.json")
    finally:
        server.stop_thread()
    out = runner.invoke(app, ["compare", str(a), str(b), "--min-effect", "5%", "-o", "json"])
    assert out.exit_code == 0, out.output
    rows = _rows(out.stdout)
    assert {r["verdict"] for r in rows.values()} == {"within noise"}, rows
    assert "same file" not in out.output and "one run" not in out.output
    same = runner.invoke(app, ["compare", str(a), str(a)])  # ninth sweep: no word of it
    assert same.exit_code == 0 and "A and B are the same file" in same.output
    assert "one run" not in same.output  # said once, as the same file
    copy = tmp_path / "copy.json"  # twenty-second sweep (a2) A2-8: "within noise" alone
    copy.write_bytes(a.read_bytes())
    copied = runner.invoke(app, ["compare", str(a), str(copy)])
    assert copied.exit_code == 0 and "A and B are one run (their seals match)" in copied.output


def test_a_slower_server_is_named_with_its_interval(tmp_path: Path) -> None:
    fast = ScriptedServer(Script(persona="llamacpp", ttft_s=0.060, itl_s=0.012)).start_in_thread()
    slow = ScriptedServer(Script(persona="llamacpp", ttft_s=0.090, itl_s=0.018)).start_in_thread()
    try:
        a = _bench(fast, tmp_path / "fast.json")
        b = _bench(slow, tmp_path / "slow.json")
    finally:
        fast.stop_thread()
        slow.stop_thread()
    out = runner.invoke(
        app,
        ["compare", str(a), str(b), "-o", "json", "--chart", str(tmp_path / "change.png")],
    )
    assert out.exit_code == 0, out.output
    rows = _rows(out.stdout)
    ttft, itl, speed = rows["TTFT p50"], rows["ITL p50"], rows["writing speed p50"]
    assert ttft["verdict"] == "worse" and itl["verdict"] == "worse"
    assert speed["verdict"] == "worse"
    # the truth: +30 ms to the first token, +6 ms a gap; each inside its interval, roughly
    assert float(ttft["low"]) - 3 < 30 < float(ttft["high"]) + 3, ttft  # type: ignore[arg-type]
    assert float(itl["low"]) - 1 < 6 < float(itl["high"]) + 1, itl  # type: ignore[arg-type]
    assert (tmp_path / "change.png").read_bytes().startswith(b"\x89PNG")
    table = runner.invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "160"})
    assert "worse" in table.output and "95 %" in table.output


def test_what_cannot_be_compared_is_said_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text("[]")
    out = runner.invoke(app, ["compare", str(tmp_path / "x.json"), str(tmp_path / "y.json")])
    assert out.exit_code == 2
    assert "not a felab bench record" in out.output and "Traceback" not in out.output
    out = runner.invoke(
        app, ["compare", str(tmp_path / "x.json"), str(tmp_path / "x.json"), "--min-effect", "x"]
    )
    assert out.exit_code == 2
