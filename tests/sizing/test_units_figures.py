"""Figures shown readable: a small size in MB (not '0.0 GB'), a slow speed and a small share to
their first figure (not '0.0 tokens per second is 0 %')."""

from __future__ import annotations

from fractions import Fraction

from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing.units import GB, figure_text, size_text

runner = CliRunner()


def test_size_text_keeps_small_sizes_readable() -> None:
    assert size_text(4_900_000_000) == "4.9 GB"
    assert size_text(16 * GB, 1) == "16.0 GB"
    assert size_text(40_000_000) == "40 MB"
    assert size_text(703_125) == "703.13 kB"
    assert "0.0" not in size_text(1_048_576)


def test_figure_text_keeps_the_first_figure() -> None:
    assert figure_text(Fraction(446, 10)) == "44.6"
    assert figure_text(Fraction(1, 1000)) == "0.001"
    assert figure_text(Fraction(1, 10000), 0) == "0.0001"
    assert figure_text(80, 0) == "80"
    assert figure_text(0, 1) == "0.0"


def test_size_limit_shows_the_slowest_speed_it_takes() -> None:
    """--measured 0.001 (LEAST_SPEED) had shown '0.0 tokens/s = 0 % of the ceiling'."""
    result = runner.invoke(
        app,
        ["size", "limit", "--chip", "H100 SXM", "--model-bytes", "4.9GB", "--measured", "0.001"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "0.001 tokens/s = 0.0001 % of the ceiling" in result.output
    assert "0.001 tokens per second is 0.0001 % of the about 684" in result.output
    assert "0.0 tokens" not in result.output and " 0 %" not in result.output
