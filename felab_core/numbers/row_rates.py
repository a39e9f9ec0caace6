"""A results row's throughputs against its requests: a count over the run's time cannot be
more than its requests' own times allow (seventeenth sweep, a2 H8; twentieth, A2-9, A2-10,
A2-23: 999,999 req/s beside a rate, 9,999,999 tok/s beside a blank max_tokens, and p95
latencies of a day in a run of 1.7 s had been stored).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from felab_core.engine.workloads import MAX_TOKENS, MIN_BURSTINESS
from felab_core.errors import Invalid
from felab_core.numbers.speed_tpot import ROUNDING

#: The latencies of a row: each is one request's time, or a time inside one request.
_LATENCIES = (
    "ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s", "itl_p50_s", "itl_p95_s",
    "e2e_p50_s", "e2e_p95_s",
)  # fmt: skip
#: A run's length read back from ok / request_tps (written to 6 digits) and a latency (also
#: 6 digits): each may be off by 5e-6 of itself; this leaves room for rows kept with fewer.
_RUN_ROUNDING = 1e-3
_LEAST_BURSTINESS = MIN_BURSTINESS


def check_rates(
    row: Mapping[str, str], figures: Mapping[str, float | None], counts: Mapping[str, int | None]
) -> None:
    """A run's throughputs agree with its requests (`figures` and `counts`: the row's numbers
    and whole numbers, already checked one by one)."""
    request_tps, output_tps = figures["request_tps"], figures["output_tps"]
    _check_users(row, request_tps, figures["e2e_p50_s"])
    ok = counts["ok"]
    if ok and request_tps:
        _check_inside_the_run(figures, ok, request_tps)
        _check_open_loop(row, figures, counts, ok / request_tps)
    if output_tps and ok == 0:  # twentieth sweep: 1.6 million tok/s beside no answer
        check_output_tps(
            output_tps, 0, None, "ok 0: no request was answered, so none wrote a token"
        )
    if output_tps and request_tps and ok:
        max_tokens = counts["max_tokens"]
        each = 4 * (max_tokens or MAX_TOKENS) + 256
        asked = (
            f"a request of max_tokens {max_tokens:,}"
            if max_tokens
            else f"with max_tokens blank (the server's own limit), a request of felab's "
            f"(at most max_tokens {MAX_TOKENS:,})"
        )
        check_output_tps(
            output_tps,
            ok * each,
            ok / request_tps,
            f"request_tps {request_tps:g}: {asked} brings at most {each:,} tokens",
        )


def check_output_tps(output_tps: float, tokens: float, seconds: float | None, said: str) -> None:
    """output_tps is the answered requests' output tokens over the run's time, so at most
    `tokens` over `seconds` (the run's length; None: no time, where output_tps is 0 too).
    `said`: where the tokens and the time come from, for the message. One bound for every
    source of the two (a row's own counts, a result's request records)."""
    most = tokens / seconds if seconds and tokens > 0 else 0.0
    if output_tps > most * (1 + 2 * ROUNDING) * (1 + _RUN_ROUNDING):
        raise Invalid(
            f"output_tps {output_tps:g} beside {said}"
            + (f" ({tokens:,.0f} over {seconds:.4g} s is {most:.4g} a second)" if most else "")
            + "; the row was edited: put back what felab bench wrote"
        )


def run_length(
    figures: Mapping[str, float | None], counts: Mapping[str, int | None]
) -> float | None:
    """How long the run lasted, as its row says: ok / request_tps (None: not given)."""
    ok, request_tps = counts["ok"], figures["request_tps"]
    return ok / request_tps if ok and request_tps else None


def _check_users(row: Mapping[str, str], request_tps: float | None, e2e: float | None) -> None:
    """Users one request at a time finish at most users / mean E2E a second, and at least
    half of the requests take the median or longer, so the mean is at least half the median:
    4 x users / E2E p50 leaves room for a ramp. Requests sent at a rate with a cap on those in
    flight (concurrency 1 or more beside the rate) are held to it too (A2-9)."""
    users = (row.get("concurrency") or "").strip()
    if not (users.isdigit() and int(users) >= 1 and request_tps and e2e):
        return
    most = 4 * int(users) / e2e
    if request_tps > most * (1 + 2 * ROUNDING):
        rate = (row.get("rate") or "").strip()
        sent = (
            f"sent at rate {rate[:20]} with at most {users} in flight"
            if rate
            else f"at {users} user(s) one request at a time"
        )
        raise Invalid(
            f"request_tps {request_tps:g} {sent}, whose "
            f"median request took {e2e:g} s: they finish at most about {most:.3g} a second; "
            "the row was edited"
        )


def _check_inside_the_run(figures: Mapping[str, float | None], ok: int, request_tps: float) -> None:
    """request_tps is the answered requests over the run's time, so the run lasted ok /
    request_tps; every request, and every time inside one, fits in it (A2-23: a p95 of a day,
    an ITL of 80,000 s beside a blank e2e_p95, in a run of 10 requests at 5.7 a second)."""
    lasted = ok / request_tps
    for name in _LATENCIES:
        value = figures[name]
        if value is not None and value > lasted * (1 + _RUN_ROUNDING):
            raise Invalid(
                f"{name} {value:g} beside ok {ok:,} at request_tps {request_tps:g}: the run "
                f"lasted about {lasted:.4g} s ({ok:,} / {request_tps:g}), and every request "
                "took less; the row was edited"
            )


#: An open-loop row whose requests finished faster than its rate sends them this improbably
#: is refused (one in a billion rows of honest runs at the most).
_LEAST_CHANCE = 1e-9


def _log_chance_gamma_below(shape: float, x: float) -> float:
    """An upper bound on log P(G <= x) for G ~ Gamma(shape, 1): the series of the lower
    incomplete gamma function, x^a e^-x / Gamma(a + 1) times a sum whose terms shrink by
    x / (a + 1) or faster, so at most 1 / (1 - x / (a + 1)). 0 (no bound) where x >= a + 1,
    or x is 0: bursty gaps may underflow to 0 s, so a time of 0 is no proof."""
    if x <= 0 or x >= shape + 1:
        return 0.0
    return shape * math.log(x) - x - math.lgamma(shape + 1) - math.log1p(-x / (shape + 1))


def _check_open_loop(
    row: Mapping[str, str],
    figures: Mapping[str, float | None],
    counts: Mapping[str, int | None],
    lasted: float,
) -> None:
    """Requests sent at a rate arrive with gamma gaps of mean 1 / rate (shape: the
    burstiness; engine.workloads.arrival_offsets_s), the first at 0, in order, and the run
    lasts at least until the last was sent: N requests take the sum of N - 1 gaps, a
    Gamma((N - 1) k) in units of 1 / (rate k). A run whose length (ok / request_tps) that sum
    reaches less than once in a billion finished far above its rate: 30 to 20,000 times the
    rate had been stored (twentieth sweep). A few requests, or bursty ones, may well finish
    fast: the bound says so by itself. Below the rate is honest (a server that did not keep
    up), and a trace's requests follow its own times."""
    rate, burstiness = figures["rate"], figures["burstiness"]
    preset = (row.get("preset") or "").strip()
    if not rate or preset.startswith("trace:"):
        return
    sent = counts["requests"] or counts["ok"] or 0
    k = burstiness or _LEAST_BURSTINESS  # blank: the burstiest felab sends, the loosest bound
    shape, x = (sent - 1) * k, lasted * (1 + _RUN_ROUNDING) * rate * (1 + ROUNDING) * k
    if sent < 2 or _log_chance_gamma_below(shape, x) >= math.log(_LEAST_CHANCE):
        return
    request_tps = figures["request_tps"]
    raise Invalid(
        f"request_tps {request_tps:g} beside rate {rate:g} (burstiness {k:g}): {sent:,} "
        f"requests sent at that rate span about {(sent - 1) / rate:.4g} s, and all in "
        f"{lasted:.4g} s (ok / request_tps) happens less than once in a billion runs; the row "
        "was edited: put back what felab bench wrote"
    )
