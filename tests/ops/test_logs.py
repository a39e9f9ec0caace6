"""felab_core.ops.logs: every line masked, and a peer's huge field said by its start."""

from __future__ import annotations

import logging

import pytest

from felab_core.ops import logs
from felab_core.settings import Settings


def _logged(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    """What one warning writes to stderr through felab's handler (set up here: a handler made
    in a fixture writes to the setup phase's stream, closed by the time the test runs)."""
    logs.setup(Settings(log_level="INFO"))
    try:
        logging.getLogger("felab.ingest").warning(*args)  # type: ignore[arg-type]
        return capsys.readouterr().err
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_felab", False)]:
            root.removeHandler(handler)


def test_a_huge_field_is_cut_after_it_is_masked(capsys: pytest.CaptureFixture[str]) -> None:
    """Fourteenth sweep: a 200,000-character worker id in "refused an event from worker %s"
    held the ingest for two minutes; now the line is masked whole, then cut."""
    who = "redis://u:hunter2pw@h/" + "a" * 200_000
    line = _logged(capsys, "refused an event from worker %s: %s", who, "no")
    assert "hunter2pw" not in line and "redis://u:***@h/aaa" in line
    assert "characters cut)" in line and len(line) < logs.MAX_MESSAGE + 300


def test_a_short_line_is_left_whole(capsys: pytest.CaptureFixture[str]) -> None:
    assert "applied 3 events" in _logged(capsys, "applied %s events", 3)


def test_a_peers_escape_codes_are_shown_not_obeyed(capsys: pytest.CaptureFixture[str]) -> None:
    """Eighteenth sweep (b) M4: Celery's own retry line quoted a broker's error with its escape
    codes, which acted on the operator's terminal; a traceback's line breaks and tabs stay."""
    line = _logged(capsys, "Cannot connect to %s: %s\n\tretrying", "redis://h:1", "\x1b[2J\x07bad")
    assert "\x1b" not in line and "\x07" not in line
    assert "?[2J?bad\n\tretrying" in line
