"""The sizing memo: the course's Day 10 hardware recommendation, written from measured rows.

The results CSV knows what was measured (server, model, preset, writing speed) but not the
machine's memory bandwidth, the model's shape, or how much memory is left for the cache. The
caller supplies those (`MemoInputs`); `build_memo` joins them with the latest row per server and
machine through the sizing package, so every figure is the course's arithmetic, done exactly.
`render_markdown` and `write_charts` only present a `Memo`: they compute nothing new.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from felab_core.engine.results import CSV_COLUMNS, read_csv
from felab_core.engine.server_kinds import ServerKind
from felab_core.sizing import capacity as cap
from felab_core.sizing import change, kv, speed_limit, vllm_log
from felab_core.sizing.errors import SizingError
from felab_core.sizing.model_shape import ModelShape, gguf_file_bytes, resolve_shape
from felab_core.sizing.units import (
    GB,
    MB,
    about_text,
    as_fraction,
    binary_size_text,
    both_ways,
    decimal_text,
    gb_text,
    mib_text,
    parse_bandwidth,
    parse_bytes,
    tidy_text,
    whole_text,
)

DEFAULT_CONTEXTS: tuple[int, ...] = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
DEFAULT_MAX_LEN = 8192  # the course's --max-model-len
DEFAULT_BLOCK_SIZE = 16  # vLLM's default block, in tokens

# The columns the memo reads; an older felab's file (a prefix of CSV_COLUMNS) is fine if it has
# them all, and a newer one may have appended more.
REQUIRED_COLUMNS: tuple[str, ...] = (
    "timestamp",
    "host",
    "target",
    "server",
    "server_version",
    "model",
    "preset",
    "concurrency",
    "rate",
    "requests",
    "ok",
    "failed",
    "ttft_p50_s",
    "ttft_p95_s",
    "writing_tps_p50",
)

_SERVER_ORDER = [k.value for k in ServerKind]

# The course's Serving With vLLM video (Day 2 whiteboards): the measured before-and-after.
VIDEO_BLOCKS, VIDEO_BLOCK_SIZE, VIDEO_MAX_LEN = 8234, 16, 8192
VIDEO_CONVERSATIONS_AFTER = 50
VIDEO_TTFT_P95_BEFORE, VIDEO_TTFT_P95_AFTER = "1.6", "0.5"


class MemoError(ValueError):
    """Bad input for a memo: the message says what was wrong and what to pass instead."""


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class MachineSpec:
    """The machine behind some rows: a chip from the bandwidth table or a bandwidth in GB/s.

    `host` None means every host in the CSV that no other spec names (the usual one-Mac case).
    """

    host: str | None = None
    chip: str | None = None
    bandwidth: str | None = None


def parse_machine(text: str, *, bandwidth: bool = False) -> MachineSpec:
    """Read 'M4 Pro' or 'HOST=M4 Pro' (a bandwidth with `bandwidth=True`: '273', 'HOST=273')."""
    host, sep, value = text.partition("=")
    if not sep:
        host, value = "", text
    host, value = host.strip(), value.strip()
    if sep and not host:
        raise MemoError(f"{text!r} names no host before '='; write HOST=VALUE or just VALUE")
    if not value:
        raise MemoError(f"{text!r} gives no {'bandwidth' if bandwidth else 'chip'} after '='")
    if bandwidth:
        return MachineSpec(host=host or None, bandwidth=value)
    return MachineSpec(host=host or None, chip=value)


@dataclass(frozen=True)
class MemoInputs:
    """What the results CSV cannot know: the machine, the model, the cache memory, the contexts.

    The model is named exactly one way (`model`, `config` or `gguf`); the weights read per token
    come from `model_bytes` (the file's size, as the course divides by it), else a GGUF's file size,
    else a config folder's safetensors, else `bits_per_weight`. The cache memory is given exactly
    one way: `kv_memory` (bytes left for the cache), `kv_tokens`, `blocks` or `vllm_log`.
    """

    machines: tuple[MachineSpec, ...]
    model: str | None = None
    config: Path | None = None
    gguf: Path | None = None
    model_bytes: str | int | Fraction | None = None
    bits_per_weight: str | None = None
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    max_len: int | None = None
    kv_dtype: str = "f16"
    kv_memory: str | int | Fraction | None = None
    kv_tokens: int | None = None
    blocks: int | None = None
    block_size: int | None = None
    vllm_log: Path | None = None
    hosts: tuple[str, ...] = ()


# ---------------------------------------------------------------- the memo's data


@dataclass(frozen=True)
class Machine:
    """One machine's speed limit and the hosts (CSV rows) it applies to."""

    hosts: tuple[str, ...]
    label: str
    chip: speed_limit.Chip | None
    limit: speed_limit.Ceiling

    @property
    def bandwidth_text(self) -> str:
        return f"{tidy_text(self.limit.bandwidth / GB)} GB/s"


@dataclass(frozen=True)
class TimingRow:
    """The newest run of one server on one machine, set against that machine's speed limit."""

    host: str
    server: str
    target: str
    server_version: str
    model: str
    preset: str
    measured_at: datetime
    concurrency: int | None
    rate: str
    requests: int | None
    ok: int | None
    writing_tps: Fraction | None
    ttft_p50_s: Fraction | None
    ttft_p95_s: Fraction | None
    machine: Machine
    check: speed_limit.SpeedCheck | None
    older_rows: int

    @property
    def server_label(self) -> str:
        try:
            return ServerKind(self.server).label
        except ValueError:
            return self.server or self.target

    @property
    def name(self) -> str:
        return f"{self.server_label} on {self.host}"

    @property
    def users_text(self) -> str:
        if self.rate:
            cap_text = f", at most {self.concurrency}" if self.concurrency else ""
            return f"{self.rate} req/s open loop{cap_text}"
        return "-" if self.concurrency is None else str(self.concurrency)

    @property
    def verdict(self) -> str:
        if self.check is None:
            return "no writing speed"
        return self.check.verdict

    @property
    def percent_text(self) -> str:
        if self.check is None:
            return "-"
        return f"{decimal_text(self.check.share * 100, 0)} %"


@dataclass(frozen=True)
class CacheBudget:
    """The memory set aside for the cache, as a capacity at the memo's headline length."""

    words: str
    short: str
    source: str
    base: cap.Capacity
    memory_bytes: Fraction | None
    reading: vllm_log.VllmReading | None = None

    def at(self, max_len: int) -> cap.Capacity:
        """The same cache with every conversation allowed `max_len` tokens."""
        return replace(self.base, max_len=max_len)


@dataclass(frozen=True)
class ConcurrencyRow:
    """Worst-case conversations at once at one context length, as run and with an fp8 cache."""

    context: int
    per_conversation: kv.KvMemory
    per_conversation_fp8: kv.KvMemory
    capacity: cap.Capacity
    fp8: cap.Capacity | None

    @property
    def fp8_factor(self) -> Fraction | None:
        if self.fp8 is None or self.capacity.whole_requests == 0:
            return None
        return Fraction(self.fp8.whole_requests, self.capacity.whole_requests)


@dataclass(frozen=True)
class FlagAdvice:
    """One setting to try first, what it buys, and the numbers behind that."""

    title: str
    flag: str
    buys: str
    numbers: str
    default_note: str = ""


@dataclass(frozen=True)
class Memo:
    """Everything the memo says, as data: render_markdown and write_charts only present it."""

    source: str
    rows_read: int
    machines: tuple[Machine, ...]
    shape: ModelShape
    weights: Fraction
    weights_note: str
    rows: tuple[TimingRow, ...]
    row_notes: tuple[str, ...]
    per_token: kv.KvPerToken
    per_token_fp8: kv.KvPerToken
    max_len: int
    budget: CacheBudget
    concurrency: tuple[ConcurrencyRow, ...]
    what_ifs: tuple[cap.CapacityChange, ...]
    flags: tuple[FlagAdvice, ...]
    context_notes: tuple[str, ...]

    @property
    def title(self) -> str:
        return f"Sizing memo: {self.shape.name} on {' and '.join(m.label for m in self.machines)}"

    @property
    def impossible(self) -> tuple[TimingRow, ...]:
        return tuple(r for r in self.rows if r.check is not None and r.check.impossible)

    @property
    def headline(self) -> ConcurrencyRow:
        return next(r for r in self.concurrency if r.context == self.max_len)

    @property
    def already_fp8(self) -> bool:
        return self.per_token.key_dtype.bytes_per_element <= 1


# ---------------------------------------------------------------- reading the CSV


def load_results(path: Path) -> list[dict[str, str]]:
    """Read felab's results CSV, refusing a missing file or one with other columns."""
    if not path.exists():
        raise MemoError(
            f"{path} does not exist: run `felab bench` first (it appends to "
            "results/01-latency.csv), or pass --csv with the path of your results file"
        )
    if path.is_dir():
        raise MemoError(f"{path} is a folder: pass --csv with the results CSV file inside it")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError) as exc:
        raise MemoError(f"cannot read {path}: {exc}") from None
    if not header:
        return []
    _check_header(tuple(header), str(path))
    return read_csv(path)


def _check_header(header: tuple[str, ...], where: str) -> None:
    """Columns are only ever appended, so a felab file's header lines up with CSV_COLUMNS."""
    n = min(len(header), len(CSV_COLUMNS))
    if header[:n] != CSV_COLUMNS[:n]:
        at = next(i for i in range(n) if header[i] != CSV_COLUMNS[i])
        raise MemoError(
            f"{where} has other columns than felab's results file (column {at + 1} is "
            f"{header[at]!r} where felab writes {CSV_COLUMNS[at]!r}); pass --csv with the "
            "results/01-latency.csv that `felab bench` writes"
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise MemoError(
            f"{where} lacks the column(s) {', '.join(missing)} the memo needs (it was written by "
            "an older felab); rerun `felab bench` into a new file with --csv"
        )


def _fraction(row: Mapping[str, str], column: str, where: str) -> Fraction | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        return as_fraction(text)
    except SizingError:
        raise MemoError(f"{where}: {column} is {text!r}, not a number") from None


def _int(row: Mapping[str, str], column: str, where: str) -> int | None:
    value = _fraction(row, column, where)
    if value is None:
        return None
    if value.denominator != 1:
        raise MemoError(f"{where}: {column} is {row[column]!r}, not a whole number")
    return int(value)


def _when(text: str, where: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise MemoError(
            f"{where}: timestamp {text!r} is not a date and time; felab bench writes ISO times "
            "such as 2025-06-09T14:02:11+00:00"
        ) from None
    if stamp.tzinfo is None:
        return stamp.replace(tzinfo=UTC)  # felab writes UTC; a hand-made row is taken as UTC
    return stamp.astimezone(UTC)


def _latest(
    rows: Sequence[Mapping[str, str]], source: str
) -> list[tuple[Mapping[str, str], datetime, int]]:
    """The newest row per (host, server), with how many older rows it replaces.

    One run at several concurrencies writes rows with one timestamp: the one-user row wins (the
    speed limit is about one conversation), else the last one written.
    """
    best: dict[tuple[str, str], tuple[tuple[datetime, bool, int], Mapping[str, str]]] = {}
    counts: dict[tuple[str, str], int] = {}
    for index, row in enumerate(rows):
        where = f"{source}, row {index + 2}"
        missing = [c for c in REQUIRED_COLUMNS if c not in row]
        if missing:
            raise MemoError(
                f"{where} lacks {', '.join(missing)}; pass the CSV that `felab bench` writes"
            )
        stamp = _when(row["timestamp"], where)
        single = not (row.get("rate") or "").strip() and _int(row, "concurrency", where) == 1
        key = (row["host"], row["server"] or row["target"])
        rank = (stamp, single, index)
        counts[key] = counts.get(key, 0) + 1
        if key not in best or rank > best[key][0]:
            best[key] = (rank, row)
    return [(row, rank[0], counts[key] - 1) for key, (rank, row) in best.items()]


def _server_rank(server: str) -> tuple[int, str]:
    return (_SERVER_ORDER.index(server) if server in _SERVER_ORDER else len(_SERVER_ORDER), server)


# ---------------------------------------------------------------- building


def _machines(
    specs: Sequence[MachineSpec], hosts: Sequence[str], weights: Fraction, note: str
) -> dict[str, Machine]:
    """Each host's machine and speed limit; a host with no machine would get a wrong percentage."""
    if not specs:
        raise MemoError(
            "name the machine the rows were measured on: --chip 'M4 Pro' (see `felab size chips`) "
            "or --bandwidth 273 (GB/s from the maker's spec sheet)"
        )
    reads = speed_limit.bytes_per_token(weights, weights_note=note)
    by_host: dict[str | None, MachineSpec] = {}
    for spec in specs:
        if spec.host in by_host:
            who = f"host {spec.host!r}" if spec.host else "every host"
            raise MemoError(f"{who} is given two machines; give one --chip or --bandwidth each")
        if spec.host is not None and spec.host not in hosts:
            raise MemoError(
                f"no rows come from host {spec.host!r}; the CSV's hosts are {', '.join(hosts)}"
            )
        by_host[spec.host] = spec
    owner: dict[str, str | None] = {}  # host -> the spec key that covers it
    for host in hosts:
        if host in by_host:
            owner[host] = host
        elif None in by_host:
            owner[host] = None
        else:
            raise MemoError(
                f"no machine for host {host!r}: add --chip '{host}=CHIP' (or --bandwidth "
                f"'{host}=GBPS'), or leave its rows out with --host"
            )
    machines: dict[str | None, Machine] = {}
    for key, spec in by_host.items():
        covered = tuple(h for h in hosts if owner[h] == key)
        if not covered:
            continue
        chip = speed_limit.find_chip(spec.chip) if spec.chip else None
        if chip is not None:
            bw, label = chip.bytes_per_second, chip.name
        else:
            bw = parse_bandwidth(spec.bandwidth or "")
            label = f"a {tidy_text(bw / GB)} GB/s machine"
        machines[key] = Machine(covered, label, chip, speed_limit.ceiling(bw, reads, chip))
    return {host: machines[owner[host]] for host in hosts}


def _weights(inputs: MemoInputs, shape: ModelShape) -> tuple[Fraction, str]:
    """Bytes one token reads: the course divides by the file's size, so that comes first."""
    if inputs.model_bytes is not None:
        if isinstance(inputs.model_bytes, str):
            weights = parse_bytes(inputs.model_bytes)
        else:
            weights = Fraction(inputs.model_bytes)
        if weights < MB:
            raise MemoError(
                f"--model-bytes {inputs.model_bytes} is only {tidy_text(weights)} bytes; write "
                "the unit, e.g. --model-bytes 4.9GB"
            )
        return weights, f"the {gb_text(weights, 1)} model file, as given"
    if inputs.gguf is not None:
        size = gguf_file_bytes(inputs.gguf)
        return Fraction(size), f"the GGUF file's size on disk, {both_ways(size)}"
    bits = as_fraction(inputs.bits_per_weight) if inputs.bits_per_weight else None
    try:
        return speed_limit.weights_for(shape, bits)
    except SizingError:
        raise MemoError(
            f"the speed limit needs the bytes read per token, and the size of {shape.name}'s "
            "weights is unknown: pass --model-bytes with the model file's size (e.g. 4.9GB, "
            "as `ollama list` shows it), --gguf FILE, or --bits-per-weight"
        ) from None


def _budget(inputs: MemoInputs, per_token: kv.KvPerToken, max_len: int) -> CacheBudget:
    """The cache as one Capacity, whichever way it was given; concurrency needs exactly one."""
    given = [
        name
        for name, value in (
            ("--kv-memory", inputs.kv_memory),
            ("--kv-tokens", inputs.kv_tokens),
            ("--blocks", inputs.blocks),
            ("--vllm-log", inputs.vllm_log),
        )
        if value is not None
    ]
    if len(given) != 1:
        what = "none was given" if not given else f"got {' and '.join(given)}"
        raise MemoError(
            "give the memory left for the KV cache exactly one way (" + what + "): --kv-memory "
            "16GiB (after the weights), --kv-tokens N or --blocks N from the server's log, or "
            "--vllm-log FILE (vLLM's startup log)"
        )
    bs = inputs.block_size
    dtype = per_token.key_dtype.name
    if inputs.kv_memory is not None:
        memory = (
            parse_bytes(inputs.kv_memory)
            if isinstance(inputs.kv_memory, str)
            else Fraction(inputs.kv_memory)
        )
        base = cap.capacity_from_memory(memory, per_token, bs or DEFAULT_BLOCK_SIZE, max_len)
        return CacheBudget(
            words=f"{both_ways(memory)} of cache memory",
            short=f"{binary_size_text(memory)} of cache memory",
            source=f"{both_ways(memory)} of memory for the cache, as given (--kv-memory).",
            base=base,
            memory_bytes=memory,
        )
    if inputs.kv_tokens is not None:
        base = cap.capacity_from_tokens(inputs.kv_tokens, max_len, bs, dtype)
        return CacheBudget(
            words=f"a cache of {whole_text(inputs.kv_tokens)} tokens",
            short=f"a cache of {whole_text(inputs.kv_tokens)} tokens",
            source=f"a cache of {whole_text(inputs.kv_tokens)} tokens, as given (--kv-tokens).",
            base=base,
            memory_bytes=None,
        )
    if inputs.blocks is not None:
        size = bs or DEFAULT_BLOCK_SIZE
        base = cap.capacity_from_blocks(inputs.blocks, size, max_len, dtype)
        return CacheBudget(
            words=f"{whole_text(inputs.blocks)} cache blocks of {size} tokens",
            short=f"{whole_text(inputs.blocks)} blocks of {size} tokens",
            source=(
                f"{whole_text(inputs.blocks)} cache blocks of {size} tokens, as given (--blocks)."
            ),
            base=base,
            memory_bytes=None,
        )
    assert inputs.vllm_log is not None
    reading = vllm_log.parse_log_file(inputs.vllm_log)
    base = reading.capacity(block_size=bs, max_len=max_len)
    if base.kv_dtype is None:
        base = replace(base, kv_dtype=dtype)
    return CacheBudget(
        words=f"vLLM's cache of {whole_text(base.tokens)} tokens",
        short=f"vLLM's cache of {whole_text(base.tokens)} tokens",
        source=reading.explanation,
        base=base,
        memory_bytes=reading.kv_memory_bytes,
        reading=reading,
    )


def _contexts(
    inputs: MemoInputs, shape: ModelShape, max_len: int
) -> tuple[tuple[int, ...], list[str]]:
    """The lengths to tabulate, always with the planned one, none past the trained context."""
    for c in (*inputs.contexts, max_len):
        if isinstance(c, bool) or not isinstance(c, int) or c <= 0:
            raise MemoError(f"context lengths are whole numbers of tokens above zero (got {c!r})")
    trained = shape.context_length
    if trained is not None and max_len > trained:
        raise MemoError(
            f"--max-len {whole_text(max_len)} is longer than {shape.name}'s trained context of "
            f"{whole_text(trained)} tokens; pass a --max-len the server can be started with"
        )
    wanted = sorted({*inputs.contexts, max_len})
    notes: list[str] = []
    if trained is not None:
        dropped = [c for c in wanted if c > trained]
        if dropped:
            notes.append(
                f"Left out {', '.join(whole_text(c) for c in dropped)} tokens: longer than "
                f"{shape.name}'s trained context of {whole_text(trained)}."
            )
        wanted = [c for c in wanted if c <= trained]
    return tuple(wanted), notes


def _row_notes(rows: Sequence[TimingRow], weights: Fraction) -> list[str]:
    """Why rows might not compare: a reader should not rank servers that ran different tests."""
    notes: list[str] = []
    presets = sorted({r.preset or "(none)" for r in rows})
    if len(presets) > 1:
        notes.append(
            f"The rows ran different workloads ({', '.join(presets)}), so their speeds do not "
            "compare directly; rerun them with one preset (`felab bench ... --preset day2`)."
        )
    custom = [r.name for r in rows if r.preset.endswith("+custom")]
    if custom:
        notes.append(
            f"{', '.join(custom)} ran a preset changed by flags ('+custom'): compare with care."
        )
    users = sorted({r.users_text for r in rows})
    if len(users) > 1:
        notes.append(
            f"The rows ran with different numbers of users at once ({', '.join(users)}); "
            "per-user speed drops as users share the machine."
        )
    if any(r.check is not None for r in rows):
        mlx = (
            " (MLX keeps its own copy of the model)" if any(r.server == "mlx" for r in rows) else ""
        )
        notes.append(
            f"Each percentage divides by the speed limit for {gb_text(weights, 1)} of weights read "
            f"per token; a server that loaded a different file{mlx} has its own limit, so check "
            "the model column."
        )
    for r in rows:
        if r.check is None:
            done = (
                f" ({r.ok} of {r.requests} requests succeeded)"
                if r.ok is not None and r.requests
                else ""
            )
            notes.append(
                f"{r.name}: the newest run has no writing speed{done}; rerun `felab bench "
                f"{r.target or r.server}` before quoting this server."
            )
    return notes


def _flags(
    shape: ModelShape,
    per_token: kv.KvPerToken,
    per_token_fp8: kv.KvPerToken,
    budget: CacheBudget,
    max_len: int,
) -> tuple[FlagAdvice, ...]:
    """The course's three first flags, each with what it buys here and in the course's video."""
    video = cap.capacity_from_blocks(VIDEO_BLOCKS, VIDEO_BLOCK_SIZE, VIDEO_MAX_LEN, "f16")
    video_fp8 = cap.what_if(video, kv_to="fp8")
    tuned = change.compare(video.whole_requests, VIDEO_CONVERSATIONS_AFTER)
    wait = change.compare(VIDEO_TTFT_P95_BEFORE, VIDEO_TTFT_P95_AFTER)
    here = budget.at(max_len)
    v1 = (
        "On recent vLLM releases (the V1 engine) this is already on by default: check what the "
        "customer's version turns on before promising it as a win."
    )
    if per_token.key_dtype.bytes_per_element <= 1:
        fp8_numbers = (
            f"The cache is already {per_token.key_dtype.name}, 8 bits or fewer per number "
            f"({binary_size_text(per_token.bytes)} per token), so this one is spent."
        )
    else:
        mine = cap.what_if(here, kv_from=per_token.key_dtype.name, kv_to="fp8")
        fp8_numbers = (
            f"{shape.name}: {binary_size_text(per_token.bytes)} of notes per token becomes "
            f"{binary_size_text(per_token_fp8.bytes)} ({per_token_fp8.formula}). "
            f"With {budget.words}: {whole_text(here.tokens)} tokens become "
            f"{whole_text(mine.after.tokens)}, so at {whole_text(max_len)} tokens per conversation "
            f"{whole_text(here.whole_requests)} conversations at once become "
            f"{whole_text(mine.after.whole_requests)} ({tidy_text(mine.factor)} times). "
            f"In the course's video: {whole_text(video.tokens)} tokens x 2 = "
            f"{whole_text(video_fp8.after.tokens)}, from {whole_text(video.whole_requests)} to "
            f"{whole_text(video_fp8.after.whole_requests)} conversations at once."
        )
    return (
        FlagAdvice(
            title="Prefix caching",
            flag="--enable-prefix-caching",
            buys=(
                "Reuses the notes for a prompt opening that many requests share (the same "
                "instructions at the top of every chat). The shared opening is not read again for "
                "every request, which cuts the wait for the first token and the memory each "
                "conversation needs."
            ),
            numbers=(
                "In the course's Serving With vLLM video, with prompts sharing an opening, this "
                f"and the two below took p95 TTFT from {VIDEO_TTFT_P95_BEFORE} s to "
                f"{VIDEO_TTFT_P95_AFTER} s: {wait.wait_text()}."
            ),
            default_note=v1,
        ),
        FlagAdvice(
            title="Chunked prefill",
            flag="--enable-chunked-prefill",
            buys=(
                "Reads long prompts in pieces, between other people's writing steps, so one long "
                "prompt does not freeze everyone else's replies. It trades a little time to first "
                "token on the long prompt for smoother streaming for everyone."
            ),
            numbers=(
                "The video reports the three flags only together: one machine went from "
                f"{whole_text(video.whole_requests)} conversations at once to "
                f"{VIDEO_CONVERSATIONS_AFTER}, {tuned.more_text()}, with no new hardware."
            ),
            default_note=v1,
        ),
        FlagAdvice(
            title="FP8 KV cache",
            flag="--kv-cache-dtype fp8",
            buys=(
                "Stores the notes with 8 bits per number instead of 16: half the memory per token, "
                "so the same memory holds twice the tokens and about twice the conversations."
            ),
            numbers=fp8_numbers,
            default_note=""
            if per_token.key_dtype.bytes_per_element <= 1
            else "The fp8 cache is still opt-in: it must be asked for.",
        ),
    )


def build_memo(
    rows: Sequence[Mapping[str, str]], inputs: MemoInputs, source: str = "results/01-latency.csv"
) -> Memo:
    """Join the latest row per server and machine with the machine, model and cache arithmetic."""
    try:
        return _build(rows, inputs, source)
    except SizingError as exc:
        raise MemoError(str(exc)) from None


def _build(rows: Sequence[Mapping[str, str]], inputs: MemoInputs, source: str) -> Memo:
    if not rows:
        raise MemoError(
            f"{source} has no timing rows: run `felab bench ollama llamacpp mlx` (or the servers "
            "you use) first, then write the memo"
        )
    if inputs.model is None and inputs.config is None and inputs.gguf is None:
        seen = sorted({r.get("model", "") for r in rows if r.get("model")})
        hint = f" (the CSV's rows name {', '.join(seen)})" if seen else ""
        raise MemoError(
            "name the model the rows ran: --model llama-3.1-8b (felab's table), --config "
            f"config.json or --gguf FILE{hint}"
        )
    if inputs.hosts:
        all_hosts = sorted({r.get("host", "") for r in rows})
        unknown = [h for h in inputs.hosts if h not in all_hosts]
        if unknown:
            raise MemoError(
                f"no rows come from host(s) {', '.join(unknown)}; the CSV's hosts are "
                f"{', '.join(all_hosts)}"
            )
        rows = [r for r in rows if r.get("host") in inputs.hosts]

    shape = resolve_shape(config=inputs.config, gguf=inputs.gguf, model=inputs.model)
    weights, weights_note = _weights(inputs, shape)
    latest = _latest(rows, source)
    hosts = sorted({row["host"] for row, _, _ in latest})
    machines = _machines(inputs.machines, hosts, weights, weights_note)

    timing: list[TimingRow] = []
    for row, stamp, older in latest:
        where = f"{source}, {row['server']} on {row['host']}"
        machine = machines[row["host"]]
        tps = _fraction(row, "writing_tps_p50", where)
        check = speed_limit.check_speed(tps, machine.limit) if tps and tps > 0 else None
        timing.append(
            TimingRow(
                host=row["host"],
                server=row["server"] or row["target"],
                target=row["target"],
                server_version=row["server_version"],
                model=row["model"],
                preset=row["preset"],
                measured_at=stamp,
                concurrency=_int(row, "concurrency", where),
                rate=(row.get("rate") or "").strip(),
                requests=_int(row, "requests", where),
                ok=_int(row, "ok", where),
                writing_tps=tps if check is not None else None,
                ttft_p50_s=_fraction(row, "ttft_p50_s", where),
                ttft_p95_s=_fraction(row, "ttft_p95_s", where),
                machine=machine,
                check=check,
                older_rows=older,
            )
        )
    timing.sort(key=lambda r: (r.host, _server_rank(r.server)))

    per_token = kv.kv_bytes_per_token(shape, inputs.kv_dtype)
    per_token_fp8 = kv.kv_bytes_per_token(shape, "fp8")
    reading_len = None
    if inputs.vllm_log is not None and inputs.max_len is None:
        reading_len = vllm_log.parse_log_file(inputs.vllm_log).max_len
    max_len = inputs.max_len or reading_len or DEFAULT_MAX_LEN
    contexts, context_notes = _contexts(inputs, shape, max_len)
    budget = _budget(inputs, per_token, max_len)
    if budget.base.kv_dtype and kv.kv_dtype(budget.base.kv_dtype) != per_token.key_dtype:
        per_token = kv.kv_bytes_per_token(shape, budget.base.kv_dtype)  # the log's own type

    concurrency: list[ConcurrencyRow] = []
    for ctx in contexts:
        here = budget.at(ctx)
        fp8 = None
        if per_token.key_dtype.bytes_per_element > 1:
            fp8 = cap.what_if(here, kv_from=per_token.key_dtype.name, kv_to="fp8").after
        concurrency.append(
            ConcurrencyRow(
                ctx, kv.kv_memory(ctx, per_token), kv.kv_memory(ctx, per_token_fp8), here, fp8
            )
        )
    what_ifs = cap.standard_what_ifs(
        budget.at(max_len), kv_from=per_token.key_dtype.name, kv_to="fp8"
    )
    distinct: list[Machine] = []
    for m in machines.values():
        if m not in distinct:
            distinct.append(m)
    return Memo(
        source=source,
        rows_read=len(rows),
        machines=tuple(distinct),
        shape=shape,
        weights=weights,
        weights_note=weights_note,
        rows=tuple(timing),
        row_notes=tuple(_row_notes(timing, weights)),
        per_token=per_token,
        per_token_fp8=per_token_fp8,
        max_len=max_len,
        budget=budget,
        concurrency=tuple(concurrency),
        what_ifs=what_ifs,
        flags=_flags(shape, per_token, per_token_fp8, budget, max_len),
        context_notes=tuple(context_notes),
    )


# ---------------------------------------------------------------- Markdown


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    align = ["---:" if i in right else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(_cell(h) for h in head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _seconds(value: Fraction | None) -> str:
    return "-" if value is None else decimal_text(value, 2)


def _when_text(stamp: datetime) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M")


def _plural(n: int, word: str) -> str:
    return f"{whole_text(n)} {word}{'' if n == 1 else 's'}"


def _summary(memo: Memo) -> list[str]:
    lines: list[str] = []
    believable = [r for r in memo.rows if r.check is not None and not r.check.impossible]
    if believable:
        best = max(believable, key=lambda r: r.check.share if r.check else Fraction(0))
        assert best.check is not None
        who = "for one user" if best.concurrency == 1 and not best.rate else "per user"
        lines.append(
            f"- **Fastest believable server: {best.name}**, {decimal_text(best.check.measured, 1)} "
            f"tokens per second {who}, {best.percent_text} of the speed limit."
        )
    for m in memo.machines:
        lines.append(
            f"- **Speed limit on {m.label}: {about_text(m.limit.tokens_per_second)} tokens per "
            f"second** for one conversation ({m.bandwidth_text} ÷ {gb_text(memo.weights, 1)}); "
            "measured runs usually reach 55-85 % of it."
        )
    head = memo.headline
    fp8 = (
        f"; an 8-bit (fp8) cache makes it **{whole_text(head.fp8.whole_requests)}**"
        if head.fp8 is not None
        else ""
    )
    lines.append(
        f"- **{_plural(head.capacity.whole_requests, 'conversation')} at once** at "
        f"{whole_text(memo.max_len)} tokens each, with {memo.budget.words} (worst case, every "
        f"conversation full length){fp8}."
    )
    if memo.impossible:
        names = ", ".join(r.name for r in memo.impossible)
        lines.append(
            f"- **{_plural(len(memo.impossible), 'row')} above the speed limit cannot be right:** "
            f"{names}. Find the cause before quoting it."
        )
    lines.append(
        "- **Try first:** prefix caching, chunked prefill and an fp8 cache. Then, and only then, "
        "argue about hardware."
    )
    return lines


def _machine_and_model(memo: Memo) -> list[str]:
    rows: list[list[str]] = []
    for m in memo.machines:
        what = m.label if m.chip is None else f"{m.chip.name} ({m.chip.family}, {m.chip.memory})"
        rows.append([f"machine ({', '.join(m.hosts)})", what])
        rows.append(["memory bandwidth", m.bandwidth_text])
    s = memo.shape
    rows.append(["model", s.name])
    rows.append(["weights read per token", f"{both_ways(memo.weights)} ({memo.weights_note})"])
    rows.append(["KV cache type", memo.per_token.key_dtype.name])
    if s.context_length:
        rows.append(["trained context", f"{whole_text(s.context_length)} tokens"])
    rows.append(["model shape from", s.source])
    out = ["## Machine and model", "", _table(["", "value"], rows), ""]
    for m in memo.machines:
        if m.chip is not None:
            out += [f"Bandwidth source: {m.chip.source}.", ""]
        out += [m.limit.explanation, ""]
    return [*out, s.describe(), ""]


def _timing(memo: Memo, chart: str | None) -> list[str]:
    out = [
        "## Latest timing rows",
        "",
        "The newest run of each server on each machine. Writing speed is what one person sees "
        "appear each second once the reply starts (p50, tokens per second); the percentage sets "
        "it against the machine's speed limit.",
        "",
    ]
    head = [
        "machine",
        "server",
        "model",
        "preset",
        "users",
        "measured (UTC)",
        "writing speed",
        "% of speed limit",
        "verdict",
        "TTFT p50 / p95 (s)",
    ]
    rows = [
        [
            r.host,
            r.server_label + (f" {r.server_version}" if r.server_version else ""),
            r.model or "-",
            r.preset or "-",
            r.users_text,
            _when_text(r.measured_at),
            decimal_text(r.writing_tps, 1) if r.writing_tps is not None else "-",
            r.percent_text,
            f"**{r.verdict}**" if r.verdict == "impossible" else r.verdict,
            f"{_seconds(r.ttft_p50_s)} / {_seconds(r.ttft_p95_s)}",
        ]
        for r in memo.rows
    ]
    out += [_table(head, rows, right=(4, 6, 7, 9)), ""]
    older = sum(r.older_rows for r in memo.rows)
    if older:
        verb = "is" if older == 1 else "are"
        out += [
            f"{_plural(older, 'older row')} for the same servers {verb} left out: only the "
            "newest run of each counts.",
            "",
        ]
    for r in memo.impossible:
        assert r.check is not None
        out += [f"**{r.name} is impossible.** {r.check.explanation}", ""]
    for note in memo.row_notes:
        out += [note, ""]
    if chart:
        out += [f"![Writing speed per server against the speed limit]({chart})", ""]
    return out


def _kv_math(memo: Memo) -> list[str]:
    dtype = memo.per_token.key_dtype.name
    out = ["## KV cache math", "", memo.per_token.explanation, ""]
    head = ["tokens in one conversation", f"cache ({dtype})"]
    rows = [
        [
            whole_text(c.context),
            f"{mib_text(c.per_conversation.bytes)} = {gb_text(c.per_conversation.bytes)}",
        ]
        for c in memo.concurrency
    ]
    if not memo.already_fp8:
        out += [
            f"In fp8 (8 bits per number): {memo.per_token_fp8.formula} "
            f"({binary_size_text(memo.per_token_fp8.bytes)}), half as much.",
            "",
        ]
        head.append("cache (fp8)")
        for row, c in zip(rows, memo.concurrency, strict=True):
            fp8 = c.per_conversation_fp8.bytes
            row.append(f"{mib_text(fp8)} = {gb_text(fp8)}")
    out += [_table(head, rows, right=range(len(head))), ""]
    for note in memo.context_notes:
        out += [note, ""]
    return out


def _concurrency(memo: Memo, chart: str | None) -> list[str]:
    out = [
        "## Conversations at once",
        "",
        f"Cache memory: {memo.budget.source}",
        "",
        memo.headline.capacity.explanation,
        "",
    ]
    head = [
        "tokens per conversation",
        "cache tokens ÷ length",
        f"conversations ({memo.per_token.key_dtype.name})",
    ]
    rows = [
        [
            whole_text(c.context) + (" (as planned)" if c.context == memo.max_len else ""),
            decimal_text(c.capacity.concurrency, 2),
            whole_text(c.capacity.whole_requests),
        ]
        for c in memo.concurrency
    ]
    if not memo.already_fp8:
        head += ["conversations (fp8 cache)", "fp8 gain"]
        for row, c in zip(rows, memo.concurrency, strict=True):
            row.append("-" if c.fp8 is None else whole_text(c.fp8.whole_requests))
            row.append("-" if c.fp8_factor is None else f"x{tidy_text(c.fp8_factor)}")
    out += [
        _table(head, rows, right=range(len(head))),
        "",
        "Each figure is the worst case, every conversation using its full length: what you can "
        "promise. Shorter conversations leave room for more.",
        "",
        *(f"- {w.explanation}" for w in memo.what_ifs),
        "",
        "Before capping the length, check how long the customer's real conversations are: a "
        "limit below what they need breaks their product.",
        "",
    ]
    if chart:
        out += [f"![Conversations at once by context length]({chart})", ""]
    return out


def _flag_lines(memo: Memo) -> list[str]:
    out = [
        "## Flags to try first",
        "",
        "These are vLLM's settings, the server built for many users at once. Same machine, same "
        "model: only the settings change.",
        "",
    ]
    for i, f in enumerate(memo.flags, 1):
        out += [f"{i}. **{f.title}** (`{f.flag}`): {f.buys}", f"   {f.numbers}"]
        if f.default_note:
            out.append(f"   {f.default_note}")
        out.append("")
    return [*out, "Then, and only then, argue about hardware.", ""]


_HOW_TO_READ = [
    "## How to read this memo",
    "",
    "- Speed limit: to write one token the machine reads every weight once, so one conversation "
    "can never write faster than memory bandwidth ÷ bytes of weights. Measured runs usually land "
    "at 55-85 % of it; above 100 % is impossible and means the measurement is off.",
    "- KV cache (notes): the model's notes on each conversation so far, kept in memory; they grow "
    "with every token.",
    "- Conversations at once: cache tokens ÷ tokens per conversation, counted in whole blocks.",
    "- Every number here comes from felab's sizing functions; rerun `felab memo` after new "
    "`felab bench` runs.",
    "",
]


def chart_names(stem: str = "memo") -> tuple[str, str]:
    """The two chart files for a memo named STEM.md: STEM-speed.png, STEM-concurrency.png."""
    return f"{stem}-speed.png", f"{stem}-concurrency.png"


def render_markdown(memo: Memo, *, charts: tuple[str, str] | None = chart_names()) -> str:
    """The memo as Markdown a person can hand a customer; `charts` are linked by file name."""
    newest = max((r.measured_at for r in memo.rows), default=None)
    intro = (
        f"Written by `felab memo` from `{memo.source}`: {_plural(memo.rows_read, 'timing row')}, "
        "the newest run per server and machine shown"
        + (f" (latest {_when_text(newest)} UTC)." if newest else ".")
    )
    out = [f"# {memo.title}", "", intro, "", "## Summary", "", *_summary(memo), ""]
    out += _machine_and_model(memo)
    out += _timing(memo, charts[0] if charts else None)
    out += _kv_math(memo)
    out += _concurrency(memo, charts[1] if charts else None)
    out += _flag_lines(memo)
    out += _HOW_TO_READ
    return "\n".join(out)


# ---------------------------------------------------------------- charts


_LIMIT_COLORS = ("#333333", "#8e44ad", "#b9770e", "#117a65")


def write_charts(memo: Memo, directory: Path, stem: str = "memo") -> tuple[Path, Path]:
    """Two PNGs beside the memo: writing speed vs the speed limit, conversations vs context."""
    from matplotlib.figure import Figure  # no pyplot: no global backend or window state

    directory.mkdir(parents=True, exist_ok=True)
    speed_name, conc_name = chart_names(stem)
    speed_path, conc_path = directory / speed_name, directory / conc_name

    fig = Figure(figsize=(8, 4.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    labels = [
        r.server_label if len(memo.machines) == 1 else f"{r.server_label}\n{r.host}"
        for r in memo.rows
    ]
    values = [float(r.writing_tps) if r.writing_tps is not None else 0.0 for r in memo.rows]
    colors = [
        "#c0392b" if r.check is not None and r.check.impossible else "#2e86c1" for r in memo.rows
    ]
    bars = ax.bar(range(len(values)), values, color=colors, width=0.6, zorder=2)
    top = max([*values, *(float(m.limit.tokens_per_second) for m in memo.machines)]) * 1.32
    for bar, r in zip(bars, memo.rows, strict=True):
        text = (
            "no data"
            if r.writing_tps is None
            else (f"{decimal_text(r.writing_tps, 1)}\n{r.percent_text}")
        )
        if r.check is not None and r.check.impossible:
            text += "\nimpossible"
        ax.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    for n, m in enumerate(memo.machines):
        idx = [i for i, r in enumerate(memo.rows) if r.machine == m]
        limit = float(m.limit.tokens_per_second)
        lo, hi = min(idx) - 0.45, max(idx) + 0.45
        ax.hlines(
            limit,
            lo,
            hi,
            colors=_LIMIT_COLORS[n % len(_LIMIT_COLORS)],
            linestyles="--",
            zorder=3,
            label=f"speed limit, {m.label}: {about_text(m.limit.tokens_per_second)} tokens/s",
        )
        ax.fill_between(
            [lo, hi],
            limit * float(speed_limit.TYPICAL_LOW),
            limit * float(speed_limit.TYPICAL_HIGH),
            color="#7dcea0",
            alpha=0.25,
            zorder=1,
            label="typical runs: 55-85 % of the limit" if n == 0 else None,
        )
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylim(0, top)
    ax.set_ylabel("writing speed, tokens per second (p50)")
    ax.set_title(f"{memo.shape.name}: writing speed for one user vs the speed limit", fontsize=11)
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(loc="upper left", fontsize=9)
    fig.savefig(speed_path, format="png", metadata={"Software": None})

    fig = Figure(figsize=(8, 4.6), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(len(memo.concurrency)))
    base = [c.capacity.whole_requests for c in memo.concurrency]
    dtype = memo.per_token.key_dtype.name
    has_fp8 = any(c.fp8 is not None for c in memo.concurrency)
    width = 0.38 if has_fp8 else 0.6
    shift = width / 2 if has_fp8 else 0.0
    b1 = ax.bar(
        [x - shift for x in xs], base, width, color="#2e86c1", label=f"{dtype} cache", zorder=2
    )
    ax.bar_label(b1, fontsize=8, padding=2)
    if has_fp8:
        fp8 = [c.fp8.whole_requests if c.fp8 is not None else 0 for c in memo.concurrency]
        b2 = ax.bar(
            [x + shift for x in xs], fp8, width, color="#e67e22", label="fp8 cache", zorder=2
        )
        ax.bar_label(b2, fontsize=8, padding=2)
    ticks = [
        _k(c.context) + ("\n(as planned)" if c.context == memo.max_len else "")
        for c in memo.concurrency
    ]
    ax.set_xticks(xs, ticks)
    ax.set_xlabel("tokens per conversation (max model length)")
    ax.set_ylabel("conversations at once (worst case)")
    ax.set_title(f"{memo.shape.name}: conversations that fit in {memo.budget.short}", fontsize=11)
    ax.set_ylim(
        0, max([*base, *([c.fp8.whole_requests for c in memo.concurrency if c.fp8])]) * 1.15 + 1
    )
    ax.grid(axis="y", alpha=0.3, zorder=0)
    ax.legend(fontsize=9)
    fig.savefig(conc_path, format="png", metadata={"Software": None})
    return speed_path, conc_path


def _k(tokens: int) -> str:
    """8192 -> '8K', 131072 -> '128K', 1000 -> '1,000': how people name context lengths."""
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else whole_text(tokens)
