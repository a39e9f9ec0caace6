"""`felab demo --quick`, as CI runs it: real llama.cpp and MLX, timed, rows written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab_core.cli.main import app
from felab_core.engine.results import read_csv
from tests.lab_fixtures import real_servers_enabled


def engine_processes() -> set[int]:
    """PIDs of llama-server and mlx_lm.server processes now running."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"llama-server" in cmd or b"mlx_lm.server" in cmd:
            pids.add(int(proc.name))
    return pids


@pytest.mark.skipif(not real_servers_enabled(), reason="FELAB_TEST_REAL_SERVERS=0")
def test_quick_demo_times_both_engines_and_leaves_nothing_running(tmp_path: Path) -> None:
    csv_path = tmp_path / "01-latency.csv"
    before = engine_processes()
    result = CliRunner().invoke(
        app,
        ["demo", "--quick", "--no-install", "--csv", str(csv_path)],
        env={"COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    assert engine_processes() <= before
    rows = read_csv(csv_path)
    assert [r["server"] for r in rows] == ["llamacpp", "mlx"]
    for row in rows:
        assert row["ok"] == "3" and row["failed"] == "0"
        assert row["token_source"] == "usage"
        assert float(row["writing_tps_p50"]) > 0
        assert row["preset"] == "day2+custom"
    assert "tiny.gguf" in result.output
