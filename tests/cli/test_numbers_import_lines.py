"""Twentieth sweep (a2) A2-19: `felab numbers import` named line 3 for a row on line 5 when
the file had blank lines (a spreadsheet's "save as CSV" leaves some): each row's line is the
file's own."""

from __future__ import annotations

from pathlib import Path

from felab_core.engine.results import append_csv, read_table_lines
from tests.cli.test_numbers_cli import _own_data, felab, row

__all__ = ["_own_data"]  # the fixture: each test its own data folder


def _with_blank_lines(path: Path, rows: list[dict[str, str]]) -> None:
    append_csv(path, rows)
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n\n".join([header, *lines, ""]) + "\n", encoding="utf-8")


def test_a_row_after_blank_lines_is_named_by_its_own_line(tmp_path: Path) -> None:
    csv_path = tmp_path / "saved.csv"
    bad = row("ollama", "llama3.1:8b", "abc", timestamp="2026-03-04T09:00:00+00:00")
    _with_blank_lines(csv_path, [row("ollama", "llama3.1:8b"), bad])
    assert read_table_lines(csv_path)[2] == [3, 5]
    code, out = felab("import", str(csv_path))
    assert code == 2 and "line 5: result column writing_tps_p50 holds 'abc'" in out, out
    assert "line 3:" not in out
