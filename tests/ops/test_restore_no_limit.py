"""`felab db restore` (sweep 22 b B2): a backup holding an 'ok' figure with no speed limit
behind it (its member's machine or its server's model size unknown) is refused: felab stores
such a figure 'unverified', and migration 0015 moved every older one there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ops.test_restore_checks import _refused_once_changed, live  # noqa: F401 (a fixture)
from tests.ops.test_restore_rows import full  # noqa: F401 (a fixture)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            "UPDATE members SET chip = NULL, bandwidth_gb_s = NULL",
            "holds a figure ranked with no speed limit behind it: numbers row 1 (felab does not "
            "know your machine yet",
        ),
        (
            "UPDATE member_servers SET model_bytes = NULL",
            "holds a figure ranked with no speed limit behind it: numbers row 1 (felab does not "
            "know the size of the model file ollama runs",
        ),
    ],
)
def test_an_ok_figure_with_no_limit_is_refused(
    live: str,  # noqa: F811 (the fixture)
    full: Path,  # noqa: F811 (the fixture)
    change: str,
    says: str,
) -> None:
    _refused_once_changed(live, full, change, says)
