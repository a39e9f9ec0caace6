"""A short --find-max-rate probe is judged on the rate its server kept, not on its run's time
with the last answer's own latency in it (A05)."""

from __future__ import annotations

from felab_core.engine.metrics import RequestMetrics, summarize
from felab_core.engine.rate_search import finished_rate, judge, parse_objective

_LOOSE = parse_objective("ttft_p95=60s")


def _probe(rate: float, e2e_each: list[float]) -> object:
    """A probe sending len(e2e_each) requests at `rate`, request i taking e2e_each[i]."""
    sends = [i / rate for i in range(len(e2e_each))]
    ends = [s + e for s, e in zip(sends, e2e_each, strict=True)]
    done = [
        RequestMetrics(i, True, None, ttft_s=0.1, e2e_s=e, output_tokens=8)
        for i, e in enumerate(e2e_each)
    ]
    return summarize(done, duration_s=max(ends))


def test_a_short_probe_of_a_server_that_kept_up_passes() -> None:
    """Twenty-first sweep A05: 12 requests at 8 req/s of 15 s each read "finished only 0.73
    req/s of 8 asked", 11 times too few, and the probe failed."""
    summary = _probe(8.0, [15.0] * 12)
    assert summary.request_tps < 0.8  # the run's time holds the last answer's 15 s
    assert finished_rate(8.0, summary) == 8.0
    assert judge(8.0, summary, _LOOSE).passed


def test_a_probe_whose_queue_grew_still_fell_behind() -> None:
    """100 requests at 10 req/s to a server finishing 5 a second: each waits longer."""
    e2e = [1.0 + i * (0.2 - 0.1) for i in range(100)]  # the queue grows 0.1 s a request
    summary = _probe(10.0, e2e)
    probe = judge(10.0, summary, _LOOSE)
    assert not probe.passed and "the server fell behind" in probe.misses[0], probe.misses


def test_never_more_than_the_rate_asked() -> None:
    summary = _probe(2.0, [0.01])  # one request: it finished no faster than it was sent
    assert finished_rate(2.0, summary) <= 2.0
