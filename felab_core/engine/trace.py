"""Trace replay: a recorded day of traffic (Mooncake / Bailian JSONL) sent again, on its times.

Each line is one request: `timestamp` (milliseconds from the trace's start; `delay`, the gap
since the previous line, is read too), `input_length` and `output_length` in tokens, and
`hash_ids`, one id per block of `block_size` prompt tokens (512 in the published Mooncake
traces). Two requests that share leading ids shared that much of their prompt, so their prompts
are rebuilt here from one text per id: the server's prefix cache sees what the trace's users
shared, and nothing more. A request without ids gets a prompt of its own.

Times are kept on felab's absolute schedule (a late send never pushes later ones back) and can
be scaled: `speed` 2 replays twice as fast. Tokens are approximated by common English words,
one token each on the usual tokenizers, as felab's synthetic prompts are.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path

from felab_core.engine.words import synthetic_words
from felab_core.files import MiB, NamedFileError, read_named_text
from felab_core.json_keys import KeyTwice, once
from felab_core.text import with_hidden_shown

DEFAULT_BLOCK_SIZE = 512
MAX_LINES = 1_000_000
MAX_LINE_BYTES = 1 << 20
#: A million lines of about a hundred bytes, with room: Mooncake's day-long traces are ~3 MB.
MAX_TRACE_BYTES = 512 * MiB
#: A replay of more than a day is a mistake (seconds given as milliseconds, a stray stamp).
MAX_SPAN_S = 86_400
#: Requests a median of fewer milliseconds apart than this look like a trace written in
#: seconds (0, 1.5, 3.2): read as milliseconds, its 30 minutes replay in 1.8 s (A2-9). 5 ms
#: is 200 requests a second all trace long, past any one server felab times; an honest trace
#: that fast is replayed all the same, with the note.
SECONDS_LIKE_GAP_MS = 5.0
#: A line's prompt and answer, as --prompt-tokens and --max-tokens take them: a line asking
#: 2,000,000 prompt tokens (with blocks of 65,536) had grown felab past 1.4 GB in 30 s.
MAX_INPUT_TOKENS = 262_144  # workloads.MAX_TOKENS (a test holds them equal)
MAX_OUTPUT_TOKENS = MAX_INPUT_TOKENS
#: The most words of rebuilt blocks kept at once (about 50 MB): a block used again after
#: others is rebuilt, the same words from its id.
MOST_KEPT_WORDS = 8_000_000


class TraceError(ValueError):
    """A trace file felab cannot replay, with the line that says why."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    at_s: float  # from the trace's first request, before scaling
    input_tokens: int
    output_tokens: int | None
    hash_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace as read: its requests in time order, where it came from, how to replay it."""

    name: str
    sha256: str
    requests: tuple[TraceRequest, ...]
    block_size: int = DEFAULT_BLOCK_SIZE
    speed: float = 1.0
    #: The first line whose time is before the line above it (None: in time order); the
    #: requests are replayed in time order all the same, and the run's notes say so (A2-21).
    goes_back_at: int | None = None

    @property
    def order_note(self) -> str | None:
        """What a run of this trace says when its file was not in time order."""
        if self.goes_back_at is None:
            return None
        return (
            f"trace {self.name}: line {self.goes_back_at}'s time is before the line above it "
            "(two traces joined, or a shuffled file?); felab replays every request in time "
            "order, so traces laid over each other run at once"
        )

    @property
    def unit_note(self) -> str | None:
        """What a run says when the trace's times look like seconds read as milliseconds: its
        requests a median of under SECONDS_LIKE_GAP_MS apart, in the file and as replayed
        (--trace-speed 0.001, which reads them as seconds, silences it). A note, not a
        refusal: a millisecond trace that busy is rare, not wrong."""
        gaps = [b.at_s - a.at_s for a, b in itertools.pairwise(self.requests)]
        apart = [g * 1000 for g in gaps if g > 0]
        if len(apart) < 2:  # one gap, or all at once: no pace to judge
            return None
        median_ms = statistics.median(apart)
        if median_ms >= SECONDS_LIKE_GAP_MS or median_ms / self.speed >= SECONDS_LIKE_GAP_MS:
            return None
        return (
            f"trace {self.name}: its requests are a median {median_ms:.3g} ms apart "
            f"({len(self.requests):,} in {self.span_s:.3g} s): felab reads timestamp and delay "
            "as milliseconds; if this file's times are seconds, replay it with --trace-speed "
            "0.001 (or multiply them by 1000)"
        )

    def offsets_s(self, count: int | None = None) -> list[float]:
        """Send times from the start of the run, scaled by `speed`."""
        picked = self.requests if count is None else self.requests[:count]
        return [r.at_s / self.speed for r in picked]

    @property
    def span_s(self) -> float:
        return self.requests[-1].at_s / self.speed if self.requests else 0.0

    @property
    def longest_gap_s(self) -> float:
        """The longest wait between two sends, replayed: nothing may be in flight meanwhile."""
        offsets = self.offsets_s()
        return max((b - a for a, b in itertools.pairwise(offsets)), default=0.0)

    def summary(self) -> dict[str, object]:
        """What the JSON record keeps of the trace (enough to find the same file again)."""
        shared = sum(1 for r in self.requests if r.hash_ids)
        return {
            "name": self.name,
            "sha256": self.sha256,
            "requests": len(self.requests),
            "with_hash_ids": shared,
            "block_size": self.block_size,
            "speed": self.speed,
            "span_s": round(self.span_s, 3),
        }


#: No count, time or block id in a trace is near 2**63; a longer integer is not a record (and
#: past 10**308 it cannot become a float: 400 digits ended in the CLI's catch-all).
_MAX_INTEGER = 2**63


def _too_big(value: int | float) -> bool:
    return isinstance(value, int) and abs(value) >= _MAX_INTEGER


def _digits(value: int | float) -> str:
    return f"{len(str(abs(int(value)))):,}"


def check_replay_knobs(block_size: int, speed: float) -> None:
    """--trace-block-size and --trace-speed, said as the flags (not as the trace file's fault)."""
    if not (isinstance(block_size, int) and 1 <= block_size <= 65_536):
        raise TraceError(f"--trace-block-size must be 1-65536 tokens, not {block_size}")
    if not (math.isfinite(speed) and 0.001 <= speed <= 1000):
        raise TraceError(f"--trace-speed must be 0.001-1000 (2 = twice as fast), not {speed:g}")


def _given(row: dict[str, object], names: tuple[str, ...], line: int) -> None:
    """Refuse a line that gives a figure under two of its names (input_length and
    input_tokens, timestamp and delay): which one the trace meant is a guess, and the first
    one had been taken without a word."""
    said = [n for n in names if row.get(n) is not None]
    if len(said) > 1:
        raise TraceError(
            f"line {line}: gives both {said[0]} and {said[1]}: which one the trace meant is a "
            "guess; keep one"
        )


#: The fields a trace line's figures are read from; others are the trace's own and left alone.
_FIELDS = (
    "timestamp", "created_time", "delay", "delay_ms", "input_length", "input_tokens",
    "output_length", "output_tokens", "hash_ids",
)  # fmt: skip


#: Other tools' names for the figures felab reads (OpenAI's request, its usage block, AIPerf
#: and genai-perf's traces): left out without a word, every request asked for 256 tokens (A2-4).
_OTHER_NAMES = {
    "max_tokens": "output_length", "max_completion_tokens": "output_length",
    "completion_tokens": "output_length", "osl": "output_length",
    "output_sequence_length": "output_length", "num_output_tokens": "output_length",
    "prompt_tokens": "input_length", "isl": "input_length",
    "input_sequence_length": "input_length", "num_input_tokens": "input_length",
}  # fmt: skip


_SAME_FIGURE = {
    "output_length": ("output_length", "output_tokens"),
    "input_length": ("input_length", "input_tokens"),
}


def _no_misspelling(row: dict[str, object], line: int) -> None:
    """Refuse a field that is one of felab's misspelled (`output_len`) or named as another tool
    names it (`max_tokens`, `osl`): it was left out without a word, and every request then
    asked for the default 256 tokens."""
    for key in row:
        if key in _FIELDS:
            continue
        meant = _OTHER_NAMES.get(str(key).lower())
        if meant is not None and any(name in row for name in _SAME_FIGURE[meant]):
            continue  # beside felab's own name for the figure it is the trace's own field
        if meant is not None:
            raise TraceError(
                f"line {line}: {with_hidden_shown(str(key)[:40])!r} is not a field felab reads: "
                f"felab reads this figure given as {meant}; rename the field"
            )
        near = difflib.get_close_matches(str(key), _FIELDS, n=1, cutoff=0.75)
        if near:
            raise TraceError(
                f"line {line}: {with_hidden_shown(str(key)[:40])!r} is not a field felab reads: "
                f"did you mean {near[0]}?"
            )


def _int(row: dict[str, object], names: tuple[str, ...], line: int, *, needed: bool) -> int | None:
    _given(row, names, line)
    for name in names:
        if name in row and row[name] is not None:
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TraceError(f"line {line}: {name} must be a number, not {value!r}")
            if _too_big(value):
                raise TraceError(f"line {line}: {name} is a number of {_digits(value)} digits")
            if not math.isfinite(value) or value < 0 or value != int(value):
                raise TraceError(f"line {line}: {name} must be a whole number >= 0, not {value}")
            return int(value)
    if needed:
        raise TraceError(f"line {line}: no {names[0]} (the prompt length in tokens)")
    return None


def _time_ms(row: dict[str, object], names: tuple[str, ...], line: int) -> float | None:
    _given(row, names, line)
    for name in names:
        if name in row and row[name] is not None:
            value = row[name]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TraceError(f"line {line}: {name} must be milliseconds, not {value!r}")
            if _too_big(value):
                raise TraceError(
                    f"line {line}: {name} is a number of {_digits(value)} digits, not a time in "
                    "milliseconds"
                )
            if not math.isfinite(value) or value < 0:
                raise TraceError(f"line {line}: {name} must be finite and >= 0, not {value}")
            return float(value)
    return None


def parse_trace(
    text: str,
    *,
    name: str = "trace",
    block_size: int = DEFAULT_BLOCK_SIZE,
    speed: float = 1.0,
) -> Trace:
    """Read JSONL trace text; every refusal names its line."""
    check_replay_knobs(block_size, speed)
    requests: list[TraceRequest] = []
    clock_ms = 0.0
    first_ms: float | None = None
    goes_back_at: int | None = None
    # Lines end at \n only: str.splitlines also splits at U+2028, legal inside a JSON string.
    for line_no, raw in enumerate(text.split("\n"), 1):
        raw = raw.removesuffix("\r")
        if not raw.strip():
            continue
        if len(requests) >= MAX_LINES:
            raise TraceError(f"more than {MAX_LINES:,} requests: cut the trace (head -n)")
        if len(raw) > MAX_LINE_BYTES:
            raise TraceError(f"line {line_no}: longer than {MAX_LINE_BYTES:,} bytes")
        try:
            row = json.loads(raw, object_pairs_hook=once)
        except KeyTwice as exc:
            raise TraceError(
                f"line {line_no}: gives {with_hidden_shown(exc.key[:40])} twice: which one the "
                "trace meant is a guess; keep one"
            ) from None
        except json.JSONDecodeError as exc:
            raise TraceError(f"line {line_no}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise TraceError(f"line {line_no}: nested too deeply to be a trace record") from None
        except ValueError:  # an integer of thousands of digits (Python reads at most 4,300)
            raise TraceError(
                f"line {line_no}: a number of thousands of digits: not a trace record"
            ) from None
        if not isinstance(row, dict):
            raise TraceError(f'line {line_no}: expected an object such as {{"timestamp": 0, ...}}')
        _no_misspelling(row, line_no)
        _given(row, ("timestamp", "created_time", "delay", "delay_ms"), line_no)
        stamp = _time_ms(row, ("timestamp", "created_time"), line_no)
        delay = _time_ms(row, ("delay", "delay_ms"), line_no)
        if stamp is None and delay is None and requests:
            raise TraceError(f"line {line_no}: no timestamp (ms) or delay (ms since the last)")
        at_ms = stamp if stamp is not None else clock_ms + (delay or 0.0)
        if first_ms is None:
            first_ms = at_ms
        if requests and at_ms < clock_ms and goes_back_at is None:
            goes_back_at = line_no
        clock_ms = at_ms
        input_tokens = _int(row, ("input_length", "input_tokens"), line_no, needed=True)
        assert input_tokens is not None
        if not 1 <= input_tokens <= MAX_INPUT_TOKENS:
            raise TraceError(f"line {line_no}: input_length must be 1-{MAX_INPUT_TOKENS:,}")
        output_tokens = _int(row, ("output_length", "output_tokens"), line_no, needed=False)
        if output_tokens is not None and not 1 <= output_tokens <= MAX_OUTPUT_TOKENS:
            raise TraceError(f"line {line_no}: output_length must be 1-{MAX_OUTPUT_TOKENS:,}")
        ids = row.get("hash_ids")
        ids = [] if ids is None else ids  # "", 0 or false had read as "no ids"
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < _MAX_INTEGER for i in ids
        ):
            raise TraceError(
                f"line {line_no}: hash_ids must be a list of whole numbers from 0 to 2**63 - 1"
            )
        if len(ids) > math.ceil(input_tokens / block_size):
            raise TraceError(
                f"line {line_no}: {len(ids)} hash_ids cover more than input_length "
                f"{input_tokens} at {block_size} tokens a block: is --trace-block-size right?"
            )
        requests.append(TraceRequest(at_ms, input_tokens, output_tokens, tuple(ids)))
    if not requests:
        raise TraceError("the trace has no requests (one JSON object per line)")
    unordered = goes_back_at is not None
    start = min(r.at_s for r in requests) if unordered else requests[0].at_s
    ordered = sorted(requests, key=lambda r: r.at_s) if unordered else requests
    rebased = tuple(
        TraceRequest((r.at_s - start) / 1000, r.input_tokens, r.output_tokens, r.hash_ids)
        for r in ordered
    )
    span_s = rebased[-1].at_s / speed
    if span_s > MAX_SPAN_S:
        # 1e308: not 309 digits; 86,400.001 s is not "86,400 s, more than 86,400 s" (A2-5)
        spans = f"{span_s:,.3f}".rstrip("0").rstrip(".") if span_s < 1e12 else f"{span_s:.3g}"
        raise TraceError(
            f"the trace spans {spans} s at --trace-speed {speed:g} (its timestamps are "
            f"milliseconds): more than a day ({MAX_SPAN_S:,} s); cut it, or replay it faster"
        )
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Trace(name, digest, rebased, block_size, speed, goes_back_at)


def preset_name(name: str) -> str:
    """The preset a replay's rows carry: trace:NAME, the file's name cut to fit a results row
    (64 characters, numbers/row_checks.py) and its invisible characters shown as '?', so the
    row imports back."""
    shown = with_hidden_shown(name)
    return "trace:" + shown[: 64 - len("trace:")]


def load_trace(path: Path, *, block_size: int = DEFAULT_BLOCK_SIZE, speed: float = 1.0) -> Trace:
    """Read a trace file (see parse_trace)."""
    check_replay_knobs(block_size, speed)
    try:
        text = read_named_text(path, what="trace (JSONL)", limit=MAX_TRACE_BYTES)
    except NamedFileError as exc:
        raise TraceError(str(exc)) from None
    try:
        return parse_trace(text, name=path.name, block_size=block_size, speed=speed)
    except TraceError as exc:
        raise TraceError(f"{path}: {exc}") from None


class TracePrompts:
    """Prompts rebuilt from hash_ids: the same id always gives the same block of words."""

    def __init__(self, trace: Trace, seed: int = 0) -> None:
        self.trace = trace
        self.seed = seed
        self._blocks: dict[int, str] = {}

    def _block(self, block_id: int) -> str:
        text = self._blocks.pop(block_id, None)
        if text is None:
            rng = random.Random(f"trace-block-{self.seed}-{block_id}")
            text = synthetic_words(rng, self.trace.block_size)
            most = max(1, MOST_KEPT_WORDS // self.trace.block_size)
            while len(self._blocks) >= most:  # the least recently used first
                self._blocks.pop(next(iter(self._blocks)))
        self._blocks[block_id] = text  # last: the most recently used
        return text

    def prompt(self, index: int) -> str:
        """Request `index`'s prompt: its blocks in order, then words of its own to its length."""
        req = self.trace.requests[index]
        words: list[str] = []
        for block_id in req.hash_ids:
            words.extend(self._block(block_id).split()[: max(0, req.input_tokens - len(words))])
        if len(words) < req.input_tokens:
            rng = random.Random(f"trace-own-{self.seed}-{index}")
            own = f"[trace request {index}] " if not req.hash_ids else ""
            rest = req.input_tokens - len(words) - (3 if own else 0)
            words.extend((own + synthetic_words(rng, rest)).split())
        return " ".join(words)

    def max_tokens(self, index: int) -> int | None:
        return self.trace.requests[index].output_tokens
