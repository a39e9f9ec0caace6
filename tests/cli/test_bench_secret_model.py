"""A key passed as --model by mistake (sweep 22 a2 A2-13): felab sends it as asked, but no
table, results CSV or record it writes holds it; the model column says it was masked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()

KEYS = (
    "sk-proj-4f9Qx2LmN7pR8sT1vW3yZ6bC",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
)


@pytest.fixture
def vllm_like() -> Iterator[ScriptedServer]:
    server = ScriptedServer(Script(persona="vllm", itl_s=0.001, ttft_s=0.002)).start_in_thread()
    yield server
    server.stop_thread()


@pytest.mark.parametrize("key", KEYS)
def test_a_key_given_as_model_is_in_no_output(
    tmp_path: Path, vllm_like: ScriptedServer, key: str
) -> None:
    csv_path = tmp_path / "01-latency.csv"
    json_path = tmp_path / "run.json"
    common = ["bench", "--url", vllm_like.base_url, "--model", key, "-n", "2", "-c", "1"]
    common += ["--max-tokens", "4", "--warmup", "0"]
    shown = []
    for fmt in ("table", "md", "csv", "json"):
        files = ["--csv", str(csv_path), "--json", str(json_path)] if fmt == "table" else []
        files = files or ["--no-csv"]
        env = {"COLUMNS": "200", "FELAB_RESULTS_DIR": str(tmp_path)}
        result = runner.invoke(app, [*common, *files, "-o", fmt], env=env)
        assert result.exit_code == 0, result.output
        shown.append(result.output)
    assert vllm_like.log and all(r.body.get("model") == key for r in vllm_like.log)  # as asked
    written = [csv_path.read_text(), json_path.read_text(), *shown]
    assert all(key not in text for text in written)
    assert all(key[:12] not in text for text in written)  # not half of it either
    assert "***" in csv_path.read_text() and "***" in json_path.read_text()
    assert "looks like a key or password" in shown[0]  # said, not only masked


def test_a_key_given_as_a_target_name_is_not_repeated() -> None:
    result = runner.invoke(app, ["bench", KEYS[0], "--no-csv"])
    assert result.exit_code == 2
    assert "unknown target" in result.output and KEYS[0] not in result.output
