"""felab_core.numbers.speeds.typed_text: a figure typed in other digits is shown with the
number it was read as (tenth sweep: '٣٣ tok/s' said nothing of 33)."""

from __future__ import annotations

from felab_core.db import models as m
from felab_core.numbers.speeds import typed_text


def _number(typed: str, value: float) -> m.Number:
    return m.Number(value=value, typed_value=typed, typed_unit="tok/s")


def test_other_digits_are_shown_with_the_figure_read() -> None:
    assert typed_text(_number("٣٣", 33.0)) == "٣٣ tok/s (33.0 tok/s)"
    assert typed_text(_number("４４.６", 44.6)) == "４４.６ tok/s (44.6 tok/s)"
    assert typed_text(_number("44.6", 44.6)) == "44.6 tok/s"
