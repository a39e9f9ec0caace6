"""Checking a results row (the results CSV's columns) before it is stored: a row felab
wrote agrees with itself and stays within what a run can produce; anything else was made or
edited by hand, and is refused with the column and the reason.

Shared by `felab numbers import` and the worker fleet's ingest (felab_core.numbers.recording).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from felab_core import __version__
from felab_core.engine.apis import Api
from felab_core.engine.server_kinds import validate_server
from felab_core.engine.token_counts import MAX_SERVER_TPS, TOKEN_SOURCES
from felab_core.engine.workloads import (
    MAX_BURSTINESS,
    MAX_REQUESTS,
    MAX_TOKENS,
    MIN_BURSTINESS,
    MIN_RATE,
    PRESETS,
)
from felab_core.errors import Invalid
from felab_core.numbers.row_e2e_tokens import check_e2e_holds_its_tokens
from felab_core.numbers.row_rates import check_rates, run_length
from felab_core.numbers.row_workload import check_workload
from felab_core.numbers.speed_tpot import check_writing_is_one_over_tpot
from felab_core.redact import secret_problem
from felab_core.text import FORMULA_MARKS, formula_mark, holds_hidden

#: What a results row's figures may be: anything outside is a corrupted or hand-edited row,
#: refused with its reason rather than stored (a negative speed, NaN, 1e309).
MAX_ROW_TPS = 10_000_000.0
MAX_ROW_SECONDS = 86_400.0
MAX_ROW_CONCURRENCY = 1_000_000
MAX_ROW_RATE = 100_000.0  # bench --rate's own bound
#: The most a count in a row can be (requests sent, answered, failed, cold; the server's mean
#: prompt tokens): no felab run comes near it (a day at 10,000 requests a second is 864 million).
MAX_ROW_COUNT = 10**9
MAX_ROW_SEED = 2**63 - 1  # bench's --seed bound (Workload.validate)
MAX_ROW_TURNS = 1000  # and its --turns bound
#: The whole-number columns felab writes, each with the least and the most it can hold: the
#: workload's bounds where it has them (a warm-up's was 10,000 before MAX_WARMUP: 1,000).
_ROW_COUNTS = {
    **{name: (0, MAX_ROW_COUNT) for name in ("requests", "ok", "failed", "cold_starts")},
    "prompt_tokens": (1, MAX_TOKENS),
    "shared_prefix_tokens": (0, MAX_TOKENS),
    "max_tokens": (1, MAX_TOKENS),
    "warmup": (0, MAX_REQUESTS),
    "seed": (0, MAX_ROW_SEED),
}
#: A count this long is read without a second look at its length (MAX_ROW_SEED has 19 digits).
_MOST_COUNT_DIGITS = min(len(str(most)) for _, most in _ROW_COUNTS.values())
_ROW_BOUNDS = {
    **dict.fromkeys(("output_tps", "server_tps_p50", "request_tps", "goodput_rps"), MAX_ROW_TPS),
    # one stream's median: a server's own figure is held to this too (999,999 from a machine
    # was stored and posted unflagged, as the judge reads only speeds it could rank)
    "writing_tps_p50": MAX_SERVER_TPS,
    **dict.fromkeys(
        (
            "ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s", "itl_p50_s", "itl_p95_s",
            "e2e_p50_s", "e2e_p95_s",
        ),
        MAX_ROW_SECONDS,
    ),
    "rate": MAX_ROW_RATE,
    "burstiness": MAX_BURSTINESS,
    "prompt_tokens_server": float(MAX_ROW_COUNT),  # a mean: felab writes it with decimals
}  # fmt: skip
#: The least bench sends (its --rate and --burstiness bounds): a rate of 0 or 1e-300 beside a
#: run had been stored, and its key read as another run of the same row (a2 H5).
_ROW_LEAST = {"rate": MIN_RATE, "burstiness": MIN_BURSTINESS}
#: The throughputs of a row: a count over the run's time.
_RATES = ("writing_tps_p50", "output_tps", "server_tps_p50", "request_tps", "goodput_rps")
#: Less than one token or request in the longest run `felab bench` can make (a million requests
#: one at a time, each up to a day: 8.6e10 s): 1e-300 tok/s had been stored as a measured speed.
_LEAST_RATE = 1e-12
#: The latencies felab writes as a median and a 95th percentile of the same requests.
_PERCENTILE_PAIRS = ("ttft", "tpot", "itl", "e2e")
_APIS = tuple(a.value for a in Api)
#: felab wrote no row before this: an earlier timestamp is a hand-made or damaged one.
FIRST_ROW_DATE = datetime(2025, 1, 1, tzinfo=UTC)
_ROW_TEXT_LIMITS = {
    "server": 32,
    "model": 300,
    "preset": 64,
    "target": 64,
    "host": 255,
    "server_version": 100,
}


def _float(row: Mapping[str, str], name: str) -> float | None:
    text = (row.get(name) or "").strip()
    if not text:
        return None
    try:
        if "_" in text or not text.isascii() or len(text) > 32:  # Python reads 9_6.0 as 96.0
            raise ValueError(text)  # and ４４.６ as 44.6; felab writes neither, nor 5,000 digits
        value = float(text)
    except ValueError:
        raise Invalid(f"result column {name} holds {text[:40]!r}, not a number") from None
    if not math.isfinite(value):
        raise Invalid(f"result column {name} holds {text[:40]!r}, not a finite number")
    if value < 0 or math.copysign(1.0, value) < 0:  # -0.0 too: felab never writes a signed zero
        raise Invalid(f"result column {name} holds {text[:40]!r}: it cannot be negative")
    largest = _ROW_BOUNDS.get(name)
    if largest is not None and value > largest:
        raise Invalid(f"result column {name} holds {text[:40]!r}, above {largest:,.0f}: not real")
    least = _ROW_LEAST.get(name)
    if least is not None and value < least * (1 - 1e-9):
        raise Invalid(
            f"result column {name} holds {text[:40]!r}: felab bench takes --{name} from "
            f"{least:g}; the row was edited"
        )
    if name == "writing_tps_p50" and 0 < value < 1 / MAX_ROW_SECONDS:  # 1e-7 showed as 0.0
        raise Invalid(
            f"result column {name} holds {text[:40]!r}: one token in more than a day "
            f"({MAX_ROW_SECONDS:,.0f} s, the longest time per token a row holds) is no "
            "writing speed"
        )
    if name in _RATES and 0 < value < _LEAST_RATE:
        raise Invalid(
            f"result column {name} holds {text[:40]!r}, not 0 and below {_LEAST_RATE:g} a "
            "second: one token or request in the longest run felab can make is more"
        )
    return value


@dataclass(frozen=True)
class ResultRow:
    """The headline figures of one results-CSV row, checked."""

    server: str
    model: str
    preset: str
    concurrency: int
    writing_tps_p50: float | None
    ttft_p50_s: float | None
    #: The row's whole-number columns as read (row_counts), for checks that need them again.
    counts: Mapping[str, int | None] = field(default_factory=dict)
    #: How long the run lasted: ok / request_tps (None: the row gives neither, or 0).
    lasted_s: float | None = None

    @property
    def gives_writing_speed(self) -> bool:
        """Whether the row is one person's writing speed (a "measured" number)."""
        tps = self.writing_tps_p50
        return tps is not None and 0 < tps <= MAX_SERVER_TPS and self.concurrency == 1


def check_result_row(row: Mapping[str, str]) -> ResultRow:
    """Read a row with the results CSV's columns; Invalid says what is wrong with it."""
    for name in ("server", "model", "preset", "concurrency"):
        if not (row.get(name) or "").strip():
            raise Invalid(f"the result row has no {name}; it must carry the CSV's columns")
    for name, longest in _ROW_TEXT_LIMITS.items():
        if len((row.get(name) or "").strip()) > longest:
            raise Invalid(f"the result row's {name} is longer than {longest} characters")
    _check_cells_are_plain(row)
    _check_no_secret(row)
    if "host" in row and not (row["host"] or "").strip():
        raise Invalid("the result row's host is empty: felab writes the machine's name there")
    if "target" in row and not (row["target"] or "").strip():
        raise Invalid("the result row's target is empty: felab writes the target's name there")
    preset = row["preset"].strip()
    if any(c in preset for c in "/\\") or not _preset_felab_writes(preset):
        raise Invalid(
            f"preset {preset[:40]!r} is not a name felab writes: a preset ({', '.join(PRESETS)}), "
            "one changed by flags (day2+custom), sessions NxM or trace:NAME"
        )
    server = validate_server(row["server"])
    typed = row["concurrency"].strip()
    digits = typed.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):  # int() also reads 1_0 and a fullwidth １
        raise Invalid(f"concurrency {typed[:40]!r} is not a whole number") from None
    concurrency = int(typed) if len(digits) <= 12 else MAX_ROW_CONCURRENCY + 1
    if not 0 <= concurrency <= MAX_ROW_CONCURRENCY:
        raise Invalid(f"concurrency {concurrency} is not from 0 to {MAX_ROW_CONCURRENCY:,}")
    if concurrency == 0 and _float(row, "rate") is None and not preset.startswith("trace:"):
        # 0 users is an open loop with no cap on how many run at once: requests sent at a rate
        # (the row writes it) or at a trace's times (its preset is trace:NAME).
        raise Invalid(
            "concurrency 0 with no rate: felab writes 0 users only for requests sent at a rate "
            "(bench --rate, written beside it) or replayed from a trace; the row was edited"
        )
    _float(row, "writing_tps_p50")  # the headline figure's fault is named first
    _check_timestamp(row)
    # A blank cell is None without a call: most of a row's columns are blank (60,000 rows).
    figures = {name: _float(row, name) if row.get(name) else None for name in _ROW_BOUNDS}
    counts = row_counts(row)
    _check_agrees(row, figures, counts)
    return ResultRow(
        server=server,
        model=row["model"].strip(),
        preset=row["preset"].strip(),
        concurrency=concurrency,
        writing_tps_p50=figures["writing_tps_p50"],
        ttft_p50_s=figures["ttft_p50_s"],
        counts=counts,
        lasted_s=run_length(figures, counts),
    )


#: A cell that is a figure (12, 0.0239, 4.46e1, -1): no password or key takes that shape, and a
#: 60,000-row file's figures, each different, are not each read for one.
_FIGURE = re.compile(r"[0-9.eE+-]*")


def _check_no_secret(row: Mapping[str, str]) -> None:
    """No cell holds a password or key: felab masks them in every URL and name it writes, so
    a target of http://bob:S3cret@... (or a host of bob:S3cret@studio.local) was typed in
    after, and would be stored (every cell is), exported and shown. Every text cell, through
    felab's one check (secret_problem)."""
    for name, value in row.items():
        if not isinstance(value, str) or not value or _FIGURE.fullmatch(value):
            continue
        if problem := secret_problem(f"result row's {name}", value):
            raise Invalid(
                f"{problem}: felab writes none and stores none: "
                "remove it, or import the file felab bench wrote"
            )


def _check_cells_are_plain(row: Mapping[str, str]) -> None:
    """No cell holds an escape code (it would reach terminals, chat posts and leaderboards: a
    U+202E shows a model name reversed) or begins a spreadsheet formula (a leading = runs in an
    exported sheet; a name's leading + - @ too). The whole row is looked at once first: a row
    felab wrote has neither (60,000 rows, benchmarks/csv_import.py)."""
    try:
        joined = "".join(row.values())  # a CSV row's cells are text
    except TypeError:  # a missing cell (None) or the extra cells' list
        joined = "".join(value for value in row.values() if isinstance(value, str))
    if joined.isprintable() and "=" not in joined:
        for name in _ROW_TEXT_LIMITS:
            value = row.get(name)
            if isinstance(value, str) and value.lstrip()[:1] in FORMULA_MARKS:
                break  # a name that may begin a formula: looked at below
        else:
            return
    for name, value in row.items():
        if not isinstance(value, str):
            continue
        odd = "holds invisible or control characters" if holds_hidden(value) else ""
        if name in _ROW_TEXT_LIMITS:
            mark = formula_mark(value, allowed="@" if name == "model" else "")
        else:  # a number's sign is checked as a number below
            mark = "=" if value.lstrip().startswith("=") else ""
        odd = odd or (f"begins with {mark!r}, a spreadsheet formula" if mark else "")
        if odd:
            raise Invalid(f"the result row's {name} {odd}: felab writes none")


def _preset_felab_writes(preset: str) -> bool:
    """A preset as felab names it in a row: a named preset (day2), one changed by flags
    (day2+custom, Workload.with_overrides), a multi-turn run (sessions 8x4) or a trace replay
    (trace:NAME, the trace file's name), as `felab bench` and the worker build them."""
    if preset.removesuffix("+custom") in PRESETS:
        return True
    if preset.startswith("trace:"):
        return bool(preset.removeprefix("trace:").strip())
    sessions = re.fullmatch(r"sessions ([1-9][0-9]{0,6})x([1-9][0-9]{0,3})", preset)
    if sessions is None:
        return False
    count, turns = int(sessions[1]), int(sessions[2])
    return turns <= MAX_ROW_TURNS and count * turns <= MAX_REQUESTS


def _count(row: Mapping[str, str], name: str) -> int | None:
    """A whole-number column (None when empty), within what felab writes there (_ROW_COUNTS)."""
    text = (row.get(name) or "").strip()
    if not text:
        return None
    least, most = _ROW_COUNTS[name]
    if not (text.isdigit() and text.isascii()):  # as felab writes it: plain digits
        digits = text.removeprefix("-")
        if not (digits.isascii() and digits.isdigit()):
            raise Invalid(f"result column {name} holds {text[:40]!r}, not a whole number")
        raise Invalid(f"result column {name} holds {text[:40]!r}: it cannot be negative")
    # By length first: int() of thousands of digits is slow, then refused.
    value = (
        int(text)
        if len(text) <= _MOST_COUNT_DIGITS or len(text.lstrip("0")) <= len(str(most))
        else most + 1
    )
    if value > most:
        raise Invalid(f"result column {name} holds {text[:40]!r}, above {most:,}: not real")
    if value < least:
        raise Invalid(f"result column {name} holds {value}: felab writes at least {least}")
    return value


def row_counts(row: Mapping[str, str]) -> dict[str, int | None]:
    """A row's whole-number columns, each within what felab writes there."""
    return {name: _count(row, name) if row.get(name) else None for name in _ROW_COUNTS}


@functools.lru_cache(maxsize=256)
def _written_by_felab(version: str) -> bool:
    """A version felab writes (major.minor.patch, this one or older, or the next minor: a worker
    may be upgraded before the ingest), not 99 or 'latest'."""
    written = re.fullmatch(r"(\d{1,4})\.(\d{1,4})(\.\d{1,4})?([.+-]?[0-9A-Za-z.]{1,20})?", version)
    ours = re.match(r"(\d+)\.(\d+)", __version__)
    if written is None or ours is None:
        return False
    major, minor = int(written[1]), int(written[2])
    return (major, minor) <= (int(ours[1]), int(ours[2]) + 1)


def _check_timestamp(row: Mapping[str, str]) -> None:
    """A start time reads as a time felab writes: with its time zone, not in the future, not
    from before felab timed any run."""
    stamp = (row.get("timestamp") or "").strip()
    if stamp:
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            raise Invalid(f"timestamp {stamp[:40]!r} is not a date and time felab writes") from None
        if when.tzinfo is None:
            raise Invalid(f"timestamp {stamp[:40]!r} has no time zone: felab writes one (+00:00)")
        if when > datetime.now(UTC) + timedelta(days=1):
            raise Invalid(f"timestamp {stamp[:40]!r} is in the future: no run was timed then")
        if when < FIRST_ROW_DATE:
            raise Invalid(f"timestamp {stamp[:40]!r} is from before felab timed any run")


def _check_agrees(
    row: Mapping[str, str], figures: Mapping[str, float | None], counts: Mapping[str, int | None]
) -> None:
    """A row felab wrote agrees with itself (`figures` and `counts`: its numbers and whole
    numbers, each already within what felab writes): medians no higher than their 95th
    percentiles, an API felab speaks, requests that are ok + failed, and a writing speed that
    is 1/TPOT (within the spread of two medians)."""
    writing = figures["writing_tps_p50"]
    for metric in _PERCENTILE_PAIRS:
        p50, p95 = figures[f"{metric}_p50_s"], figures[f"{metric}_p95_s"]
        # Both are written to 6 digits: a tie may round either way.
        if p50 is not None and p95 is not None and p50 > p95 * (1 + 1e-5):
            raise Invalid(
                f"{metric}_p50_s {p50:g} is above {metric}_p95_s {p95:g}: a median is never above "
                "the 95th percentile of the same requests; the row was edited"
            )
    api = (row.get("api") or "").strip()
    if api and api not in _APIS:
        raise Invalid(f"api {api[:40]!r} is not one felab speaks: {', '.join(_APIS)}")
    source = (row.get("token_source") or "").strip()
    if source and source not in TOKEN_SOURCES:
        raise Invalid(f"token_source {source[:40]!r} is not one felab writes")
    version = (row.get("felab_version") or "").strip()
    if version and not _written_by_felab(version):
        raise Invalid(f"felab_version {version[:40]!r} is not a felab that has written rows")
    requests, ok, failed = counts["requests"], counts["ok"], counts["failed"]
    if requests is not None and ((ok or 0) > requests or (failed or 0) > requests):
        raise Invalid(f"ok {ok} / failed {failed} of {requests} requests: more than were sent")
    if requests is not None and ok is not None and failed is not None and ok + failed != requests:
        raise Invalid(
            f"ok {ok} + failed {failed} is not requests {requests}: felab writes their sum"
        )
    # What `felab bench` refuses to run, no row of it holds (a hand-edited file's rows did).
    shared, prompt = counts["shared_prefix_tokens"], counts["prompt_tokens"]
    if shared and prompt is not None and shared >= prompt:
        raise Invalid(
            f"shared_prefix_tokens {shared:,} is not shorter than prompt_tokens {prompt:,}: the "
            "prefix opens the prompt; the row was edited"
        )
    cold = counts["cold_starts"]
    if requests is not None and cold is not None and cold > requests:
        raise Invalid(f"cold_starts {cold} of {requests} requests: more than were sent")
    if ok == 0 and writing:
        raise Invalid(f"a writing speed of {writing:g} tok/s from 0 answered requests")
    for q in ("p50", "p95"):  # each request ends after its first token: so do their medians
        first, whole = figures[f"ttft_{q}_s"], figures[f"e2e_{q}_s"]
        if first is not None and whole is not None and whole < first * (1 - 1e-5):
            raise Invalid(
                f"e2e_{q}_s {whole:g} is below ttft_{q}_s {first:g}: a request ends after its "
                "first token; the row was edited"
            )
    tpot = figures["tpot_p50_s"]
    if writing is not None and tpot is not None and (writing or tpot):
        check_writing_is_one_over_tpot(writing, tpot, figures["tpot_p95_s"])
    _check_what_bench_writes(row, figures, counts)
    check_rates(row, figures, counts)
    check_workload(row, figures, counts)
    check_e2e_holds_its_tokens(figures, counts, (row.get("token_source") or "").strip())


#: How far a request's median time per token or between tokens may be past the slow end of
#: its end-to-end times: each is inside its own request (TPOT 100 s beside E2E 0.02 s had
#: been stored), and the tenfold room covers runs whose few long answers alone have a TPOT.
_INSIDE_E2E = 10.0


def _check_what_bench_writes(
    row: Mapping[str, str], figures: Mapping[str, float | None], counts: Mapping[str, int | None]
) -> None:
    """What `felab bench` never writes together (seventeenth sweep, a H6/H7, a2 H8): a writing
    speed where a request holds one token; a server's speed past any stream; figures from
    requests that were all cold starts (those are left out of the figures); a token time
    longer than the requests; a shared prefix without a prompt length; burstiness without a
    rate; a first token or an end in no time; a mean prompt of part of a token."""
    if counts["max_tokens"] == 1 and figures["writing_tps_p50"]:
        raise Invalid(
            "writing_tps_p50 beside max_tokens 1: a request of one token has no time per "
            "token, and felab writes no writing speed for it; the row was edited"
        )
    server_tps = figures["server_tps_p50"]
    if server_tps is not None and server_tps > MAX_SERVER_TPS:
        raise Invalid(
            f"server_tps_p50 {server_tps:g}: felab keeps no server's figure past "
            f"{MAX_SERVER_TPS:,.0f} tokens a second for one stream; the row was edited"
        )
    cold, ok = counts["cold_starts"], counts["ok"]
    if cold and ok and cold >= ok and figures["ttft_p50_s"] is not None:
        raise Invalid(
            f"cold_starts {cold} of {ok} answered, beside latency figures: cold starts are left "
            "out of the figures, so there are none; the row was edited"
        )
    e2e_slow = figures["e2e_p95_s"]
    for name in ("tpot_p50_s", "itl_p50_s"):
        value = figures[name]
        if value is not None and e2e_slow and value > _INSIDE_E2E * e2e_slow:
            raise Invalid(
                f"{name} {value:g} beside e2e_p95_s {e2e_slow:g}: a time per token is inside "
                "its request; the row was edited"
            )
    for name in ("ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "e2e_p95_s", "tpot_p50_s"):
        if figures[name] == 0:
            raise Invalid(f"{name} 0: every request takes time; the row was edited")
    if counts["shared_prefix_tokens"] and counts["prompt_tokens"] is None:
        raise Invalid(
            "shared_prefix_tokens without prompt_tokens: felab bench takes a shared prefix only "
            "with --prompt-tokens; the row was edited"
        )
    if figures["burstiness"] is not None and figures["rate"] is None:
        raise Invalid(
            "burstiness without a rate: it shapes the gaps between requests sent at a rate, "
            "and felab writes it only then; the row was edited"
        )
    prompt = figures["prompt_tokens_server"]
    if prompt is not None and 0 < prompt < 1:
        raise Invalid(
            f"prompt_tokens_server {prompt:g}: a prompt is a token at least; the row was edited"
        )
