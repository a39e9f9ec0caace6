"""`felab model tiny`, `felab lab where`, `felab serve` from the command line."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from felab.cli.main import app

runner = CliRunner()


def test_model_tiny_writes_both_formats(tmp_path: Path) -> None:
    result = runner.invoke(app, ["model", "tiny", "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m" / "tiny.gguf").is_file()
    assert (tmp_path / "m" / "hf" / "model.safetensors").is_file()
    assert "Lorem ipsum" in result.output and "felab serve llamacpp" in result.output


def test_model_tiny_refuses_an_unknown_size(tmp_path: Path) -> None:
    result = runner.invoke(app, ["model", "tiny", "--out", str(tmp_path), "--size", "huge"])
    assert result.exit_code == 2


def test_lab_where_lists_every_engine(isolated_cache: Path) -> None:
    result = runner.invoke(app, ["lab", "where"])
    assert result.exit_code == 0, result.output
    for name in ("llamacpp", "mlx", "vllm", "ollama"):
        assert name in result.output
    assert "felab lab install" in result.output


def test_serve_missing_model_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "llamacpp", "--model", str(tmp_path / "no.gguf")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_serve_engine_not_installed(isolated_cache: Path, tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    result = runner.invoke(app, ["serve", "llamacpp", "--model", str(gguf), "--", "-c", "2048"])
    assert result.exit_code == 2
    assert "felab lab install llamacpp" in result.output


def test_serve_rejects_an_unknown_engine(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", "ollama", "--model", str(tmp_path)])
    assert result.exit_code == 2
