"""What the memo is made of: its inputs (the machine, the model, the contexts) and the
figures it holds, with the course's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from fractions import Fraction
from pathlib import Path

from felab_core.engine.server_kinds import ServerKind
from felab_core.sizing import capacity as cap
from felab_core.sizing import kv, speed_limit, vllm_log
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import (
    GB,
    tidy_text,
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
    kv_dtype: str | None = None  # f16 unless given; a vLLM log's own type is checked against it
    kv_memory: str | int | Fraction | None = None
    kv_tokens: int | None = None
    blocks: int | None = None
    block_size: int | None = None
    vllm_log: Path | None = None
    hosts: tuple[str, ...] = ()

    @property
    def model_flag(self) -> str:
        """The flag that named the model, as a message quotes it: --model NAME, --config PATH."""
        if self.model is not None:
            return f"--model {self.model}"
        return f"--config {self.config}" if self.config is not None else f"--gguf {self.gguf}"


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
    """The newest run of one server on one machine that had a request answered, set against
    that machine's speed limit."""

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
    #: A newer run of this server whose every request failed, passed over for this one.
    failed_after: datetime | None = None

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
            return "every request failed" if self.ok == 0 else "no writing speed"
        return self.check.verdict

    @property
    def percent_text(self) -> str:
        if self.check is None:
            return "-"
        return self.check.percent_text


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
    #: What one machine holds: weights + cache = their sum, as the memory check summed them.
    memory_line: str = ""
    #: Each machine's speed limit at the planned length, its cache read with the weights.
    limit_notes: tuple[str, ...] = ()
    #: What the memory sum says beside the machine: --model-bytes against a vLLM log's weights.
    memory_notes: tuple[str, ...] = ()

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
