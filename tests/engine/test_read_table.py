"""Reading a results CSV from anywhere (`felab numbers import`, `felab memo --csv`): what the
csv module refuses is said in felab's words with its line, and a non-UTF-8 byte is counted from
the start of the file."""

from __future__ import annotations

import codecs
import csv
from pathlib import Path

import pytest

from felab_core.engine.results import (
    CSV_COLUMNS,
    ResultsFileError,
    UnreadableResults,
    append_csv,
    read_table,
)

SAMPLE_CSV = Path(__file__).resolve().parents[1] / "reports" / "fixtures" / "sample-latency.csv"


def test_reads_the_header_and_rows() -> None:
    columns, rows = read_table(SAMPLE_CSV)
    assert tuple(columns) == CSV_COLUMNS
    assert len(rows) == 8 and rows[0]["server"] == "ollama"


def test_a_byte_order_mark_is_not_a_column(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(codecs.BOM_UTF8 + SAMPLE_CSV.read_bytes())
    assert read_table(path) == read_table(SAMPLE_CSV)


def test_a_cell_past_the_csv_limit_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "hugecell.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        writer.writerow(["y" * 200_000] + [""] * (len(CSV_COLUMNS) - 1))
    with pytest.raises(UnreadableResults) as caught:
        read_table(path)
    message = str(caught.value)
    assert message.startswith(
        "line 2: a cell longer than 131,072 characters: not a row felab writes"
    )
    assert "field limit" not in message


def test_the_first_bad_byte_is_counted_from_the_start_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    good = codecs.BOM_UTF8 + b"server,model\n" + b"a" * 20_000 + b"\n"
    path.write_bytes(good + b"caf\xe9\n")
    with pytest.raises(UnreadableResults, match=rf"is not UTF-8 text \(byte {len(good) + 3}\)"):
        read_table(path)


def test_random_bytes_fail_at_byte_0(tmp_path: Path) -> None:
    path = tmp_path / "random.csv"
    path.write_bytes(b"\xbe\x00\x01\xff")
    with pytest.raises(UnreadableResults, match=r"is not UTF-8 text \(byte 0\)"):
        read_table(path)


def test_a_row_with_fewer_or_more_cells_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    path.write_text("server,model,preset\nollama,m,latency\nollama,m\n", encoding="utf-8")
    with pytest.raises(UnreadableResults, match=r"^line 3: 2 cells where the header has 3"):
        read_table(path)
    path.write_text("server,model\nollama,m,extra,more\n", encoding="utf-8")
    with pytest.raises(UnreadableResults, match=r"^line 2: 4 cells where the header has 2"):
        read_table(path)


def test_a_column_named_twice_is_refused(tmp_path: Path) -> None:
    """Eighth sweep: felab's header plus a second `host`; csv kept the last cell, so the run was
    stored as from another machine."""
    header = ",".join([*CSV_COLUMNS, "host"])
    path = tmp_path / "twice.csv"
    path.write_text(header + "\n" + ",".join(["x"] * (len(CSV_COLUMNS) + 1)) + "\n")
    with pytest.raises(UnreadableResults, match="has a header that names host twice"):
        read_table(path)


def test_a_file_past_the_size_limit_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thirteenth sweep: a 220 MB CSV was read for 15 s in silence (2.1 million rows)."""
    import felab_core.engine.results as results

    monkeypatch.setattr(results, "MAX_RESULTS_BYTES", 1024)
    path = tmp_path / "big.csv"
    path.write_text(",".join(CSV_COLUMNS) + "\n" + "x," * 600 + "\n")
    with pytest.raises(UnreadableResults, match=r"is over 0 MiB: .* split it"):
        read_table(path)
    path.write_text(",".join(CSV_COLUMNS) + "\n")
    assert read_table(path) == (list(CSV_COLUMNS), [])


@pytest.mark.parametrize(("mark", "name"), [(";", "`;`"), ("\t", "tab")])
def test_a_semicolon_separated_file_is_said_so(tmp_path: Path, mark: str, name: str) -> None:
    """A spreadsheet in a language with decimal commas saves CSV with `;`: read as one column,
    it was blamed for "37 cells where the header has 1" or for having no server column."""
    path = tmp_path / "semicolons.csv"
    path.write_text(
        mark.join(CSV_COLUMNS) + "\n" + mark.join(["1,5"] * len(CSV_COLUMNS)) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(UnreadableResults) as caught:
        read_table(path)
    assert str(caught.value).startswith(f"looks {name}-separated")
    assert "save it with commas" in str(caught.value)
    with pytest.raises(ResultsFileError) as appended:  # felab bench --csv onto it
        append_csv(path, [])
    assert f"looks {name}-separated" in str(appended.value)
    assert "move it aside" in str(appended.value)


@pytest.mark.parametrize(("mark", "name"), [(";", "`;`"), ("\t", "a tab")])
def test_a_header_mixing_delimiters_names_its_cell(tmp_path: Path, mark: str, name: str) -> None:
    """`timestamp;host;target,model,...`: the sound row 2 was blamed ("36 cells where the
    header has 34: the row is cut short"); the header cell holding `;` is named instead."""
    lines = SAMPLE_CSV.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[0] = lines[0].replace("timestamp,host,target", f"timestamp{mark}host{mark}target", 1)
    path = tmp_path / "mixed.csv"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(UnreadableResults) as caught:
        read_table(path)
    message = str(caught.value)
    assert message.startswith(f"has a header cell {f'timestamp{mark}host{mark}target'!r}")
    assert f"holding {name}" in message and "one delimiter, commas" in message
    assert "cut short" not in message
    with pytest.raises(ResultsFileError) as appended:  # felab bench --csv onto it
        append_csv(path, [])
    assert "has a header cell" in str(appended.value) and "move it aside" in str(appended.value)


def test_rows_with_semicolons_under_a_comma_header_are_said_so(tmp_path: Path) -> None:
    """A `,` header over `;` rows: "line 2: 1 cells ... cut short" hid that the delimiters
    differ."""
    path = tmp_path / "rows.csv"
    path.write_text(",".join(CSV_COLUMNS) + "\n" + ";".join(["1"] * len(CSV_COLUMNS)) + "\n")
    with pytest.raises(UnreadableResults) as caught:
        read_table(path)
    message = str(caught.value)
    assert message.startswith(f"line 2: 1 cell where the header has {len(CSV_COLUMNS)}: ")
    assert "holds `;` or a tab where the header has `,`" in message
    assert "cut short" not in message
