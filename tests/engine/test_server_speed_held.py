"""llama.cpp's own decode speed is held to its own counts of the same answer (sweep 22 a A9).

predicted_per_second 99,999 beside predicted_n 20 in predicted_ms 200 (100 a second), or a
speed beside a predicted_n felab had thrown out, had been saved as the server's speed.
"""

from __future__ import annotations

import pytest

from felab_core.engine.metrics import request_metrics
from felab_core.engine.timeline import RequestTimeline
from felab_core.engine.token_counts import speed_disagreement, speed_disagreement_note
from tests.engine.test_metrics import timeline


def _answer(timings: dict[str, float]) -> RequestTimeline:
    tl = timeline([10 * i for i in range(1, 21)], usage=20)  # 20 tokens over 190 ms
    tl.server_timings = timings
    return tl


def test_a_speed_its_own_counts_contradict_is_left_out_with_a_note() -> None:
    tl = _answer({"predicted_n": 20.0, "predicted_ms": 200.0, "predicted_per_second": 99999.0})
    m = request_metrics(tl)
    assert m.server_tps is None
    assert m.server_timings == {"predicted_n": 20.0, "predicted_ms": 200.0}
    said = speed_disagreement(tl)
    assert said is not None and "99,999" in said and "100 tokens a second" in said
    note = speed_disagreement_note([tl])
    assert note is not None and note.startswith("the server's own decode speed was left out")


def test_a_speed_beside_a_count_felab_threw_out_is_left_out() -> None:
    tl = _answer({"predicted_n": 5000.0, "predicted_ms": 200.0, "predicted_per_second": 25000.0})
    m = request_metrics(tl)
    assert m.server_tps is None
    assert "predicted_per_second" not in (m.server_timings or {})
    assert "the answer felab read cannot hold" in (speed_disagreement(tl) or "")


@pytest.mark.parametrize(
    "timings",
    [
        {"predicted_n": 20.0, "predicted_ms": 200.0, "predicted_per_second": 100.0},
        {"predicted_n": 20.0, "predicted_ms": 190.123, "predicted_per_second": 105.19},  # rounded
        {"predicted_per_second": 100.0},  # nothing to hold it to
    ],
)
def test_a_speed_its_own_counts_bear_out_is_kept(timings: dict[str, float]) -> None:
    tl = _answer(timings)
    m = request_metrics(tl)
    assert m.server_tps == timings["predicted_per_second"]
    assert speed_disagreement_note([tl]) is None
