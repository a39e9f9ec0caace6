"""A server's /metrics counters that no run felab made could leave are not kept (A11)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from felab_core.engine import runner
from felab_core.engine.counter_fit import RunFit
from felab_core.engine.metrics import RequestMetrics, summarize
from felab_core.engine.timeline import RequestTimeline
from felab_core.lab.scripted_server import Script
from felab_core.sizing import metrics_scrape
from tests.engine.scripted_bench import bench


def _vllm(prompt: float, gen: float, at: float) -> metrics_scrape.Snapshot:
    text = f"vllm:prompt_tokens_total {prompt}\nvllm:generation_tokens_total {gen}\n"
    return metrics_scrape.parse_metrics(text, taken_at=at)


def _run(requests: int = 1, tokens_each: int = 16) -> Any:
    done = [RequestMetrics(i, True, None, output_tokens=tokens_each) for i in range(requests)]
    return summarize(done, duration_s=0.4)


def _fit(requests: int = 1, streams: int = 1, asked: int | None = 16, sent: int | None = 2000):
    return RunFit(requests=requests, streams=streams, asked_tokens=asked, sent_bytes=sent)


@pytest.mark.parametrize(
    ("after", "fit", "says"),
    [
        # 2,000,000 written in 0.4 s by one stream, with no max_tokens to hold it to
        (_vllm(40, 2_000_016, 5.4), _fit(asked=None), "past 100,000 tokens a second"),
        # 5,000 written in 0.4 s by one stream asked for 16
        (_vllm(40, 5_016, 5.4), _fit(), "asked for at most 16 each"),
        # 1,000,000 prompt tokens read in 0.3 s (within any prefill speed) for 2,000 bytes sent
        (_vllm(1_000_010, 32, 5.3), _fit(), "where felab sent 2,000 bytes"),
    ],
)
def test_counters_past_what_the_run_sent_are_not_used(
    after: metrics_scrape.Snapshot, fit: RunFit, says: str
) -> None:
    kept = runner._server_rates(_vllm(10, 16, 5.0), after, _run(), fit)
    assert kept is not None and "do not fit this run" in kept["explanation"], kept
    assert says in kept["explanation"] and "generation_tokens" not in kept


def test_honest_counters_are_kept() -> None:
    kept = runner._server_rates(_vllm(10, 16, 5.0), _vllm(60, 32, 5.4), _run(), _fit())
    assert kept is not None and kept["generation_tokens"] == 16 and kept["prompt_tokens"] == 50


def test_the_fit_is_what_felab_sent() -> None:
    timelines = [RequestTimeline(i) for i in range(3)]
    for tl in timelines:
        tl.request_bytes = 500
    fit = RunFit.of(timelines, 3, concurrency=8, asked_tokens=16)
    assert fit == RunFit(requests=3, streams=3, asked_tokens=16, sent_bytes=1500)
    assert RunFit.of(timelines[:2], 3, concurrency=0, asked_tokens=None).sent_bytes is None


def test_a_bench_keeps_no_counters_past_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty-first sweep A11: /metrics claiming 2,000,000 tokens written in 0.4 s was kept."""
    looks = iter([_vllm(0, 0, 5.0), _vllm(30, 2_000_000, 5.4)])

    async def snapshot(
        target: object, notes: list[str], model: str | None = None
    ) -> metrics_scrape.Snapshot:
        return next(looks)

    monkeypatch.setattr(runner, "_metrics_snapshot", snapshot)
    done = bench(Script(), tmp_path / "r.json", "--requests", "1", "--max-tokens", "8")
    said = done.run["server_metrics"]
    assert "do not fit this run" in said["explanation"] and "generation_tokens" not in said
    assert "2,000,000" in json.dumps(said)
