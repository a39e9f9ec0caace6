"""Reading a results CSV for `felab numbers import`: what the csv module refuses is said in
felab's words with its line, and a non-UTF-8 byte is counted from the start of the file."""

from __future__ import annotations

import codecs
import csv
from pathlib import Path

import pytest

from felab_core.engine.results import CSV_COLUMNS
from felab_core.errors import Invalid
from felab_core.numbers.importing import read_results_csv

SAMPLE_CSV = Path(__file__).resolve().parents[1] / "reports" / "fixtures" / "sample-latency.csv"


def test_reads_the_header_and_rows() -> None:
    columns, rows = read_results_csv(SAMPLE_CSV)
    assert tuple(columns) == CSV_COLUMNS
    assert len(rows) == 8 and rows[0]["server"] == "ollama"


def test_a_byte_order_mark_is_not_a_column(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_bytes(codecs.BOM_UTF8 + SAMPLE_CSV.read_bytes())
    assert read_results_csv(path) == read_results_csv(SAMPLE_CSV)


def test_a_cell_past_the_csv_limit_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "hugecell.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        writer.writerow(["y" * 200_000] + [""] * (len(CSV_COLUMNS) - 1))
    with pytest.raises(Invalid) as caught:
        read_results_csv(path)
    message = str(caught.value)
    assert message.startswith(
        "line 2: a cell longer than 131,072 characters: not a row felab writes"
    )
    assert "field limit" not in message


def test_the_first_bad_byte_is_counted_from_the_start_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    good = codecs.BOM_UTF8 + b"server,model\n" + b"a" * 20_000 + b"\n"
    path.write_bytes(good + b"caf\xe9\n")
    with pytest.raises(UnicodeDecodeError) as caught:
        read_results_csv(path)
    assert caught.value.start == len(good) + 3


def test_random_bytes_fail_at_byte_0(tmp_path: Path) -> None:
    path = tmp_path / "random.csv"
    path.write_bytes(b"\xbe\x00\x01\xff")
    with pytest.raises(UnicodeDecodeError) as caught:
        read_results_csv(path)
    assert caught.value.start == 0
