"""A `felab bench --json` record read for a comparison: every request checked before any
verdict, and each run's usable requests kept as arrays.

A record can come from anywhere (edited by hand, cut short, another tool's JSON): a number
felab could not have measured is named with its run and request, never compared. Apart from
felab_core/engine/compare.py, which does the statistics, so each stays one job.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from felab_core.engine.measure import SCHEMA
from felab_core.engine.workloads import (
    MAX_BURSTINESS,
    MAX_DURATION_S,
    MAX_RATE,
    MAX_REQUESTS,
    MAX_WARMUP,
    MIN_RATE,
)
from felab_core.engine.workloads import MAX_TOKENS as MAX_WORKLOAD_TOKENS
from felab_core.files import GiB, NamedFileError, read_named_text
from felab_core.json_keys import KeyTwice, once
from felab_core.sizing.units import MAX_TOKENS

EPSILON_S = 1e-6  # clocks round: an end-to-end this much under TTFT is the same instant
#: The most runs one record holds: a -c list takes at most 64 values.
MOST_RUNS = 64
#: The most values (numbers and fields, counted by their commas) a record may hold: Python's
#: JSON parser takes 20 to 40 bytes a value, so this keeps a comparison within about 1 GB.
MOST_VALUES = 20_000_000
#: The most inter-token gaps one request of felab's holds: a stream is cut past four messages
#: a token asked (of the most --max-tokens) and 256 more (stream_shape.most_messages).
MOST_GAPS = 4 * MAX_WORKLOAD_TOKENS + 256
#: A request's gaps add up to the time from its first token to its last, inside its
#: end-to-end less its TTFT; gaps sent from another machine are whole microseconds, so each
#: may be off by half of one.
_GAP_ROUNDING_S = 1e-6


class CompareError(ValueError):
    """A file that is not a felab bench record, or two records with nothing to compare."""


def finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


SCALARS = ("ttft_s", "e2e_s", "tpot_s", "writing_tps")  # the order a broken file is checked in
#: Figures felab never writes as 0: an answer, and a token after the first, take some time.
_ABOVE_ZERO = ("ttft_s", "e2e_s", "tpot_s", "writing_tps")
#: felab writes a request's writing_tps as exactly 1 / tpot_s; JSON keeps both to the last
#: digit, so a product further from 1 than this is an edit (one figure changed, not the other).
_SPEED_TIMES_TPOT_SLACK = 1e-9


def _slim(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Drop, while parsing, the bulky per-request lists compare never reads: a record of a
    million requests is mostly these, and keeping them doubled the memory a comparison took.
    A key given twice is refused: which of the two would be compared is a guess."""
    obj = once(pairs)
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
        values = text.count(",")
        if values <= MOST_VALUES:  # 63 million zeros (126 MB) had taken 2.6 GB to parse
            record = json.loads(text, object_pairs_hook=_slim)
    except NamedFileError as exc:
        raise CompareError(str(exc)) from None
    except KeyTwice as exc:
        raise CompareError(
            f"{path}: holds the key {_cut(exc.key)} twice in one object; felab writes each key "
            "once, so the file was edited or joined from two: keep one"
        ) from None
    except json.JSONDecodeError as exc:
        raise CompareError(f"{path}: not a JSON file ({exc})") from None
    except ValueError:  # an integer of thousands of digits (Python reads at most 4,300)
        raise CompareError(
            f"{path}: holds a number of thousands of digits: not a felab bench record"
        ) from None
    except RecursionError:  # a file nested thousands deep: no record felab writes
        raise CompareError(f"{path}: nested too deeply to be a felab bench record") from None
    del text
    if values > MOST_VALUES:
        raise CompareError(
            f"{path}: holds about {values:,} numbers and fields, more than a comparison reads "
            f"({MOST_VALUES:,}: some 400,000 requests of 16 tokens); compare records of fewer "
            "requests"
        )
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise CompareError(
            f"{path}: not a felab bench record (expected schema {SCHEMA!r}); write one with "
            "`felab bench ... --json FILE`"
        )
    if not isinstance(record.get("runs"), list):
        raise CompareError(f"{path}: the record has no runs")
    if len(record["runs"]) > MOST_RUNS:  # 2,000 runs had run past 30 s
        raise CompareError(
            f"{path}: holds {len(record['runs']):,} runs, and felab bench writes at most "
            f"{MOST_RUNS} (a -c list of 64): the file was edited or joined from others"
        )
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
        rate = run.get("rate")
        if rate is not None and not (_number(rate) and MIN_RATE <= rate <= MAX_RATE):
            raise CompareError(  # bench runs no rate below MIN_RATE: 1e-300 was shown as asked
                f"{path}: run {i} has rate {_cut(rate)}, not a request rate ({MIN_RATE:g} to "
                f"{MAX_RATE:,.0f} a second): {broken}"
            )
        summary = run.get("summary")
        said_ok = summary.get("ok") if isinstance(summary, dict) else None
        if not requests and type(said_ok) is int and said_ok > 0:  # compared as "0 requests"
            raise CompareError(
                f"{path}: run {i} says {said_ok:,} requests answered but lists none: the "
                "requests were cut out of the file; compare the record felab bench wrote"
            )
        run["requests"] = _checked_sample(path, i, requests)
    _check_workload(path, record)
    _check_words(path, record)
    interrupted = record.get("interrupted")
    if interrupted is not None and not isinstance(interrupted, bool):
        raise CompareError(
            f"{path}: interrupted is {_cut(interrupted)}, not true or false: {broken}"
        )
    loads = [load_key(run) for run in record["runs"]]
    if len(set(loads)) < len(loads):  # felab writes one run a load
        raise CompareError(f"{path}: the record holds one load more than once: {broken}")
    return record


#: The workload's whole-number fields and the most each may be (felab bench's own bounds).
_WORKLOAD_COUNTS = {
    "requests": MAX_REQUESTS, "warmup": MAX_WARMUP, "max_tokens": MAX_WORKLOAD_TOKENS,
    "prompt_tokens": MAX_WORKLOAD_TOKENS, "shared_prefix_tokens": MAX_WORKLOAD_TOKENS,
    "seed": 2**63 - 1, "sessions": MAX_REQUESTS, "turns": 1000,
}  # fmt: skip
#: Its other numbers: each at least 0, at most this.
_WORKLOAD_FIGURES = {
    "rate": MAX_RATE, "burstiness": MAX_BURSTINESS, "duration_s": MAX_DURATION_S,
    "temperature": 100.0, "think_time_s": MAX_DURATION_S,
}  # fmt: skip


def _number(value: Any) -> bool:
    """A finite int or float, not a bool (true is 1 to Python)."""
    return type(value) in (int, float) and math.isfinite(value)


def _cut(value: Any) -> str:
    """A value of the file for an error: repr'd (an escape code is written out, not sent to
    the terminal), at most 40 characters, and only the start of a long one is repr'd."""
    text = repr(value[:40] if isinstance(value, str | list) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_workload(path: Path, record: dict[str, Any]) -> None:
    """The workload felab bench wrote: each figure within bench's own bounds, and the loads it
    lists those of the runs; a comparison shows these as the two runs' terms."""
    broken = "the file was edited or broken"
    workload = record.get("workload")
    if workload is None:
        return
    if not isinstance(workload, dict):
        raise CompareError(f"{path}: workload is {_cut(workload)}, not a mapping: {broken}")
    for key, most in _WORKLOAD_COUNTS.items():
        value = workload.get(key)
        if value is not None and (type(value) is not int or not 0 <= value <= most):
            raise CompareError(
                f"{path}: workload {key} is {_cut(value)}, not a count felab bench takes (0 to "
                f"{most:,}): {broken}"
            )
    for key, top in _WORKLOAD_FIGURES.items():
        value = workload.get(key)
        if value is not None and not (_number(value) and 0 <= value <= top):
            raise CompareError(
                f"{path}: workload {key} is {_cut(value)}, not a figure felab bench takes (0 "
                f"to {top:,}): {broken}"
            )
    listed = workload.get("concurrency")
    if listed is None:
        return
    if not isinstance(listed, list) or not all(
        type(c) is int and 0 <= c <= 1_000_000 for c in listed
    ):
        raise CompareError(
            f"{path}: workload concurrency is {_cut(listed)}, not a list of stream counts: {broken}"
        )
    run_loads = {r.get("concurrency") for r in record["runs"] if r.get("rate") is None}
    if listed and not run_loads <= set(listed) | {None}:
        raise CompareError(
            f"{path}: the runs were at concurrency {sorted(c for c in run_loads if c is not None)} "
            f"but the workload lists {_cut(listed)}: {broken}"
        )


#: The words of a record a comparison shows, each at most this long (felab writes a server's
#: version and a model's name far shorter; a 1 MB kind had been printed whole).
_MOST_WORDS = 300


def _check_words(path: Path, record: dict[str, Any]) -> None:
    """The target and server a record names are mappings of short words, as felab writes
    them: a comparison says when they differ, so a string where the mapping goes, or a page
    of text where a version goes, is an edit (an escape code in one is shown as '?')."""
    broken = "the file was edited or broken"
    for part, keys in (("target", ("model", "api")), ("server", ("kind", "version"))):
        value = record.get(part)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise CompareError(f"{path}: {part} is {_cut(value)}, not a mapping: {broken}")
        for key in keys:
            word = value.get(key)
            if word is not None and (not isinstance(word, str) or len(word) > _MOST_WORDS):
                raise CompareError(
                    f"{path}: {part} {key} is {_cut(word)}, not a name felab writes (words of "
                    f"at most {_MOST_WORDS} characters): {broken}"
                )
    preset = (record.get("workload") or {}).get("preset")
    if preset is not None and (not isinstance(preset, str) or len(preset) > _MOST_WORDS):
        raise CompareError(
            f"{path}: workload preset is {_cut(preset)}, not a preset's name: {broken}"
        )


def _check_request(path: Path, run: int, index: int, request: Any) -> None:
    """A request's times are seconds, finite and not negative, and the end comes no sooner
    than the first token; `ok` and `cold` are true or false; a token count is a whole number.
    Anything else is not a measurement (an edited or broken file), and a comparison would
    believe it."""
    where = f"{path}: run {run}, request {index}"
    broken = "the file was edited or broken"
    if not isinstance(request, dict):
        raise CompareError(f"{where} is not a request record")
    number = request.get("index")
    if number is not None and (type(number) is not int or number < 0):
        raise CompareError(
            f"{where} has index = {_cut(number)}, not a request's number (0 or more): {broken}"
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
    if len(gaps) > MOST_GAPS:
        raise CompareError(
            f"{where} has {len(gaps):,} inter-token gaps: felab ends a stream long before "
            f"({MOST_GAPS:,}: four messages a token of the most --max-tokens), so {broken}"
        )
    if gaps and ttft is not None and e2e is not None:
        spent = math.fsum(gaps)
        if spent > e2e - ttft + EPSILON_S + _GAP_ROUNDING_S * len(gaps):
            raise CompareError(
                f"{where} has inter-token gaps that add up to {spent:.6g} s, longer than its "
                f"time from first token to end ({e2e - ttft:.6g} s, e2e_s - ttft_s): felab "
                f"measures both on one clock, so {broken}"
            )


def _one_over(speed: Any, tpot: Any) -> Any:
    """Whether each speed is 1 / its TPOT, as felab writes them (true where either is NaN,
    not measured); for numbers or arrays."""
    off = np.abs(np.asarray(speed, dtype=float) * np.asarray(tpot, dtype=float) - 1.0)
    return ~(off > _SPEED_TIMES_TPOT_SLACK)


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
    if any(i is not None for i in indexes):  # felab numbers each request of a run once
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
    if counts.size and counts.max() > MOST_GAPS:
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
    # as bench's own figures: warm, and inside the steady window (--ramp-up/--ramp-down)
    usable = np.array(oks, dtype=bool) & ~np.array(
        [c is True or w is True for c, w in zip(colds, outside, strict=True)], dtype=bool
    )
    return Sample(
        {key: arrays[key][usable] for key in SCALARS},
        arrays["itl_s"][np.repeat(usable, counts)],
        counts[usable],
    )


def load_key(run: dict[str, Any]) -> str:
    rate = run.get("rate")
    if finite(rate):
        return f"{rate:g} req/s"
    return f"{run.get('concurrency')} stream{'' if run.get('concurrency') == 1 else 's'}"
