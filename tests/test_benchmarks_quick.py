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
