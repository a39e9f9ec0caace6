"""A `felab bench --json` record read for a comparison: every request checked before any
verdict, and each run's usable requests kept as arrays.

A record can come from anywhere (edited by hand, cut short, another tool's JSON): a number
felab could not have measured is named with its run and request, never compared. Apart from
felab_core/engine/compare.py, which does the statistics, so each stays one job.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from felab_core.engine.loads import load_label, trace_speed_of
from felab_core.engine.measure import SCHEMA
from felab_core.engine.record_requests import (
    MOST_GAPS,
    CompareError,
    checked_sample,
    cut,
    finite,
)
from felab_core.engine.record_runs import check_run_bounds
from felab_core.engine.record_seal import SEAL_STATE, SealState, parse_sealed
from felab_core.engine.trace import MAX_LINES, MAX_SPAN_S
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

#: --trace-speed's bounds (engine/trace.check_replay_knobs).
MIN_SPEED, MAX_SPEED = 0.001, 1000.0
#: The most runs one record holds: a -c list takes at most 64 values.
MOST_RUNS = 64
#: The most values (numbers and fields, counted by their commas) a record may hold: Python's
#: JSON parser takes 20 to 40 bytes a value, so this keeps a comparison within about 1 GB.
MOST_VALUES = 20_000_000


#: The bulky per-request lists compare never reads, left out while parsing: a record of a
#: million requests is mostly these, and keeping them doubled the memory a comparison took.
_UNREAD = ("chunk_times_s", "server_timings")


def _unsealed_problem(path: Path, state: SealState) -> str:
    if state is SealState.changed:
        return (
            f"{path}: changed after felab wrote it (its seal does not match its contents): "
            "compare the file felab bench wrote, or run the bench again; to compare an edited "
            "or older file on purpose, pass --unsealed"
        )
    return (
        f"{path}: has no seal, and felab seals every record it writes (felab bench --json): "
        "it is an older felab's record, another tool's or an edited one; run the bench again, "
        "or pass --unsealed to compare it anyway, its figures checked field by field"
    )


def load_record(path: Path, *, unsealed: bool = False) -> dict[str, Any]:
    """A `felab bench --json` file, or a CompareError saying what it is instead.

    Each run's "requests" comes back as a `Sample`: the checked numbers of its successful,
    warm requests as arrays (not a list of dicts), so that two records of hundreds of
    thousands of requests fit in memory side by side.

    Every field is checked first (a named defect tells more than a seal), then the seal: a
    record without one, or whose seal does not match, is refused unless `unsealed`; what the
    seal said is left under SEAL_STATE for the comparison's notes.
    """
    try:
        text = read_named_text(path, what="bench record (JSON)", limit=GiB)
        if not text.strip():  # had read "not a JSON file (Expecting value: line 1 ...)"
            raise NamedFileError(path, "is empty: give a record `felab bench --json` wrote")
        values = text.count(",")
        if values <= MOST_VALUES:  # 63 million zeros (126 MB) had taken 2.6 GB to parse
            record, state = parse_sealed(text, once, _UNREAD)
    except NamedFileError as exc:
        raise CompareError(str(exc)) from None
    except KeyTwice as exc:
        raise CompareError(
            f"{path}: holds the key {cut(exc.key)} twice in one object; felab writes each key "
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
    kept: list[tuple[int, dict[str, Any], list[Any]]] = []  # each run's requests as listed
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
                f"{path}: run {i} has rate {cut(rate)}, not a request rate ({MIN_RATE:g} to "
                f"{MAX_RATE:,.0f} a second): {broken}"
            )
        summary = run.get("summary")
        said_ok = summary.get("ok") if isinstance(summary, dict) else None
        if not requests and type(said_ok) is int and said_ok > 0:  # compared as "0 requests"
            raise CompareError(
                f"{path}: run {i} says {said_ok:,} requests answered but lists none: the "
                "requests were cut out of the file; compare the record felab bench wrote"
            )
        listed_ok = sum(1 for r in requests if isinstance(r, dict) and r.get("ok") is True)
        if requests and type(said_ok) is int and said_ok != listed_ok:
            raise CompareError(  # felab counts its summary from the very requests it lists
                f"{path}: run {i} says {said_ok:,} requests answered but lists {listed_ok:,}: "
                f"requests were added to or cut from the file: {broken}"
            )
        run["requests"] = checked_sample(path, i, requests, _most_gaps(record.get("workload")))
        kept.append((i, run, requests))
    _check_workload(path, record)
    _check_words(path, record)
    interrupted = record.get("interrupted")
    if interrupted is not None and not isinstance(interrupted, bool):
        raise CompareError(
            f"{path}: interrupted is {cut(interrupted)}, not true or false: {broken}"
        )
    loads = [load_key(run, record.get("workload")) for run in record["runs"]]
    if len(set(loads)) < len(loads):  # felab writes one run a load
        raise CompareError(f"{path}: the record holds one load more than once: {broken}")
    replayed = (record.get("workload") or {}).get("trace") is not None
    for i, run, requests in kept:
        users = run.get("concurrency")
        if run.get("rate") is None and not replayed and (users is None or users < 1):
            raise CompareError(  # shown as "None streams" / "0 streams"
                f"{path}: run {i} has concurrency {users!r} and no rate: felab bench runs each "
                f"load at 1 or more streams, at a rate, or as a trace's replay: {broken}"
            )
        check_run_bounds(path, i, run, requests, record)
    if state is not SealState.sealed and not unsealed:
        raise CompareError(_unsealed_problem(path, state))
    record[SEAL_STATE] = state
    return record


def _most_gaps(workload: Any) -> int:
    """The most gaps a request of this workload brings: bench cuts a stream past four messages
    a token asked and 256 more (a trace asks its own lengths, so only bench's most bounds it)."""
    if not isinstance(workload, dict) or workload.get("trace") is not None:
        return MOST_GAPS
    asked = workload.get("max_tokens")
    if type(asked) is int and 1 <= asked <= MAX_WORKLOAD_TOKENS:
        return 4 * asked + 256
    return MOST_GAPS


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


def _check_workload(path: Path, record: dict[str, Any]) -> None:
    """The workload felab bench wrote: each figure within bench's own bounds, and the loads it
    lists those of the runs; a comparison shows these as the two runs' terms."""
    broken = "the file was edited or broken"
    workload = record.get("workload")
    if workload is None:
        return
    if not isinstance(workload, dict):
        raise CompareError(f"{path}: workload is {cut(workload)}, not a mapping: {broken}")
    for key, most in _WORKLOAD_COUNTS.items():
        value = workload.get(key)
        if value is not None and (type(value) is not int or not 0 <= value <= most):
            raise CompareError(
                f"{path}: workload {key} is {cut(value)}, not a count felab bench takes (0 to "
                f"{most:,}): {broken}"
            )
    for key, top in _WORKLOAD_FIGURES.items():
        value = workload.get(key)
        if value is not None and not (_number(value) and 0 <= value <= top):
            raise CompareError(
                f"{path}: workload {key} is {cut(value)}, not a figure felab bench takes (0 "
                f"to {top:,}): {broken}"
            )
    _check_trace(path, workload.get("trace"))
    listed = workload.get("concurrency")
    if listed is None:
        return
    if not isinstance(listed, list) or not all(
        type(c) is int and 0 <= c <= 1_000_000 for c in listed
    ):
        raise CompareError(
            f"{path}: workload concurrency is {cut(listed)}, not a list of stream counts: {broken}"
        )
    run_loads = {r.get("concurrency") for r in record["runs"] if r.get("rate") is None}
    if listed and not run_loads <= set(listed) | {None}:
        raise CompareError(
            f"{path}: the runs were at concurrency {sorted(c for c in run_loads if c is not None)} "
            f"but the workload lists {cut(listed)}: {broken}"
        )


#: The figures of a replayed trace bench writes, each a whole number within these bounds.
_TRACE_COUNTS = {
    "requests": (1, MAX_LINES), "with_hash_ids": (0, MAX_LINES), "block_size": (1, 65_536),
}  # fmt: skip


def _check_trace(path: Path, trace: Any) -> None:
    """The trace a workload replayed, as bench writes it (name, sha256, requests, block size,
    speed, span): a string, a NaN speed or a hash that is no sha256 had been taken as is."""
    broken = "the file was edited or broken"
    if trace is None:
        return
    if not isinstance(trace, dict):
        raise CompareError(
            f"{path}: workload trace is {cut(trace)}, not the mapping felab bench writes for a "
            f"replayed trace (name, sha256, requests, ...): {broken}"
        )
    name, digest = trace.get("name"), trace.get("sha256")
    if name is not None and (not isinstance(name, str) or len(name) > _MOST_WORDS):
        raise CompareError(
            f"{path}: workload trace name is {cut(name)}, not a file's name: {broken}"
        )
    if digest is not None and not (
        isinstance(digest, str) and len(digest) == 64 and set(digest) <= set("0123456789abcdef")
    ):
        raise CompareError(
            f"{path}: workload trace sha256 is {cut(digest)}, not a sha256 (64 hex digits): "
            f"{broken}"
        )
    for key, (least, most) in _TRACE_COUNTS.items():
        value = trace.get(key)
        if value is not None and (type(value) is not int or not least <= value <= most):
            raise CompareError(
                f"{path}: workload trace {key} is {cut(value)}, not a count felab bench writes "
                f"({least} to {most:,}): {broken}"
            )
    speed, span = trace.get("speed"), trace.get("span_s")
    if speed is not None and not (_number(speed) and MIN_SPEED <= speed <= MAX_SPEED):
        raise CompareError(
            f"{path}: workload trace speed is {cut(speed)}, not a --trace-speed ({MIN_SPEED:g} "
            f"to {MAX_SPEED:g}): {broken}"
        )
    if span is not None and not (_number(span) and 0 <= span <= MAX_SPAN_S / MIN_SPEED):
        raise CompareError(
            f"{path}: workload trace span_s is {cut(span)}, not a trace's length in seconds "
            f"(0 to {MAX_SPAN_S / MIN_SPEED:,.0f}): {broken}"
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
            raise CompareError(f"{path}: {part} is {cut(value)}, not a mapping: {broken}")
        for key in keys:
            word = value.get(key)
            if word is not None and (not isinstance(word, str) or len(word) > _MOST_WORDS):
                raise CompareError(
                    f"{path}: {part} {key} is {cut(word)}, not a name felab writes (words of "
                    f"at most {_MOST_WORDS} characters): {broken}"
                )
    preset = (record.get("workload") or {}).get("preset")
    if preset is not None and (not isinstance(preset, str) or len(preset) > _MOST_WORDS):
        raise CompareError(
            f"{path}: workload preset is {cut(preset)}, not a preset's name: {broken}"
        )


def load_key(run: dict[str, Any], workload: Any) -> str:
    """A run's load as bench named it (load_label): two records' runs match by it."""
    rate = run.get("rate")
    speed = trace_speed_of(workload if isinstance(workload, dict) else None)
    return load_label(run.get("concurrency"), rate if finite(rate) else None, speed)
