"""bursts.burst_of: the one rule for "these tokens came in a burst, no time per token"."""

from __future__ import annotations

from felab_core.engine.bursts import BURST_TPS, burst_of
from felab_core.engine.metrics import request_metrics
from felab_core.engine.timeline import Chunk, RequestTimeline


def test_bursts_are_named() -> None:
    assert burst_of([0.1], 50, None) == "50 tokens in one message"
    assert burst_of([0.1] * 20, 20, 1) == "20 tokens in one read"
    flushed = burst_of([0.1 + k * 1e-3 for k in range(5)], 250, 50)  # a A7: 50,000 tok/s
    assert flushed is not None and "50,000 tok/s" in flushed
    # a A7 on a busy box: 50 tokens a message, 2.5 ms apart (20,000 tok/s), and K=12 at 1 ms
    assert burst_of([0.1 + k * 2.5e-3 for k in range(5)], 250, 50) is not None
    assert burst_of([0.1 + k * 1.5e-3 for k in range(5)], 60, 12) is not None
    # the open finding: 27 tokens, one a message, within 1 ms (26,000 tok/s) had been kept
    assert burst_of([0.1 + k * 1e-3 / 26 for k in range(27)], 27, 1) is not None
    # a long answer sent whole, read in pieces 10 µs apart, then one read 4 ms later (7,000 tok/s)
    pieces = [0.1 + k * 1e-5 for k in range(30)] + [0.104]
    assert "under 50 µs apart" in str(burst_of(pieces, 31, 1))


def test_honest_streams_are_timed() -> None:
    # felab's tiny model on llama.cpp: ~3,300 tok/s, one token a message
    assert burst_of([k / 3300 for k in range(200)], 200, 1) is None
    # speculative decoding: four tokens a message, 2 ms apart (2,000 tok/s)
    assert burst_of([k * 2e-3 for k in range(50)], 200, 4) is None
    # a server that fell behind: three tokens together every 3 ms (1,000 tok/s)
    clumps = [k // 3 * 3e-3 + k % 3 * 1e-5 for k in range(60)]
    assert burst_of(clumps, 60, 1) is None
    # a hosted API's chunks: 40 tokens a message, 100 ms apart (400 tok/s)
    assert burst_of([k * 0.1 for k in range(10)], 400, 40) is None
    # just under the bound stays a measurement
    assert burst_of([k * 1.01 / BURST_TPS for k in range(100)], 100, 1) is None
    assert burst_of([0.1], 1, None) is None  # one token: nothing to time


def test_a_burst_has_no_itl_tpot_or_writing_speed() -> None:
    """a A1, A17: ITL p50/p95 0 had been written beside the blanked TPOT."""
    tl = RequestTimeline(0, sent_ns=0, end_ns=200_000_000, done=True)
    tl.chunks = [Chunk(100_000_000 + k * 1_000, 10, "w ") for k in range(900)]
    tl.usage = {"completion_tokens": 900, "prompt_tokens": 5}
    m = request_metrics(tl)
    assert m.ok and m.ttft_s is not None
    assert m.itl_s == [] and m.tpot_s is None and m.writing_tps is None
