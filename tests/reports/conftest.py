"""Shared inputs for the memo tests: the sample results CSV and the course's Day 2 Mac."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from felab_core.engine.results import CSV_COLUMNS
from felab_core.reports.memo import MachineSpec, MemoInputs

HERE = Path(__file__).parent
SAMPLE_CSV = HERE / "fixtures" / "sample-latency.csv"
GOLDEN = HERE / "golden" / "memo.md"
SOURCE = "results/01-latency.csv"  # how the memo names its CSV, fixed so the golden file is stable

# The course's Day 1 sample Mac and Day 2 model: 273 GB/s ÷ 4.9 GB = about 56 tokens/s.
MAC_INPUTS = MemoInputs(
    machines=(MachineSpec(chip="M4 Pro"),),
    model="llama-3.1-8b",
    model_bytes="4.9GB",
    kv_memory="16GiB",
)


def gguf_inputs(path: Path, model_bytes: str | None = None) -> MemoInputs:
    """A memo of the GGUF at `path` on a 273 GB/s machine (its size read from the file unless
    `model_bytes` is given), planned to 2,048 tokens."""
    return replace(
        MAC_INPUTS,
        machines=(MachineSpec(bandwidth="273"),),
        model=None,
        model_bytes=model_bytes,
        gguf=str(path),
        max_len=2048,
        contexts=(1024, 2048),
    )


def sample_rows() -> list[dict[str, str]]:
    """The sample CSV's rows, as felab_core.engine.results.read_csv gives them."""
    with SAMPLE_CSV.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def blank_row(**values: str) -> dict[str, str]:
    """A row with every column felab writes, empty unless given."""
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(values)
    return row


def write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def csv_writer(tmp_path: Path) -> Callable[[list[dict[str, str]]], Path]:
    """Write rows to a fresh results CSV with felab's real header."""
    return lambda rows: write_rows(tmp_path / "01-latency.csv", rows)
