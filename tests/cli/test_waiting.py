"""The note a long command gives when it has heard nothing for a while."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab.cli.waiting import SilenceNotice
from felab_core.lab.scripted_server import Script, ScriptedServer


def test_silence_is_said_once() -> None:
    said: list[float] = []
    with SilenceNotice(0.2, said.append):
        time.sleep(0.8)
    assert len(said) == 1 and said[0] >= 0.2


def test_progress_keeps_it_quiet() -> None:
    said: list[float] = []
    with SilenceNotice(0.3, said.append) as notice:
        for _ in range(12):
            time.sleep(0.05)
            notice.poke()
    assert said == []


def test_a_gap_in_the_schedule_is_not_blamed_on_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eighteenth sweep (a2) M5: a trace whose second request was due 29 minutes after the
    first said nothing of it at the start, then "no request has finished in 30 s. A server
    loading its model..." while nothing was in flight."""
    import felab.cli.bench as bench_cli

    monkeypatch.setattr(bench_cli, "QUIET_NOTICE_S", 0.5)
    trace = tmp_path / "gap.jsonl"
    line = '{{"timestamp": {}, "input_length": 8, "output_length": 4}}\n'
    # 3 s: a first answer slowed by a busy machine still leaves 0.5 s of silence after it
    trace.write_text(line.format(0) + line.format(3000))
    server = ScriptedServer(Script(persona="vllm", ttft_s=0.002, itl_s=0.001)).start_in_thread()
    try:
        args = ["bench", "vllm", "--url", server.base_url, "--trace", str(trace), "--warmup", "0",
                "--no-csv"]  # fmt: skip
        result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    assert "replaying 2 requests over 3 s" in result.output
    assert "the schedule leaves gaps of up to 3 s between sends" in result.output
    assert "loading its model" not in result.output
