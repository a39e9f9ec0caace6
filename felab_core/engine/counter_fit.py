"""Whether a server's own /metrics counters can be of the run felab just made: no more tokens
written than its streams could write in the time between the looks, or than the requests sent
could ask for; no more prompt tokens read than the bytes felab sent could hold."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from felab_core.engine.timeline import RequestTimeline
from felab_core.engine.token_counts import MAX_SERVER_TPS, TEMPLATE_TOKENS, UNSHOWN_TOKENS
from felab_core.sizing.metrics_scrape import ServerRates

#: How far past what felab sent a server's count may go (a request recomputed after its
#: preemption, a chat template's tokens): twice is far past any, and 10^6 for 2 kB is past it.
_SLACK = 2.0


@dataclass(frozen=True, slots=True)
class RunFit:
    """What felab sent in one run, to hold a server's counters to."""

    requests: int  # sent in the run, answered or not
    streams: int  # the most open at once
    asked_tokens: int | None  # each request's max_tokens (None: the server's own, or a trace's)
    sent_bytes: int | None  # the request bodies' bytes, all together (None: not known)

    @classmethod
    def of(
        cls,
        timelines: Sequence[RequestTimeline],
        requests: int,
        concurrency: int,
        asked_tokens: int | None,
    ) -> RunFit:
        known = len(timelines) == requests and all(t.request_bytes for t in timelines)
        return cls(
            requests=requests,
            streams=min(concurrency, requests) if concurrency > 0 else requests,
            asked_tokens=asked_tokens,
            sent_bytes=sum(t.request_bytes for t in timelines) if known else None,
        )


def past_the_run(rates: ServerRates, fit: RunFit, received: int) -> str | None:
    """Why the counters cannot be of this run, in words, or None. 2,000,000 tokens written in
    0.4 s by one stream, and 10^6 prompt tokens read for a few kB sent, had been kept."""
    written, prompt = rates.generation_tokens, rates.prompt_tokens
    if written is not None and fit.requests:
        most = MAX_SERVER_TPS * fit.streams * max(rates.seconds, 0.0)
        if written > _SLACK * most:
            return (
                f"{written:,.0f} tokens written in {rates.seconds:.3g} s by {fit.streams:,} "
                f"stream(s), past {MAX_SERVER_TPS:,.0f} tokens a second for each"
            )
        if fit.asked_tokens is not None:
            each = fit.asked_tokens + 1 + UNSHOWN_TOKENS  # the end of the turn, a stop string
            asked = max(received, fit.requests * each)
            if written > _SLACK * asked:
                return (
                    f"{written:,.0f} tokens written, where felab's {fit.requests:,} request(s) "
                    f"asked for at most {fit.asked_tokens:,} each and it received {received:,}"
                )
    if prompt is not None and fit.sent_bytes is not None:
        most_prompt = fit.sent_bytes + TEMPLATE_TOKENS * fit.requests  # a token is a byte or more
        if prompt > _SLACK * most_prompt:
            return (
                f"{prompt:,.0f} prompt tokens read, where felab sent {fit.sent_bytes:,} bytes "
                f"in {fit.requests:,} request(s)"
            )
    return None
