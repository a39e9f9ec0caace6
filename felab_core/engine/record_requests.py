"""The requests of one run of a `felab bench --json` record, checked as felab writes them and
made into arrays for a comparison.

A request's figures hang together: its end comes after its first token, its gaps add up to
the time between, its TPOT is that time over the tokens after the first chunk, its writing
speed one over its TPOT. A hand edit of one figure breaks one of these; the request is named
with its run and the rule it breaks. Apart from record_reading.py (the record around them).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from felab_core.engine.token_counts import MAX_SERVER_TPS
from felab_core.engine.workloads import MAX_TOKENS as MAX_WORKLOAD_TOKENS
from felab_core.sizing.units import MAX_TOKENS

EPSILON_S = 1e-6  # clocks round: an end-to-end this much under TTFT is the same instant
#: The most inter-token gaps one request of felab's holds: a stream is cut past four messages
#: a token asked (of the most --max-tokens) and 256 more (stream_shape.most_messages).
MOST_GAPS = 4 * MAX_WORKLOAD_TOKENS + 256
#: A request's gaps add up to the time from its first token to its last, inside its
#: end-to-end less its TTFT; gaps sent from another machine are whole microseconds, so each
#: may be off by half of one.
_GAP_ROUNDING_S = 1e-6
#: The least a first token or a whole request takes: one round trip over a connection is tens
#: of microseconds (numbers import holds its rows to the same floor); 1e-300 s had been "better".
LEAST_REQUEST_S = 1e-6
#: Times that are at least LEAST_REQUEST_S when given.
_ROUND_TRIPS = ("ttft_s", "e2e_s")


class CompareError(ValueError):
    """A file that is not a felab bench record, or two records with nothing to compare."""


def finite(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


SCALARS = ("ttft_s", "e2e_s", "tpot_s", "writing_tps")  # the order a broken file is checked in
#: Figures felab never writes as 0: an answer, and a token after the first, take some time.
_ABOVE_ZERO = ("ttft_s", "e2e_s", "tpot_s", "writing_tps")
#: felab writes a request's writing_tps as exactly 1 / tpot_s; JSON keeps both to the last
#: digit, so a product further from 1 than this is an edit (one figure changed, not the other).
_SPEED_TIMES_TPOT_SLACK = 1e-9


def cut(value: Any) -> str:
    """A value of the file for an error: repr'd (an escape code is written out, not sent to
    the terminal), at most 40 characters, and only the start of a long one is repr'd."""
    text = repr(value[:40] if isinstance(value, str | list) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_request(
    path: Path, run: int, index: int, request: Any, most_gaps: int = MOST_GAPS
) -> None:
    """A request's times are seconds, finite and not negative, and the end comes no sooner
    than the first token; `ok` and `cold` are true or false; a token count is a whole number.
    Anything else is not a measurement (an edited or broken file), and a comparison would
    believe it."""
    where = f"{path}: run {run}, request {index}"
    broken = "the file was edited or broken"
    if not isinstance(request, dict):
        raise CompareError(f"{where} is not a request record")
    number = request.get("index")
    if type(number) is not int or number < 0:  # without it, copied requests pass as new ones
        raise CompareError(
            f"{where} has index = {cut(number)}, not a request's number (0 or more; felab "
            f"numbers every request): {broken}"
        )
    for key, missing_ok in (("ok", False), ("cold", True), ("outside_window", True)):
        flag = request.get(key)
        if not isinstance(flag, bool) and not (missing_ok and flag is None):
            raise CompareError(f"{where} has {key} = {flag!r}, not true or false: {broken}")
    tokens = request.get("output_tokens")
    if tokens is not None and (type(tokens) is not int or not 0 <= tokens <= MAX_TOKENS):
        raise CompareError(
            f"{where} has output_tokens = {tokens!r}, not a count of tokens (a whole number, "
            f"0 to {MAX_TOKENS:,}): {broken}"
        )
    itl = request.get("itl_s")
    if itl is not None and not isinstance(itl, list):
        raise CompareError(f"{where} has itl_s that is not a list")
    chunks = request.get("counted_chunks")
    if chunks is not None and (type(chunks) is not int or not 0 <= chunks <= MOST_GAPS + 1):
        raise CompareError(
            f"{where} has counted_chunks = {cut(chunks)}, not a count of chunks (a whole number, "
            f"0 to {MOST_GAPS + 1:,}): {broken}"
        )
    values = [(k, request.get(k)) for k in SCALARS]
    values += [("itl_s", v) for v in itl or []]
    for key, value in values:
        if value is None:
            continue
        most, what = (86_400, "a time") if key.endswith("_s") else (10_000_000, "a speed")
        least = math.ulp(0) if key in _ABOVE_ZERO else 0
        if not finite(value) or not least <= value < most:
            raise CompareError(
                f"{where} has {key} = {value!r}, not {what} felab measures: {broken}"
            )
        if key in _ROUND_TRIPS and value < LEAST_REQUEST_S:
            raise CompareError(
                f"{where} has {key} = {value!r}: no request of felab's is timed under "
                f"{LEAST_REQUEST_S:g} s (one round trip over a connection takes longer), so "
                f"{broken}"
            )
    ttft, e2e = request.get("ttft_s"), request.get("e2e_s")
    timed = ttft is not None or itl or request.get("tpot_s") is not None
    if request.get("ok") is True and e2e is None and timed:
        raise CompareError(  # a TTFT of 86,000 s with no end had been compared as "worse"
            f"{where} is answered, with a first token (ttft_s = {ttft!r}), but has no e2e_s: "
            f"felab times the end of every answer, so {broken}"
        )
    tpot, speed = request.get("tpot_s"), request.get("writing_tps")
    if speed is not None and tpot is None:  # 9,999,999 tok/s with no TPOT had been "better"
        raise CompareError(
            f"{where} has writing_tps = {speed!r} and no tpot_s: felab writes the speed as "
            f"1 / tpot_s, never alone, so {broken}"
        )
    if tpot is not None and speed is not None and not _one_over(speed, tpot):
        raise CompareError(
            f"{where} has writing_tps = {speed!r} beside tpot_s = {tpot!r}: felab writes the "
            f"speed as 1 / tpot_s ({1 / tpot:.6g}), so {broken}"
        )
    ttft, e2e = request.get("ttft_s"), request.get("e2e_s")
    if ttft is not None and e2e is not None and e2e < ttft - EPSILON_S:
        raise CompareError(
            f"{where} has e2e_s = {e2e!r}, shorter than its ttft_s = {ttft!r}: a request ends "
            f"after its first token, so {broken}"
        )
    tpot = request.get("tpot_s")
    if tpot is not None and ttft is not None and e2e is not None and tpot > e2e - ttft + EPSILON_S:
        raise CompareError(
            f"{where} has tpot_s = {tpot!r}, longer than its time from first token to end "
            f"({e2e - ttft:.6g} s, e2e_s - ttft_s): a token after the first takes part of that "
            f"time, so {broken}"
        )
    gaps = itl or []
    if chunks is not None and len(gaps) > max(chunks - 1, 0):
        raise CompareError(  # zeros appended to itl_s had made ITL "0.00 ms, better"
            f"{where} has {len(gaps):,} inter-token gaps and counted_chunks = {chunks:,}: felab "
            f"times one gap between each two chunks ({max(chunks - 1, 0):,}), so {broken}"
        )
    if len(gaps) > most_gaps:
        raise CompareError(
            f"{where} has {len(gaps):,} inter-token gaps: felab ends a stream long before "
            f"({most_gaps:,}: four messages a token of --max-tokens, and 256), so {broken}"
        )
    if gaps and ttft is not None and e2e is not None:
        spent = math.fsum(gaps)
        if spent > e2e - ttft + EPSILON_S + _GAP_ROUNDING_S * len(gaps):
            raise CompareError(
                f"{where} has inter-token gaps that add up to {spent:.6g} s, longer than its "
                f"time from first token to end ({e2e - ttft:.6g} s, e2e_s - ttft_s): felab "
                f"measures both on one clock, so {broken}"
            )
    if tokens == 0 and request.get("ttft_s") is not None:  # a first token, and none written
        raise CompareError(
            f"{where} has a first token (ttft_s = {request.get('ttft_s')!r}) and output_tokens "
            f"= 0: felab counts a token at least where one came, so {broken}"
        )
    _check_tpot(where, request, gaps, tokens)


def _check_tpot(where: str, request: dict[str, Any], gaps: list[Any], tokens: Any) -> None:
    """TPOT is the time from the first chunk to the last (the gaps' sum) over the tokens after
    the first chunk: a TPOT (and the speed beside it) edited alone no longer says that."""
    broken = "the file was edited or broken"
    first = request.get("first_chunk_tokens")
    if first is not None and not (finite(first) and 0 <= first <= (tokens or 0)):
        raise CompareError(
            f"{where} has first_chunk_tokens = {cut(first)}, not a share of its "
            f"{tokens or 0:,} output tokens: {broken}"
        )
    tpot = request.get("tpot_s")
    if tpot is None:
        return
    if not gaps or tokens is None or first is None:  # each dropped, an edited TPOT had passed
        raise CompareError(
            f"{where} has tpot_s = {tpot!r} without its gaps (itl_s), output_tokens and "
            f"first_chunk_tokens: felab writes a TPOT only beside all three, so {broken}"
        )
    if tpot < MOST_TPOT_OF:  # a speed no stream has (7.3 million tokens a second)
        raise CompareError(
            f"{where} has tpot_s = {tpot!r}: faster than {1 / MOST_TPOT_OF:,.0f} tokens a second, "
            f"which no stream writes, so {broken}"
        )
    after = tokens - first
    if after <= 0:
        raise CompareError(
            f"{where} has tpot_s = {tpot!r} but no token after its first chunk ({tokens:,} "
            f"output tokens, {first:g} in the first chunk): there is nothing to time, so {broken}"
        )
    spent = math.fsum(gaps)
    if abs(tpot * after - spent) > _tpot_slack(spent, len(gaps)):
        raise CompareError(
            f"{where} has tpot_s = {tpot!r}, but its gaps add up to {spent:.6g} s over "
            f"{after:g} tokens after the first chunk ({spent / after:.6g} s a token): felab "
            f"writes TPOT as that, so {broken}"
        )


#: The shortest TPOT a stream has: 100,000 tokens a second (felab's bound for any one stream's
#: speed, engine/token_counts.MAX_SERVER_TPS); bench writes no faster one (metrics.py).
MOST_TPOT_OF = 1 / MAX_SERVER_TPS


def _tpot_slack(spent: Any, gaps: Any) -> Any:
    """How far TPOT x tokens may be from the gaps' sum: clocks round, and gaps sent from
    another machine are whole microseconds (for numbers or arrays)."""
    return EPSILON_S + _GAP_ROUNDING_S * np.asarray(gaps) + 1e-9 * np.abs(spent)


def _one_over(speed: Any, tpot: Any) -> Any:
    """Whether each speed is 1 / its TPOT, as felab writes them (true where either is NaN,
    not measured); for numbers or arrays."""
    off = np.abs(np.asarray(speed, dtype=float) * np.asarray(tpot, dtype=float) - 1.0)
    return ~(off > _SPEED_TIMES_TPOT_SLACK)


#: Requests with this many gaps or more (not all equal) that match in TTFT, end and every gap
#: are one request copied: clocks tick in nanoseconds (microseconds from another machine), so
#: two real ones never agree in all of them.
_COPY_GAPS = 3


def _check_copies(path: Path, run: int, requests: list[dict[str, Any]]) -> None:
    """No request is another's copy under a new index: 20 copies of the fastest request,
    renumbered 0..19, had turned "worse" verdicts into "within noise"."""
    seen: dict[tuple[Any, ...], int] = {}
    for j, r in enumerate(requests, 1):
        gaps = r.get("itl_s") or []
        if len(gaps) < _COPY_GAPS or r.get("ttft_s") is None or r.get("e2e_s") is None:
            continue
        if len(set(gaps)) == 1:  # made, not measured (a test's even stream): no copy to tell
            continue
        key = (r["ttft_s"], r["e2e_s"], *gaps)
        first = seen.setdefault(key, j)
        if first != j:
            raise CompareError(
                f"{path}: run {run}, request {j} has the same first token, end and {len(gaps):,} "
                f"gaps as request {first}, to the last digit: a request copied under another "
                "index (copies would narrow its intervals): the file was edited or broken"
            )


@dataclass(frozen=True)
class Sample:
    """The numbers a comparison needs from the successful, warm requests of one run, as
    arrays: each scalar field (NaN where a request has none) and every inter-token gap, with
    how many gaps each request brought (they travel together in the bootstrap)."""

    scalars: dict[str, np.ndarray]
    gaps: np.ndarray
    gap_counts: np.ndarray

    def __len__(self) -> int:
        return len(self.gap_counts)

    def values(self, source: str) -> tuple[np.ndarray, np.ndarray]:
        """A figure's values, and how many each request that has any brought."""
        if source == "itl_s":
            return self.gaps, self.gap_counts[self.gap_counts > 0]
        column = self.scalars[source]
        present = column[~np.isnan(column)]
        return present, np.ones(len(present), dtype=np.int64)

    def take(self, keep: np.ndarray) -> Sample:
        """The requests at these (sorted) positions."""
        mask = np.zeros(len(self), dtype=bool)
        mask[keep] = True
        return Sample(
            {k: v[mask] for k, v in self.scalars.items()},
            self.gaps[np.repeat(mask, self.gap_counts)],
            self.gap_counts[mask],
        )


def sample_of(requests: Sequence[dict[str, Any]]) -> Sample:
    """The numbers of these requests, all of them (they are taken as usable); what is not a
    finite number counts as not measured."""
    scalars = {
        key: np.array(
            [float(r[key]) if finite(r.get(key)) else math.nan for r in requests], dtype=float
        )
        for key in SCALARS
    }
    gaps = [[float(v) for v in r.get("itl_s") or [] if finite(v)] for r in requests]
    return Sample(
        scalars,
        np.array([v for g in gaps for v in g], dtype=float),
        np.array([len(g) for g in gaps], dtype=np.int64),
    )


def checked_sample(path: Path, run: int, requests: list[Any], most_gaps: int = MOST_GAPS) -> Sample:
    """The usable requests of one run as a Sample, once every request is checked; a request
    has at most `most_gaps` gaps (fewer where the workload asked fewer tokens).

    The checks run over whole columns; only when one fails is the run walked request by
    request, for the first broken one to be named as `_check_request` says it."""

    def broken() -> CompareError:
        for j, request in enumerate(requests, 1):
            _check_request(path, run, j, request, most_gaps)
        return CompareError(f"{path}: run {run} has a request felab did not write")

    if not all(type(r) is dict for r in requests):
        raise broken()
    oks = [r.get("ok") for r in requests]
    colds = [r.get("cold") for r in requests]
    outside = [r.get("outside_window") for r in requests]
    tokens = [r.get("output_tokens") for r in requests]
    itls = [r.get("itl_s") for r in requests]
    columns = {key: [r.get(key) for r in requests] for key in SCALARS}
    if (
        not set(map(type, oks)) <= {bool}
        or not set(map(type, colds)) <= {bool, type(None)}
        or not set(map(type, outside)) <= {bool, type(None)}
        or not set(map(type, tokens)) <= {int, type(None)}
        or any(not 0 <= t <= MAX_TOKENS for t in tokens if t is not None)
        or not set(map(type, itls)) <= {list, type(None)}
    ):
        raise broken()
    indexes = [r.get("index") for r in requests]
    if indexes:  # felab numbers each request of a run once
        if not set(map(type, indexes)) <= {int} or min(indexes) < 0:
            raise broken()
        if len(set(indexes)) < len(indexes):
            twice = next(i for i, n in Counter(indexes).items() if n > 1)
            raise CompareError(
                f"{path}: run {run} holds request {twice} more than once (copied requests "
                "would narrow its intervals): the file was edited or broken"
            )
    flat = [v for gaps in itls if gaps for v in gaps]
    arrays = {}
    try:
        for key, column in [*columns.items(), ("itl_s", flat)]:
            if not set(map(type, column)) <= {float, int, type(None)}:
                raise broken()
            values = np.array([math.nan if v is None else v for v in column], dtype=float)
            present = np.array([v is not None for v in column], dtype=bool)
            most = 86_400 if key.endswith("_s") else 10_000_000
            least = math.ulp(0) if key in _ABOVE_ZERO else 0
            least = LEAST_REQUEST_S if key in _ROUND_TRIPS else least
            shown = values[present]
            if not (np.isfinite(shown).all() and (shown >= least).all() and (shown < most).all()):
                raise broken()
            arrays[key] = values
    except OverflowError:  # an integer too big for a float
        raise broken() from None
    ttft, e2e = arrays["ttft_s"], arrays["e2e_s"]
    if (e2e < ttft - EPSILON_S).any():  # NaN (not measured) compares false
        raise broken()
    if (arrays["tpot_s"] > e2e - ttft + EPSILON_S).any():  # NaN compares false
        raise broken()
    counts = np.array([len(g) if g else 0 for g in itls], dtype=np.int64)
    if counts.size and counts.max() > most_gaps:
        raise broken()
    timed = ~np.isnan(ttft) | ~np.isnan(arrays["tpot_s"]) | (counts > 0)
    if (np.array(oks, dtype=bool) & np.isnan(e2e) & timed).any():  # an answer has an end
        raise broken()
    chunks = [r.get("counted_chunks") for r in requests]
    if not set(map(type, chunks)) <= {int, type(None)}:
        raise broken()
    if any(c is not None and not 0 <= c <= MOST_GAPS + 1 for c in chunks):
        raise broken()
    told = np.array([MOST_GAPS + 1 if c is None else c for c in chunks], dtype=np.int64)
    if (counts > np.maximum(told - 1, 0)).any():  # one gap between each two chunks
        raise broken()
    spent = np.bincount(
        np.repeat(np.arange(len(requests)), counts), arrays["itl_s"], minlength=len(requests)
    )
    if (spent > e2e - ttft + EPSILON_S + _GAP_ROUNDING_S * counts).any():
        raise broken()
    if not _one_over(arrays["writing_tps"], arrays["tpot_s"]).all():
        raise broken()
    if (~np.isnan(arrays["writing_tps"]) & np.isnan(arrays["tpot_s"])).any():
        raise broken()
    zero = np.array([t == 0 for t in tokens], dtype=bool)
    if (zero & ~np.isnan(arrays["ttft_s"])).any():
        raise broken()
    firsts = [r.get("first_chunk_tokens") for r in requests]
    if not set(map(type, firsts)) <= {float, int, type(None)}:
        raise broken()
    n = np.array([math.nan if t is None else t for t in tokens], dtype=float)
    n1 = np.array([math.nan if f is None else f for f in firsts], dtype=float)
    given = np.array([f is not None for f in firsts], dtype=bool)
    if (given & ~np.isfinite(n1)).any() or ((n1 < 0) | (n1 > np.nan_to_num(n, nan=0.0))).any():
        raise broken()
    has_tpot = ~np.isnan(arrays["tpot_s"])
    timed = has_tpot & ~np.isnan(n) & ~np.isnan(n1) & (counts > 0)
    if (has_tpot & ~timed).any() or (arrays["tpot_s"] < MOST_TPOT_OF).any():
        raise broken()
    after = np.where(timed, n - n1, 1.0)
    if (after <= 0).any() or (
        np.abs(np.where(timed, arrays["tpot_s"] * after - spent, 0.0)) > _tpot_slack(spent, counts)
    ).any():
        raise broken()
    _check_copies(path, run, requests)
    # as bench's own figures: warm, and inside the steady window (--ramp-up/--ramp-down)
    usable = np.array(oks, dtype=bool) & ~np.array(
        [c is True or w is True for c, w in zip(colds, outside, strict=True)], dtype=bool
    )
    return Sample(
        {key: arrays[key][usable] for key in SCALARS},
        arrays["itl_s"][np.repeat(usable, counts)],
        counts[usable],
    )
