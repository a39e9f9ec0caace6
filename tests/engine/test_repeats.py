"""`--repeat N`: each headline figure's mean over N runs with its Student-t 95 % interval."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.repeats import HEADLINES, Interval, intervals, t95
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1.0, 1e4), min_size=2, max_size=40))
def test_the_interval_is_the_t_interval(values: list[float]) -> None:
    iv = Interval(HEADLINES[0], tuple(values))
    n = len(values)
    assert iv.mean == pytest.approx(statistics.fmean(values))
    expected = t95(n - 1) * statistics.stdev(values) / n**0.5
    assert iv.half_width == pytest.approx(expected)


def test_one_value_has_no_interval() -> None:
    assert Interval(HEADLINES[0], (5.0,)).half_width is None
    assert t95(1) == 12.706 and t95(30) == 2.042 and t95(500) == 1.96


def test_repeats_of_a_known_server(tmp_path: Path) -> None:
    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.02, itl_s=0.004)).start_in_thread()
    csv_path = tmp_path / "rows.csv"
    try:
        result = runner.invoke(
            app,
            [
                "bench",
                "llamacpp",
                "--url",
                server.base_url,
                "-n",
                "6",
                "--max-tokens",
                "6",
                "--repeat",
                "3",
                "--csv",
                str(csv_path),
                "--json",
                str(tmp_path / "run.json"),
                "-o",
                "json",
            ],
        )
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    rows = {r["figure"]: r for r in json.loads(result.stdout)}
    ttft = rows["TTFT p50"]
    assert ttft["mean"] == pytest.approx(20.0, abs=3.0)  # the server's 20 ms
    assert 0 < ttft["half_width"] < 5.0
    assert rows["ITL p50"]["mean"] == pytest.approx(4.0, abs=1.0)
    assert len(csv_path.read_text().splitlines()) == 4  # a header and a row per repeat
    for k in (1, 2, 3):
        assert json.loads((tmp_path / f"run.r{k}.json").read_text())["runs"]


def test_repeat_is_bounded() -> None:
    result = runner.invoke(app, ["bench", "--url", "http://127.0.0.1:9", "--repeat", "0"])
    assert result.exit_code == 2 and "--repeat must be 1-100" in result.output


def test_a_repeat_that_measured_nothing_is_left_out_of_the_means(tmp_path: Path) -> None:
    """Twentieth sweep (a) A23: a repeat whose every request failed (HTTP 503) went unmentioned,
    and its 0.0 total tok/s was averaged in with the others' (mean 162 of ~300, min 0.0)."""
    import io
    from dataclasses import replace

    from rich.console import Console

    from felab.cli.bench_repeat import run_repeats
    from felab.cli.output import Format
    from felab_core.engine.bench import run_bench
    from felab_core.engine.event_loop import run_sync
    from felab_core.engine.targets import DEFAULT_TARGETS, resolve_target
    from felab_core.engine.workloads import Workload

    script = Script(persona="llamacpp", ttft_s=0.005, itl_s=0.002)
    server = ScriptedServer(script).start_in_thread()
    target = resolve_target("llamacpp", targets=DEFAULT_TARGETS, url=server.base_url)
    workload = Workload(requests=2, warmup=0, max_tokens=4)

    def once(k: int) -> list:  # type: ignore[type-arg]
        server.script = replace(script, fault="http500") if k == 1 else script
        return run_sync(run_bench([target], workload, check_server=False))

    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False)
    try:
        repeats = run_repeats(
            3, once, csv_path=None, json_path=None, fmt=Format.json, console=console, notes=console
        )
    finally:
        server.stop_thread()
    said = out.getvalue()
    assert "repeat 1: llamacpp: 2 failed: HTTP 500" in said
    assert "no request succeeded, so this repeat is left out of the means" in said
    assert "repeat 2: llamacpp" not in said
    summaries = [rep[0].result.runs[0].summary for rep in repeats]  # type: ignore[union-attr]
    (total,) = [iv for iv in intervals(summaries) if iv.headline.key == "output_tps"]
    assert len(total.values) == 2 and min(total.values) > 0


def test_ctrl_c_during_repeats_is_said_and_the_cut_repeat_averages_nothing(
    tmp_path: Path,
) -> None:
    """Twentieth sweep (a) A30: Ctrl-C in repeat 1 printed no "interrupted" and a table titled
    "1 repeats: mean and 95 % interval" from the one request that had finished; exit 0."""
    import signal
    import subprocess
    import sys
    import time

    server = ScriptedServer(Script(persona="llamacpp", itl_s=0.01)).start_in_thread()
    cmd = [sys.executable, "-m", "felab", "bench", "llamacpp", "--url", server.base_url,
           "-n", "200", "--max-tokens", "20", "--warmup", "0", "--repeat", "3", "--no-csv",
           "--json", str(tmp_path / "ir.json")]  # fmt: skip
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 20
        while len(server.log) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        server.stop_thread()
    assert proc.returncode == 130, out
    assert "interrupted: repeat 1 of 3 was stopped" in out
    assert "mean and 95 % interval" not in out
    assert json.loads((tmp_path / "ir.r1.json").read_text())["interrupted"] is True
