"""Did this change help, beyond noise? Two `felab bench --json` records compared run by run.

Each headline figure (TTFT p50 and p95, ITL p50, TPOT p50, end-to-end p50, writing speed p50) is
compared as the change from A to B with a 95 % interval from a bootstrap over requests: the
requests of each run are resampled with replacement (a request's inter-token gaps travel with
it, since they are not independent of each other), the figure recomputed, and the middle 95 %
of the differences kept. A difference is called real only when its interval leaves out zero
*and* it is at least `min_effect` of A's figure: two runs of one server differ by tenths of a
millisecond no one should act on, which a bootstrap on a thousand requests calls "significant".

Only successful, warm requests count (the run's own summary drops cold loads and failures the
same way). The bootstrap's seed is fixed, so the same two files always give the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from felab_core.engine.compare_notes import (
    copy_note,
    failed_note,
    seal_notes,
    setting_notes,
    unsealed_sides,
)
from felab_core.engine.loads import check_same_trace, same_load_flags
from felab_core.engine.record_reading import load_key
from felab_core.engine.record_requests import CompareError, Sample, sample_of
from felab_core.text import with_hidden_shown

RESAMPLES = 2000
CONFIDENCE = 0.95
DEFAULT_MIN_EFFECT = 0.02
#: the most requests of one run the bootstrap resamples: its time and memory grow with them
BOOTSTRAP_REQUESTS = 5000
#: the most requests the bootstrap resamples over all the runs a comparison matches: a sweep
#: of 64 loads of 1,000 requests each had taken 50 s to 120 s (nineteenth sweep, a2 H6), one
#: bootstrap per load. Each run resamples its share, at least BOOTSTRAP_LEAST requests.
BOOTSTRAP_BUDGET = 20_000
BOOTSTRAP_LEAST = 300
#: The fewest requests a side for a verdict on a median. Below it the comparison shows the
#: figures and says "too few requests to tell" (sweep 22 a2 A2-14: 2 requests a side were
#: called better or worse): a percentile of 2 requests is not a percentile, and a bootstrap
#: of n requests has few distinct resamples (3 for n = 2), so its "95 %" interval is not one.
#: 10 is where the median's distribution-free 95 % interval (order statistics) first leaves
#: out the slowest and the fastest request; under 6 it has none at all.
LEAST_FOR_VERDICT = 10


def least_requests(quantile: float) -> int:
    """The fewest requests a side for a verdict on this quantile: LEAST_FOR_VERDICT, and for a
    tail at least 1 / (1 - q), so that one request lies beyond it (20 for p95: under 20, the
    p95 is the slowest request and its neighbour, not a percentile)."""
    return max(LEAST_FOR_VERDICT, math.ceil(round(1 / (1 - quantile), 6)))


@dataclass(frozen=True)
class Figure:
    """One headline figure: which per-request number it is read from, and which way is better."""

    key: str
    label: str
    unit: str
    scale: float  # seconds to the shown unit
    lower_is_better: bool
    source: str  # the request's field: one number, or a list of them for "itl_s"
    quantile: float


FIGURES: tuple[Figure, ...] = (
    Figure("ttft_p50", "TTFT p50", "ms", 1e3, True, "ttft_s", 0.50),
    Figure("ttft_p95", "TTFT p95", "ms", 1e3, True, "ttft_s", 0.95),
    Figure("itl_p50", "ITL p50", "ms", 1e3, True, "itl_s", 0.50),
    Figure("tpot_p50", "TPOT p50", "ms", 1e3, True, "tpot_s", 0.50),
    Figure("e2e_p50", "end-to-end p50", "s", 1.0, True, "e2e_s", 0.50),
    Figure("writing_tps_p50", "writing speed p50", "tok/s", 1.0, False, "writing_tps", 0.5),
)


#: The verdict of a figure measured on both sides from too few requests (least_requests).
TOO_FEW = "too few requests to tell"


@dataclass(frozen=True)
class Change:
    """One figure of one run, A against B."""

    figure: Figure
    a: float | None
    b: float | None
    low: float | None  # the 95 % interval of B - A, in the figure's unit
    high: float | None
    beyond_noise: bool

    @property
    def diff(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def relative(self) -> float | None:
        if self.diff is None or not self.a:
            return None
        return self.diff / self.a

    @property
    def verdict(self) -> str:
        """In words: better, worse, within noise, or not measured."""
        if self.diff is None:
            return "not measured in both"
        if self.low is None:  # both measured, too few requests (least_requests)
            return TOO_FEW
        if not self.beyond_noise:
            return "within noise"
        better = (self.diff < 0) == self.figure.lower_is_better
        return "better" if better else "worse"


@dataclass(frozen=True)
class RunPair:
    """The runs at one load (concurrency, or request rate) in A and in B."""

    load: str
    requests_a: int
    requests_b: int
    changes: list[Change]


@dataclass(frozen=True)
class Comparison:
    a_name: str
    b_name: str
    runs: list[RunPair]
    caveats: list[str]  # how the two workloads differ, said before any figure
    min_effect: float
    unsealed: tuple[str, ...] = ()  # "A", "B": read without a matching seal (--unsealed)


def _caveats(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    notes = []
    for part, keys in (
        ("target", ("model", "api")),
        # burstiness and tools change what one rate means (a2 M5: matched by rate alone)
        ("workload", ("preset", "prompt_tokens", "max_tokens", "shared_prefix_tokens",
                      "burstiness", "tools")),
    ):  # fmt: skip
        for key in keys:
            va, vb = (a.get(part) or {}).get(key), (b.get(part) or {}).get(key)
            if key == "tools":  # records from before it was written hold none: no tools
                va, vb = bool(va), bool(vb)
            if va != vb:
                notes.append(f"{part} {key} differs: {_shown(va)} in A, {_shown(vb)} in B")
    notes += _replay_caveats(a.get("workload") or {}, b.get("workload") or {})
    for side, record in (("A", a), ("B", b)):
        if record.get("interrupted") is True:  # bench keeps such a run out of the results CSV
            notes.append(f"{side} was interrupted (Ctrl-C): its runs stopped short of their plan")
    sa, sb = a.get("server") or {}, b.get("server") or {}
    if (sa.get("kind"), sa.get("version")) != (sb.get("kind"), sb.get("version")):
        said = [
            " ".join(with_hidden_shown(str(w))[:60] for w in (s.get("kind"), s.get("version")) if w)
            or "no server named"
            for s in (sa, sb)
        ]
        notes.append(f"server differs: {said[0]} in A, {said[1]} in B")
    return notes


#: What a replay or a conversation sends beside its preset's name (trace:NAME and sessions
#: NxM name neither the file's contents nor the pace): two traces of one name, another
#: --trace-speed or block size, another --think-time were compared without a word (a2 M7).
_TRACE_KEYS = (("sha256", "trace's contents (sha256)"), ("speed", "--trace-speed"),
               ("block_size", "--trace-block-size"))  # fmt: skip
_SESSION_KEYS = (("sessions", "--sessions"), ("turns", "--turns"), ("think_time_s", "--think-time"))


def _replay_caveats(wa: dict[str, Any], wb: dict[str, Any]) -> list[str]:
    notes = []
    ta, tb = wa.get("trace"), wb.get("trace")
    if isinstance(ta, dict) and isinstance(tb, dict):
        for key, what in _TRACE_KEYS:
            va, vb = ta.get(key), tb.get(key)
            if va != vb:
                shown = [_shown(_short_hash(v) if key == "sha256" else v) for v in (va, vb)]
                notes.append(f"workload {what} differs: {shown[0]} in A, {shown[1]} in B")
    for key, flag in _SESSION_KEYS:
        va, vb = wa.get(key), wb.get(key)
        if va != vb:
            notes.append(f"workload {flag} differs: {_shown(va)} in A, {_shown(vb)} in B")
    return notes


def _short_hash(value: Any) -> Any:
    """A sha256 as a note shows it: its first 12 digits tell two files apart."""
    return value[:12] + "..." if isinstance(value, str) and len(value) > 12 else value


def _shown(value: Any) -> str:
    """A record's word as a note shows it: quoted, escape codes as '?', at most 60 characters."""
    if isinstance(value, str):
        return repr(with_hidden_shown(value[:60]) + ("..." if len(value) > 60 else ""))
    return repr(value)


def _usable(run: dict[str, Any]) -> Sample:
    requests = run.get("requests")
    if isinstance(requests, Sample):  # from load_record: already only the usable ones
        return requests
    return sample_of(
        [
            r
            for r in requests or []
            if isinstance(r, dict)
            and r.get("ok")
            and not r.get("cold")
            and not r.get("outside_window")
        ]
    )


def _figure_of(values: np.ndarray, q: float) -> float | None:
    return float(np.quantile(values, q)) if len(values) else None


def _bootstrap(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    q: float,
    rng: np.random.Generator,
) -> tuple[float, float] | None:
    """The 95 % interval of figure(B) - figure(A) over resampled requests; each side is the
    values and how many of them each request brought (a request without any is left out)."""
    (va, ca), (vb, cb) = a, b
    if len(ca) < 2 or len(cb) < 2:
        return None
    if (ca == 1).all() and (cb == 1).all():  # one value per request: resample all at once
        ia = rng.integers(0, len(va), (RESAMPLES, len(va)))
        ib = rng.integers(0, len(vb), (RESAMPLES, len(vb)))
        diffs = np.quantile(vb[ib], q, axis=1) - np.quantile(va[ia], q, axis=1)
    else:  # each request brings its own gaps: resample requests, pool their gaps
        diffs = _pooled_quantiles(*_thinned(vb, cb), q, rng) - _pooled_quantiles(
            *_thinned(va, ca), q, rng
        )
    tail = (1 - CONFIDENCE) / 2
    return float(np.quantile(diffs, tail)), float(np.quantile(diffs, 1 - tail))


#: The most gaps of one request the interval's resamples carry: a longer request enters as
#: this many of its gaps at evenly spaced ranks, each standing for its share of the rest. Its
#: quantiles move by at most 1/THINNED_GAPS of its own spread, while 20 requests of 20,000 gaps
#: each had taken 44 s (and one request of 2,000,000, 99 s and 2.6 GB).
THINNED_GAPS = 256
#: The widest window of sorted gaps a resample sums over (its width grows with the square root
#: of the requests times the most gaps one carries): many requests keep fewer gaps each, at
#: least _LEAST_KEPT (5,000 requests of 1,000 gaps took 36 s at 256 each).
_WINDOW_VALUES = 60_000
_LEAST_KEPT = 16


def _thinned(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each request's gaps (grouped by request, in order), at most THINNED_GAPS of them (fewer
    when there are many requests: _WINDOW_VALUES), and the weight each kept gap carries: 1
    for a request kept whole, its count / the number kept for one thinned. The figures
    themselves are read from every gap; only the interval uses these."""
    weights = np.ones(len(values))
    most = min(THINNED_GAPS, _WINDOW_VALUES // (16 * math.isqrt(len(counts)) + 1))
    most = max(_LEAST_KEPT, most)
    if len(counts) == 0 or counts.max() <= most:
        return values, counts, weights
    kept_values, kept_counts, kept_weights = [], [], []
    ranks = (np.arange(most) + 0.5) / most
    start = 0
    for count in counts.tolist():
        gaps = values[start : start + count]
        start += count
        if count <= most:
            kept_values.append(gaps)
            kept_weights.append(np.ones(count))
            kept_counts.append(count)
            continue
        kept_values.append(np.sort(gaps)[(ranks * count).astype(np.int64)])
        kept_weights.append(np.full(most, count / most))
        kept_counts.append(most)
    return (
        np.concatenate(kept_values),
        np.array(kept_counts, dtype=np.int64),
        np.concatenate(kept_weights),
    )


#: The most cells (resamples x values) one step of the pooled quantile holds: 8,000,000 is
#: 64 MB a step, whatever the run's length (a fixed 50 resamples of a wide window had been GBs).
_STEP_CELLS = 8_000_000


def _pooled_quantiles(
    values: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray,
    q: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The q-quantile of the pooled values of each resample of whole requests.

    A resample is a count per request (drawn with replacement); the pooled quantile is then a
    weighted one over the values sorted once (each value also carries its own weight: see
    `_thinned`), computed for a batch of resamples at a time. The running weight is summed
    only over a window of the sorted values around the quantile (what lies below it enters as
    one product per resample); a resample whose quantile falls outside the window, which the
    window's width makes rare, is computed over all the values, so the answer is the same as
    summing everything every time.
    """
    n = len(counts)
    owner = np.repeat(np.arange(n), counts)
    order = np.argsort(values, kind="stable")
    values, owner, weights = values[order], owner[order], weights[order]
    totals = np.bincount(owner, weights=weights, minlength=n)
    centre = int(np.searchsorted(np.cumsum(weights), q * totals.sum()))
    half = 8 * int(math.sqrt(n)) * int(counts.max()) + 64
    lo, hi = max(0, centre - half), min(len(values), centre + half)
    below = np.bincount(owner[:lo], weights=weights[:lo], minlength=n)
    window, window_weights = owner[lo:hi], weights[lo:hi]
    batch = max(1, min(50, _STEP_CELLS // max(1, hi - lo)))
    out = np.empty(RESAMPLES)
    for start in range(0, RESAMPLES, batch):
        size = min(batch, RESAMPLES - start)
        draws = rng.multinomial(n, np.full(n, 1 / n), size=size)
        target = q * (draws @ totals)
        base = draws @ below
        running = base[:, None] + np.cumsum(draws[:, window] * window_weights, axis=1)
        found = running >= target[:, None]
        picked = lo + np.argmax(found, axis=1)
        for row in np.flatnonzero((base >= target) | ~found[:, -1]):  # outside the window
            everything = np.cumsum(draws[row, owner] * weights)
            picked[row] = np.argmax(everything >= target[row])
        out[start : start + size] = values[picked]
    return out


def compare_runs(
    a_requests: Sequence[dict[str, Any]] | Sample,
    b_requests: Sequence[dict[str, Any]] | Sample,
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    seed: int = 0,
    resampled: int = BOOTSTRAP_REQUESTS,
) -> list[Change]:
    """Every headline figure of one run in A against the same run in B.

    The figures are read from every request; the bootstrap resamples at most `resampled`
    requests of each run (a fixed random subset of a larger run: see `bootstrap_note`), so that
    its time and memory do not grow with the run."""
    a = a_requests if isinstance(a_requests, Sample) else sample_of(a_requests)
    b = b_requests if isinstance(b_requests, Sample) else sample_of(b_requests)
    sub_a, sub_b = _subsample(a, seed, 1, resampled), _subsample(b, seed, 2, resampled)
    rng = np.random.default_rng(seed)
    changes = []
    for fig in FIGURES:
        va, vb = a.values(fig.source), b.values(fig.source)
        fa, fb = _figure_of(va[0], fig.quantile), _figure_of(vb[0], fig.quantile)
        enough = min(len(va[1]), len(vb[1])) >= least_requests(fig.quantile)
        interval = (
            _bootstrap(sub_a.values(fig.source), sub_b.values(fig.source), fig.quantile, rng)
            if fa is not None and fb is not None and enough
            else None
        )
        if fa is None or fb is None or interval is None:
            shown_a = None if fa is None else fa * fig.scale
            shown_b = None if fb is None else fb * fig.scale
            changes.append(Change(fig, shown_a, shown_b, None, None, False))
            continue
        low, high = interval
        big_enough = fa != 0 and abs(fb - fa) / abs(fa) >= min_effect
        beyond = big_enough and (low > 0 or high < 0)
        s = fig.scale
        changes.append(Change(fig, fa * s, fb * s, low * s, high * s, beyond))
    return changes


def _subsample(sample: Sample, seed: int, side: int, most: int) -> Sample:
    if len(sample) <= most:
        return sample
    pick = np.random.default_rng([seed, side]).choice(len(sample), most, False)
    return sample.take(np.sort(pick))


def resampled_per_run(runs: int) -> int:
    """How many requests of each run the bootstrap resamples when a comparison matches `runs`
    runs: BOOTSTRAP_REQUESTS, or their share of BOOTSTRAP_BUDGET when there are many."""
    return min(BOOTSTRAP_REQUESTS, max(BOOTSTRAP_LEAST, BOOTSTRAP_BUDGET // max(1, runs)))


def bootstrap_note(
    load: str, a: int, b: int, resampled: int = BOOTSTRAP_REQUESTS, runs: int = 1
) -> str | None:
    """What a comparison says when a run has more requests than the bootstrap resamples."""
    if max(a, b) <= resampled:
        return None
    why = (
        "to keep the comparison quick"
        if resampled >= BOOTSTRAP_REQUESTS
        else f"to keep a comparison of {runs} loads quick"
    )
    return (
        f"{load}: the figures use all {a:,} requests of A and {b:,} of B, but the 95 % "
        f"intervals resample a fixed random {resampled:,} of each run that has more, "
        f"{why}: they are somewhat wider than all the requests would give"
    )


def too_few_note(pair: RunPair) -> list[str]:
    """What a comparison says of a load whose figures were measured from too few requests
    for a verdict (least_requests): how many it has, and how many a verdict needs."""
    few = [c for c in pair.changes if c.verdict == TOO_FEW]
    if not few:
        return []
    measured = [c for c in pair.changes if c.diff is not None]
    which = "" if few == measured else " for " + ", ".join(c.figure.label for c in few)
    needs = sorted({(least_requests(c.figure.quantile), c.figure.quantile) for c in few})
    most, q = needs[-1]
    tail = f" ({most} for a p{q * 100:g})" if most > needs[0][0] else ""
    return [
        f"{pair.load}: too few requests to tell{which} ({pair.requests_a} in A, "
        f"{pair.requests_b} in B): a verdict needs {needs[0][0]} a side{tail}; run more (-n)"
    ]


def compare_records(
    a: dict[str, Any],
    b: dict[str, Any],
    *,
    a_name: str = "A",
    b_name: str = "B",
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> Comparison:
    """Runs matched by their load (load_label: streams, or a rate or a trace's speed and its
    cap); others are named and left."""
    if not (0 <= min_effect < 1) or not math.isfinite(min_effect):
        raise CompareError(f"the smallest effect worth naming must be 0-100 %, not {min_effect}")
    check_same_trace(a.get("workload"), b.get("workload"))
    runs_b = {load_key(r, b.get("workload")): r for r in b["runs"]}
    matched = sum(load_key(r, a.get("workload")) in runs_b for r in a["runs"])
    resampled = resampled_per_run(matched)
    pairs = []
    unmatched = []
    notes = []
    for run_a in a["runs"]:
        key = load_key(run_a, a.get("workload"))
        run_b = runs_b.pop(key, None)
        if run_b is None:
            unmatched.append(f"{key} is only in A")
            continue
        ra, rb = _usable(run_a), _usable(run_b)
        changes = compare_runs(ra, rb, min_effect=min_effect, resampled=resampled)
        pairs.append(RunPair(key, len(ra), len(rb), changes))
        note = bootstrap_note(key, len(ra), len(rb), resampled, matched)
        if note:
            notes.append(note)
        notes += too_few_note(pairs[-1])
    unmatched += [f"{key} is only in B" for key in runs_b]
    if not pairs:
        raise CompareError(
            "A and B share no load to compare ("
            + "; ".join(unmatched)
            + "): run both with "
            + same_load_flags(a, b)
        )
    if not any(p.requests_a and p.requests_b for p in pairs):  # "not measured in both" throughout
        empty = "; ".join(f"{p.load}: {p.requests_a} in A, {p.requests_b} in B" for p in pairs)
        raise CompareError(
            f"no shared load has answered requests in both records ({empty}): nothing to "
            "compare; run the empty side again"
        )
    if all(c.diff is None for p in pairs for c in p.changes):
        # Answered, yet no figure in both: an empty table that exits 0 reads as "no change".
        raise CompareError(
            "no figure was measured in both records at any shared load (their answered "
            "requests hold no first-token or end-to-end time on one side): nothing to compare; "
            "run the empty side again"
        )
    said = copy_note(a, b) + seal_notes(a, b, a_name, b_name) + _caveats(a, b) + failed_note(a, b)
    said += setting_notes(a, b)
    unsealed = tuple(unsealed_sides(a, b))
    return Comparison(a_name, b_name, pairs, said + unmatched + notes, min_effect, unsealed)
