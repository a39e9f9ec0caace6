"""The warm-up's cold-start note follows the run's own rule for a model load (sweep 22 a A8).

A warm Ollama reports a load_duration of a few ms on every answer; the warm-up said "cold
start in warm-up: the server loaded the model (0.00 s)" on every run.
"""

from __future__ import annotations

import pytest

from felab_core.engine.metrics import RequestMetrics, detect_cold
from felab_core.engine.runner import _warmup_cold_note


def _warm(load_s: float, ttft_s: float = 1.0) -> RequestMetrics:
    return RequestMetrics(index=0, ok=True, error=None, ttft_s=ttft_s, server_load_s=load_s)


@pytest.mark.parametrize("load_s", [1e-6, 0.015, 0.1])
def test_a_warm_servers_short_load_is_no_cold_start(load_s: float) -> None:
    assert _warmup_cold_note([_warm(load_s)], []) is None
    assert detect_cold([_warm(load_s)]) == set()


@pytest.mark.parametrize(("load_s", "ttft_s"), [(0.2, 0.3), (2.5, 2.6), (0.06, 0.1)])
def test_a_real_load_in_the_warm_up_is_said(load_s: float, ttft_s: float) -> None:
    note = _warmup_cold_note([_warm(load_s, ttft_s)], [])
    assert note is not None and note.startswith("cold start in warm-up: the server loaded")
    assert detect_cold([_warm(load_s, ttft_s)]) == {0}
