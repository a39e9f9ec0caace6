"""`--model-bytes 8b` reads like 8 billion parameters: it had been taken as 8 bytes and refused
as "8 bytes of weights is no model", which never said what the flag takes; now both
readings are said."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.reports.memo import build_memo
from felab_core.sizing import units
from felab_core.sizing.errors import SizingError
from felab_core.sizing.units import GB
from tests.reports.conftest import MAC_INPUTS, sample_rows

WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}


@pytest.mark.parametrize(
    ("typed", "billions", "at16"),
    [("8b", "8", "16"), ("70B", "70", "140"), ("1.5b", "1.5", "3")],
)
def test_a_parameter_count_is_said_as_one(typed: str, billions: str, at16: str) -> None:
    with pytest.raises(SizingError) as exc:
        units.parse_model_bytes(typed)
    text = str(exc.value)
    said = f"--model-bytes {typed} is {billions} bytes, no model file; it reads like {billions}"
    assert f"{said} billion parameters" in text, text
    assert "takes the weights' size, such as 16GB" in text
    assert f"{billions}B parameters at 16-bit are about {at16} GB" in text
    assert "--model NAME --bits-per-weight 16" in text


@pytest.mark.parametrize("typed", ["0.000001B", "0.05b", "20000B"])
def test_no_parameter_count_anyone_means_is_not_offered_as_one(typed: str) -> None:
    """'0.000001B ... reads like 0 billion parameters (0B at 16-bit are about 0 GB)' was said;
    out of 0.1 to 10,000 billion the size alone is refused."""
    assert units.parse_model_bytes(typed) == units.parse_bytes(typed)  # read as bytes
    out = CliRunner().invoke(app, ["size", "limit", "--model-bytes", typed, "--chip", "M4 Pro"])
    text = " ".join(out.output.split())
    assert out.exit_code == 2 and "is no model" in text, text
    assert "billion parameters" not in text


@pytest.mark.parametrize(
    ("typed", "size"),
    [("4.9GB", 49 * GB // 10), ("4912898304B", 4912898304), ("4912898304", 4912898304)],
)
def test_a_size_is_still_a_size(typed: str, size: int) -> None:
    assert units.parse_model_bytes(typed) == Fraction(size)


def test_bytes_written_out_are_not_called_parameters() -> None:
    assert units.parse_model_bytes("8 bytes") == 8  # refused later as "no model", in bytes


@pytest.mark.parametrize(
    ("args", "table"),
    [
        (("limit", "--chip", "M4 Pro", "--model-bytes", "8b"), True),
        (("chips", "--model-bytes", "8B"), False),
    ],
)
def test_size_commands_say_it(args: tuple[str, ...], table: bool) -> None:
    result = CliRunner().invoke(app, ["size", *args], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "bytes, no model file; it reads like 8 billion parameters" in result.output, (
        result.output
    )
    assert ("--bits-per-weight 16" in result.output) == table  # size chips has no --model


def test_the_memo_says_it() -> None:
    inputs = replace(MAC_INPUTS, model_bytes="8b")
    with pytest.raises(
        Exception, match="8 bytes, no model file; it reads like 8 billion parameters"
    ) as exc:
        build_memo(sample_rows(), inputs)
    assert "such as 16GB" in str(exc.value)
