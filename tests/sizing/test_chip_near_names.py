"""A chip typed close to one in the bandwidth table names the close ones (it had said only "run
`felab size chips` for the list", leaving a person to find 'M4 Pro' for 'M4 Prp')."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing.errors import SizingError
from felab_core.sizing.speed_limit import find_chip


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("M4 Prp", "(did you mean 'M4 Pro'?)"),
        ("H100 SMX", "(did you mean 'H100 SXM'?)"),
        ("MI300", "(did you mean 'MI300X'?)"),
        ("RTX 4900", "(did you mean 'RTX 4090', 'RTX 4080' or 'RTX 4070'?)"),
    ],
)
def test_a_near_name_is_offered(typed: str, says: str) -> None:
    with pytest.raises(SizingError) as exc:
        find_chip(typed)
    text = str(exc.value)
    assert f"{typed!r} is not in felab's bandwidth table {says}" in text, text
    assert "felab size chips" in text and "--bandwidth" in text


def test_a_name_near_nothing_offers_nothing() -> None:
    with pytest.raises(SizingError) as exc:
        find_chip("Z80")
    assert "did you mean" not in str(exc.value)


def test_size_limit_says_it() -> None:
    result = CliRunner().invoke(
        app, ["size", "limit", "--chip", "M4 Prp", "--model-bytes", "4.9GB"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2, result.output
    assert "did you mean 'M4 Pro'?" in result.output
