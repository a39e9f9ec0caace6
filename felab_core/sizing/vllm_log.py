"""vLLM's own account of its KV cache: startup log lines, or a live server's /metrics.

The wording has changed across releases; each format below is kept as a real excerpt under
tests/sizing/fixtures/ with where it came from:

- ``v0-blocks``: V0 engine (0.2 to 0.10): ``# GPU blocks: N, # CPU blocks: M`` (later
  ``# cuda blocks: ...``), from 0.6 on followed by ``Maximum concurrency for L tokens per
  request: X.XXx``.
- ``v1-blocks``: early V1 engine (0.7.1 to 0.7.2): ``# GPU blocks: N`` then the concurrency line.
- ``v1-tokens``: V1 engine (0.7.3 to about 0.2x): ``GPU KV cache size: T tokens`` then the
  concurrency line, numbers with thousands commas.
- ``v1-one-line``: current releases (0.32 here): ``CPU KV cache size: T tokens, Maximum
  concurrency for L tokens per request: X.XXx``, the device named (GPU, CPU, XPU ...).
- ``summary``: the course page's own notes ("# GPU blocks 8,234 · block size 16 tokens").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import IO

from felab_core.files import NamedFileError, refuse_special
from felab_core.sizing.cache_figures import (
    LOG_FIX,
    infer_block_size,
    memory_beside_tokens,
    printed_concurrency_fits,
)
from felab_core.sizing.capacity import (
    Capacity,
    capacity_from_blocks,
    capacity_from_tokens,
)
from felab_core.sizing.errors import SizingError
from felab_core.sizing.kv import kv_dtype as kv_dtype_named
from felab_core.sizing.units import GB, GiB, MiB, decimal_text, whole_text
from felab_core.sizing.vllm_log_line import (
    LINE_WORDS,
    check_memory_figures,
    read_line,
)
from felab_core.sizing.vllm_startups import Startups, lengths_held

_FORMATS = {
    "v0-blocks": "vLLM V0 engine (0.2 to 0.10): '# GPU blocks: N, # CPU blocks: M'",
    "v1-blocks": "early vLLM V1 engine (0.7.1 to 0.7.2): '# GPU blocks: N'",
    "v1-tokens": "vLLM V1 engine (0.7.3 on): 'GPU KV cache size: T tokens'",
    "v1-one-line": "current vLLM: 'GPU KV cache size: T tokens, Maximum concurrency ...'",
    "summary": "a summary in the course's words ('# GPU blocks 8,234', 'block size 16 tokens')",
    "metrics": "a live vLLM's /metrics (vllm:cache_config_info)",
}


@dataclass(frozen=True)
class VllmReading:
    """The KV-cache facts one vLLM log (or /metrics) gives, each None when it was not there."""

    format: str
    device: str | None = None
    gpu_blocks: int | None = None
    cpu_blocks: int | None = None
    block_size: int | None = None
    block_size_from: str | None = None
    tokens: int | None = None
    max_len: int | None = None
    printed_concurrency: Fraction | None = None
    kv_cache_dtype: str | None = None
    kv_memory_bytes: Fraction | None = None
    kv_memory_slack: Fraction = Fraction(0)  # the print's rounding: half its last digit
    weights_bytes: Fraction | None = None
    gpus: int | None = None  # tensor x pipeline parallel size, where the log gives it
    version: str | None = None
    occurrences: int = 1
    startups_skipped: int = 0  # earlier startups with a cache of their own, not read
    later_lines_from: int | None = None  # a later startup that printed no cache starts here
    source: str = ""
    lines_cut_at: int | None = None  # a log longer than MAX_LOG_LINES: only these were read
    model: str | None = None  # the model the startup served, as its log names it

    @property
    def format_words(self) -> str:
        return _FORMATS.get(self.format, self.format)

    def capacity(
        self,
        *,
        block_size: int | None = None,
        max_len: int | None = None,
        kv_dtype: str | None = None,
    ) -> Capacity:
        """Turn the reading into capacity and worst-case concurrency.

        `block_size`, `max_len` and `kv_dtype` fill in what the log did not print; one that
        the log contradicts (its own figure, or a block size its concurrency line rules out)
        is refused, as the server would not run so.
        """
        length = self.max_len or max_len
        if length is None:
            said = (
                f"{self.source} and /v1/models name no max model length"
                if self.format == "metrics"
                else "this log names no max model length (no 'Maximum concurrency for L tokens' "
                "line)"
            )
            raise SizingError(
                f"{said}; pass --max-len with the --max-model-len the server was started with"
            )
        bs = self.block_size
        if max_len is not None and self.max_len is not None and max_len != self.max_len:
            # the "as started" row is how the server runs: 4,096 given beside a log of 8,192
            # had become the starting point every what-if was measured from
            raise SizingError(
                f"{self.source} says the server runs --max-model-len {whole_text(self.max_len)}, "
                f"and --max-len {whole_text(max_len)} would not be how it runs: leave --max-len "
                "out (size capacity --try-max-len shows a shorter length as a what-if)"
            )
        if block_size is not None and block_size != bs:
            self._block_size_fits(block_size, length)
            bs = block_size
        dtype = _dtype_name(self.kv_cache_dtype)
        if self.kv_cache_dtype is not None and dtype is None:  # fp99 was read as f16
            raise SizingError(
                f"{self.source} gives the cache type {self.kv_cache_dtype[:40]!r}, which felab "
                "does not know (auto, float16, bfloat16, float32 and the fp8 kinds): give the "
                "figures with --tokens (or --blocks) and --kv-dtype"
            )
        if dtype is not None and kv_dtype is not None and kv_dtype.strip().lower() != "auto":
            typed = kv_dtype_named(kv_dtype)
            if typed.bytes_per_element != kv_dtype_named(dtype).bytes_per_element:
                raise SizingError(  # --kv-dtype f16 beside a log of fp8 was dropped unsaid
                    f"{self.source} gives the cache type {self.kv_cache_dtype}, and --kv-dtype "
                    f"{kv_dtype.strip()[:40]} would not be how it runs: leave --kv-dtype out "
                    "(size capacity --try-dtype shows another type as a what-if)"
                )
        dtype = dtype or (kv_dtype_named(kv_dtype).name if kv_dtype is not None else None)
        if self.gpu_blocks is not None:
            if bs is None:
                raise SizingError(
                    f"{'the server' if self.format == 'metrics' else 'the log'} gives "
                    f"{whole_text(self.gpu_blocks)} block{'' if self.gpu_blocks == 1 else 's'} "
                    "but not their size; pass "
                    "--block-size (vLLM's default is 16 tokens on NVIDIA GPUs)"
                )
            return self._holds_one(capacity_from_blocks(self.gpu_blocks, bs, length, dtype))
        if self.tokens is None:
            raise SizingError(
                "found neither the cache's blocks nor its size in tokens: give --blocks and "
                "--block-size, or --tokens (vLLM's startup log prints them)"
            )
        return self._holds_one(capacity_from_tokens(self.tokens, length, bs, dtype))

    def memory_holds_tokens(self, per_token: tuple[Fraction, str] | None = None) -> None:
        """Refuse cache memory too small for the cache it gives (0.001 GiB beside 100,000 tokens
        had been bounded only by the largest GPU): at the model's bytes a token (`per_token`:
        bytes, whose) or the least any model takes."""
        tokens = self.tokens
        if tokens is None and self.gpu_blocks is not None and self.block_size is not None:
            tokens = self.gpu_blocks * self.block_size
        if self.kv_memory_bytes is None or tokens is None:
            return
        live = self.format == "metrics"
        memory_beside_tokens(
            (
                self.kv_memory_bytes,
                self.kv_memory_slack,
                self.source + (" (kv_cache_memory_bytes)" if live else ""),
            ),
            (tokens, "its blocks x block size" if self.tokens is None else "as it gives it"),
            per_token,
            fix=(
                "check the server, or give the figures you trust with --tokens (or --blocks) and "
                "--max-len"
                if live
                else LOG_FIX
            ),
        )

    def _holds_one(self, base: Capacity) -> Capacity:
        """Refuse a cache that cannot hold one conversation of the max length: vLLM refuses to
        start so ("0 conversations at once" had been written up from a log of 1 token). A model
        mixing kinds of layers can count fewer tokens than its max length and still hold one
        request; vLLM's printed concurrency of 1x or more says so, and is believed."""
        if base.tokens >= base.max_len or (
            self.printed_concurrency is not None and self.printed_concurrency >= 1
        ):
            return base
        length = whole_text(base.max_len)
        where = f"--max-len {length}" if self.max_len is None else f"its max model length {length}"
        live = self.format == "metrics"
        why = "check the server" if live else "the log was edited or is from a failed start"
        raise SizingError(
            f"{self.source} {'reports' if live else 'gives'} a cache of "
            f"{whole_text(base.tokens)} token{'' if base.tokens == 1 else 's'}, which cannot "
            f"hold one conversation of {where}: vLLM refuses to start with such a cache ({why}); "
            "give a started server's figures with --tokens (or --blocks) and --max-len"
        )

    def _block_size_fits(self, block_size: int, length: int) -> None:
        """Refuse a typed --block-size the reading contradicts: its own block size, or the one
        its concurrency line works out to (--block-size 32 had doubled a log's 462.97x)."""
        said = self.block_size or 0
        if self.block_size_from == "log":
            raise SizingError(
                f"{self.source} gives blocks of {whole_text(said)} "
                f"token{'' if said == 1 else 's'}, and --block-size {whole_text(block_size)} "
                "would not be how it runs: leave --block-size out"
            )
        if self.block_size_from != "inferred" or self.printed_concurrency is None:
            return
        assert self.gpu_blocks is not None
        worked = Fraction(self.gpu_blocks * block_size, length)
        printed = self.printed_concurrency
        if decimal_text(worked, 2, group=False) != decimal_text(printed, 2, group=False):
            raise SizingError(
                f"{self.source} gives a maximum concurrency of {decimal_text(printed, 2)}x for "
                f"{whole_text(length)} tokens per request, which {whole_text(self.gpu_blocks)} "
                f"blocks give at {whole_text(said)} tokens a block; "
                f"--block-size {whole_text(block_size)} would give {decimal_text(worked, 2)}x: "
                "leave --block-size out"
            )

    def consistency_notes(self, block_size: int | None = None) -> tuple[str, ...]:
        """Where the figures disagree: the cache in tokens with blocks x block size, and the
        printed concurrency with blocks x block size ÷ max length (`block_size`: the one a
        flag gave where the reading has none)."""
        notes = []
        if None not in (self.tokens, self.gpu_blocks, self.block_size):
            assert self.tokens is not None and self.gpu_blocks and self.block_size
            blocks_hold = self.gpu_blocks * self.block_size
            if self.tokens != blocks_hold:  # 1 token beside 8,234 blocks of 16 went unsaid
                notes.append(
                    f"vLLM gives a cache of {whole_text(self.tokens)} "
                    f"token{'' if self.tokens == 1 else 's'}, but {whole_text(self.gpu_blocks)} "
                    f"blocks x {whole_text(self.block_size)} = {whole_text(blocks_hold)}: the "
                    "blocks are used here; a model mixing kinds of layers can count so, "
                    "otherwise check the server"
                )
        return (*notes, *self._concurrency_notes(self.block_size or block_size))

    def _concurrency_notes(self, block_size: int | None) -> tuple[str, ...]:
        if self.printed_concurrency is None or self.max_len is None:
            return ()
        tokens = self.tokens
        if self.gpu_blocks is not None and block_size is not None:
            tokens = self.gpu_blocks * block_size
        if tokens is None:
            return ()
        worked = Fraction(tokens, self.max_len)
        if decimal_text(worked, 2, group=False) == decimal_text(
            self.printed_concurrency, 2, group=False
        ):
            return ()
        said = (
            f"vLLM printed {decimal_text(self.printed_concurrency, 2)}x but {whole_text(tokens)} ÷ "
            f"{whole_text(self.max_len)} = {decimal_text(worked, 2)}"
        )
        apart = self.printed_concurrency / worked if worked else None
        if apart is not None and Fraction(1, 2) <= apart <= 2:
            return (
                f"{said}: for models mixing several kinds of layers (sliding window, Mamba, "
                "several cache groups) vLLM counts each request's blocks per group, so its own "
                "figure is the one to trust",
            )
        return (  # 19.53x beside 1.22 (16x) had been called "the one to trust" (sweep 22 C11)
            f"{said}, {decimal_text(apart or 0, 1)}x apart: a model mixing kinds of layers can "
            f"count so, or {whole_text(self.max_len)} is not the length vLLM printed its figure "
            "for; the table uses tokens ÷ length, the worst case: check the server's "
            "--max-model-len",
        )

    @property
    def explanation(self) -> str:
        who = f"vLLM {self.version}" if self.version else "vLLM"
        where = f" ({self.device})" if self.device else ""
        facts: list[str] = []
        if self.gpu_blocks is not None:
            facts.append(
                f"{whole_text(self.gpu_blocks)} cache block{'' if self.gpu_blocks == 1 else 's'}"
            )
        if self.tokens is not None:
            facts.append(f"a cache of {whole_text(self.tokens)} tokens")
        if self.block_size is not None:
            how = {"log": "", "inferred": " (worked out from its concurrency line)"}.get(
                self.block_size_from or "", ""
            )
            facts.append(f"blocks of {self.block_size} tokens{how}")
        if self.printed_concurrency is not None and self.max_len is not None:
            facts.append(
                f"a maximum concurrency of {decimal_text(self.printed_concurrency, 2)}x for "
                f"{whole_text(self.max_len)} tokens per request"
            )
        verb = "reports" if self.format == "metrics" else "logged"
        text = f"{who}{where} {verb} " + ", ".join(facts) + f" [{self.format_words}]."
        if self.kv_memory_bytes is not None:
            text += (
                f" Memory left for the cache: {decimal_text(self.kv_memory_bytes / GiB, 2)} GiB."
            )
        if self.weights_bytes is not None:
            text += f" Weights took {decimal_text(self.weights_bytes / GB, 2)} GB."
        if self.occurrences > 1:
            text += (
                f" The KV lines appear {self.occurrences} times (several workers or restarts); "
                "the last startup's are used."
            )
        if self.startups_skipped:
            n = self.startups_skipped
            text += (
                f" {n} earlier startup{'' if n == 1 else 's'} in the log "
                f"{'was' if n == 1 else 'were'} skipped: every figure here is the last startup's "
                "own, none borrowed."
            )
        if self.later_lines_from is not None:
            text += (
                f" The lines from line {self.later_lines_from:,} begin another startup that "
                "printed no cache (a restart cut short?): not read."
            )
        if self.lines_cut_at is not None:
            text += (
                f" Only the first {self.lines_cut_at:,} lines of the log were read: a restart "
                "after them is not seen here."
            )
        return text


def _dtype_name(value: str | None) -> str | None:
    if value is None:
        return None
    if value in ("auto", "float16", "bfloat16", "half"):
        return "f16" if value != "bfloat16" else "bf16"
    if value in ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"):  # not fp8_garbage
        return "fp8"
    if value in ("float32", "float"):
        return "f32"
    return None


def parse_log(text: str | Iterable[str], source: str = "log") -> VllmReading:
    """Read the KV-cache lines of a vLLM startup log (any supported release) into one reading:
    its text, or its lines one by one (a file is read so: felab_core.sizing.vllm_log)."""
    lines = text.split("\n") if isinstance(text, str) else text  # \r is a progress bar's
    startups = Startups(source)
    read = 0
    for number, line in enumerate(lines, 1):
        if not any(word in line for word in LINE_WORDS):  # most of a long log: a cheap look
            continue
        read += len(line)
        if read > MOST_READ_BYTES:
            raise SizingError(
                f"{source}: over {MOST_READ_BYTES // MiB} MiB of lines that name vLLM's cache "
                f"settings by line {number:,}, where a startup writes a few kB: give the "
                "startup's part of the log (from its start until 'Application startup "
                "complete'), e.g. head -n 2000 of it"
            )
        try:
            found = read_line(line)
        except SizingError as exc:
            raise SizingError(f"{source}, line {number}: {exc}") from None
        startups.add(number, found)
    last, skipped, later = startups.close()

    if last is None:
        raise SizingError(
            f"no KV-cache lines in {source}: felab looks for 'GPU KV cache size: N tokens', "
            "'# GPU blocks: N' and 'Maximum concurrency for L tokens per request'. Give vLLM's "
            "startup log from the start until 'Application startup complete' (the lines come "
            "after the weights load); a log cut short or from another server has none."
        )

    max_len, printed = lengths_held(last, source)
    tokens_hits, block_hits, block_size = last.tokens_hits, last.block_hits, last.block_size
    weights, kv_memory, kv_dtype, model_dtype = (
        last.weights,
        last.kv_memory,
        last.kv_dtype,
        last.model_dtype,
    )
    device: str | None = None
    gpu_blocks = cpu_blocks = tokens = None
    if tokens_hits:
        device, tokens = tokens_hits[-1]
        fmt = "v1-one-line" if last.one_line else "v1-tokens"
        occurrences = skipped + len(tokens_hits)
    else:
        dev, gpu_blocks, cpu_blocks, colon = block_hits[-1]
        device = "GPU" if dev.lower() == "cuda" else dev.upper() if len(dev) <= 4 else dev
        if not colon:
            fmt = "summary"
        elif cpu_blocks is not None:
            fmt = "v0-blocks"
        else:
            fmt = "v1-blocks"
        occurrences = skipped + len(block_hits)

    check_memory_figures(source, device, (weights, kv_memory))
    if printed is not None and max_len is not None:  # both from one concurrency line
        printed_concurrency_fits(printed, max_len, (tokens, gpu_blocks, block_size), source)
    block_size_from = "log" if block_size is not None else None
    if block_size is None and gpu_blocks is not None and printed is not None and max_len:
        block_size = infer_block_size(gpu_blocks, max_len, printed)
        block_size_from = "inferred" if block_size is not None else None

    return VllmReading(
        format=fmt,
        device=device,
        gpu_blocks=gpu_blocks,
        cpu_blocks=cpu_blocks,
        block_size=block_size,
        block_size_from=block_size_from,
        tokens=tokens,
        max_len=max_len,
        printed_concurrency=printed,
        kv_cache_dtype=model_dtype if kv_dtype == "auto" and model_dtype else kv_dtype,
        kv_memory_bytes=kv_memory,
        kv_memory_slack=last.kv_slack,
        weights_bytes=weights,
        gpus=last.gpus,
        model=last.model,
        version=last.version,
        occurrences=occurrences,
        startups_skipped=skipped,
        later_lines_from=later,
        source=source,
    )


#: The most bytes of such lines read: a startup writes a few kB of them, a server's log over
#: months a few MB; every pattern over 150 MB of them had run past 30 s.
MOST_READ_BYTES = 32 * MiB
#: A startup is a few hundred lines, and a long-running server's log a few million: past these
#: the rest is not read (a 240 MB log of short lines took 6 GB and ran past 30 s whole).
MAX_LOG_LINES = 2_000_000
MAX_LINE_BYTES = 64 * 1024
_UTF8_FIX = (
    "save it as UTF-8 (PowerShell: ... | Out-File -Encoding utf8), or run the server with "
    "2>&1 | tee vllm.log from a Unix shell"
)


def _log_lines(fh: IO[bytes], cut: list[int], log: Path) -> Iterator[str]:
    """The file's lines, each cut at MAX_LINE_BYTES (the rest of a longer one is skipped);
    `cut` gets MAX_LOG_LINES when the file goes on past them. A line of UTF-16 text is refused
    where it starts: without a byte-order mark, or a restart appended in it, its lines had
    been read as noise (the restart's cache lost, or "no KV-cache lines")."""
    for number in range(1, MAX_LOG_LINES + 1):
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            return
        if raw.count(b"\x00") >= 4 and raw.count(b"\x00") * 3 >= len(raw):
            after = " after lines of UTF-8 (a restart appended from another shell)"
            raise SizingError(
                f"{log}, line {number:,}, is UTF-16 text{after if number > 1 else ''}, not "
                f"UTF-8: {_UTF8_FIX}"
            )
        if not raw.endswith(b"\n"):  # a line past the cut: skip to its end, in bounded reads
            while (more := fh.readline(MAX_LINE_BYTES)) and not more.endswith(b"\n"):
                pass
        yield raw.decode("utf-8", errors="replace")
    if fh.read(1):
        cut.append(MAX_LOG_LINES)


def parse_log_file(path: str | Path) -> VllmReading:
    """Read a saved vLLM log file, line by line; refuse a missing or unreadable one plainly."""
    log = Path(path)
    try:
        present = refuse_special(log, what="vLLM log (its startup is enough)")
        if present is None:
            raise SizingError(f"{log} does not exist: give the vLLM log (its startup is enough)")
        cut: list[int] = []
        with log.open("rb") as fh:
            if fh.read(2) in (b"\xff\xfe", b"\xfe\xff"):  # c C29: every line read as noise
                raise SizingError(
                    f"{log} is UTF-16 text (as PowerShell's > writes it), not UTF-8: {_UTF8_FIX}"
                )
            fh.seek(0)
            try:
                reading = parse_log(_log_lines(fh, cut, log), source=str(log))
            except SizingError as exc:
                if cut and str(exc).startswith("no KV-cache lines"):
                    raise SizingError(
                        f"no KV-cache lines in the first {MAX_LOG_LINES:,} lines of {log}, "
                        "and felab reads no further: give the startup's part of the log (from "
                        "its start until 'Application startup complete')"
                    ) from None
                raise
        return replace(reading, lines_cut_at=cut[0]) if cut else reading
    except NamedFileError as exc:
        raise SizingError(str(exc)) from None
    except OSError as exc:
        raise SizingError(f"cannot read {log}: {exc.strerror or exc}") from None
