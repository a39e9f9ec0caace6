"""A results row's end-to-end times against its tokens: a request of n tokens streams them
one time per token apart, so it lasts at least about n / 2 times its TPOT (sweep 22 B10: an
E2E of 0.03 s beside 32 tokens at 20.7 ms each had been stored).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from felab_core.engine.token_counts import COUNT_FROM_OLLAMA, COUNT_FROM_SERVER
from felab_core.errors import Invalid

#: The token counts a server gives and felab believes only up to max_tokens + 1 (the end token
#: aside; engine.token_counts._output_bounds): the least tokens of a request follow from them.
_BOUNDED_SOURCES = (COUNT_FROM_SERVER, COUNT_FROM_OLLAMA)
#: Each figure is written to 6 digits; this leaves room for rows kept with a few fewer.
_ROUNDING = 1e-3


def least_tokens(
    ok: int | None, output_tps: float | None, request_tps: float | None, max_tokens: int | None
) -> int | None:
    """The fewest output tokens any answered request of a row had (None: the row cannot say):
    the answered requests wrote output_tps / request_tps tokens each on average
    (engine.metrics.summarize: both over the run's time), and none more than max_tokens + 1,
    so the fewest is at least ok x the mean - (ok - 1) x (max_tokens + 1). A mean past
    max_tokens + 1 bounds nothing (row_rates holds output_tps to its own looser bound)."""
    if not (ok and output_tps and request_tps and max_tokens):
        return None
    mean = output_tps / request_tps * (1 - _ROUNDING)
    if mean > max_tokens + 1:  # more than a request may write: not a count bounded by it
        return None
    least = math.floor(ok * mean - (ok - 1) * (max_tokens + 1))
    return least if least >= 2 else None


def check_e2e_holds_its_tokens(
    figures: Mapping[str, float | None],
    counts: Mapping[str, int | None],
    token_source: str,
) -> None:
    """Refuse E2E times shorter than their own tokens take. felab times a request's TPOT as
    (last chunk - first chunk) / (n - n1), n1 the first chunk's share of the n tokens (n / the
    chunks, engine.metrics.request_metrics; 2 chunks at least), so the stream after the first
    chunk lasts TPOT x (n - n1) >= TPOT x n / 2, inside the request's E2E. Every request
    having at least `least_tokens`, each percentile of E2E is at least that of TPOT times half
    of them (a time per request at least another's, request by request, is so at each
    percentile). One function for every row a member's figures come from."""
    if token_source not in _BOUNDED_SOURCES:
        return  # counted from chunks, or mixed: no bound on a request's tokens
    least = least_tokens(
        counts["ok"], figures["output_tps"], figures["request_tps"], counts["max_tokens"]
    )
    if least is None:
        return
    for q in ("p50", "p95"):
        tpot, e2e = figures[f"tpot_{q}_s"], figures[f"e2e_{q}_s"]
        if tpot is None or e2e is None:
            continue
        shortest = tpot * least / 2
        if e2e < shortest * (1 - _ROUNDING):
            raise Invalid(
                f"e2e_{q}_s {e2e:g} beside tpot_{q}_s {tpot:g}: each answered request wrote at "
                f"least {least:,} tokens (output_tps / request_tps, max_tokens "
                f"{counts['max_tokens']:,}), which stream for at least {shortest:.4g} s after "
                "the first; the row was edited: put back what felab bench wrote"
            )
