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

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from felab_core.engine.measure import SCHEMA
from felab_core.files import GiB, NamedFileError, read_named_text

RESAMPLES = 2000
CONFIDENCE = 0.95
DEFAULT_MIN_EFFECT = 0.02
#: the most requests of one run the bootstrap resamples: its time and memory grow with them
BOOTSTRAP_REQUESTS = 5000
EPSILON_S = 1e-6  # clocks round: an end-to-end this much under TTFT is the same instant


class CompareError(ValueError):
    """A file that is not a felab bench record, or two records with nothing to compare."""


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


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


FIGURES: tuple[Figure, ...] = (
    Figure("ttft_p50", "TTFT p50", "ms", 1e3, True, "ttft_s", 0.50),
    Figure("ttft_p95", "TTFT p95", "ms", 1e3, True, "ttft_s", 0.95),
    Figure("itl_p50", "ITL p50", "ms", 1e3, True, "itl_s", 0.50),
    Figure("tpot_p50", "TPOT p50", "ms", 1e3, True, "tpot_s", 0.50),
    Figure("e2e_p50", "end-to-end p50", "s", 1.0, True, "e2e_s", 0.50),
    Figure("writing_tps_p50", "writing speed p50", "tok/s", 1.0, False, "writing_tps", 0.5),
)
SCALARS = ("ttft_s", "e2e_s", "tpot_s", "writing_tps")  # the order a broken file is checked in


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
        if self.diff is None or self.low is None:
            return "not measured in both"
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


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop, while parsing, the bulky per-request lists compare never reads: a record of a
    million requests is mostly these, and keeping them doubled the memory a comparison took."""
    obj.pop("chunk_times_s", None)
    obj.pop("server_timings", None)
    return obj


def load_record(path: Path) -> dict[str, Any]:
    """A `felab bench --json` file, or a CompareError saying what it is instead.

    Each run's "requests" comes back as a `Sample`: the checked numbers of its successful,
    warm requests as arrays (not a list of dicts), so that two records of hundreds of
    thousands of requests fit in memory side by side.
    """
    try:
        text = read_named_text(path, what="bench record (JSON)", limit=GiB)
        record = json.loads(text, object_hook=_slim)
    except NamedFileError as exc:
        raise CompareError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise CompareError(f"{path}: not a JSON file ({exc})") from None
    except RecursionError:  # a file nested thousands deep: no record felab writes
        raise CompareError(f"{path}: nested too deeply to be a felab bench record") from None
    del text
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise CompareError(
            f"{path}: not a felab bench record (expected schema {SCHEMA!r}); write one with "
            "`felab bench ... --json FILE`"
        )
    if not isinstance(record.get("runs"), list):
        raise CompareError(f"{path}: the record has no runs")
    broken = "the file was edited or broken"
    for i, run in enumerate(record["runs"], 1):
        requests = run.get("requests") if isinstance(run, dict) else None
        if not isinstance(requests, list):
            raise CompareError(f"{path}: run {i} has no list of requests; was it edited?")
        users = run.get("concurrency")
        if users is not None and (type(users) is not int or not 0 <= users <= 1_000_000):
            raise CompareError(
                f"{path}: run {i} has concurrency {users!r}, not a number of "
                f"streams (0 for an open loop, up to 1,000,000): {broken}"
            )
        run["requests"] = _checked_sample(path, i, requests)
    loads = [_load_key(run) for run in record["runs"]]
    if len(set(loads)) < len(loads):  # felab writes one run a load
        raise CompareError(f"{path}: the record holds one load more than once: {broken}")
    return record


def _check_request(path: Path, run: int, index: int, request: Any) -> None:
    """A request's times are seconds, finite and not negative, and the end comes no sooner
    than the first token; `ok` and `cold` are true or false; a token count is a whole number.
    Anything else is not a measurement (an edited or broken file), and a comparison would
    believe it."""
    where = f"{path}: run {run}, request {index}"
    broken = "the file was edited or broken"
    if not isinstance(request, dict):
        raise CompareError(f"{where} is not a request record")
    for key, missing_ok in (("ok", False), ("cold", True)):
        flag = request.get(key)
        if not isinstance(flag, bool) and not (missing_ok and flag is None):
            raise CompareError(f"{where} has {key} = {flag!r}, not true or false: {broken}")
    tokens = request.get("output_tokens")
    if tokens is not None and (type(tokens) is not int or tokens < 0):
        raise CompareError(
            f"{where} has output_tokens = {tokens!r}, not a count of tokens (a whole number, "
            f"0 or more): {broken}"
        )
    itl = request.get("itl_s")
    if itl is not None and not isinstance(itl, list):
        raise CompareError(f"{where} has itl_s that is not a list")
    values = [(k, request.get(k)) for k in SCALARS]
    values += [("itl_s", v) for v in itl or []]
    for key, value in values:
        if value is None:
            continue
        most, what = (86_400, "a time") if key.endswith("_s") else (10_000_000, "a speed")
        least = math.ulp(0) if key in ("ttft_s", "e2e_s") else 0  # an answer takes some time
        if not _finite(value) or not least <= value < most:
            raise CompareError(
                f"{where} has {key} = {value!r}, not {what} felab measures: {broken}"
            )
    ttft, e2e = request.get("ttft_s"), request.get("e2e_s")
    if ttft is not None and e2e is not None and e2e < ttft - EPSILON_S:
        raise CompareError(
            f"{where} has e2e_s = {e2e!r}, shorter than its ttft_s = {ttft!r}: a request ends "
            f"after its first token, so {broken}"
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
            [float(r[key]) if _finite(r.get(key)) else math.nan for r in requests], dtype=float
        )
        for key in SCALARS
    }
    gaps = [[float(v) for v in r.get("itl_s") or [] if _finite(v)] for r in requests]
    return Sample(
        scalars,
        np.array([v for g in gaps for v in g], dtype=float),
        np.array([len(g) for g in gaps], dtype=np.int64),
    )


def _checked_sample(path: Path, run: int, requests: list[Any]) -> Sample:
    """The usable requests of one run as a Sample, once every request is checked.

    The checks run over whole columns; only when one fails is the run walked request by
    request, for the first broken one to be named as `_check_request` says it."""

    def broken() -> CompareError:
        for j, request in enumerate(requests, 1):
            _check_request(path, run, j, request)
        return CompareError(f"{path}: run {run} has a request felab did not write")

    if not all(type(r) is dict for r in requests):
        raise broken()
    oks = [r.get("ok") for r in requests]
    colds = [r.get("cold") for r in requests]
    tokens = [r.get("output_tokens") for r in requests]
    itls = [r.get("itl_s") for r in requests]
    columns = {key: [r.get(key) for r in requests] for key in SCALARS}
    if (
        not set(map(type, oks)) <= {bool}
        or not set(map(type, colds)) <= {bool, type(None)}
        or not set(map(type, tokens)) <= {int, type(None)}
        or any(t < 0 for t in tokens if t is not None)
        or not set(map(type, itls)) <= {list, type(None)}
    ):
        raise broken()
    flat = [v for gaps in itls if gaps for v in gaps]
    arrays = {}
    try:
        for key, column in [*columns.items(), ("itl_s", flat)]:
            if not set(map(type, column)) <= {float, int, type(None)}:
                raise broken()
            values = np.array([math.nan if v is None else v for v in column], dtype=float)
            present = np.array([v is not None for v in column], dtype=bool)
            most = 86_400 if key.endswith("_s") else 10_000_000
            least = math.ulp(0) if key in ("ttft_s", "e2e_s") else 0  # an answer takes time
            shown = values[present]
            if not (np.isfinite(shown).all() and (shown >= least).all() and (shown < most).all()):
                raise broken()
            arrays[key] = values
    except OverflowError:  # an integer too big for a float
        raise broken() from None
    ttft, e2e = arrays["ttft_s"], arrays["e2e_s"]
    if (e2e < ttft - EPSILON_S).any():  # NaN (not measured) compares false
        raise broken()
    usable = np.array(oks, dtype=bool) & ~np.array([c is True for c in colds], dtype=bool)
    counts = np.array([len(g) if g else 0 for g in itls], dtype=np.int64)
    return Sample(
        {key: arrays[key][usable] for key in SCALARS},
        arrays["itl_s"][np.repeat(usable, counts)],
        counts[usable],
    )


def _load_key(run: dict[str, Any]) -> str:
    rate = run.get("rate")
    if _finite(rate):
        return f"{rate:g} req/s"
    return f"{run.get('concurrency')} stream{'' if run.get('concurrency') == 1 else 's'}"


def _caveats(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    notes = []
    for part, keys in (
        ("target", ("model", "api")),
        ("workload", ("preset", "prompt_tokens", "max_tokens", "shared_prefix_tokens")),
    ):
        for key in keys:
            va, vb = (a.get(part) or {}).get(key), (b.get(part) or {}).get(key)
            if va != vb:
                notes.append(f"{part} {key} differs: {va!r} in A, {vb!r} in B")
    sa, sb = a.get("server") or {}, b.get("server") or {}
    if (sa.get("kind"), sa.get("version")) != (sb.get("kind"), sb.get("version")):
        notes.append(
            f"server differs: {sa.get('kind')} {sa.get('version') or ''} in A, "
            f"{sb.get('kind')} {sb.get('version') or ''} in B".replace("  ", " ")
        )
    return notes


def _usable(run: dict[str, Any]) -> Sample:
    requests = run.get("requests")
    if isinstance(requests, Sample):  # from load_record: already only the usable ones
        return requests
    return sample_of(
        [r for r in requests or [] if isinstance(r, dict) and r.get("ok") and not r.get("cold")]
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
        diffs = _pooled_quantiles(vb, cb, q, rng) - _pooled_quantiles(va, ca, q, rng)
    tail = (1 - CONFIDENCE) / 2
    return float(np.quantile(diffs, tail)), float(np.quantile(diffs, 1 - tail))


def _pooled_quantiles(
    values: np.ndarray, counts: np.ndarray, q: float, rng: np.random.Generator, batch: int = 50
) -> np.ndarray:
    """The q-quantile of the pooled values of each resample of whole requests.

    A resample is a count per request (drawn with replacement); the pooled quantile is then a
    weighted one over the values sorted once, computed for a batch of resamples at a time.
    The running weight is summed only over a window of the sorted values around the
    quantile (what lies below it enters as one product per resample); a resample whose
    quantile falls outside the window, which the window's width makes rare, is computed over
    all the values, so the answer is the same as summing everything every time.
    """
    n = len(counts)
    owner = np.repeat(np.arange(n), counts)
    order = np.argsort(values, kind="stable")
    values, owner = values[order], owner[order]
    centre = int(q * len(values))
    half = 8 * int(math.sqrt(n)) * int(counts.max()) + 64
    lo, hi = max(0, centre - half), min(len(values), centre + half)
    below = np.bincount(owner[:lo], minlength=n)
    window = owner[lo:hi]
    out = np.empty(RESAMPLES)
    for start in range(0, RESAMPLES, batch):
        size = min(batch, RESAMPLES - start)
        draws = rng.multinomial(n, np.full(n, 1 / n), size=size)
        target = q * (draws @ counts)
        base = draws @ below
        running = base[:, None] + np.cumsum(draws[:, window], axis=1)
        found = running >= target[:, None]
        picked = lo + np.argmax(found, axis=1)
        for row in np.flatnonzero((base >= target) | ~found[:, -1]):  # outside the window
            everything = np.cumsum(draws[row, owner])
            picked[row] = np.argmax(everything >= target[row])
        out[start : start + size] = values[picked]
    return out


def compare_runs(
    a_requests: Sequence[dict[str, Any]] | Sample,
    b_requests: Sequence[dict[str, Any]] | Sample,
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    seed: int = 0,
) -> list[Change]:
    """Every headline figure of one run in A against the same run in B.

    The figures are read from every request; the bootstrap resamples at most
    BOOTSTRAP_REQUESTS of each run (a fixed random subset of a larger run: see
    `bootstrap_note`), so that its time and memory do not grow with the run."""
    a = a_requests if isinstance(a_requests, Sample) else sample_of(a_requests)
    b = b_requests if isinstance(b_requests, Sample) else sample_of(b_requests)
    sub_a, sub_b = _subsample(a, seed, 1), _subsample(b, seed, 2)
    rng = np.random.default_rng(seed)
    changes = []
    for fig in FIGURES:
        va, vb = a.values(fig.source), b.values(fig.source)
        fa, fb = _figure_of(va[0], fig.quantile), _figure_of(vb[0], fig.quantile)
        interval = (
            _bootstrap(sub_a.values(fig.source), sub_b.values(fig.source), fig.quantile, rng)
            if fa is not None and fb is not None
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


def _subsample(sample: Sample, seed: int, side: int) -> Sample:
    if len(sample) <= BOOTSTRAP_REQUESTS:
        return sample
    pick = np.random.default_rng([seed, side]).choice(len(sample), BOOTSTRAP_REQUESTS, False)
    return sample.take(np.sort(pick))


def bootstrap_note(load: str, a: int, b: int) -> str | None:
    """What a comparison says when a run has more requests than the bootstrap resamples."""
    if max(a, b) <= BOOTSTRAP_REQUESTS:
        return None
    return (
        f"{load}: the figures use all {a:,} requests of A and {b:,} of B, but the 95 % "
        f"intervals resample a fixed random {BOOTSTRAP_REQUESTS:,} of each run that has more, "
        "to keep the comparison quick: they are somewhat wider than all the requests would give"
    )


def compare_records(
    a: dict[str, Any],
    b: dict[str, Any],
    *,
    a_name: str = "A",
    b_name: str = "B",
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> Comparison:
    """Runs matched by their load (the same concurrency or rate); others are named and left."""
    if not (0 <= min_effect < 1) or not math.isfinite(min_effect):
        raise CompareError(f"the smallest effect worth naming must be 0-100 %, not {min_effect}")
    runs_b = {_load_key(r): r for r in b["runs"]}
    pairs = []
    unmatched = []
    notes = []
    for run_a in a["runs"]:
        key = _load_key(run_a)
        run_b = runs_b.pop(key, None)
        if run_b is None:
            unmatched.append(f"{key} is only in A")
            continue
        ra, rb = _usable(run_a), _usable(run_b)
        changes = compare_runs(ra, rb, min_effect=min_effect)
        pairs.append(RunPair(key, len(ra), len(rb), changes))
        note = bootstrap_note(key, len(ra), len(rb))
        if note:
            notes.append(note)
    unmatched += [f"{key} is only in B" for key in runs_b]
    if not pairs:
        raise CompareError(
            "A and B share no load to compare (" + "; ".join(unmatched) + "): run both with "
            "the same --concurrency or --rate"
        )
    return Comparison(a_name, b_name, pairs, _caveats(a, b) + unmatched + notes, min_effect)
