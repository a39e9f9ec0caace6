"""The highest request rate a server sustains within a latency objective (`--find-max-rate`).

The objective is a list of percentile bounds, e.g. `ttft_p95=500ms,itl_p95=50ms`. A probe is one
open-loop run at a rate; it passes when every bound holds over its requests, no more than 1 % of
them failed, and the server kept up (it finished at least 90 % of the rate asked: past that
point the latencies describe a queue, not the server). The search doubles the rate while probes
pass, then halves the gap between the last pass and the first failure until it is narrower than
`precision` of the pass, or the probes run out. Every probe is kept, so the output can show the
curve the answer came from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from felab_core.engine.bursts import burst_share
from felab_core.engine.metrics import (
    MAX_OBJECTIVE_S,
    MIN_OBJECTIVE_S,
    RunSummary,
    Stats,
    unit_slip,
)
from felab_core.text import comma_items

METRICS = {"ttft": "ttft_s", "itl": "itl_s", "tpot": "tpot_s", "e2e": "e2e_s"}
PERCENTILES = (50, 90, 95, 99)
MAX_FAILED = 0.01
MIN_KEPT_UP = 0.9
_BOUND = re.compile(r"^(ttft|itl|tpot|e2e)_p(\d+)=([-+]?[0-9.]+(?:e[-+]?\d+)?)\s*(ms|s)?\Z")


class ObjectiveError(ValueError):
    """An objective felab cannot read."""


class ProbeInterrupted(Exception):
    """`run_at` raises it when its probe was stopped (Ctrl-C, SIGTERM): the search ends there,
    with no verdict, since a cut probe says nothing about its rate."""


class ProbeUnmeasurable(Exception):
    """`run_at` raises it when its probe's answers came in bursts (`per_token_unreadable`): a
    bound on ITL or TPOT can be neither met nor missed there, at this rate or any other, so the
    search ends with the reason (a buffered stream's ITL 0 had "met" itl_p95=1ms at 450 req/s,
    and its missing TPOT had halved the rate to 0.02 req/s: twenty-second sweep, a A2, A3)."""

    def __init__(self, rate: float, summary: RunSummary, reason: str) -> None:
        super().__init__(reason)
        self.rate, self.summary, self.reason = rate, summary, reason


#: The bounds read from each token's arrival time.
PER_TOKEN = ("itl", "tpot")


def per_token_unreadable(bounds: tuple[Bound, ...], requests: list[Any]) -> str | None:
    """Why a probe's bounds on ITL or TPOT cannot be judged (None: they can): at least half its
    answers of more than one token came in one read or one burst (bursts.burst_of), so their
    per-token times are not the model's. `requests`: the probe's RequestMetrics."""
    named = sorted({b.metric for b in bounds if b.metric in PER_TOKEN})
    burst, long, example = burst_share(requests)
    if not named or not burst or 2 * burst < long:
        return None
    return (
        f"{' and '.join(named)} cannot be measured: {burst} of {long} answers arrived in one "
        f"read or one burst (e.g. {example}), so something buffers the stream"
    )


@dataclass(frozen=True, slots=True)
class Bound:
    metric: str  # ttft, itl, tpot, e2e
    percentile: int
    limit_s: float

    def __str__(self) -> str:
        return f"{self.metric}_p{self.percentile}<={self.limit_s * 1e3:g}ms"


def parse_objective(text: str) -> tuple[Bound, ...]:
    """`ttft_p95=500ms,itl_p95=50ms` (ms or s; seconds when no unit is given)."""
    bounds: list[Bound] = []
    try:
        parts = comma_items(text, "ttft_p95=500ms,itl_p95=50ms")
    except ValueError as exc:
        raise ObjectiveError(str(exc)) from None
    for part in parts:  # matched lower-cased, quoted as typed (a key pasted here stays a key)
        match = _BOUND.match(part.replace(" ", "").lower())
        if match is None:
            raise ObjectiveError(
                f"{part!r}: write METRIC_pNN=LIMIT, e.g. ttft_p95=500ms or itl_p99=0.05 "
                f"(metrics: {', '.join(METRICS)}; percentiles: {', '.join(map(str, PERCENTILES))})"
            )
        metric, pct, value, unit = match.groups()
        if int(pct) not in PERCENTILES:
            raise ObjectiveError(f"{part!r}: felab reports p50, p90, p95 and p99, not p{pct}")
        try:
            limit = float(value) / (1000 if unit == "ms" else 1)
        except ValueError:  # 1.2.3
            raise ObjectiveError(f"{part!r}: {value!r} is not a number") from None
        if not (math.isfinite(limit) and MIN_OBJECTIVE_S <= limit <= MAX_OBJECTIVE_S):
            raise ObjectiveError(f"{part!r}: the limit must be from 0.1 ms to an hour (3600 s)")
        slip = unit_slip(metric, limit, unit)
        if slip:
            raise ObjectiveError(f"{part!r}: {slip}")
        if any((b.metric, b.percentile) == (metric, int(pct)) for b in bounds):
            raise ObjectiveError(f"{metric}_p{pct} is given twice: give each bound once")
        bounds.append(Bound(metric, int(pct), limit))
    if not bounds:
        raise ObjectiveError("the objective is empty: e.g. ttft_p95=500ms,itl_p95=50ms")
    return tuple(bounds)


@dataclass(slots=True)
class Probe:
    """One run at one rate, and what it said about the objective."""

    rate: float
    summary: RunSummary
    misses: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.misses


def judge(rate: float, summary: RunSummary, bounds: tuple[Bound, ...]) -> Probe:
    """A probe's verdict, with each reason it missed in words."""
    probe = Probe(rate, summary)
    sent = summary.ok + summary.failed
    if sent == 0:
        probe.misses.append("no request finished")
        return probe
    if summary.ok == 0:  # not load: the server answers none at any rate ("fell behind" misled)
        kinds = ", ".join(sorted(summary.errors)) or "no reason given"
        every = "the one request" if sent == 1 else f"all {sent:,} requests"
        probe.misses.append(f"{every} failed ({kinds})")
        return probe
    if summary.stopped:
        probe.misses.append("over-saturated: the run stopped sending")
    if summary.failed / sent > MAX_FAILED:
        probe.misses.append(f"{summary.failed:,} of {sent:,} requests failed")
    if (finished := finished_rate(rate, summary)) < MIN_KEPT_UP * rate:
        probe.misses.append(
            f"finished only {finished:.2f} req/s of {rate:g} asked: the server fell behind"
        )
    for bound in bounds:
        stats: Stats | None = getattr(summary, METRICS[bound.metric])
        value = None if stats is None else getattr(stats, f"p{bound.percentile}")
        if value is None:
            probe.misses.append(f"no {bound.metric} measured")
        elif value > bound.limit_s:
            probe.misses.append(
                f"{bound.metric} p{bound.percentile} {value * 1e3:.1f} ms > "
                f"{bound.limit_s * 1e3:g} ms"
            )
    return probe


def finished_rate(rate: float, summary: RunSummary) -> float:
    """Requests a probe finished a second, to judge whether the server kept up: the answered
    over the run's time less one request's usual latency, which the last answer takes however
    fast the server is (12 requests at 8 req/s, each 1.5 s, read as 11 times too few), and never
    more than the rate asked of the requests sent."""
    sent = summary.ok + summary.failed
    if summary.e2e_s is None or not sent or rate <= 0 or summary.duration_s <= 0:
        return summary.request_tps
    span = min(summary.duration_s, max(summary.duration_s - summary.e2e_s.p50, sent / rate))
    return min(summary.request_tps * summary.duration_s / span, rate * summary.ok / sent)


@dataclass(slots=True)
class SearchResult:
    best: Probe | None  # the highest rate that passed
    probes: list[Probe]
    capped: bool = False  # every probe up to the ceiling passed
    #: The last probe, where two in a row had every request fail before any passed: a server
    #: that answers none at half the rate either has an error to fix, not a rate to find.
    failing: Probe | None = None
    #: The rate whose probe was stopped (Ctrl-C): the search ended there, with no answer.
    interrupted_at: float | None = None
    #: Why a bound on ITL or TPOT could not be judged (ProbeUnmeasurable): the search ended.
    unmeasurable: str | None = None


def _answered_none(probe: Probe) -> bool:
    return probe.summary.ok == 0 and probe.summary.failed > 0


#: The highest rate the search probes: past it a client, not the server, is what is measured.
SEARCH_CEILING = 10_000.0


async def find_max_rate(
    run_at: Callable[[float], Awaitable[RunSummary]],
    bounds: tuple[Bound, ...],
    *,
    start: float = 1.0,
    ceiling: float = SEARCH_CEILING,
    floor: float = 0.01,
    precision: float = 0.1,
    max_probes: int = 12,
    on_probe: Callable[[Probe], None] | None = None,
) -> SearchResult:
    """Search the rate: double while probes pass, then bisect the gap to `precision`.

    A probe stopped by the user (`run_at` raises ProbeInterrupted) ends the search: the result
    holds the probes that finished, `interrupted_at` its rate, and no best rate.
    """
    try:
        return await _search(run_at, bounds, start, ceiling, floor, precision, max_probes, on_probe)
    except _Stopped as stopped:
        return SearchResult(None, stopped.probes, interrupted_at=stopped.rate)
    except _Unjudged as unjudged:
        return SearchResult(None, unjudged.probes, unmeasurable=unjudged.reason)


class _Unjudged(Exception):
    def __init__(self, reason: str, probes: list[Probe]) -> None:
        super().__init__(reason)
        self.reason, self.probes = reason, probes


class _Stopped(Exception):
    def __init__(self, rate: float, probes: list[Probe]) -> None:
        super().__init__(rate)
        self.rate, self.probes = rate, probes


async def _search(
    run_at: Callable[[float], Awaitable[RunSummary]],
    bounds: tuple[Bound, ...],
    start: float,
    ceiling: float,
    floor: float,
    precision: float,
    max_probes: int,
    on_probe: Callable[[Probe], None] | None,
) -> SearchResult:
    if not (0 < floor <= start <= ceiling) or not (0 < precision < 1) or max_probes < 1:
        raise ObjectiveError("the search needs 0 < floor <= start <= ceiling and 0 < precision < 1")
    probes: list[Probe] = []

    async def probe(rate: float) -> Probe:
        try:
            summary = await run_at(rate)
        except ProbeInterrupted:
            raise _Stopped(rate, probes) from None
        except ProbeUnmeasurable as unmeasurable:
            probes.append(Probe(rate, unmeasurable.summary, [unmeasurable.reason]))
            if on_probe:
                on_probe(probes[-1])
            raise _Unjudged(unmeasurable.reason, probes) from None
        result = judge(rate, summary, bounds)
        probes.append(result)
        if on_probe:
            on_probe(result)
        return result

    good: Probe | None = None
    bad: float | None = None
    rate = start
    while len(probes) < max_probes:  # find a bracket
        result = await probe(rate)
        if good is None and len(probes) >= 2 and all(_answered_none(p) for p in probes[-2:]):
            return SearchResult(None, probes, failing=result)  # halving the rate did not help
        if result.passed:
            good = result
            if rate >= ceiling:
                return SearchResult(good, probes, capped=True)
            rate = min(ceiling, rate * 2)
        else:
            bad = rate
            if good is not None:
                break
            if rate <= floor:
                return SearchResult(
                    None, probes, failing=result if _answered_none(result) else None
                )
            rate = max(floor, rate / 2)
    while good is not None and bad is not None and len(probes) < max_probes:
        if (bad - good.rate) / good.rate <= precision:
            break
        middle = (good.rate + bad) / 2
        result = await probe(middle)
        if result.passed:
            good = result
        else:
            bad = middle
    return SearchResult(good, probes)
