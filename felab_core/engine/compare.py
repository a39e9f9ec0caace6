"""Did this change help, beyond noise? Two `felab bench --json` records compared run by run.

Each headline figure (TTFT p50 and p95, ITL p50, TPOT p50, end-to-end p50, writing speed p50) is
compared as the change from A to B with a 95 % interval from a bootstrap over requests: the
requests of each run are resampled with replacement (a request's inter-token gaps travel with
it, since they are not independent of each other), the figure recomputed, and the middle 95 %
of the differences kept. A difference is called real only when its interval leaves out zero
*and* it is at least `min_effect` of A's figure: two runs of the same server differ by a few
tenths of a millisecond that no one should act on, and a bootstrap on a thousand requests would
call that "significant".

Only successful, warm requests count (the run's own summary drops cold loads and failures the
same way). The bootstrap's seed is fixed, so the same two files always give the same answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from felab_core.engine.measure import SCHEMA
from felab_core.files import GiB, NamedFileError, read_named_text

RESAMPLES = 2000
CONFIDENCE = 0.95
DEFAULT_MIN_EFFECT = 0.02


class CompareError(ValueError):
    """A file that is not a felab bench record, or two records with nothing to compare."""


@dataclass(frozen=True)
class Figure:
    """One headline figure: how to read it from a run's requests, and which way is better."""

    key: str
    label: str
    unit: str
    scale: float  # seconds to the shown unit
    lower_is_better: bool
    values: Callable[[dict[str, Any]], list[float]]  # one request's contribution
    quantile: float


def _scalar(name: str) -> Callable[[dict[str, Any]], list[float]]:
    def read(request: dict[str, Any]) -> list[float]:
        value = request.get(name)
        return [float(value)] if isinstance(value, int | float) and math.isfinite(value) else []

    return read


def _gaps(request: dict[str, Any]) -> list[float]:
    return [float(v) for v in request.get("itl_s") or [] if _finite(v)]


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


FIGURES: tuple[Figure, ...] = (
    Figure("ttft_p50", "TTFT p50", "ms", 1e3, True, _scalar("ttft_s"), 0.50),
    Figure("ttft_p95", "TTFT p95", "ms", 1e3, True, _scalar("ttft_s"), 0.95),
    Figure("itl_p50", "ITL p50", "ms", 1e3, True, _gaps, 0.50),
    Figure("tpot_p50", "TPOT p50", "ms", 1e3, True, _scalar("tpot_s"), 0.50),
    Figure("e2e_p50", "end-to-end p50", "s", 1.0, True, _scalar("e2e_s"), 0.50),
    Figure(
        "writing_tps_p50", "writing speed p50", "tok/s", 1.0, False, _scalar("writing_tps"), 0.5
    ),
)


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


def load_record(path: Path) -> dict[str, Any]:
    """A `felab bench --json` file, or a CompareError saying what it is instead."""
    try:
        record = json.loads(read_named_text(path, what="bench record (JSON)", limit=GiB))
    except NamedFileError as exc:
        raise CompareError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise CompareError(f"{path}: not a JSON file ({exc})") from None
    except RecursionError:  # a file nested thousands deep: no record felab writes
        raise CompareError(f"{path}: nested too deeply to be a felab bench record") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise CompareError(
            f"{path}: not a felab bench record (expected schema {SCHEMA!r}); write one with "
            "`felab bench ... --json FILE`"
        )
    if not isinstance(record.get("runs"), list):
        raise CompareError(f"{path}: the record has no runs")
    for i, run in enumerate(record["runs"], 1):
        requests = run.get("requests") if isinstance(run, dict) else None
        if not isinstance(requests, list):
            raise CompareError(f"{path}: run {i} has no list of requests; was it edited?")
        for j, request in enumerate(requests, 1):
            _check_request(path, i, j, request)
    return record


def _check_request(path: Path, run: int, index: int, request: Any) -> None:
    """A request's times are seconds, finite and not negative: anything else is not a
    measurement (an edited or broken file), and a comparison would believe it."""
    if not isinstance(request, dict):
        raise CompareError(f"{path}: run {run}, request {index} is not a request record")
    itl = request.get("itl_s")
    if itl is not None and not isinstance(itl, list):
        raise CompareError(f"{path}: run {run}, request {index} has itl_s that is not a list")
    values = [(k, request.get(k)) for k in ("ttft_s", "e2e_s", "tpot_s", "writing_tps")]
    values += [("itl_s", v) for v in itl or []]
    for key, value in values:
        if value is None:
            continue
        most = 86_400 if key.endswith("_s") else 10_000_000  # a day; any stream's tok/s
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (math.isfinite(value) and 0 <= value < most)
        ):
            what = "a time" if key.endswith("_s") else "a speed"
            raise CompareError(
                f"{path}: run {run}, request {index} has {key} = {value!r}, not {what} felab "
                "measures: the file was edited or broken"
            )


def _load_key(run: dict[str, Any]) -> str:
    rate = run.get("rate")
    return f"{rate:g} req/s" if _finite(rate) else f"{run.get('concurrency')} streams"


def _usable(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for r in run.get("requests") or []
        if isinstance(r, dict) and r.get("ok") and not r.get("cold")
    ]


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


def _figure_of(requests: Sequence[list[float]], q: float) -> float | None:
    pooled = [v for vals in requests for v in vals]
    return float(np.quantile(pooled, q)) if pooled else None


def _bootstrap(
    a: list[list[float]], b: list[list[float]], q: float, rng: np.random.Generator
) -> tuple[float, float] | None:
    """The 95 % interval of figure(B) - figure(A) over resampled requests."""
    a = [v for v in a if v]
    b = [v for v in b if v]
    if len(a) < 2 or len(b) < 2:
        return None
    diffs = np.empty(RESAMPLES)
    single = all(len(v) == 1 for v in a) and all(len(v) == 1 for v in b)
    if single:  # one value per request: resample all at once
        va, vb = np.array([v[0] for v in a]), np.array([v[0] for v in b])
        ia = rng.integers(0, len(va), (RESAMPLES, len(va)))
        ib = rng.integers(0, len(vb), (RESAMPLES, len(vb)))
        diffs = np.quantile(vb[ib], q, axis=1) - np.quantile(va[ia], q, axis=1)
    else:  # each request brings its own gaps: resample requests, pool their gaps
        diffs = _pooled_quantiles(b, q, rng) - _pooled_quantiles(a, q, rng)
    tail = (1 - CONFIDENCE) / 2
    return float(np.quantile(diffs, tail)), float(np.quantile(diffs, 1 - tail))


def _pooled_quantiles(
    requests: list[list[float]], q: float, rng: np.random.Generator, batch: int = 50
) -> np.ndarray:
    """The q-quantile of the pooled values of each resample of whole requests.

    A resample is a count per request (drawn with replacement); the pooled quantile is then a
    weighted one over the values sorted once, computed for a batch of resamples at a time.
    """
    values = np.concatenate([np.asarray(v, dtype=float) for v in requests])
    owner = np.concatenate([np.full(len(v), i) for i, v in enumerate(requests)])
    order = np.argsort(values, kind="stable")
    values, owner = values[order], owner[order]
    n = len(requests)
    out = np.empty(RESAMPLES)
    for start in range(0, RESAMPLES, batch):
        size = min(batch, RESAMPLES - start)
        counts = rng.multinomial(n, np.full(n, 1 / n), size=size)
        cumulative = np.cumsum(counts[:, owner], axis=1)
        target = q * cumulative[:, -1]
        out[start : start + size] = values[np.argmax(cumulative >= target[:, None], axis=1)]
    return out


def compare_runs(
    a_requests: list[dict[str, Any]],
    b_requests: list[dict[str, Any]],
    *,
    min_effect: float = DEFAULT_MIN_EFFECT,
    seed: int = 0,
) -> list[Change]:
    """Every headline figure of one run in A against the same run in B."""
    rng = np.random.default_rng(seed)
    changes = []
    for fig in FIGURES:
        va = [fig.values(r) for r in a_requests]
        vb = [fig.values(r) for r in b_requests]
        fa, fb = _figure_of(va, fig.quantile), _figure_of(vb, fig.quantile)
        interval = (
            _bootstrap(va, vb, fig.quantile, rng) if fa is not None and fb is not None else None
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
    for run_a in a["runs"]:
        key = _load_key(run_a)
        run_b = runs_b.pop(key, None)
        if run_b is None:
            unmatched.append(f"{key} is only in A")
            continue
        ra, rb = _usable(run_a), _usable(run_b)
        changes = compare_runs(ra, rb, min_effect=min_effect)
        pairs.append(RunPair(key, len(ra), len(rb), changes))
    unmatched += [f"{key} is only in B" for key in runs_b]
    if not pairs:
        raise CompareError(
            "A and B share no load to compare (" + "; ".join(unmatched) + "): run both with "
            "the same --concurrency or --rate"
        )
    return Comparison(a_name, b_name, pairs, _caveats(a, b) + unmatched, min_effect)
