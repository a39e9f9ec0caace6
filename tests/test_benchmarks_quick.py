"""Benchmarks that cannot rot: every script in benchmarks/ runs in its --quick mode (small
sizes, seconds, no figure asserted and none written over the published ones), so a change that
breaks one fails here the day it lands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.db_support import postgres_base_url

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
NEEDS_POSTGRES = {"db_reports.py"}


def test_every_benchmark_has_a_quick_mode() -> None:
    assert SCRIPTS, "no benchmarks found"
    missing = [p.name for p in SCRIPTS if "--quick" not in p.read_text()]
    assert not missing, f"add a --quick mode (seconds, small sizes) to: {', '.join(missing)}"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_benchmark_runs_quick(script: Path) -> None:
    if script.name in NEEDS_POSTGRES and postgres_base_url() is None:
        pytest.skip("PostgreSQL is not answering on 127.0.0.1:5432")
    results = ROOT / "benchmarks" / "results"
    before = {p.name: p.read_bytes() for p in results.glob("*")} if results.exists() else {}
    out = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, (
        f"{script.name} --quick failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    )
    assert out.stdout.strip(), f"{script.name} --quick printed no figures"
    after = {p.name: p.read_bytes() for p in results.glob("*")} if results.exists() else {}
    assert after == before, f"{script.name} --quick wrote over the published figures"


def test_client_scaling_gives_each_client_a_physical_core_of_its_own() -> None:
    """Hyperthread siblings share one core: clients go one per physical core, the servers on
    the cores left, and a placement that must share says so."""
    from benchmarks.client_scaling import placement

    eight_by_two = [[c, c + 8] for c in range(8)]  # Linux's usual numbering of siblings
    clients, servers, shared = placement(eight_by_two, 4)
    assert clients == [0, 1, 2, 3] and servers == [4, 12, 5, 13, 6, 14, 7, 15] and not shared
    clients, servers, shared = placement(eight_by_two, 8)
    assert clients == list(range(8)) and servers == list(range(8, 16))
    assert "share physical cores" in shared
    clients, servers, shared = placement([[0], [1]], 2)  # this 2-core box
    assert clients == [0, 1] and servers == [1] and "share" in shared


def test_client_scaling_steps_down_when_the_first_rate_is_already_too_fast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slower machine than expected must still give a ceiling, not nan: down in steps until a
    rate passes, then halvings between it and the lowest that failed."""
    import benchmarks.client_scaling as cs

    edge = 3_000.0
    asked: list[float] = []

    def fake_one(
        clients: list[int], rate: float, streams: int, seconds: float, servers: list[int]
    ) -> dict[str, object]:
        asked.append(rate)
        ok = rate <= edge
        return {
            "chunks_per_s": rate * 0.9,
            "server_kept_up": True,
            "read_lag_p50_ms": 1.0 if ok else 50.0,
            "ttft_err_p50_ms": 0.1,
            "itl_err_p50_ms": 0.1,
            "tokens_exact": True,
            "failed": 0,
            "processes": 1,
            "streams": streams,
            "offered_chunks_per_s": rate,
            "ttft_err_p99_ms": 0.2,
            "send_gap_p50_ms": 1.0,
            "server_busy_max": 0.1,
        }

    monkeypatch.setattr(cs, "one", fake_one)
    best, server_bound, _rows = cs.ceiling([0], 8, 0.1, [1], 8, 3, start=10_000.0, step=1.25)
    assert not server_bound
    assert asked[:2] == [10_000.0, 10_000.0 / 1.25**2]  # stepped down
    assert best == pytest.approx(max(r for r in asked if r <= edge) * 0.9)
    assert edge / 1.25**2 < best / 0.9 <= edge


def test_machine_scaling_measures_each_process_against_one_alone() -> None:
    """The machine's own scaling (pure Python and loopback ping-pong) comes back as rates and
    fractions of one process alone, one row per count."""
    from benchmarks.machine_scaling import scaling, show_scaling

    result = scaling([0], [0], [1], seconds=0.1)
    for kind in ("spin", "loopback"):
        row = result[kind]["1"]
        assert row["median_rate"] > 0 and row["fraction_of_one"] == 1.0
    assert "| 1 | 1.00 | 1.00 | 1.00 | 1.00 |" in show_scaling(result)
