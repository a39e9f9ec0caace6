"""--find-max-rate with a bound on ITL or TPOT against a server whose answers arrive in a burst:
the figure cannot be measured at any rate, so the search stops at the first probe with that
reason, exit 2 (twenty-second sweep, a A2: itl_p95=1ms "met" at 450 req/s by ITL 0; A3:
tpot_p95=1ms halved the rate to 0.02 req/s and advised loosening the objective)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from tests.cli.burst_server import BurstServer

runner = CliRunner()


@pytest.fixture
def whole() -> Iterator[BurstServer]:
    server = BurstServer([(20, 1)])  # every answer in one write, as srv/fake.py `instant`
    yield server
    server.stop()


def _search(url: str, objective: str) -> list[str]:
    return [
        "bench", "--url", url, "--api", "openai-chat", "--model", "m",
        "--find-max-rate", objective, "--duration", "0.5", "--rate", "8", "--no-csv",
    ]  # fmt: skip


@pytest.mark.parametrize("objective", ["itl_p95=1ms", "tpot_p95=1ms", "ttft_p95=1s,itl_p95=5ms"])
def test_a_per_token_bound_on_bursts_stops_the_search(whole: BurstServer, objective: str) -> None:
    result = runner.invoke(app, _search(whole.base_url, objective), env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert "cannot be measured" in result.output and "one burst" in result.output
    assert "highest rate" not in result.output and "loosen" not in result.output
    assert result.output.count("probe ") == 1  # the first probe says it; no other follows


def test_a_ttft_bound_on_bursts_is_still_searched(whole: BurstServer) -> None:
    result = runner.invoke(app, _search(whole.base_url, "ttft_p95=2s"), env={"COLUMNS": "250"})
    assert "cannot be measured" not in result.output
