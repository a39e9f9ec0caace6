"""`felab memo` through typer's CliRunner: files written, the memo printed, clear refusals."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from felab.cli.main import app
from tests.reports.conftest import GOLDEN, SAMPLE_CSV
from tests.reports.test_memo import png_size

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
MAC = ["--chip", "M4 Pro", "--model", "llama-3.1-8b", "--model-bytes", "4.9GB"]


def memo(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memo", *args], env=WIDE)
    return result.exit_code, result.stdout, result.stderr


def test_memo_is_registered_and_its_help_teaches() -> None:
    top = runner.invoke(app, ["--help"], env=WIDE)
    assert "memo" in top.output
    code, out, _ = memo("--help")
    assert code == 0
    for flag in ("--csv", "--chip", "--bandwidth", "--model-bytes", "--kv-memory", "--vllm-log"):
        assert flag in out
    assert "felab memo --chip" in out  # an example to copy


def test_writes_the_memo_and_its_charts(tmp_path: Path) -> None:
    out = tmp_path / "results" / "memo.md"
    code, stdout, stderr = memo(
        "--csv", str(SAMPLE_CSV), *MAC, "--kv-memory", "16GiB", "--out", str(out)
    )
    assert code == 0, stderr
    speed, conc = out.with_name("memo-speed.png"), out.with_name("memo-concurrency.png")
    for path in (out, speed, conc):
        assert f"wrote {path}" in stdout
    for chart in (speed, conc):
        png_size(chart.read_bytes())
    text = out.read_text(encoding="utf-8")
    # the same memo as the golden file, apart from how the CSV is named
    golden = GOLDEN.read_text(encoding="utf-8").replace("results/01-latency.csv", str(SAMPLE_CSV))
    assert text == golden


def test_charts_follow_the_memo_name(tmp_path: Path) -> None:
    out = tmp_path / "acme.md"
    code, _, stderr = memo("--csv", str(SAMPLE_CSV), *MAC, "--blocks", "8234", "--out", str(out))
    assert code == 0, stderr
    assert (tmp_path / "acme-speed.png").exists()
    assert "](acme-concurrency.png)" in out.read_text(encoding="utf-8")


def test_no_charts(tmp_path: Path) -> None:
    out = tmp_path / "memo.md"
    code, _, _ = memo(
        "--csv", str(SAMPLE_CSV), *MAC, "--kv-memory", "16GiB", "--out", str(out), "--no-charts"
    )
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memo.md"]
    assert ".png" not in out.read_text(encoding="utf-8")


def test_out_dash_prints_the_memo() -> None:
    code, out, _ = memo(
        "--csv",
        str(SAMPLE_CSV),
        "--bandwidth",
        "273",
        "--model",
        "llama-3.1-8b",
        "--model-bytes",
        "4.9GB",
        "--blocks",
        "8234",
        "--contexts",
        "4096,8192",
        "--out",
        "-",
    )
    assert code == 0
    assert out.startswith("# Sizing memo: Llama 3.1 8B on a 273 GB/s machine")
    assert "| 8,192 (as planned) | 16.08 | 16 | 32 | x2 |" in out
    assert ".png" not in out


def test_refusals_exit_2_with_what_to_pass(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    cases = [
        (["--csv", str(tmp_path / "nope.csv"), *MAC, "--kv-memory", "16GiB"], "does not exist"),
        (["--csv", str(other), *MAC, "--kv-memory", "16GiB"], "other columns"),
        (
            ["--csv", str(SAMPLE_CSV), *MAC, "--kv-memory", "16GiB", "--chip", "x=M9"],
            "no rows come from host 'x'",
        ),
        (["--csv", str(SAMPLE_CSV), *MAC], "--kv-memory"),
        (
            ["--csv", str(SAMPLE_CSV), *MAC, "--kv-memory", "16GiB", "--contexts", "4k"],
            "--contexts '4k'",
        ),
        (
            [
                "--csv",
                str(SAMPLE_CSV),
                "--chip",
                "M9 Hyper",
                "--model",
                "llama-3.1-8b",
                "--model-bytes",
                "4.9GB",
                "--kv-memory",
                "16GiB",
            ],
            "felab size chips",
        ),
    ]
    for args, needle in cases:
        code, out, err = memo(*args, "--out", str(tmp_path / "m.md"))
        assert code == 2, (args, out, err)
        assert err.startswith("error: ") and needle in err, err
        assert "Traceback" not in out + err
    assert not (tmp_path / "m.md").exists()


def test_a_results_path_that_is_not_utf8_is_written_with_a_question_mark(tmp_path: Path) -> None:
    """Eighteenth sweep (c H2): a --csv named with byte 0xFF (a legal Linux name) stopped the
    memo with UnicodeEncodeError (exit 70) after it had emptied the last memo."""
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/\xfflat.csv"))
    odd.write_bytes(SAMPLE_CSV.read_bytes())
    out = tmp_path / "memo.md"
    code, _, stderr = memo("--csv", str(odd), *MAC, "--kv-memory", "16GiB", "--out", str(out))
    assert code == 0, stderr
    assert "?lat.csv" in out.read_text(encoding="utf-8")
    code, _, stderr = memo("--csv", str(odd), *MAC, "--kv-memory", "16GiB", "--out", str(out))
    assert code == 0, stderr  # a memo replaces the last one
