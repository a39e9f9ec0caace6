"""A results row's throughputs against its requests: a count over the run's time cannot be
more than its requests' own times allow (seventeenth sweep, a2 H8; twentieth, A2-9, A2-10,
A2-23: 999,999 req/s beside a rate, 9,999,999 tok/s beside a blank max_tokens, and p95
latencies of a day in a run of 1.7 s had been stored).
"""

from __future__ import annotations

from collections.abc import Mapping

from felab_core.engine.workloads import MAX_TOKENS
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
    if output_tps and request_tps:
        max_tokens = counts["max_tokens"]
        each = 4 * (max_tokens or MAX_TOKENS) + 256
        if output_tps > request_tps * each * (1 + 2 * ROUNDING):
            asked = (
                f"a request of max_tokens {max_tokens:,}"
                if max_tokens
                else f"with max_tokens blank (the server's own limit), a request of felab's "
                f"(at most max_tokens {MAX_TOKENS:,})"
            )
            raise Invalid(
                f"output_tps {output_tps:g} beside request_tps {request_tps:g}: {asked} brings "
                f"at most {each:,} tokens; the row was edited"
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
