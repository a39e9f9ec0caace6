"""`--find-max-rate`: the highest rate within a latency objective, found by doubling then
bisecting, against a model of a server and against a scripted server of known capacity."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.metrics import RunSummary, Stats
from felab_core.engine.rate_search import (
    ObjectiveError,
    ProbeInterrupted,
    find_max_rate,
    parse_objective,
)
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


def _stats(value: float) -> Stats:
    return Stats(value, value, value, value, value, value, 10)


def _summary(
    rate: float, ttft: float, failed: int = 0, finished: float | None = None
) -> RunSummary:
    return RunSummary(
        ok=100 - failed,
        failed=failed,
        duration_s=10,
        ttft_s=_stats(ttft),
        tpot_s=_stats(0.01),
        itl_s=_stats(0.01),
        e2e_s=_stats(ttft + 0.5),
        writing_tps=_stats(100),
        ttft_from_schedule_s=None,
        e2e_from_schedule_s=None,
        connect_s=None,
        server_tps=None,
        output_tokens=1000,
        output_tps=100,
        request_tps=rate if finished is None else finished,
        token_source="usage",
        counted_chunks=1000,
        prompt_tokens_mean=None,
    )


def test_objectives_read_and_refuse_in_words() -> None:
    bounds = parse_objective("ttft_p95=500ms, itl_p99=0.05")
    assert [str(b) for b in bounds] == ["ttft_p95<=500ms", "itl_p99<=50ms"]
    for bad, said in (
        ("ttft=500ms", "METRIC_pNN=LIMIT"),
        ("ttft_p42=1", "not p42"),
        ("ttft_p95=0ms", "from 0.1 ms to an hour"),
        ("ttft_p95=-1", "from 0.1 ms to an hour"),
        ("ttft_p95=1e-300", "from 0.1 ms to an hour"),
        ("ttft_p95=1.2.3", "'1.2.3' is not a number"),
        ("", "empty"),
        ("ttft_p95=500", "500 with no unit reads as 500 seconds"),
    ):
        with pytest.raises(ObjectiveError, match=said):
            parse_objective(bad)


def test_the_search_brackets_then_bisects_to_the_knee() -> None:
    """A server whose TTFT p95 is 100 ms up to 37 req/s and climbs fast after."""
    asked: list[float] = []

    async def run_at(rate: float) -> RunSummary:
        asked.append(rate)
        return _summary(rate, 0.1 + max(0.0, rate - 37) * 0.1)

    bounds = parse_objective("ttft_p95=400ms")  # met up to 40 req/s
    result = asyncio.run(find_max_rate(run_at, bounds, start=1, precision=0.05))
    assert asked[:7] == [1, 2, 4, 8, 16, 32, 64]
    assert result.best is not None and 38 <= result.best.rate <= 40
    assert all(p.passed == (p.rate <= 40) for p in result.probes)
    missed = next(p for p in result.probes if p.rate == 64)
    assert missed.misses == ["ttft p95 2800.0 ms > 400 ms"]


def test_failures_and_a_server_that_fell_behind_fail_a_probe() -> None:
    async def run_at(rate: float) -> RunSummary:
        if rate > 10:
            return _summary(rate, 0.1, finished=rate * 0.5)  # a growing queue
        return _summary(rate, 0.1, failed=5 if rate > 4 else 0)

    result = asyncio.run(find_max_rate(run_at, parse_objective("ttft_p95=1s"), max_probes=6))
    assert result.best is not None and result.best.rate <= 4
    reasons = " ".join(m for p in result.probes for m in p.misses)
    assert "5 of 100 requests failed" in reasons


def test_no_rate_passes_and_it_is_said() -> None:
    async def run_at(rate: float) -> RunSummary:
        return _summary(rate, 9.0)

    result = asyncio.run(find_max_rate(run_at, parse_objective("ttft_p50=1s"), start=0.04))
    assert result.best is None and min(p.rate for p in result.probes) == 0.01


def test_a_server_that_answers_none_stops_the_search_with_its_error(tmp_path: Path) -> None:
    """Eighteenth sweep (a) M3: every request an HTTP 500, and the search probed eight rates
    down to 0.01 req/s, each "the server fell behind", then exit 4 "loosen the objective"; the
    server's error was never shown. Two probes that answer none end it: exit 3, in its words."""
    asked: list[float] = []

    async def run_at(rate: float) -> RunSummary:
        asked.append(rate)
        summary = _summary(rate, 0.1, failed=100)
        summary.errors = {"HTTP 500": 100}
        return summary

    result = asyncio.run(find_max_rate(run_at, parse_objective("ttft_p95=500ms"), start=4))
    assert asked == [4, 2] and result.best is None and result.failing is not None
    assert result.probes[0].misses == ["all 100 requests failed (HTTP 500)"]
    server = ScriptedServer(Script(persona="llamacpp", fault="http500")).start_in_thread()
    try:
        args = ["bench", "llamacpp", "--url", server.base_url, "--find-max-rate",
                "ttft_p95=500ms", "--duration", "0.5", "--no-csv"]  # fmt: skip
        said = runner.invoke(app, args)
    finally:
        server.stop_thread()
    assert said.exit_code == 3, said.output
    assert "every request failed at 0.5 req/s" in said.output
    assert "first error: HTTP 500: scripted failure: out of memory" in said.output
    assert "fell behind" not in said.output


def test_a_scripted_server_of_known_capacity(tmp_path: object) -> None:
    """Two slots, 10 ms to the first token and 10 tokens 4 ms apart: a request holds a slot
    ~46 ms, so the server serves at most ~43 req/s, and Poisson arrivals queue long before that
    (measured: TTFT p95 ~130 ms at 30 req/s, ~160 ms at 32)."""
    script = Script(persona="llamacpp", ttft_s=0.01, itl_s=0.004, slots=2)
    server = ScriptedServer(script).start_in_thread()
    try:
        result = runner.invoke(
            app,
            [
                "bench",
                "llamacpp",
                "--url",
                server.base_url,
                "--max-tokens",
                "10",
                "--find-max-rate",
                "ttft_p95=150ms",
                "--rate",
                "4",
                "--duration",
                "1.5",
                "--no-csv",
                "-o",
                "json",
            ],
        )
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    probes = json.loads(result.stdout)
    passed = [p["rate"] for p in probes if p["verdict"] == "passed"]
    assert passed and 16 <= max(passed) <= 45, probes
    missed = [p["rate"] for p in probes if p["verdict"] != "passed"]
    assert missed and min(missed) > max(passed), probes  # the knee lies between them
    assert (min(missed) - max(passed)) / max(passed) <= 0.1  # bisected to 10 %
    assert "highest rate within ttft_p95<=150ms" in result.output


def test_a_probe_that_sends_one_request_is_not_said_to_finish_many(tmp_path: Path) -> None:
    """Sixteenth sweep (a) M1: a 0.01 req/s run of 1 s sends one request at 0 s; over the
    ~0.05 s it took it read as "finished 20 req/s". Its throughputs are over the 1 s offered."""
    script = Script(persona="llamacpp", ttft_s=0.01, itl_s=0.004, slots=2)
    server = ScriptedServer(script).start_in_thread()
    record = tmp_path / "r.json"
    try:
        result = runner.invoke(
            app,
            ["bench", "llamacpp", "--url", server.base_url, "--max-tokens", "10", "--rate",
             "0.01", "--duration", "1", "--no-csv", "--json", str(record)],
        )  # fmt: skip
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    (run,) = json.loads(record.read_text())["runs"]
    assert run["summary"]["ok"] == 1
    assert run["summary"]["duration_s"] >= 1.0
    assert run["summary"]["request_tps"] <= 1.0


def test_a_stopped_probe_ends_the_search_with_no_verdict() -> None:
    """Twentieth sweep (a) A29: Ctrl-C cut a probe, the search took the cut probe as a miss
    and went on for minutes to a verdict. Now it ends there, with the probes that finished."""
    asked: list[float] = []

    async def run_at(rate: float) -> RunSummary:
        asked.append(rate)
        if rate >= 4:
            raise ProbeInterrupted(rate)
        return _summary(rate, 0.1)

    result = asyncio.run(find_max_rate(run_at, parse_objective("ttft_p95=500ms"), start=1))
    assert asked == [1, 2, 4]
    assert result.interrupted_at == 4 and result.best is None
    assert [p.rate for p in result.probes] == [1, 2]


def test_ctrl_c_stops_a_running_search_at_once(tmp_path: Path) -> None:
    """A real `felab bench --find-max-rate` process, sent SIGINT in its first probe: it stops
    within seconds, says it was interrupted, gives no highest rate, exit 130."""
    import signal
    import subprocess
    import sys
    import time

    server = ScriptedServer(Script(persona="llamacpp", itl_s=0.01)).start_in_thread()
    cmd = [sys.executable, "-m", "felab", "bench", "llamacpp", "--url", server.base_url,
           "--find-max-rate", "ttft_p95=1s", "--duration", "3", "--warmup", "0", "--no-csv",
           "--max-tokens", "5"]  # fmt: skip
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 20
        while not server.log and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        began = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - began
    finally:
        server.stop_thread()
    assert proc.returncode == 130, out
    assert "interrupted during the probe at 1 req/s" in out
    assert "highest rate" not in out and "no rate down to" not in out
    assert took < 2.5, out  # the probe lasts 3 s; the search had run on for 28-143 s
