"""One rule for "this answer's tokens came in a burst, so no time per token can be read".

A per-token figure (ITL, TPOT, writing speed) is only a figure when the tokens arrived spread
over time. A server that sends its answer whole, a proxy that buffers it, or one that flushes
hundreds of tokens a millisecond apart gives arrival times that say how fast bytes cross a
socket, not how fast a model writes: ITL 0 ms, 31,000 or 60,000 tokens a second for one user
had been written as measurements (twenty-second sweep, a A1, A7, A17). Every reader of those
figures (metrics.request_metrics, the run's note, --find-max-rate) asks `burst_of`.

What a burst leaves standing: TTFT and E2E (when the text reached felab: what a user behind the
same buffer waits for; an answer sent whole brings its first token with its last), and the
run's total tok/s and requests a second, which are tokens and answers over the run's wall
time and read no gap between tokens, so they stay honest. What it takes: ITL, TPOT, writing
speed, and goodput against an SLO's TPOT bound (a burst's TPOT is not slow, it is unread: such
a run's goodput is blank, not 0 %).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from typing import Protocol

#: The fastest one stream is believed to write, tokens a second. Measured: felab's own tiny test
#: model (a 700 kB GGUF, `felab lab`'s) on the llama.cpp server felab builds writes ~3,300 tok/s
#: on one stream of a 2-core box (the server's own timings: 3,272); the fastest hosted single
#: streams are a few thousand (2-3k) a second. 20,000 leaves six times that tiny model's speed
#: for a faster CPU or GPU, and is still far below a burst (31,000-60,000 and up; a whole answer
#: in one write reads as millions). Speculative decoding, several tokens a message at honest
#: gaps, stays well below it and keeps its TPOT (taken over the whole span).
BURST_TPS = 20_000.0

#: The speed past which tokens that come many to a message (BATCHED_TOKENS or more, on average
#: after the first) are a buffer's flushes, not a model's steps: 5,000 tok/s is past the fastest
#: hosted single streams (2-3k) and the tiny model's 3,300 (which sends one token a message);
#: speculative decoding accepts a few tokens a step at a few hundred steps a second, and chunked
#: hosted streams (tens of tokens a message) write a few hundred tok/s. It caught 50 tokens a
#: message a millisecond apart read at 14,600 tok/s on a busy box (31,000 on a quiet one).
BATCHED_TPS = 5_000.0
BATCHED_TOKENS = 8

#: The gap below which two messages of one stream are one flush cut by the reads, not two
#: steps of a model: one token in less than this is past BURST_TPS (50 microseconds). Read only
#: past BATCHED_TPS over the span: a server that falls behind (a busy host, a frontend under
#: load) sends a few tokens together, and its span still times the model.
BURST_GAP_S = 1.0 / BURST_TPS


class _Answer(Protocol):
    ok: bool
    cold: bool
    output_tokens: int | None
    counted_chunks: int
    first_chunk_tokens: float | None
    chunk_times_s: list[float]


def burst_of(
    times_s: Sequence[float], tokens: int | None, first_tokens: float | None
) -> str | None:
    """Why an answer's content messages (arrival times `times_s`, any origin) cannot be timed
    per token, in words, or None when they came spread out enough to be.

    A burst: more than one token, and either every message arrived at once (one read, or one
    message holding them all), or the tokens after the first message came faster than one
    stream writes (BURST_TPS, over the whole span), or past BATCHED_TPS either many to a message
    or most gaps shorter than one token at BURST_TPS (BURST_GAP_S: a flush read in pieces)."""
    n = tokens or len(times_s)
    if n < 2 or not times_s:
        return None
    if len(times_s) == 1:
        return f"{n:,} tokens in one message"
    span = max(times_s) - min(times_s)
    if span <= 0:
        return f"{n:,} tokens in one read"
    first = first_tokens if first_tokens is not None else n / len(times_s)
    after = n - first
    if after > 0 and after / span > BURST_TPS:
        return f"{n:,} tokens in {span * 1e3:.2f} ms, {after / span:,.0f} tok/s"
    per_message = after / (len(times_s) - 1)
    if after > 0 and after / span > BATCHED_TPS and per_message >= BATCHED_TOKENS:
        return (
            f"{n:,} tokens in {span * 1e3:.2f} ms, {after / span:,.0f} tok/s, "
            f"{per_message:.0f} a message"
        )
    gaps = [b - a for a, b in itertools.pairwise(times_s)]
    if after / span > BATCHED_TPS and statistics.median(gaps) < BURST_GAP_S:
        return (
            f"{n:,} tokens in {len(times_s):,} messages, most of them under "
            f"{BURST_GAP_S * 1e6:.0f} µs apart"
        )
    return None


def answer_burst(r: _Answer) -> str | None:
    """`burst_of` for one measured answer (a RequestMetrics)."""
    return burst_of(r.chunk_times_s, r.output_tokens or r.counted_chunks, r.first_chunk_tokens)


def timed_answers(metrics: Sequence[_Answer]) -> list[_Answer]:
    """The answers a run's per-token figures are read from: answered, warm, more than a token."""
    return [r for r in metrics if r.ok and not r.cold and (r.output_tokens or r.counted_chunks) > 1]


def burst_share(metrics: Sequence[_Answer]) -> tuple[int, int, str | None]:
    """(answers that came in a burst, answers of more than one token, one burst in words)."""
    long = timed_answers(metrics)
    said = [why for r in long if (why := answer_burst(r)) is not None]
    return len(said), len(long), (said[0] if said else None)


def burst_note(metrics: Sequence[_Answer], *, tpot_bound: bool = False) -> str | None:
    """What a run says when answers came in a burst: their ITL, TPOT and writing speed are
    blank (never 0), and why; what stays (TTFT, E2E and the run's total tok/s, over its wall
    time); with `tpot_bound` (an SLO on TPOT), that goodput is blank too."""
    burst, long, example = burst_share(metrics)
    if not burst:
        return None
    which = (
        f"every token of the {long} answer(s)"
        if burst == long
        else f"the tokens of {burst} of the {long} answer(s)"
    )
    return (
        f"{which} of more than one token arrived in one read or one burst (e.g. {example}: "
        "faster than a model writes one stream): something buffers the stream "
        "(a proxy, or a server that sends its answer whole or in batches), so no time per "
        "token (ITL, TPOT) or writing speed can be read for them"
        + (", nor goodput against --slo's tpot bound (blank, not 0 %)" if tpot_bound else "")
        + "; TTFT and E2E are when the text reached felab, and total tok/s is over the run's "
        "wall time; time the server directly"
    )
