"""`--stop-when-saturated`: an open-loop run stops sending once the server has fallen behind,
and says so; a server that keeps up is never stopped."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from felab_core.engine.measure import SaturationGuard
from felab_core.lab.scripted_server import Script
from tests.engine.scripted_bench import bench

runner = CliRunner()
S = 1_000_000_000


def test_a_server_that_keeps_up_is_never_stopped() -> None:
    guard = SaturationGuard()
    for k in range(200):  # 20 req/s for 10 s, each done 0.2 s later
        t = k * S // 20
        assert guard.check(t, sent=k, finished=max(0, k - 4)) is None


def test_a_growing_queue_is_stopped_after_a_whole_window() -> None:
    guard = SaturationGuard()
    said = None
    for k in range(200):  # 20 req/s sent, 5 req/s finishing
        t = k * S // 20
        said = guard.check(t, sent=k, finished=k // 4)
        if said:
            break
    assert said is not None and k * 0.05 >= 3.0  # not before 3 s of history
    assert "over-saturated" in said and "in flight" in said


def test_a_run_past_the_servers_capacity_stops_and_says_so(tmp_path: Path) -> None:
    # one slot, ~50 ms a request: 20 req/s at most; 60 req/s asked for 8 s
    script = Script(persona="llamacpp", ttft_s=0.01, itl_s=0.01, slots=1)
    flags = ("--rate", "60", "--duration", "8", "--max-tokens", "5", "--timeout", "30")
    done = bench(script, tmp_path / "run.json", *flags, "--stop-when-saturated")
    run = done.run
    assert run["summary"]["stopped"].startswith("stopped sending: the server is over-saturated")
    assert len(run["requests"]) < 60 * 8 * 0.7  # it stopped well before the schedule's end
    assert "over-saturated" in done.output
