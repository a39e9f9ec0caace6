"""A value quoted back in an error is masked like everything else felab prints: a password or key
typed in the wrong place (a URL as --chip, a key as a server's name) was repeated in clear by 14
"unknown value" refusals (sweep 27); felab/cli/errors.py masks every error and warning line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app

KEY = "sk-proj-Zq8rT2vX9wL4mN7pK3sJ6hF1dG5cB0aE"


@pytest.mark.parametrize(
    "args",
    [
        ["numbers", "enter", "http://u:hunter2-pw@h:8080", "40"],
        ["numbers", "enter", KEY, "40"],
        ["size", "limit", "--chip", "http://u:hunter2-pw@host", "--model-bytes", "4GB"],
        ["size", "limit", "--chip", KEY, "--model-bytes", "4GB"],
        ["size", "kv", "--model", "http://u:hunter2-pw@hf.co/x"],
        ["drill", "--timezone", KEY, "--list"],
        ["worker", "pair", "--code", KEY],
        # bench's own error lines, and click's usage box (typer prints it, not felab)
        ["bench", "--url", "http://127.0.0.1:9", "--kind", "vllm", "--find-max-rate", KEY],
        ["bench", "--url", "http://127.0.0.1:9", "-c", KEY],
    ],
    ids=[
        "server-url",
        "server-key",
        "chip-url",
        "chip-key",
        "model-url",
        "tz-key",
        "code-key",
        "bench-objective",
        "usage-box",
    ],
)
def test_a_secret_typed_where_a_name_goes_is_masked_in_the_refusal(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("FELAB_DATABASE_URL", raising=False)
    from felab_core.settings import get_settings

    get_settings.cache_clear()
    try:
        out = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    finally:
        get_settings.cache_clear()
    said = out.output
    assert out.exit_code == 2, said
    assert "hunter2-pw" not in said and KEY.lower() not in said.lower(), said
    assert "***" in said, said
