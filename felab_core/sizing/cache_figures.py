"""Two of vLLM's figures for one cache held to each other: its size in tokens beside its blocks,
beside its printed concurrency, and beside the memory left for it.

vLLM V1 prints ``GPU KV cache size: T tokens`` as ``blocks // groups x block size`` (times the
decode-context-parallel size, which it says it multiplies by), one group for most models and a
few for models mixing kinds of layers; its ``Maximum concurrency`` is the blocks over the blocks
one request of the max length needs, at most one more than the length's blocks in each group.
Each check names both figures and where each came from, and refuses what no server prints.
"""

from __future__ import annotations

from fractions import Fraction
from math import ceil

from felab_core.sizing.capacity import MAX_BLOCK_SIZE
from felab_core.sizing.errors import SizingError
from felab_core.sizing.units import binary_size_text, decimal_text, whole_text
from felab_core.sizing.vllm_log_line import LogLine

#: The fewest bytes a token of cache takes on one GPU for any model worth serving: keys and
#: values (2) x 1 layer x 1 KV head x 32 numbers x 1 byte (fp8). Real models take thousands
#: (Qwen2.5-0.5B in fp8, split over 2 GPUs: 3,072); a log's memory below this beside its
#: tokens cannot both be true (0.001 GiB beside 100,000 tokens is 10.7 bytes a token).
LEAST_BYTES_PER_TOKEN = 64
#: The most cache groups a model's layers fall into in vLLM (one per kind of layer, times the
#: layers of the most common kind over those of the least): no model has more layers.
MOST_GROUPS = 256
#: A server spreads one token's cache over up to this many GPUs (tensor and pipeline parallel).
MOST_GPUS_SHARED = 16
#: What to do, said by each refusal: a log's own (a live server passes its own).
LOG_FIX = (
    "the log was edited or mixes two servers; give the figures with --tokens (or --blocks) and "
    "--max-len"
)


def tokens_beside_blocks(
    tokens: tuple[int, str],
    blocks: tuple[int, str],
    block_size: int | None,
    dcp: int = 1,
    fix: str = LOG_FIX,
) -> None:
    """Refuse a cache in tokens its blocks cannot give: vLLM prints (blocks // groups) x block
    size (x dcp). `tokens` and `blocks` are each (figure, where it was read)."""
    count, said = tokens
    nblocks, where = blocks
    sizes = [block_size] if block_size else [2**k for k in range(13)]
    for size in sizes:
        if any((nblocks // g) * size * dcp == count for g in range(1, MOST_GROUPS + 1)):
            return
    size_words = f"blocks of {whole_text(block_size)} tokens" if block_size else "blocks"
    most = nblocks * (block_size or 4096) * dcp
    raise SizingError(
        f"{said} gives a cache of {whole_text(count)} token{'' if count == 1 else 's'}, and "
        f"{where} "
        f"{whole_text(nblocks)} {size_words} (at most {whole_text(most)} tokens, and vLLM counts "
        f"whole blocks per group of layers): {fix}"
    )


def concurrency_beside_tokens(
    printed: tuple[Fraction, str],
    tokens: tuple[int, str],
    max_len: int,
    block_size: int | None,
    dcp: int = 1,
    fix: str = LOG_FIX,
) -> None:
    """Refuse a printed concurrency below what the cache's tokens give at the max length: a
    request needs at most one block more than its length in each group, so vLLM's figure is
    never under tokens ÷ (dcp x block size x (blocks of the length + 1)). A figure above it is a
    model mixing kinds of layers (sliding windows need fewer blocks), and stays a note."""
    figure, said = printed
    count, where = tokens
    size = block_size or 4096  # the largest block felab knows: the bound stays a floor
    least = Fraction(count, dcp * size * (ceil(Fraction(max_len, size)) + 1))
    if figure + Fraction(1, 200) >= least:
        return
    raise SizingError(
        f"{said} gives a maximum concurrency of {decimal_text(figure, 2)}x for "
        f"{whole_text(max_len)} tokens per request, and {where} a cache of {whole_text(count)} "
        f"tokens, at least {decimal_text(least, 2)}x of it for any model: {fix}"
    )


def memory_beside_tokens(
    memory: tuple[Fraction, Fraction, str],
    tokens: tuple[int, str],
    per_token: tuple[Fraction, str] | None = None,
    fix: str = LOG_FIX,
) -> None:
    """Refuse cache memory too small for its tokens: each token takes at least `per_token`'s
    bytes (the model's, a share of it on each of up to 16 GPUs) or, with no model, the least
    any model takes. `memory` is (bytes as read, the print's rounding, where it was read)."""
    size, slack, said = memory
    count, where = tokens
    least, words = (
        (per_token[0] / MOST_GPUS_SHARED, f"{per_token[1]}, over up to {MOST_GPUS_SHARED} GPUs")
        if per_token is not None
        else (Fraction(LEAST_BYTES_PER_TOKEN), "the least any model takes")
    )
    if size + slack >= count * least:
        return
    raise SizingError(
        f"{said} gives {binary_size_text(size)} of cache memory beside a cache of "
        f"{whole_text(count)} tokens ({where}): at {decimal_text(least, 2)} bytes a token "
        f"({words}) they need {binary_size_text(count * least)}; {fix}"
    )


def infer_block_size(blocks: int, max_len: int, printed: Fraction) -> int | None:
    """The one power-of-two block size that reproduces vLLM's printed concurrency, if any."""
    want = decimal_text(printed, 2, group=False)
    hits = [
        bs
        for bs in (2**k for k in range(0, 11))
        if decimal_text(Fraction(blocks * bs, max_len), 2, group=False) == want
    ]
    return hits[0] if len(hits) == 1 else None


def printed_concurrency_fits(
    printed: Fraction,
    length: int,
    cache: tuple[int | None, int | None, int | None],
    source: str,
) -> None:
    """Refuse a printed concurrency the cache (tokens, blocks, block size) cannot give: above
    one request per token of it, or 0 where it holds a whole request of `length` tokens. Both
    had been shown as vLLM's own figure, "the one to trust"."""
    tokens, blocks, block_size = cache
    if tokens is not None:
        words = f"a cache of {whole_text(tokens)} token{'' if tokens == 1 else 's'}"
        least, most = tokens, tokens
    elif blocks is not None:
        size = block_size or MAX_BLOCK_SIZE
        words = f"{whole_text(blocks)} cache blocks of {'' if block_size else 'at most '}"
        words += f"{size:,} tokens"
        least, most = blocks * (block_size or 1), blocks * size
    else:
        return
    if printed > most:
        why = "each request holds at least a token of it"
    elif printed == 0 and least >= length:
        why = f"it holds a whole request of {whole_text(length)} tokens"
    else:
        return
    raise SizingError(
        f"{source}: vLLM printed a maximum concurrency of {decimal_text(printed, 2)}x beside "
        f"{words}, and {why}: the log was edited or damaged; "
        "give the figures with --tokens (or --blocks) and --max-len"
    )


class OneStartupCache:
    """The cache figures one startup prints, each pair held together as its lines come: the
    blocks come before the cache in tokens, and the concurrency line ends the startup's cache
    (a restart starts another). The memory left for the cache is held to the cache by
    VllmReading.memory_holds_tokens, where a model's bytes a token can be given."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.block_size: int | None = None
        self._reset()

    def _reset(self) -> None:
        self.blocks: tuple[int, int] | None = None
        self.tokens: tuple[int, int] | None = None
        self.dcp = 1

    def _at(self, number: int) -> str:
        return f"{self.source}, line {number:,},"

    def add(self, number: int, found: LogLine) -> None:
        self.block_size = found.block_size or self.block_size
        self.dcp = found.dcp or self.dcp
        if found.blocks is not None:
            self.blocks = (number, found.blocks[1])
        if found.tokens is not None:
            self.tokens = (number, found.tokens[1])
            if self.blocks is not None:
                where = f"line {self.blocks[0]:,}"
                tokens_beside_blocks(
                    (found.tokens[1], self._at(number)),
                    (self.blocks[1], where),
                    self.block_size,
                    self.dcp,
                )
        if found.conc is not None:
            length, printed = found.conc
            cache = self.tokens
            if cache is None and self.blocks is not None and self.block_size is not None:
                cache = (self.blocks[0], self.blocks[1] * self.block_size)
            if cache is not None:
                where = "the same line" if cache[0] == number else f"line {cache[0]:,}"
                concurrency_beside_tokens(
                    (printed, self._at(number)),
                    (cache[1], where),
                    length,
                    self.block_size,
                    self.dcp,
                )
            self._reset()
