"""A results row's writing speed against its time per token: felab writes both from the same
requests, so one bounds the other within the spread of the row's own requests and the rounding
of its figures; a speed edited by hand shows.
"""

from __future__ import annotations

from felab_core.errors import Invalid

#: How far a figure in a row may be from the value felab computed: felab writes 6 significant
#: digits (off by at most 5e-6 of the value); 1e-4 leaves room for a row kept with fewer (the
#: fixtures' 41.5 beside 0.0241) while a writing speed edited by 0.1 tok/s still shows.
ROUNDING = 1e-4
#: The most writing_tps_p50 x tpot_p50_s can be in a row without its tpot_p95_s (felab writes
#: both; a row without it was made by hand): what runs like day2's show, 8 requests whose TPOTs
#: spread by 10 % give at most 1.013, 4 give 1.04 (measured as _most_speed_times_tpot says).
_MOST_WITHOUT_SPREAD = 1.05
#: The most it can be whatever the spread: the bound this check always had (the middle two
#: requests' TPOTs 3.7 x apart; no run of one person at a time comes near it).
_MOST_WIDE_SPREAD = 1.5


def _most_speed_times_tpot(tpot_p50: float, tpot_p95: float | None) -> float:
    """The most writing_tps_p50 x tpot_p50_s can be in a row felab wrote (it is at least 1).

    Each request's writing speed is 1 / its TPOT (engine.metrics.request_metrics), and both
    medians are np.percentile's of the same requests (Stats.of). With an odd count both are one
    request's, so the product is 1. With an even count each averages the middle two, TPOTs
    a <= b: the TPOT median m = (a + b) / 2, the speed median (1/a + 1/b) / 2 = m / ab, so the
    product is m^2 / ab = 1 / (1 - (d/m)^2), d = (b - a) / 2, above 1 by as much as the middle
    two differ. b is at most the p95 (from 3 requests on; with 2, p95 = a + 0.95 (b - a)), so
    d <= (p95 - m) / 0.9: the row's own spread bounds the product. Measured (thousands of sets
    of 2 to 64 requests, lognormal TPOTs spread 1 % to 100 %, through Stats.of and the CSV's 6
    digits): the product is 0.999995 to 17 (2 requests 100 % apart), never above this bound by
    more than 5e-6 (its rounding), so no such row is refused unless above _MOST_WIDE_SPREAD;
    day2's 8 requests at a 3 % spread give at most 1.0011. A sample row's 41.8 tok/s (TPOT
    0.0239234 s, p95 0.0248804 s) allows 41.79 to 41.89: an edited 42, 46 or 50 is refused.
    """
    if tpot_p95 is None:
        return _MOST_WITHOUT_SPREAD
    # The median rounded up and the p95 down when written: widen the spread by their rounding.
    m = tpot_p50 * (1 - ROUNDING)
    d = max(tpot_p95 * (1 + ROUNDING) - m, 0.0) / 0.9
    if d >= m:  # the p95 at 1.9 x the median or more: the middle two are not bounded
        return _MOST_WIDE_SPREAD
    return min(1 / (1 - (d / m) ** 2), _MOST_WIDE_SPREAD)


def check_writing_is_one_over_tpot(writing: float, tpot: float, tpot_p95: float | None) -> None:
    """Refuse a writing speed that is not 1/TPOT within the spread of the row's two medians
    (_most_speed_times_tpot) and the rounding of the figures (ROUNDING)."""
    least, most = 1 - 2 * ROUNDING, _most_speed_times_tpot(tpot, tpot_p95) * (1 + 2 * ROUNDING)
    if tpot > 0 and least <= writing * tpot <= most:
        return
    if tpot == 0:
        raise Invalid(
            f"writing speed {writing:g} tok/s beside a time per token of 0 s: felab never "
            "times a token in no time; the row was edited"
        )
    raise Invalid(
        f"writing speed {writing:g} tok/s disagrees with its time per token {tpot:g} s "
        f"(1/TPOT = {1 / tpot:.4g} tok/s; the spread of its requests allows {least / tpot:.4g} "
        f"to {most / tpot:.4g}): the row was edited; import the file felab bench wrote"
    )
