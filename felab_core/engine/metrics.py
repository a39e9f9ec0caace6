"""Metric definitions: the one place where a timeline becomes numbers.

Definitions (also in `felab bench --help` and the README), N = output tokens:

- TTFT: actual send (request headers on the wire) to the first message carrying non-empty
  generated text. A role-only or empty first chunk is not a token.
- ITL: gaps between successive content messages (one per gap, pooled across requests).
- TPOT: (last content - first content) / (N - n1), n1 = tokens in the first content message
  (from per-message counts, else N / content messages). With several tokens per message this
  still gives the true decode interval; with one token per message it is the usual (N - 1) form.
- Writing speed: 1 / TPOT tokens/s, the course's "tokens one person sees each second".
- E2E: actual send to the end of the stream. Open loop adds TTFT and E2E measured from the
  *scheduled* send, so time spent waiting on the client is never hidden.
- N: the server's usage, else Ollama's eval_count, else counted content messages.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from felab_core.engine.bursts import answer_burst, burst_note, burst_of
from felab_core.engine.timeline import NS, RequestTimeline
from felab_core.engine.token_counts import (
    COUNT_FROM_CHUNKS_DISBELIEVED,
    COUNT_MIXED,
    MAX_SERVER_TPS,
    believable_timings,
    first_chunk_tokens,
    output_tokens,
    prompt_counts,
    server_speed_fits,
    server_writing_tps,
)
from felab_core.text import comma_items, loose_number_problem

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True, slots=True)
class Stats:
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    count: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Stats | None:
        arr = np.fromiter((v for v in values if v is not None and math.isfinite(v)), float)
        if arr.size == 0:
            return None
        p50, p90, p95, p99 = (float(x) for x in np.percentile(arr, PERCENTILES))
        return cls(float(arr.mean()), p50, p90, p95, p99, float(arr.max()), int(arr.size))

    def to_json(self) -> dict[str, float]:
        return {k: v for k, v in asdict(self).items() if k != "count"}


@dataclass(slots=True)
class RequestMetrics:
    index: int
    ok: bool
    error: str | None
    ttft_s: float | None = None
    tpot_s: float | None = None
    writing_tps: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    ttft_from_schedule_s: float | None = None
    e2e_from_schedule_s: float | None = None
    dispatch_lag_s: float | None = None
    queue_wait_s: float | None = None
    connect_s: float | None = None
    output_tokens: int | None = None
    token_source: str | None = None
    counted_chunks: int = 0
    first_chunk_tokens: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # of the prompt, served from the server's prefix cache
    server_tps: float | None = None
    server_load_s: float | None = None
    server_timings: dict[str, float] | None = None  # as the server sent them
    chunk_times_s: list[float] = field(default_factory=list)
    cold: bool = False
    retries: int = 0
    turn: int | None = None  # a multi-turn session's turn, from 1
    outside_window: bool = False  # sent in the ramp-up or ended in the ramp-down: not counted

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _s(a: int | None, b: int | None) -> float | None:
    if a is None or b is None:
        return None
    return (b - a) / NS


def request_metrics(tl: RequestTimeline, *, api_is_ollama: bool = False) -> RequestMetrics:
    m = RequestMetrics(index=tl.index, ok=tl.ok, error=tl.error, retries=tl.retries, turn=tl.turn)
    content = tl.content_chunks()
    m.counted_chunks = len(content)
    m.e2e_s = _s(tl.sent_ns, tl.end_ns)
    m.connect_s = _s(tl.connect_start_ns, tl.connect_end_ns)
    m.dispatch_lag_s = _s(tl.scheduled_ns, tl.started_ns)
    m.queue_wait_s = _s(tl.started_ns, tl.dispatched_ns)
    m.e2e_from_schedule_s = _s(tl.scheduled_ns, tl.end_ns)
    m.server_timings = believable_timings(tl)
    m.server_tps = server_writing_tps(m.server_timings)
    if tl.server_timings and tl.server_timings.get("load_duration"):
        load_s = tl.server_timings["load_duration"] / NS
        # A load is believed only when it fits before the first token that waited for it,
        # with room for a request that came while another's load was under way (a 0.3 s load
        # beside a 10 ms TTFT had marked every request cold and blanked the run).
        content = tl.content_chunks()
        waited = _s(tl.sent_ns, content[0].t_ns) if content else m.e2e_s
        if 0 < load_s <= (2 * waited + 0.05 if waited is not None else load_s):
            m.server_load_s = load_s
    m.prompt_tokens, m.cached_tokens = prompt_counts(tl)
    m.output_tokens, m.token_source = output_tokens(tl, api_is_ollama)
    if m.token_source == COUNT_FROM_CHUNKS_DISBELIEVED:
        m.server_tps = None  # its speed is its disbelieved count over its own clock
    if not server_speed_fits(m.server_tps, m.output_tokens, m.e2e_s):
        m.server_tps = None
    if m.ok and (too_fast := _faster_than_a_stream(m.output_tokens, m.e2e_s)):
        m.ok, m.error = False, too_fast
    if tl.sent_ns is not None:
        m.chunk_times_s = [(c.t_ns - tl.sent_ns) / NS for c in content]
    if not content:
        return m
    first, last = content[0], content[-1]
    m.ttft_s = _s(tl.sent_ns, first.t_ns)
    m.ttft_from_schedule_s = _s(tl.scheduled_ns, first.t_ns)
    n = m.output_tokens or 0
    n1 = m.first_chunk_tokens = first_chunk_tokens(content, n)
    if burst_of([c.t_ns / NS for c in content], n or len(content), n1):
        return m  # a burst: no ITL, TPOT or writing speed (never 0), and the run says so
    m.itl_s = [(b.t_ns - a.t_ns) / NS for a, b in itertools.pairwise(content)]
    if len(content) >= 2 and n - n1 > 0 and last.t_ns > first.t_ns:
        tpot = (last.t_ns - first.t_ns) / NS / (n - n1)
        if tpot >= 1 / MAX_SERVER_TPS:  # faster, the tokens came in one burst (a buffering
            m.tpot_s = tpot  # proxy): no stream writes that fast, and compare refuses it
            m.writing_tps = 1.0 / tpot
    return m


def _faster_than_a_stream(tokens: int | None, e2e_s: float | None) -> str | None:
    """Why an answer is no measurement when its tokens came, from the send to the end, faster
    than any one stream writes (MAX_SERVER_TPS, the bound every reader of a speed enforces):
    4,000 tokens in 10 ms had been timed and written as a run's 175,371 tok/s."""
    if not tokens or tokens < 2 or e2e_s is None or tokens - 1 <= MAX_SERVER_TPS * e2e_s:
        return None
    return (
        f"faster than any stream: {tokens:,} tokens arrived {e2e_s * 1e3:.1f} ms after the "
        f"send, past {MAX_SERVER_TPS:,.0f} tokens a second for one stream; a cache or proxy "
        "answered, not a model: time the server directly"
    )


#: A latency limit written without a unit above this many seconds is a missing "ms", not a
#: wish: ttft=500 would wait 500 s per request and a rate search would flood the server.
BARE_SECONDS_MOST = {"ttft": 60.0, "itl": 10.0, "tpot": 10.0, "e2e": 3600.0}


def unit_slip(metric: str, seconds: float, unit: str | None) -> str | None:
    """Why a limit written with no unit is refused, or None (a unit given is taken as said)."""
    most = BARE_SECONDS_MOST.get(metric)
    if unit is None and most is not None and seconds > most:
        return (
            f"{seconds:g} with no unit reads as {seconds:g} seconds for {metric}: write "
            f"{seconds:g}ms, or {seconds:g}s if you mean seconds"
        )
    return None


#: The tightest and loosest latency objective felab takes: no server answers in under a tenth
#: of a millisecond (1e-300 s was taken, and every request missed it), none is waited on for
#: over an hour.
MIN_OBJECTIVE_S = 1e-4
MAX_OBJECTIVE_S = 3600.0


@dataclass(frozen=True, slots=True)
class SLO:
    """Service-level objective for goodput: a request counts only if it meets every bound."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    @classmethod
    def parse(cls, text: str) -> SLO:
        """`ttft=0.5,tpot=0.05` (seconds; `500ms` and `0.5s` too) -> SLO."""
        fields: dict[str, float] = {}
        for part in comma_items(text, "ttft=0.5,tpot=0.05"):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            if not sep or key not in ("ttft", "tpot", "e2e"):
                raise ValueError(
                    f"bad SLO term {part!r}: use ttft=SECONDS, tpot=SECONDS or e2e=SECONDS"
                )
            written = value.strip().lower()
            unit = "ms" if written.endswith("ms") else "s" if written.endswith("s") else None
            loose = loose_number_problem(written.removesuffix(unit or ""), float)
            if loose:  # float() reads 1_0 as 10 and ５ as 5
                raise ValueError(f"bad SLO value in {part!r}: {loose}")
            try:
                number = float(written.removesuffix(unit or "")) / (1000 if unit == "ms" else 1)
            except ValueError:
                raise ValueError(f"bad SLO value in {part!r}: {value!r} is not a number") from None
            if not (math.isfinite(number) and MIN_OBJECTIVE_S <= number <= MAX_OBJECTIVE_S):
                raise ValueError(
                    f"bad SLO value in {part!r}: must be from 0.1 ms to an hour (3600 s)"
                )
            slip = unit_slip(key, number, unit)
            if slip:
                raise ValueError(f"bad SLO value in {part!r}: {slip}")
            if f"{key}_s" in fields:
                raise ValueError(f"{key} is given twice: give each objective once")
            fields[f"{key}_s"] = number
        if not fields:
            raise ValueError("empty SLO: use for example ttft=0.5,tpot=0.05")
        return cls(**fields)

    def met_by(self, m: RequestMetrics) -> bool:
        """Whether the request meets every bound; an answer of one token has no time per token
        to miss (as vLLM's bench counts it), where one had made a run's goodput 0 % (A19)."""
        one_token = (m.output_tokens or m.counted_chunks) <= 1
        tpot = 0.0 if m.tpot_s is None and one_token else m.tpot_s
        checks = ((self.ttft_s, m.ttft_s), (self.tpot_s, tpot), (self.e2e_s, m.e2e_s))
        for bound, value in checks:
            if bound is not None and (value is None or value > bound):
                return False
        return m.ok

    def __str__(self) -> str:
        parts = [
            f"{name}<={v:g}s"
            for name, v in (("ttft", self.ttft_s), ("tpot", self.tpot_s), ("e2e", self.e2e_s))
            if v is not None
        ]
        return ",".join(parts)


@dataclass(slots=True)
class RunSummary:
    ok: int
    failed: int
    duration_s: float
    ttft_s: Stats | None
    tpot_s: Stats | None
    itl_s: Stats | None
    e2e_s: Stats | None
    writing_tps: Stats | None
    ttft_from_schedule_s: Stats | None
    e2e_from_schedule_s: Stats | None
    connect_s: Stats | None
    server_tps: Stats | None
    output_tokens: int
    output_tps: float | None  # None when no request was answered: 0 tok/s is no figure
    request_tps: float
    token_source: str | None
    counted_chunks: int
    prompt_tokens_mean: float | None
    goodput_rps: float | None = None
    goodput_fraction: float | None = None
    slo: str | None = None
    cold_starts: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    cached_share: float | None = None  # prompt tokens the server said it had cached, of all
    per_turn: list[dict[str, Any]] = field(default_factory=list)  # multi-turn sessions
    window: dict[str, Any] | None = None  # the steady-state window, when one was cut
    stopped: str | None = None  # why an open-loop run stopped sending early (over-saturated)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in self.__dataclass_fields__:
            value = getattr(self, key)
            out[key] = value.to_json() if isinstance(value, Stats) else value
        return out


def _error_kind(error: str) -> str:
    return error.split(":", 1)[0][:80]


#: A load the server reports is a model load from this long (Ollama reports ~15 ms warm), or
#: from SHORT_LOAD_S when it is half the request's TTFT: one rule for the run and its warm-up.
LOAD_S, SHORT_LOAD_S = 0.2, 0.05


def loaded_model(m: RequestMetrics) -> bool:
    """Whether this request paid for a model load, by the server's own load_duration."""
    load = m.server_load_s or 0.0
    if load >= LOAD_S:
        return True
    return load >= SHORT_LOAD_S and m.ttft_s is not None and load >= 0.5 * m.ttft_s


def detect_cold(metrics: Sequence[RequestMetrics]) -> set[int]:
    """Indices of requests that paid for a model load, to be reported and not averaged in.

    A server that says so is believed when the load is a real one: Ollama reports a
    load_duration on every answer (its scheduling, ~15 ms warm), so a load counts from 0.2 s,
    or from 50 ms when it is half the request's TTFT. Otherwise the first request is cold when
    its TTFT is over 4x the median of the rest and at least 250 ms more.
    """
    cold = {m.index for m in metrics if loaded_model(m)}
    ok = [m for m in metrics if m.ok and m.ttft_s is not None]
    if len(ok) >= 3:
        first, rest = ok[0], ok[1:]
        rest_ttft = float(np.median([m.ttft_s for m in rest if m.ttft_s is not None]))
        assert first.ttft_s is not None
        if first.ttft_s > 4 * rest_ttft and first.ttft_s - rest_ttft > 0.25:
            cold.add(first.index)
    return cold


def _cached_share(ok: Sequence[RequestMetrics]) -> float | None:
    """Cached prompt tokens over all prompt tokens, counting requests the server told both."""
    told = [m for m in ok if m.cached_tokens is not None and m.prompt_tokens]
    prompt = sum(m.prompt_tokens or 0 for m in told)
    return sum(m.cached_tokens or 0 for m in told) / prompt if prompt else None


def _per_turn(ok: Sequence[RequestMetrics], warm: Sequence[RequestMetrics]) -> list[dict[str, Any]]:
    """TTFT and the prefix cache's share turn by turn: does the history's cache pay off?"""
    turns = sorted({m.turn for m in ok if m.turn is not None})
    out = []
    for turn in turns:
        here = [m for m in warm if m.turn == turn]
        ttft = Stats.of(m.ttft_s for m in here if m.ttft_s is not None)
        prompts = [m.prompt_tokens for m in here if m.prompt_tokens is not None]
        out.append(
            {
                "turn": turn,
                "requests": len(here),
                "ttft_p50_s": None if ttft is None else ttft.p50,
                "ttft_p95_s": None if ttft is None else ttft.p95,
                "prompt_tokens_mean": float(np.mean(prompts)) if prompts else None,
                "cached_share": _cached_share(here),
            }
        )
    return out


def summarize(
    metrics: Sequence[RequestMetrics],
    *,
    duration_s: float,
    slo: SLO | None = None,
    window_s: float | None = None,
) -> RunSummary:
    """Aggregate one run. Cold-load requests are counted as ok but kept out of the latencies."""
    cold = detect_cold(metrics)
    for m in metrics:
        m.cold = m.index in cold
    ok = [m for m in metrics if m.ok]
    warm = [m for m in ok if not m.cold and not m.outside_window]
    failed = [m for m in metrics if not m.ok]
    sources = Counter(m.token_source for m in ok if m.token_source)
    token_source = None
    if sources:
        token_source = sources.most_common(1)[0][0] if len(sources) == 1 else COUNT_MIXED
    total_out = sum(m.output_tokens or 0 for m in ok)
    prompt_counts = [m.prompt_tokens for m in ok if m.prompt_tokens is not None]
    dur = duration_s if duration_s > 0 else float("nan")
    summary = RunSummary(
        ok=len(ok),
        failed=len(failed),
        duration_s=duration_s,
        ttft_s=Stats.of(m.ttft_s for m in warm if m.ttft_s is not None),
        tpot_s=Stats.of(m.tpot_s for m in warm if m.tpot_s is not None),
        itl_s=Stats.of(x for m in warm for x in m.itl_s),
        e2e_s=Stats.of(m.e2e_s for m in warm if m.e2e_s is not None),
        writing_tps=Stats.of(m.writing_tps for m in warm if m.writing_tps is not None),
        ttft_from_schedule_s=Stats.of(
            m.ttft_from_schedule_s for m in warm if m.ttft_from_schedule_s is not None
        ),
        e2e_from_schedule_s=Stats.of(
            m.e2e_from_schedule_s for m in warm if m.e2e_from_schedule_s is not None
        ),
        connect_s=Stats.of(m.connect_s for m in metrics if m.connect_s is not None),
        server_tps=Stats.of(m.server_tps for m in warm if m.server_tps is not None),
        output_tokens=total_out,
        output_tps=total_out / dur if ok else None,
        request_tps=len(ok) / dur,
        token_source=token_source,
        counted_chunks=sum(m.counted_chunks for m in ok),
        prompt_tokens_mean=float(np.mean(prompt_counts)) if prompt_counts else None,
        cached_share=_cached_share(ok),
        per_turn=_per_turn(ok, warm),
        cold_starts=[
            {"index": m.index, "ttft_s": m.ttft_s, "load_s": m.server_load_s}
            for m in metrics
            if m.cold
        ],
        errors=dict(Counter(_error_kind(m.error) for m in failed if m.error)),
    )
    if slo is not None:
        counted = [m for m in metrics if not m.outside_window]
        good = sum(1 for m in warm if slo.met_by(m))
        summary.slo = str(slo)
        span = window_s if window_s is not None and window_s > 0 else dur
        if not _tpot_unread(slo, warm):
            summary.goodput_rps = good / span
            summary.goodput_fraction = good / len(counted) if counted else None
    return summary


def _tpot_unread(slo: SLO | None, warm: Sequence[RequestMetrics]) -> bool:
    """Whether the SLO bounds TPOT and an answer's TPOT cannot be read (it came in a burst):
    counted as missing the bound, its run's goodput had read 0 %; it is blank instead."""
    return slo is not None and slo.tpot_s is not None and any(answer_burst(m) for m in warm)


def one_read_note(metrics: list[RequestMetrics], slo: SLO | None = None) -> str | None:
    """What a run says when answers arrived in one read or one burst (bursts.burst_note)."""
    warm = [m for m in metrics if m.ok and not m.cold and not m.outside_window]
    return burst_note(metrics, tpot_bound=_tpot_unread(slo, warm))


def past_length_note(metrics: list[RequestMetrics], max_tokens: int) -> str | None:
    """What a run says when answers ran past the max_tokens asked (one more is the end of the
    turn): the server ignores the length, so its per-token figures are not of the workload the
    record names (twentieth sweep, a A18: 40 tokens for --max-tokens 2, without a word)."""
    answered = [r for r in metrics if r.ok and r.output_tokens]
    over = [r.output_tokens or 0 for r in answered if (r.output_tokens or 0) > max_tokens + 1]
    if not over:
        return None
    return (
        f"{len(over)} of {len(answered)} answers ran past the max_tokens {max_tokens:,} asked "
        f"(up to {max(over):,} tokens): the server ignores the length asked (a proxy rewriting "
        "the request? a server setting?), so these figures are not of the workload named"
    )
