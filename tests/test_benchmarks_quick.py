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
