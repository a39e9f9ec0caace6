"""Every metric from hand-built timelines, checked exactly."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from felab_core.engine.metrics import SLO, Stats, request_metrics, summarize
from felab_core.engine.timeline import Chunk, RequestTimeline

MS = 1_000_000


def timeline(
    content_ms: list[float],
    *,
    sent_ms: float = 0.0,
    end_ms: float | None = None,
    usage: int | None = None,
    role_first: bool = False,
    usage_last: bool = False,
    tokens_per_chunk: int | None = None,
    scheduled_ms: float | None = None,
) -> RequestTimeline:
    tl = RequestTimeline(index=0, sent_ns=int(sent_ms * MS))
    if scheduled_ms is not None:
        tl.scheduled_ns = tl.started_ns = int(scheduled_ms * MS)
    if role_first:
        tl.chunks.append(Chunk(int((content_ms[0] - 5) * MS), 40, ""))
    for t in content_ms:
        tl.chunks.append(Chunk(int(t * MS), 60, "tok ", tokens_per_chunk))
    if usage_last:
        tl.chunks.append(Chunk(int(content_ms[-1] * MS), 90, ""))
    if usage is not None:
        tl.usage = {"completion_tokens": usage, "prompt_tokens": 12}
    tl.end_ns = int((end_ms if end_ms is not None else content_ms[-1] + 1) * MS)
    tl.done = True
    return tl


def test_one_token_per_chunk_gives_the_usual_n_minus_1_form() -> None:
    # First token at 100 ms, then one every 10 ms: 11 tokens.
    times = [100 + 10 * i for i in range(11)]
    m = request_metrics(timeline(times, usage=11, end_ms=201))
    assert m.ttft_s == pytest.approx(0.100)
    assert m.tpot_s == pytest.approx(0.010)  # (200 - 100) ms / (11 - 1)
    assert m.writing_tps == pytest.approx(100.0)
    assert m.itl_s == pytest.approx([0.010] * 10)
    assert m.e2e_s == pytest.approx(0.201)
    assert m.output_tokens == 11
    assert m.token_source == "usage"
    assert m.first_chunk_tokens == pytest.approx(1.0)


def test_several_tokens_per_chunk_still_give_the_true_decode_rate() -> None:
    # The example: 4 tokens every 20 ms is 200 tokens/s, not 50 chunks/s.
    times = [50 + 20 * i for i in range(50)]
    m = request_metrics(timeline(times, usage=200))
    assert m.first_chunk_tokens == pytest.approx(4.0)  # estimated: 200 / 50 chunks
    assert m.tpot_s == pytest.approx(0.98 / 196)
    assert m.writing_tps == pytest.approx(200.0)
    # ITL stays per chunk: what a reader of the stream sees.
    assert m.itl_s[0] == pytest.approx(0.020)


def test_per_chunk_token_counts_are_used_when_the_server_gives_them() -> None:
    times = [10, 20, 30]
    tl = timeline(times, usage=7)
    tl.content_chunks()[0].tokens = 3
    m = request_metrics(tl)
    assert m.first_chunk_tokens == 3
    assert m.tpot_s == pytest.approx(0.020 / 4)  # (30 - 10) ms / (7 - 3)


def test_role_only_first_chunk_is_not_the_first_token() -> None:
    times = [100, 110, 120]
    m = request_metrics(timeline(times, usage=3, role_first=True))
    assert m.ttft_s == pytest.approx(0.100)
    assert m.counted_chunks == 3


def test_usage_only_final_chunk_is_not_a_token_and_gives_n() -> None:
    times = [100, 110, 120, 130]
    m = request_metrics(timeline(times, usage=4, usage_last=True))
    assert m.counted_chunks == 4
    assert m.itl_s == pytest.approx([0.01, 0.01, 0.01])
    assert m.tpot_s == pytest.approx(0.010)


def test_without_usage_n_comes_from_counted_chunks() -> None:
    m = request_metrics(timeline([100, 110, 120]))
    assert m.output_tokens == 3
    assert m.token_source == "chunks"


def test_ollama_eval_count_is_named_as_such() -> None:
    m = request_metrics(timeline([1, 2, 3], usage=3), api_is_ollama=True)
    assert m.token_source == "eval_count"


def test_single_content_chunk_has_ttft_but_no_tpot() -> None:
    m = request_metrics(timeline([100], usage=5))
    assert m.ttft_s == pytest.approx(0.1)
    assert m.tpot_s is None
    assert m.writing_tps is None


def test_open_loop_latency_counts_from_the_schedule() -> None:
    tl = timeline([300, 310], usage=2, sent_ms=250, scheduled_ms=100, end_ms=320)
    tl.dispatched_ns = 240 * MS
    m = request_metrics(tl)
    assert m.ttft_s == pytest.approx(0.050)
    assert m.ttft_from_schedule_s == pytest.approx(0.200)
    assert m.e2e_from_schedule_s == pytest.approx(0.220)
    assert m.queue_wait_s == pytest.approx(0.140)


def test_server_timings_are_kept_beside_the_client_figures() -> None:
    tl = timeline([600, 610, 620], usage=3, end_ms=2600)  # the load came before the first token
    tl.server_timings = {"predicted_per_second": 71.5}
    assert request_metrics(tl).server_tps == 71.5
    tl.server_timings = {"eval_count": 3, "eval_duration": 6e7, "load_duration": 5e8}
    m = request_metrics(tl)
    assert m.server_tps == pytest.approx(50.0)
    assert m.server_load_s == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("timings", "left_out"),
    [
        ({"prompt_n": 1e11, "predicted_n": 3.0}, "prompt_n"),  # 10^11 for a 400-byte request
        ({"prompt_n": 5000.0, "cache_n": 0.0}, "prompt_n"),  # beside usage's 40 prompt tokens
        ({"cache_n": 4000.0, "prompt_n": 10.0}, "cache_n"),
        ({"predicted_n": 250.0, "predicted_ms": 30.0}, "predicted_n"),  # beside 3 chunks
        ({"eval_count": 0.0, "prompt_eval_count": 40.0}, "eval_count"),
        ({"predicted_per_second": 1e7, "prompt_n": 40.0}, "predicted_per_second"),
    ],
)
def test_server_timings_that_cannot_be_true_of_the_request_are_left_out(
    timings: dict[str, float], left_out: str
) -> None:
    """Twentieth sweep (a) A03: llama.cpp timings with prompt_n 10^11 for a ~100-byte
    prompt, or 5,000 beside the same answer's usage of 40, were written into every request."""
    tl = timeline([100, 110, 120], usage=3)
    tl.request_bytes = 400
    tl.usage = {"completion_tokens": 3, "prompt_tokens": 40}
    tl.server_timings = timings
    kept = request_metrics(tl).server_timings
    assert kept == {k: v for k, v in timings.items() if k != left_out}
    tl.server_timings = {"prompt_n": 30.0, "cache_n": 10.0, "predicted_n": 3.0}
    assert request_metrics(tl).server_timings == tl.server_timings


@pytest.mark.parametrize(
    "timings",
    [
        {"eval_count": 10**12, "eval_duration": 1},  # 10^21 tok/s
        {"eval_count": -5, "eval_duration": 1e9},
        {"predicted_per_second": float("nan")},
        {"predicted_per_second": 0.0},
    ],
)
def test_a_server_speed_no_stream_has_is_not_believed(timings: dict[str, float]) -> None:
    tl = timeline([1, 2, 3], usage=3)
    tl.server_timings = timings
    assert request_metrics(tl).server_tps is None


def test_a_server_s_speed_goes_with_its_disbelieved_count() -> None:
    tl = timeline([1, 2, 3], usage=10**9)  # a count the 3 chunks' text cannot hold
    tl.server_timings = {"eval_count": 10**9, "eval_duration": 1e9}
    m = request_metrics(tl, api_is_ollama=True)
    assert m.token_source is not None and m.token_source.startswith("chunks")
    assert m.server_tps is None


def test_a_count_of_zero_after_text_is_not_believed() -> None:
    m = request_metrics(timeline([1, 2, 3, 4, 5], usage=0))  # five chunks of text, "0 tokens"
    assert m.output_tokens == 5
    assert m.token_source is not None and m.token_source.startswith("chunks")


def test_a_cached_count_past_the_prompt_is_not_believed() -> None:
    tl = timeline([100, 110], usage=2)  # a 12-token prompt
    tl.usage = {**(tl.usage or {}), "cached_tokens": 99}
    assert request_metrics(tl).cached_tokens is None
    tl.usage = {**tl.usage, "cached_tokens": 8}
    assert request_metrics(tl).cached_tokens == 8


def test_a_count_of_one_beside_many_messages_is_not_believed() -> None:
    """Seventeenth sweep (a) M1: 1 token beside 256 chunks gave a speed of 1,047 tok/s."""
    m = request_metrics(timeline([10 + i for i in range(256)], usage=1))
    assert m.output_tokens == 256 and m.token_source is not None
    assert m.token_source.startswith("chunks (the server's count did not fit")


def test_a_prompt_count_past_the_request_sent_is_not_believed() -> None:
    """Seventeenth sweep (a) H1: 999,999,999 prompt tokens for felab's short prompt were
    stored and printed as "100 % cached"."""
    tl = timeline([100, 110], usage=2)
    tl.request_bytes = 400
    tl.usage = {**(tl.usage or {}), "prompt_tokens": 999_999_999, "cached_tokens": 999_999_998}
    m = request_metrics(tl)
    assert (m.prompt_tokens, m.cached_tokens) == (None, None)
    tl.usage = {"completion_tokens": 2, "cached_tokens": 999_999_998}  # no prompt count
    assert request_metrics(tl).cached_tokens is None
    tl.usage = {"completion_tokens": 2, "prompt_tokens": 60, "cached_tokens": 40}
    assert (request_metrics(tl).prompt_tokens, request_metrics(tl).cached_tokens) == (60, 40)


def test_a_prompt_count_far_below_the_request_sent_is_not_believed() -> None:
    """Eighteenth sweep (a) H5: a server saying 20 prompt tokens for a prompt of 8,000 (30 kB
    of request) was stored; a token stands for at most 1,024 bytes of the request."""
    tl = timeline([100, 110], usage=2)
    tl.request_bytes = 30_000
    tl.usage = {"completion_tokens": 2, "prompt_tokens": 20, "cached_tokens": 10}
    m = request_metrics(tl)
    assert (m.prompt_tokens, m.cached_tokens) == (None, None)
    tl.usage = {"completion_tokens": 2, "prompt_tokens": 29}  # 30,000 // 1,024
    assert request_metrics(tl).prompt_tokens == 29


def test_a_prompt_count_far_below_the_prompt_text_is_not_believed() -> None:
    """Twentieth sweep (a) A21: 10 prompt tokens for --prompt-tokens 2000 (9.9 kB of request)
    were stored, since a token could stand for 1,024 bytes; no tokenizer averages past 16
    bytes a token over a prompt, and felab's own words are about 5."""
    from felab_core.engine.stream_shape import prompt_bytes
    from felab_core.engine.words import synthetic_words

    text = synthetic_words(random.Random(1), 2000)
    payload = {"messages": [{"role": "user", "content": "earlier"}, {"content": text}]}
    tl = timeline([100, 110], usage=2)
    tl.request_bytes, tl.prompt_bytes = len(text) + 200, prompt_bytes(payload)
    assert tl.prompt_bytes == len(text) and 9_000 < len(text) < 12_000
    tl.usage = {"completion_tokens": 2, "prompt_tokens": 10}
    assert request_metrics(tl).prompt_tokens is None
    tl.usage = {"completion_tokens": 2, "prompt_tokens": 2003}  # a tokenizer's own count
    assert request_metrics(tl).prompt_tokens == 2003
    tl.usage = {"completion_tokens": 2, "prompt_tokens": len(text) // 16}
    assert request_metrics(tl).prompt_tokens == len(text) // 16
    assert prompt_bytes({"prompt": "é" * 10}) == 20 and prompt_bytes({"messages": []}) == 0


def test_a_cache_count_that_is_not_whole_is_not_kept() -> None:
    """Eighteenth sweep (a) M7: llama.cpp's cache_n of 3.7 was kept as 3 ("15 % cached")."""
    tl = timeline([100, 110], usage=2)
    tl.request_bytes = 400
    tl.usage = {"completion_tokens": 2, "prompt_tokens": 20}
    tl.server_timings = {"cache_n": 3.7}
    assert request_metrics(tl).cached_tokens is None
    tl.server_timings = {"cache_n": 4.0}
    assert request_metrics(tl).cached_tokens == 4


@pytest.mark.parametrize(
    "running",
    [
        [200_000] + [None] * 255,  # a first chunk's count past the whole answer
        [256] + [None] * 255,  # the total repeated on every chunk: no room for the rest
    ],
)
def test_a_running_count_the_stream_contradicts_shares_the_total(
    running: list[int | None],
) -> None:
    """Seventeenth sweep (a) H2, M4: the first chunk's count was kept (200,000 of 256), and
    the writing speed was lost without a word."""
    tl = timeline([10 + i for i in range(256)], usage=256)
    for chunk, tokens in zip(tl.content_chunks(), running, strict=True):
        chunk.tokens = tokens
    m = request_metrics(tl)
    assert m.first_chunk_tokens == pytest.approx(1.0)
    assert m.writing_tps is not None


def test_a_server_speed_slower_than_the_request_is_not_believed() -> None:
    """Seventeenth sweep (a) M2: 1e-300 tok/s was shown as 0.0 and saved in the CSV."""
    tl = timeline([100 + 10 * i for i in range(11)], usage=11, end_ms=201)
    tl.server_timings = {"predicted_per_second": 1e-300}
    assert request_metrics(tl).server_tps is None
    tl.server_timings = {"predicted_per_second": 95.0}  # 10 tokens in ~0.1 s: it fits
    assert request_metrics(tl).server_tps == 95.0


@pytest.mark.parametrize("load_ns", [-5, 10**40])
def test_a_load_time_outside_the_request_is_not_believed(load_ns: int) -> None:
    tl = timeline([100, 110], usage=2, end_ms=200)
    tl.server_timings = {"load_duration": load_ns}
    assert request_metrics(tl).server_load_s is None
    tl.server_timings = {"load_duration": 50_000_000}  # 50 ms of a 200 ms request
    assert request_metrics(tl).server_load_s == pytest.approx(0.05)
    # seventeenth sweep (a) M5: a load far longer than the wait for the first token (100 ms)
    tl.server_timings = {"load_duration": 300_000_000}
    assert request_metrics(tl).server_load_s is None


def test_summary_percentiles_counts_and_rates() -> None:
    metrics = []
    for i in range(1, 11):  # TTFT 10..100 ms, 5 tokens each, 10 ms apart
        tl = timeline([10 * i + 10 * k for k in range(5)], usage=5)
        tl.index = i
        metrics.append(request_metrics(tl))
    failed = RequestTimeline(index=99, error="connection refused: nothing listens")
    metrics.append(request_metrics(failed))
    s = summarize(metrics, duration_s=2.0)
    assert (s.ok, s.failed) == (10, 1)
    assert s.ttft_s is not None
    assert s.ttft_s.p50 == pytest.approx(0.055)
    assert s.ttft_s.max == pytest.approx(0.100)
    assert s.ttft_s.p90 == pytest.approx(0.091)
    assert s.output_tokens == 50
    assert s.output_tps == pytest.approx(25.0)
    assert s.request_tps == pytest.approx(5.0)
    assert s.errors == {"connection refused": 1}
    assert s.token_source == "usage"


def test_goodput_counts_only_requests_meeting_every_bound() -> None:
    fast = request_metrics(timeline([100, 110, 120], usage=3))
    slow = request_metrics(timeline([900, 910, 920], usage=3))
    slow.index = 1
    s = summarize([fast, slow], duration_s=1.0, slo=SLO.parse("ttft=0.5,tpot=0.05"))
    assert s.goodput_rps == pytest.approx(1.0)
    assert s.goodput_fraction == pytest.approx(0.5)
    assert s.slo == "ttft<=0.5s,tpot<=0.05s"


@pytest.mark.parametrize("bad", ["", "ttft", "ttft=x", "ttft=-1", "foo=1", "tpot=0"])
def test_bad_slo_is_refused_with_a_reason(bad: str) -> None:
    with pytest.raises(ValueError, match=r"SLO|ttft"):
        SLO.parse(bad)


def test_an_slo_takes_units_and_refuses_a_missing_ms() -> None:
    assert SLO.parse("ttft=500ms,tpot=50ms") == SLO.parse("ttft=0.5,tpot=0.05")
    assert SLO.parse("e2e=90s").e2e_s == 90.0  # a unit given is taken as said
    with pytest.raises(ValueError, match="500 with no unit reads as 500 seconds for ttft"):
        SLO.parse("ttft=500")


def test_cold_first_request_is_reported_not_averaged() -> None:
    metrics = []
    for i, first in enumerate([2000, 20, 22, 21, 23]):
        tl = timeline([first, first + 10, first + 20], usage=3)
        tl.index = i
        metrics.append(request_metrics(tl))
    s = summarize(metrics, duration_s=3.0)
    assert [c["index"] for c in s.cold_starts] == [0]
    assert s.ttft_s is not None and s.ttft_s.max < 0.03
    assert s.ok == 5


def test_ollama_load_duration_marks_a_cold_start() -> None:
    metrics = []
    for i in range(3):
        tl = timeline([1520, 1530, 1540] if i == 1 else [20, 30, 40], usage=3, end_ms=1600)
        tl.index = i
        if i == 1:
            tl.server_timings = {"load_duration": 1.5e9, "eval_count": 3, "eval_duration": 2e7}
        metrics.append(request_metrics(tl))
    s = summarize(metrics, duration_s=1.0)
    assert [c["index"] for c in s.cold_starts] == [1]


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200))
def test_stats_are_ordered(values: list[float]) -> None:
    s = Stats.of(values)
    assert s is not None
    assert s.p50 <= s.p90 <= s.p95 <= s.p99 <= s.max
    assert min(values) <= s.mean <= max(values) or s.mean == pytest.approx(min(values))


@pytest.mark.parametrize(
    ("load_s", "ttft_s", "cold"),
    [(0.015, 0.06, False), (0.04, 0.05, False), (0.06, 0.1, True), (0.3, 2.0, True)],
)
def test_a_warm_ollamas_scheduling_time_is_not_a_cold_start(
    load_s: float, ttft_s: float, cold: bool
) -> None:
    """Sixteenth sweep (a) H4: Ollama reports a load_duration on every answer (~15 ms warm);
    every request was called cold and the row had no latency at all."""
    from felab_core.engine.metrics import RequestMetrics, detect_cold

    m = RequestMetrics(index=0, ok=True, error=None, ttft_s=ttft_s, server_load_s=load_s)
    assert (detect_cold([m]) == {0}) is cold


def test_a_servers_timings_keep_a_few_dozen_figures() -> None:
    """Sixteenth sweep (a) H1: 100,000 keys were kept for every request (2.3 GB for 60)."""
    from felab_core.engine.apis import _number_fields

    kept = _number_fields({f"k{i}": i for i in range(100_000)})
    assert kept is not None and len(kept) == 32


def test_tokens_that_came_in_one_burst_have_no_writing_speed() -> None:
    """Nineteenth sweep (a) M4, (a2) H5: 31 tokens in one read and the 32nd a microsecond
    later read as a million tokens a second; no stream writes past 100,000 a second, so the
    burst (a buffering proxy) has no writing speed, and compare refuses one."""
    burst = request_metrics(timeline([300 + i * 1e-4 for i in range(32)], usage=32))
    assert burst.tpot_s is None and burst.writing_tps is None and burst.ttft_s is not None
    steady = request_metrics(timeline([300 + i * 20 for i in range(32)], usage=32))
    assert steady.writing_tps is not None and 40 < steady.writing_tps < 60


def test_answers_that_arrived_in_one_read_are_said() -> None:
    """Twentieth sweep (a) A32: 50 tokens sent as one body showed TPOT and writing speed '-'
    with no word, where a compressed stream is named."""
    from felab_core.engine.metrics import RequestMetrics, one_read_note

    def answer(times: list[float], tpot: float | None) -> RequestMetrics:
        return RequestMetrics(
            0, True, None, ttft_s=0.1, tpot_s=tpot, output_tokens=len(times),
            counted_chunks=len(times), chunk_times_s=times,
        )  # fmt: skip

    buffered = [answer([0.1] * 50, None), answer([0.2] * 50, None)]
    note = one_read_note(buffered)
    assert note is not None and "of the 2 answer(s)" in note and "arrived in one read" in note
    assert one_read_note([answer([0.1, 0.12, 0.14], 0.02)]) is None  # streamed
    assert one_read_note([answer([0.1], None)]) is None  # one token: nothing to time


def test_a_one_token_answer_has_no_time_per_token_to_miss() -> None:
    """Twentieth sweep (a) A19: three answered one-token replies made 'goodput 0.00 req/s (0%
    of requests met tpot<=0.001s)'; an answer of several tokens without a TPOT still misses."""
    from felab_core.engine.metrics import RequestMetrics

    slo = SLO(tpot_s=0.001)
    one = RequestMetrics(0, True, None, ttft_s=0.1, output_tokens=1, counted_chunks=1)
    assert slo.met_by(one)
    several = RequestMetrics(1, True, None, ttft_s=0.1, output_tokens=50, counted_chunks=50)
    assert not slo.met_by(several)
    failed = RequestMetrics(2, False, "boom", output_tokens=0)
    assert not slo.met_by(failed)


def test_answers_past_the_length_asked_are_said() -> None:
    """Twentieth sweep (a) A18: 40 tokens for --max-tokens 2 were stored without a word."""
    from felab_core.engine.metrics import RequestMetrics, past_length_note

    def answer(tokens: int) -> RequestMetrics:
        return RequestMetrics(0, True, None, ttft_s=0.1, output_tokens=tokens)

    note = past_length_note([answer(40), answer(3), answer(2)], 2)
    assert note is not None and note.startswith("1 of 3 answers ran past the max_tokens 2")
    assert "up to 40 tokens" in note
    assert past_length_note([answer(3), answer(2)], 2) is None  # one more: the end of the turn
