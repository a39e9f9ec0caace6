"""A vLLM log's startups, told apart: only the last one that printed its cache is read.

A log a server appended to across restarts holds several startups; each figure of the reading
had been taken from the last line that gave it, wherever it stood (the restart's cache in
tokens beside the first startup's concurrency line, max length and cache memory; the first
startup's kv_cache_dtype=fp8 carried into a restart that named none; a block_size line after
the cache applied to the cache before it). A startup's own settings (config, weights, memory,
block size, cache type) come before its cache lines: one of them after a cache line, or a
second cache line of a kind already seen, begins the next startup (the course's summary notes,
"# GPU blocks 8,234" without a colon, are not a log in order: their settings may follow).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from felab_core.sizing.cache_figures import OneStartupCache
from felab_core.sizing.shape_agreement import Reading, hold_together
from felab_core.sizing.vllm_log_line import LogLine, OneStartup


@dataclass
class Startup:
    """The KV-cache facts of one startup's lines (each the last such line within it)."""

    source: str
    first_line: int = 0
    tokens_hits: list[tuple[str, int]] = field(default_factory=list)
    conc_hits: list[tuple[int, Fraction]] = field(default_factory=list)
    block_hits: list[tuple[str, int, int | None, bool]] = field(default_factory=list)
    one_line: bool = False
    block_size: int | None = None
    max_len_cfg: int | None = None
    max_len_line: int | None = None
    kv_dtype: str | None = None
    model_dtype: str | None = None
    kv_memory: Fraction | None = None
    kv_slack: Fraction = Fraction(0)
    weights: Fraction | None = None
    version: str | None = None
    gpus: int | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        self._settings = OneStartup(self.source)
        self._cache = OneStartupCache(self.source)

    @property
    def has_cache(self) -> bool:
        return bool(self.tokens_hits or self.block_hits)

    def begins_another(self, found: LogLine) -> bool:
        """Whether this line belongs to the next startup rather than this one."""
        settings = (
            found.block_size, found.max_len, found.kv_dtype, found.model_dtype,
            found.kv_memory, found.weights, found.version, found.gpus, found.model,
        )  # fmt: skip
        summary = not self.tokens_hits and all(not hit[3] for hit in self.block_hits)
        if self.has_cache and not summary and any(value is not None for value in settings):
            return True
        if found.tokens is not None and self.tokens_hits:
            return True
        if found.blocks is not None and self.has_cache:
            return True
        return found.conc is not None and bool(self.conc_hits)

    def add(self, number: int, found: LogLine) -> None:
        self.first_line = self.first_line or number
        self._settings.add(number, found)
        self._cache.add(number, found)
        if found.tokens is not None:
            self.tokens_hits.append(found.tokens)
            self.one_line = self.one_line or found.conc is not None
        if found.conc is not None:
            self.conc_hits.append(found.conc)
        if found.blocks is not None:
            self.block_hits.append(found.blocks)
        self.block_size = found.block_size or self.block_size
        if found.max_len is not None:
            self.max_len_cfg, self.max_len_line = found.max_len, number
        self.kv_dtype = found.kv_dtype or self.kv_dtype
        self.model_dtype = found.model_dtype or self.model_dtype
        if found.kv_memory is not None:  # 0 is a figure
            self.kv_memory, self.kv_slack = found.kv_memory, found.kv_memory_slack
        self.weights = self.weights if found.weights is None else found.weights
        self.version = self.version or found.version
        self.gpus = found.gpus or self.gpus
        self.model = self.model or found.model  # the engine config's, before any later alias


class Startups:
    """A log's lines sorted into startups as they come; `last` is the last that printed a cache,
    `skipped_before` the startups with a cache before it, `later_from` the first line of lines
    after it that printed none (a restart cut short)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.current = Startup(source)
        self.last: Startup | None = None
        self.skipped_before = 0

    def add(self, number: int, found: LogLine) -> None:
        if self.current.begins_another(found):
            if self.current.has_cache:
                if self.last is not None:
                    self.skipped_before += 1
                self.last = self.current
            self.current = Startup(self.source)
        self.current.add(number, found)

    def close(self) -> tuple[Startup | None, int, int | None]:
        """(the startup read, how many startups with a cache came before it, the first line of
        a later startup that printed no cache, if any)."""
        if self.current.has_cache:
            if self.last is not None:
                self.skipped_before += 1
            return self.current, self.skipped_before, None
        later = self.current.first_line or None
        return self.last, self.skipped_before, later


def lengths_held(last: Startup, source: str) -> tuple[int | None, Fraction | None]:
    """The startup's max length and printed concurrency: its concurrency line's length held to
    its config's max_seq_len (vLLM prints the line for the length it runs; 131,072 beside
    'for 8,192 tokens' had been read as 8,192 without a word)."""
    if not last.conc_hits:
        return last.max_len_cfg, None
    length, printed = last.conc_hits[-1]
    if last.max_len_cfg is not None:
        hold_together(
            "the max model length",
            Reading(length, f"{length:,} tokens ('Maximum concurrency for ...')", source),
            Reading(
                last.max_len_cfg,
                f"{last.max_len_cfg:,} (line {last.max_len_line:,}'s max length)",
                "the same startup",
            ),
            room="vLLM prints its concurrency for the length it runs",
            then="the log was edited or mixes two servers; give one startup's log, or the "
            "figures with --tokens (or --blocks) and --max-len",
        )
    return length, printed
