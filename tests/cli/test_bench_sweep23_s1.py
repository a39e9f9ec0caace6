"""Independent sweep 23 (s1) LOWs in `felab bench`'s own words: the waiting notice names the
limit that ends a stopped stream, --find-max-rate names the flag to drop, --help's ranges are
the errors' ranges, and a long run off a terminal says how far it got."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


def test_the_waiting_notice_names_the_stall_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOW 1: a stream that stopped was said to be given up at --timeout (600 s); what ends
    it is --stall-timeout."""
    import felab.cli.bench as bench_cli

    monkeypatch.setattr(bench_cli, "QUIET_NOTICE_S", 0.5)
    script = Script(persona="vllm", ttft_s=0.002, itl_s=0.001, fault="stall")
    server = ScriptedServer(script).start_in_thread()
    try:
        args = ["bench", "vllm", "--url", server.base_url, "-n", "1", "--warmup", "0",
                "--stall-timeout", "2", "--no-csv"]  # fmt: skip
        said = runner.invoke(app, args, env={"COLUMNS": "300"})
    finally:
        server.stop_thread()
    assert "no request has finished" in said.output, said.output
    assert "after 2 s of silence (--stall-timeout) or 600 s in all (--timeout)" in said.output


@pytest.mark.parametrize(
    ("extra", "drop"),
    [
        (["--sessions", "2"], "drop --sessions"),
        (["--preset", "chat"], "drop --preset chat"),
        (["--trace", "TRACE"], "drop --trace"),
    ],
)
def test_find_max_rate_names_the_flag_to_drop(tmp_path: Path, extra: list[str], drop: str) -> None:
    """LOW 6: "--find-max-rate searches one target with a synthetic workload", no flag named."""
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 4}\n')
    extra = [str(trace) if a == "TRACE" else a for a in extra]
    args = ["bench", "vllm", "--find-max-rate", "ttft_p95=1s", "--no-csv", *extra]
    said = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert said.exit_code == 2 and drop in said.output, said.output
    two = runner.invoke(app, ["bench", "vllm", "llamacpp", "--find-max-rate", "ttft_p95=1s"])
    assert two.exit_code == 2 and "name one of vllm, llamacpp" in two.output


def test_help_gives_the_ranges_the_errors_hold() -> None:
    """LOW 10: --help said --timeout was "above 0"; the error said "from 0.01 s"."""
    text = runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "300"}).output
    assert "above 0" not in text
    ranges = {
        "--timeout": "0.01 to 86,400",
        "--stall-timeout": "0.01 to 86,400",
        "--burstiness": "0.01 to 1,000",
        "--duration": "0.1 to 86,400",
    }
    for flag, bounds in ranges.items():
        line = next(x for x in text.splitlines() if re.search(rf"[│|]\s+{flag}\s", x))
        assert bounds in line, line
    low = runner.invoke(app, ["bench", "vllm", "--timeout", "0.005"])
    assert low.exit_code == 2 and "from 0.01 s to 86,400 s" in low.output


def test_a_long_run_off_a_terminal_says_how_far_it_got(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOW 11: `--warmup 1000` or `--sessions 5000` printed nothing for minutes where no bar
    is drawn (stderr a file or a pipe)."""
    import felab.cli.bench as bench_cli

    monkeypatch.setattr(bench_cli, "PROGRESS_LINE_S", 0.05)
    server = ScriptedServer(Script(persona="vllm", ttft_s=0.03, itl_s=0.005)).start_in_thread()
    try:
        args = ["bench", "vllm", "--url", server.base_url, "--warmup", "8", "--sessions", "4",
                "--turns", "2", "-c", "1", "--max-tokens", "4", "--no-csv"]  # fmt: skip
        said = runner.invoke(app, args, env={"COLUMNS": "300"})
    finally:
        server.stop_thread()
    assert said.exit_code == 0, said.output
    assert re.search(r"vllm warm-up: \d of 8 done", said.output), said.output
    assert re.search(r"vllm 4 sessions x 2 turns.*: \d of 8 done", said.output), said.output
