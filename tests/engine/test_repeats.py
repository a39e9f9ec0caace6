"""`--repeat N`: each headline figure's mean over N runs with its Student-t 95 % interval."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.repeats import HEADLINES, Interval, t95
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1.0, 1e4), min_size=2, max_size=40))
def test_the_interval_is_the_t_interval(values: list[float]) -> None:
    iv = Interval(HEADLINES[0], tuple(values))
    n = len(values)
    assert iv.mean == pytest.approx(statistics.fmean(values))
    expected = t95(n - 1) * statistics.stdev(values) / n**0.5
    assert iv.half_width == pytest.approx(expected)


def test_one_value_has_no_interval() -> None:
    assert Interval(HEADLINES[0], (5.0,)).half_width is None
    assert t95(1) == 12.706 and t95(30) == 2.042 and t95(500) == 1.96


def test_repeats_of_a_known_server(tmp_path: Path) -> None:
    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.02, itl_s=0.004)).start_in_thread()
    csv_path = tmp_path / "rows.csv"
    try:
        result = runner.invoke(
            app,
            [
                "bench",
                "llamacpp",
                "--url",
                server.base_url,
                "-n",
                "6",
                "--max-tokens",
                "6",
                "--repeat",
                "3",
                "--csv",
                str(csv_path),
                "--json",
                str(tmp_path / "run.json"),
                "-o",
                "json",
            ],
        )
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    rows = {r["figure"]: r for r in json.loads(result.stdout)}
    ttft = rows["TTFT p50"]
    assert ttft["mean"] == pytest.approx(20.0, abs=3.0)  # the server's 20 ms
    assert 0 < ttft["half_width"] < 5.0
    assert rows["ITL p50"]["mean"] == pytest.approx(4.0, abs=1.0)
    assert len(csv_path.read_text().splitlines()) == 4  # a header and a row per repeat
    for k in (1, 2, 3):
        assert json.loads((tmp_path / f"run.r{k}.json").read_text())["runs"]


def test_repeat_is_bounded() -> None:
    result = runner.invoke(app, ["bench", "--url", "http://127.0.0.1:9", "--repeat", "0"])
    assert result.exit_code == 2 and "--repeat must be 1-100" in result.output
