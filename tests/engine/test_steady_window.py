"""The steady-state window (`--ramp-up`/`--ramp-down`): requests sent while a server fills up,
or still running as the run ends, are sent and counted apart, never in the percentiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from felab_core.lab.scripted_server import Script
from tests.engine.scripted_bench import bench

runner = CliRunner()


def _run(tmp_path: Path, *window: str) -> dict[str, Any]:
    script = Script(persona="llamacpp", ttft_s=0.01, itl_s=0.002, ramp_s=0.6, ramp_extra_ttft_s=0.2)
    flags = ("--rate", "40", "--duration", "2", "--warmup", "0", "--max-tokens", "4")
    done = bench(script, tmp_path / f"run{len(window)}.json", *flags, "--slo", "ttft=0.1", *window)
    run = done.run
    run["output"] = done.output
    return run


def test_the_ramp_is_left_out_of_the_figures(tmp_path: Path) -> None:
    whole = _run(tmp_path)
    steady = _run(tmp_path, "--ramp-up", "0.8", "--ramp-down", "0.2")
    # the whole run's tail is the ramp's 200 ms; the window's is the steady 10 ms
    assert whole["summary"]["ttft_s"]["p95"] > 0.15
    assert steady["summary"]["ttft_s"]["p95"] < 0.05
    window = steady["summary"]["window"]
    outside = [r for r in steady["requests"] if r["outside_window"]]
    assert window["dropped"] == len(outside) and window["kept"] == len(steady["requests"]) - len(
        outside
    )
    assert 30 <= window["kept"] <= 50  # about 1.0 s of a 40/s schedule
    in_window = [r for r in steady["requests"] if not r["outside_window"]]
    assert max(r["ttft_s"] for r in in_window) < 0.05  # the figures hold only these
    assert steady["summary"]["ok"] == len(steady["requests"])  # every request still counted
    assert steady["summary"]["goodput_fraction"] > 0.95 > whole["summary"]["goodput_fraction"]
    assert "steady window 0.8-" in steady["output"]
    assert " 40 req/s: steady window" in steady["output"]  # 19th (a) L4: was "c=0"


def test_a_window_the_ramps_leave_empty_measured_nothing(tmp_path: Path) -> None:
    """A request-count run over before its ramp-up ends has no figures: the flags left nothing
    to measure (exit 2: it was exit 3, 'could not be reached', until the thirteenth sweep), and
    no row of dashes in the results CSV, not a quiet success."""
    from felab.cli.main import app
    from felab_core.lab.scripted_server import ScriptedServer

    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.01, itl_s=0.002)).start_in_thread()
    csv = tmp_path / "results.csv"
    try:
        args = ["bench", "llamacpp", "--url", server.base_url, "-n", "2", "--warmup", "0"]
        args += ["--max-tokens", "4", "--ramp-up", "100", "--csv", str(csv)]
        result = runner.invoke(app, args)
    finally:
        server.stop_thread()
    assert result.exit_code == 2, result.output
    assert "nothing was measured" in " ".join(result.output.split())
    assert not csv.exists()
