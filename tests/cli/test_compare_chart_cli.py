"""`felab compare --chart`: the file's suffix picks PNG, SVG or PDF; any other name is refused
before anything is read (matplotlib would write a PNG under chart.txt without a word)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.compare import compare_records
from felab_core.engine.record_reading import load_record
from felab_core.files import NamedFileError
from felab_core.reports.compare_chart import draw_comparison
from tests.engine.test_compare import _record, _requests, write_record

runner = CliRunner()


@pytest.fixture
def records(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(7)
    a = _record([(1, _requests(list(0.050 + rng.normal(0, 0.003, 60))))])
    b = _record([(1, _requests(list(0.060 + rng.normal(0, 0.003, 60))))])
    paths = (tmp_path / "a.json", tmp_path / "b.json")
    for path, record in zip(paths, (a, b), strict=True):
        write_record(path, record)
    return paths


def compare(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["compare", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("chart.txt", "ends in '.txt'"),
        ("chart.jpg", "ends in '.jpg'"),
        ("chart", "has no suffix"),
        ("a.json", "ends in '.json'"),
    ],
)
def test_a_chart_name_that_is_not_png_svg_or_pdf_is_refused(
    records: tuple[Path, Path], tmp_path: Path, name: str, needle: str
) -> None:
    out = tmp_path / "out" / name
    code, stdout, stderr = compare(str(records[0]), str(records[1]), "--chart", str(out))
    assert code == 2, stdout
    assert needle in stderr and "PNG, SVG or PDF" in stderr and ".png" in stderr
    assert stdout == ""  # refused before the comparison is printed
    assert not out.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("where", "what"), [("/dev/null", "not a regular file"), ("", "a folder")])
def test_a_chart_that_names_a_device_or_a_folder_is_refused(
    records: tuple[Path, Path], tmp_path: Path, where: str, what: str
) -> None:
    """Twelfth sweep: `--chart /dev/null` was told to 'name the file null.png'."""
    if not where:  # a folder that happens to end in .png
        where = str(tmp_path / "charts.png")
        Path(where).mkdir()
    code, stdout, stderr = compare(str(records[0]), str(records[1]), "--chart", where)
    assert code == 2 and stdout == ""
    assert f"--chart {where} is {what}: the chart is a file of its own" in stderr
    assert "null.png" not in stderr


def test_the_chart_flag_is_checked_before_the_records(tmp_path: Path) -> None:
    code, _, stderr = compare(
        str(tmp_path / "none-a.json"), str(tmp_path / "none-b.json"), "--chart", "c.txt"
    )
    assert code == 2 and "--chart c.txt ends in '.txt'" in stderr


@pytest.mark.parametrize(
    ("name", "magic"),
    [("change.png", b"\x89PNG"), ("change.SVG", b"<?xml"), ("change.pdf", b"%PDF")],
)
def test_each_suffix_gets_its_own_format(
    records: tuple[Path, Path], tmp_path: Path, name: str, magic: bytes
) -> None:
    out = tmp_path / name
    code, stdout, stderr = compare(str(records[0]), str(records[1]), "--chart", str(out))
    assert code == 0, stderr
    assert f"chart: {out}" in stdout + stderr
    assert out.read_bytes().startswith(magic)


def test_a_records_name_with_escape_codes_is_shown_with_question_marks(
    records: tuple[Path, Path], tmp_path: Path
) -> None:
    """Eighteenth sweep (a2) L1: a file named with `ESC[2J` cleared the screen in the table's
    title; the record's own words were already shown with '?'. And 99.9 % is a smallest effect
    the help allows (L2: it said 0-99)."""
    odd = tmp_path / "\x1b[2J\x1b[31mevil.json"
    odd.write_bytes(records[1].read_bytes())
    code, out, err = compare(str(records[0]), str(odd), "--min-effect", "99.9")
    assert code == 0, err
    assert "\x1b" not in out and "?[2J?[31mevil.json" in out
    code, _, err = compare(str(records[0]), str(odd), "--min-effect", "100")
    assert code == 2 and "from 0 to under 100" in err


def test_a_chart_whose_folders_do_not_exist_is_refused_and_nothing_made(
    records: tuple[Path, Path], tmp_path: Path
) -> None:
    """Sweep 22 (a2), noticed: a chart under a missing tree is refused before the comparison,
    as bench's --json is (one missing folder is made, as there); drawing it made the whole
    tree (mkdir parents=True) for anyone who checked the path less carefully."""
    for where in (Path("/nonexistent/dir/chart.png"), tmp_path / "n1" / "n2" / "chart.png"):
        code, stdout, stderr = compare(str(records[0]), str(records[1]), "--chart", str(where))
        assert code == 2 and stdout == "", stderr
        assert f"{where.parent.parent} does not exist, so felab will not make the chart" in stderr
        assert not where.parent.parent.exists()
    one = tmp_path / "charts" / "chart.png"  # one missing folder: made, as for bench's files
    code, _, stderr = compare(str(records[0]), str(records[1]), "--chart", str(one))
    assert code == 0 and one.read_bytes().startswith(b"\x89PNG"), stderr
    comparison = compare_records(load_record(records[0]), load_record(records[1]))
    deep = tmp_path / "d1" / "d2" / "chart.png"
    with pytest.raises(NamedFileError, match="does not exist, so felab will not make the chart"):
        draw_comparison(comparison, deep)
    assert not (tmp_path / "d1").exists()
