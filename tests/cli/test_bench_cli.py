"""`felab bench` as a user runs it: tables, files, exit codes, help that teaches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


@pytest.fixture
def llama_like() -> Iterator[ScriptedServer]:
    server = ScriptedServer(Script(persona="llamacpp", itl_s=0.002, ttft_s=0.005)).start_in_thread()
    yield server
    server.stop_thread()


def test_help_teaches_the_metric_definitions() -> None:
    out = runner.invoke(app, ["bench", "--help"], env={"COLUMNS": "120"}).output
    for phrase in ("TTFT", "TPOT", "Writing speed", "token_source", "Exit codes", "--rate"):
        assert phrase in out


def test_bench_writes_the_table_the_csv_and_the_json(
    tmp_path: Path, llama_like: ScriptedServer
) -> None:
    csv_path = tmp_path / "01-latency.csv"
    json_path = tmp_path / "run.json"
    result = runner.invoke(
        app,
        [
            "bench",
            "llamacpp",
            "--url",
            llama_like.base_url,
            "--preset",
            "quick",
            "-c",
            "1,2",
            "--csv",
            str(csv_path),
            "--json",
            str(json_path),
        ],
        env={"COLUMNS": "140"},
    )
    assert result.exit_code == 0, result.output
    assert "writing" in result.output and "llamacpp" in result.output
    assert len(csv_path.read_text().splitlines()) == 3  # header + one row per concurrency
    record = json.loads(json_path.read_text())
    assert [r["concurrency"] for r in record["runs"]] == [1, 2]
    assert record["workload"]["preset"] == "quick+custom"


def test_several_targets_one_table_and_a_refusal(
    tmp_path: Path, llama_like: ScriptedServer
) -> None:
    targets = tmp_path / "targets.toml"
    targets.write_text(
        f'[targets.llamacpp]\nurl = "{llama_like.base_url}"\n'
        f'[targets.mlx]\nurl = "{llama_like.base_url}"\n'
    )
    result = runner.invoke(
        app,
        [
            "bench",
            "llamacpp",
            "mlx",
            "--preset",
            "quick",
            "--no-csv",
            "--targets-file",
            str(targets),
        ],
        env={"COLUMNS": "140"},
    )
    assert result.exit_code == 3, result.output
    assert "not timed" in result.output
    assert "is llama.cpp" in result.output


def _bench_faulty(every: int) -> Any:
    script = Script(persona="llamacpp", fault="disconnect", fault_every=every)
    server = ScriptedServer(script).start_in_thread()
    try:
        return runner.invoke(
            app,
            ["bench", "llamacpp", "--url", server.base_url, "-n", "2", "--warmup", "0", "--no-csv"],
        )
    finally:
        server.stop_thread()


def test_failed_requests_give_exit_code_1() -> None:
    result = _bench_faulty(every=2)  # one of the two requests is cut off
    assert result.exit_code == 1, result.output
    assert "1 failed: disconnected" in result.output


def test_every_request_failing_is_a_target_not_timed_exit_3() -> None:
    result = _bench_faulty(every=1)
    assert result.exit_code == 3, result.output
    assert "2 failed: disconnected" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--url", "http://x:1", "-c", "a,b"], "whole numbers"),
        (["bench", "--url", "http://x:1", "--preset", "nope"], "unknown preset"),
        (["bench", "--url", "http://x:1", "--slo", "ttft=fast"], "not a number"),
        (["bench", "nosuch"], "unknown target"),
        (["bench"], "name a target"),
        (["bench", "--url", "http://x:1", "--requests", "0"], "--requests"),
    ],
)
def test_bad_usage_exits_2_with_a_reason(args: list[str], message: str) -> None:
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert message in result.output


def test_targets_and_presets_list(tmp_path: Path) -> None:
    out = runner.invoke(app, ["targets"], env={"COLUMNS": "200"}).output
    assert "127.0.0.1:8081" in out and "MLX" in out
    out = runner.invoke(app, ["presets"], env={"COLUMNS": "200"}).output
    assert "day2" in out and "sweep" in out


def test_results_go_to_felab_results_dir(
    tmp_path: Path, llama_like: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from felab_core.settings import get_settings

    monkeypatch.setenv("FELAB_RESULTS_DIR", str(tmp_path / "elsewhere"))
    get_settings.cache_clear()
    try:
        result = runner.invoke(
            app, ["bench", "llamacpp", "--url", llama_like.base_url, "--preset", "quick"]
        )
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert (tmp_path / "elsewhere" / "01-latency.csv").exists()


@pytest.mark.parametrize(
    ("signame", "sigint_ignored"),
    [("SIGINT", False), ("SIGTERM", False), ("SIGTERM", True)],
    ids=["ctrl-c", "sigterm", "sigterm-started-in-background"],
)
def test_ctrl_c_keeps_what_finished_and_leaves_the_csv_alone(
    tmp_path: Path, signame: str, sigint_ignored: bool
) -> None:
    """A real `felab bench` process, interrupted the way a terminal does it (SIGINT), or by
    `kill`, `timeout` or a CI limit (SIGTERM), which had ended it with nothing written (A15).
    Sweep 24 M4: a script's `felab bench ... &` starts with SIGINT ignored, where asyncio sets
    no Ctrl-C handler; a SIGTERM there had ended it (130) with no table and no record."""
    import signal
    import subprocess
    import sys
    import time

    server = ScriptedServer(Script(persona="llamacpp", itl_s=0.01)).start_in_thread()
    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    cmd = [
        sys.executable,
        "-m",
        "felab",
        "bench",
        "llamacpp",
        "--url",
        server.base_url,
        "-n",
        "200",
        "--max-tokens",
        "20",
        "--warmup",
        "0",
        "--csv",
        str(csv_path),
        "--json",
        str(json_path),
    ]
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if sigint_ignored
            else None,
        )
        deadline = time.monotonic() + 20
        while len(server.log) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(getattr(signal, signame))
        out, _ = proc.communicate(timeout=20)
    finally:
        server.stop_thread()
    assert proc.returncode == 130, out
    assert "interrupted" in out
    assert not csv_path.exists()
    import json

    record = json.loads(json_path.read_text())
    assert record["interrupted"] is True
    finished = record["runs"][0]["summary"]["ok"]
    assert 3 <= finished < 200


def test_targets_shows_names_and_notes_as_written(tmp_path: Path) -> None:
    """Fifteenth sweep H4/M9: a model or note `[/]` crashed the table (MarkupError); a note
    `[link=file:///etc/passwd]click[/link]` was shown as a live link."""
    path = tmp_path / "t.toml"
    path.write_text(
        '[targets.a]\nkind = "vllm"\nurl = "http://127.0.0.1:1"\nmodel = "[/]"\n'
        'note = "[link=file:///x]click[/link] [/]"\n'
    )
    result = runner.invoke(app, ["targets", "--targets-file", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "[link=file:///x]click[/link] [/]" in result.output


# a name with brackets is refused since sweep 22 (A13, tests/test_redact_joined.py): the
# paths still hold them
@pytest.mark.parametrize("name", ["x_y", "blink-x"])
def test_a_target_name_or_path_with_brackets_is_shown_as_written(
    llama_like: ScriptedServer, tmp_path: Path, name: str
) -> None:
    """Eighteenth sweep (a2) H3: a targets-file name `x[/y]` reached rich's markup unescaped:
    a MarkupError from the progress thread (a traceback, exit 70) after the run was timed,
    and neither the CSV nor the record was written."""
    targets = tmp_path / "targets.toml"
    targets.write_text(f'[targets."{name}"]\nkind = "llamacpp"\nurl = "{llama_like.base_url}"\n')
    folder = tmp_path / "out[" / "]"
    folder.mkdir(parents=True)
    record = folder / "r[/b].json"
    result = runner.invoke(
        app,
        [
            "bench",
            name,
            "--targets-file",
            str(targets),
            "-n",
            "2",
            "--warmup",
            "0",
            "--max-tokens",
            "4",
            "--no-csv",
            "--json",
            str(record),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(record.read_text())["target"]["name"] == name
    assert f"wrote {record}" in result.output and "Traceback" not in result.output
