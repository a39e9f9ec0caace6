"""`felab demo --quick`, as CI runs it: real llama.cpp and MLX, timed, rows written; then a job
through the worker fleet on embedded defaults (real `felab worker` processes), posted as the
bot would, and nothing left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.results import read_csv
from tests.lab_fixtures import real_servers_enabled

ROOT = Path(__file__).resolve().parents[2]


def processes_with(marker: bytes) -> set[int]:
    """PIDs of processes whose environment holds `marker`: every process the demo starts (its
    servers and workers) inherits the test's DEMO_TEST_MARK, so other tests' servers on this
    machine do not count."""
    pids = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if marker in (proc / "environ").read_bytes():
                pids.add(int(proc.name))
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not real_servers_enabled(), reason="FELAB_TEST_REAL_SERVERS=0")
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_quick_demo_times_both_engines_and_leaves_nothing_running(tmp_path: Path) -> None:
    csv_path = tmp_path / "results" / "01-latency.csv"
    data_dir = tmp_path / "fleet-data"
    mark = f"DEMO_TEST_MARK={uuid.uuid4().hex}"
    result = CliRunner().invoke(
        app,
        ["demo", "--quick", "--no-install", "--csv", str(csv_path), "--data-dir", str(data_dir)],
        env={
            "COLUMNS": "160",
            "FELAB_BROKER_URL": "redis://nowhere:1/0",
            "DEMO_TEST_MARK": mark.split("=", 1)[1],
        },
    )
    assert result.exit_code == 0, result.output
    assert processes_with(mark.encode()) == set(), "a server or worker was left running"
    rows = read_csv(csv_path)
    # Direct timing of both engines, and the fleet job's row (the same llama.cpp server).
    direct = [r for r in rows if r["preset"] == "day2+custom"]
    fleet = [r for r in rows if r["preset"] == "quick"]
    assert [r["server"] for r in direct] == ["llamacpp", "mlx"]
    assert [r["server"] for r in fleet] == ["llamacpp"] and len(rows) == 3
    for row in direct:
        assert row["ok"] == "3" and row["failed"] == "0"
    for row in rows:
        assert row["token_source"] == "usage"
        assert float(row["writing_tps_p50"]) > 0
    assert fleet[0]["failed"] == "0"
    assert "tiny.gguf" in result.output
    # Embedded defaults even with a broker set in the shell: SQLite database and broker.
    assert (data_dir / "felab.db").exists() and (data_dir / "broker.db").exists()
    # The post as the bot would make it, the chart beside the CSV, today's cards.
    assert "the bot would post" in result.output
    assert "**Benchmark 1** on demo-laptop: `llamacpp`, preset `quick`: done" in result.output
    assert "tok/s = writing speed" in result.output
    png = csv_path.parent / "demo-chart.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "Day 2" in result.output and "Question (new today)" in result.output
    assert "stopped felab worker start" in result.output
    assert "stopped felab worker ingest" in result.output


@pytest.mark.skipif(not real_servers_enabled(), reason="FELAB_TEST_REAL_SERVERS=0")
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_mid_fleet_stops_every_process(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C (or a SIGTERM) while the worker processes run: the demo stops them and its
    servers, exit 130."""
    data_dir = tmp_path / "fleet-data"
    token = uuid.uuid4().hex
    mark = f"DEMO_TEST_MARK={token}".encode()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
    env["DEMO_TEST_MARK"] = token
    demo = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("felab")),
            "demo",
            "--quick",
            "--no-install",
            "--engines",
            "llamacpp",
            "--csv",
            str(tmp_path / "r" / "01-latency.csv"),
            "--data-dir",
            str(data_dir),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 120
        while not (data_dir / "start.log").exists():  # the student worker is starting
            assert demo.poll() is None, demo.stdout.read() if demo.stdout else ""
            assert time.monotonic() < deadline, "the demo never started its worker"
            time.sleep(0.1)
        assert processes_with(str(data_dir).encode()), "no worker process seen"
        assert len(processes_with(mark)) >= 3  # the demo, llama-server, the ingest
        demo.send_signal(sig)
        out, _ = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    text = out.decode(errors="replace")
    assert demo.returncode == 130, text
    assert "interrupted" in text
    assert processes_with(mark) == set(), text
