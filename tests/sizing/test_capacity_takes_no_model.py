"""`felab size capacity --model X`: click had said "No such option: --model (Possible options:
--help)". Capacity counts the server's cache and needs no model: it says what it needs, and
that `felab size kv` is where a model is read."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from felab.cli.main import app


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--model", "foo-7b"), ("--config", "./models/foo"), ("--gguf", "foo.gguf")],
)
def test_a_model_flag_is_answered_with_what_capacity_needs(flag: str, value: str) -> None:
    result = CliRunner().invoke(
        app, ["size", "capacity", flag, value, "--blocks", "100"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2, result.output
    out = result.output
    assert f"error: size capacity takes no {flag}" in out, out
    assert "--tokens N (or --blocks N --block-size B) with --max-len L" in out
    assert "--vllm-log FILE or --url URL" in out
    assert f"`felab size kv {flag} {value}`" in out  # shell-quoted: these need no quotes
    assert "config.json" in out and "GGUF" in out
    assert "Possible options" not in out


def test_the_model_flags_stay_out_of_capacity_help() -> None:
    result = CliRunner().invoke(app, ["size", "capacity", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--model" not in result.output and "--gguf" not in result.output
