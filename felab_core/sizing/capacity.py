"""Cache capacity and worst-case concurrency, and what changing the cache type or length buys.

vLLM hands out cache memory in blocks of a fixed number of tokens. Capacity in tokens is blocks x
block size; the number of conversations it can promise, if every one fills the longest allowed
length, is that capacity divided by the max model length (and, counted in whole blocks, blocks
divided by the blocks one full conversation needs). Shorter conversations fit more, because blocks
are handed out as a conversation grows: this is the floor, not the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from felab_core.sizing.errors import SizingError
from felab_core.sizing.kv import KvPerToken, kv_dtype
from felab_core.sizing.units import (
    MAX_TOKENS,
    both_ways,
    decimal_text,
    require_whole,
    tidy_text,
    whole_text,
)

#: The largest block (page) an engine uses: vLLM's attention blocks are 16 by default and a few
#: hundred for hybrid models; a bigger "block" is a typo (a token count given as a block size).
MAX_BLOCK_SIZE = 4096


def _check_block_size(block_size: int) -> None:
    if block_size > MAX_BLOCK_SIZE:
        raise SizingError(
            f"a block of {whole_text(block_size)} tokens is no engine's: blocks are a few to a "
            f"few hundred tokens (vLLM's default is 16; at most {whole_text(MAX_BLOCK_SIZE)} "
            "here); is that the cache size? give it in tokens (size capacity --tokens, memo "
            "--kv-tokens)"
        )


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Capacity:
    """How many tokens the cache holds and how many full-length conversations fit at once."""

    tokens: int
    max_len: int
    blocks: int | None = None
    block_size: int | None = None
    kv_dtype: str | None = None
    label: str = "as started"

    @property
    def blocks_per_request(self) -> int | None:
        """Blocks one conversation of max_len tokens occupies (a part-filled block still counts)."""
        if self.block_size is None:
            return None
        return _ceil_div(self.max_len, self.block_size)

    @property
    def concurrency(self) -> Fraction:
        """Tokens of cache over tokens per conversation: the figure vLLM logs as 'N.NNx'."""
        return Fraction(self.tokens, self.max_len)

    @property
    def whole_requests(self) -> int:
        """Conversations that fit at full length, counted in whole blocks when blocks are known."""
        if self.blocks is not None and self.blocks_per_request is not None:
            return self.blocks // self.blocks_per_request
        return self.tokens // self.max_len

    @property
    def explanation(self) -> str:
        parts: list[str] = []
        if self.blocks is not None and self.block_size is not None:
            parts.append(
                f"{whole_text(self.blocks)} blocks x {whole_text(self.block_size)} tokens = "
                f"{whole_text(self.tokens)} tokens of cache."
            )
            parts.append(
                f"One conversation at the full {whole_text(self.max_len)} tokens needs "
                f"{whole_text(self.max_len)} ÷ {whole_text(self.block_size)} = "
                f"{whole_text(self.blocks_per_request or 0)} "
                + ("block" if self.blocks_per_request == 1 else "blocks")
                + (" (the last one part-filled)." if self.max_len % self.block_size else ".")
            )
        else:
            parts.append(f"The cache holds {whole_text(self.tokens)} tokens.")
        parts.append(
            f"Worst case, every conversation at full length: {whole_text(self.tokens)} ÷ "
            f"{whole_text(self.max_len)} = {decimal_text(self.concurrency, 2)}, so "
            f"{whole_text(self.whole_requests)} "
            f"conversation{'s' if self.whole_requests != 1 else ''} "
            "at once."
        )
        if self.whole_requests == 0:
            parts.append(
                "Not even one full-length conversation fits: lower the max model length or give "
                "the cache more memory."
            )
        parts.append("Shorter conversations leave room for more; this is what you can promise.")
        return " ".join(parts)


def capacity_from_blocks(
    blocks: int, block_size: int, max_len: int, kv_dtype_name: str | None = None
) -> Capacity:
    """Capacity from vLLM's block count, block size and --max-model-len."""
    require_whole("the number of cache blocks", blocks, "vLLM's startup log prints it.")
    require_whole("the block size", block_size, "vLLM's default is 16 tokens.")
    require_whole("the max model length", max_len, "It is vLLM's --max-model-len, e.g. 8192.")
    _check_block_size(block_size)
    if blocks * block_size > MAX_TOKENS:
        raise SizingError(
            f"{whole_text(blocks)} blocks of {whole_text(block_size)} tokens is a cache of "
            f"{whole_text(blocks * block_size)} tokens: more than any server holds (at most "
            f"{whole_text(MAX_TOKENS)} here); check the block count and the block size"
        )
    if kv_dtype_name is not None:
        kv_dtype(kv_dtype_name)  # refuse an unknown name now, not at the what-if
    return Capacity(
        tokens=blocks * block_size,
        max_len=max_len,
        blocks=blocks,
        block_size=block_size,
        kv_dtype=kv_dtype_name,
    )


def capacity_from_tokens(
    tokens: int, max_len: int, block_size: int | None = None, kv_dtype_name: str | None = None
) -> Capacity:
    """Capacity from a token count (recent vLLM logs print tokens, not blocks)."""
    require_whole("the cache size in tokens", tokens)
    require_whole("the max model length", max_len, "It is vLLM's --max-model-len, e.g. 8192.")
    if tokens > MAX_TOKENS:  # a log's 9,999,999,999 tokens had been promised as 1.2M people
        raise SizingError(
            f"a cache of {whole_text(tokens)} tokens is more than any server holds (at most "
            f"{whole_text(MAX_TOKENS)} here); check the cache size the log or server gives"
        )
    blocks = None
    if block_size is not None:
        require_whole("the block size", block_size)
        _check_block_size(block_size)
        if tokens < block_size:
            raise SizingError(
                f"a cache of {tokens:,} tokens is less than one block of {block_size:,}: a "
                "block is a few tokens (vLLM's default is 16); check --block-size and the "
                "cache size"
            )
        blocks = tokens // block_size
        if tokens % block_size:  # "32 blocks x 4,096 tokens = 131,744" had been printed
            raise SizingError(
                f"a cache of {whole_text(tokens)} tokens is not a whole number of "
                f"{whole_text(block_size)}-token blocks ({whole_text(blocks)} blocks hold "
                f"{whole_text(blocks * block_size)}): vLLM's cache is blocks x block size; check "
                "--block-size, or leave it out"
            )
    return Capacity(
        tokens=tokens, max_len=max_len, blocks=blocks, block_size=block_size, kv_dtype=kv_dtype_name
    )


def capacity_from_memory(
    memory_bytes: int | Fraction, per_token: KvPerToken, block_size: int, max_len: int
) -> Capacity:
    """Capacity from the memory left for the cache: whole blocks of block_size tokens."""
    if memory_bytes <= 0:
        raise SizingError(
            f"cache memory must be more than zero (got {both_ways(Fraction(memory_bytes))}); vLLM "
            "logs it as "
            "'Available KV cache memory'"
        )
    require_whole("the block size", block_size)
    block_bytes = block_size * per_token.bytes
    blocks = int(Fraction(memory_bytes) // block_bytes)
    if blocks == 0:
        raise SizingError(
            f"{both_ways(Fraction(memory_bytes))} does not hold even one block of "
            f"{whole_text(block_size)} tokens ({both_ways(block_bytes)})"
        )
    return capacity_from_blocks(blocks, block_size, max_len, per_token.key_dtype.name)


@dataclass(frozen=True)
class CapacityChange:
    """A what-if: the same cache memory under other settings, beside the original."""

    before: Capacity
    after: Capacity
    changes: tuple[str, ...]

    @property
    def factor(self) -> Fraction:
        """How many times as many full-length conversations (after ÷ before)."""
        if self.before.whole_requests == 0:
            return Fraction(0)
        return Fraction(self.after.whole_requests, self.before.whole_requests)

    @property
    def explanation(self) -> str:
        a = self.after
        what = " and ".join(self.changes)
        before = self.before.whole_requests
        compared = (
            f"{tidy_text(self.factor)} times the {whole_text(before)} as started"
            if before
            else "where as started not one full-length conversation fits"  # no ratio to 0
        )
        return (
            f"With {what}: {whole_text(a.tokens)} tokens ÷ {whole_text(a.max_len)} = "
            f"{decimal_text(a.concurrency, 2)}, so {whole_text(a.whole_requests)} "
            f"conversation{'' if a.whole_requests == 1 else 's'} at once, {compared}, on the "
            "same memory."
        )


def what_if(
    capacity: Capacity,
    *,
    kv_from: str | None = None,
    kv_to: str | None = None,
    max_len: int | None = None,
) -> CapacityChange:
    """The same memory with another cache type (tokens scale by the byte ratio) or max length."""
    changes: list[str] = []
    after = capacity
    if kv_to is not None:
        source = kv_dtype(kv_from or capacity.kv_dtype or "f16")
        target = kv_dtype(kv_to)
        ratio = source.bytes_per_element / target.bytes_per_element
        if after.blocks is not None:
            blocks = int(after.blocks * ratio)
            assert after.block_size is not None
            tokens = blocks * after.block_size
        else:
            blocks = None
            tokens = int(after.tokens * ratio)
        after = replace(after, tokens=tokens, blocks=blocks, kv_dtype=target.name)
        changes.append(
            f"the cache in {target.name} instead of {source.name} ({target.words}), "
            f"{whole_text(capacity.tokens)} x {tidy_text(ratio)} = {whole_text(tokens)} tokens"
        )
    if max_len is not None:
        require_whole("the new max model length", max_len)
        after = replace(after, max_len=max_len)
        changes.append(f"conversations capped at {whole_text(max_len)} tokens")
    if not changes:
        raise SizingError("a what-if needs a new cache type, a new max length, or both")
    label = " + ".join(
        p
        for p in (f"{after.kv_dtype} cache" if kv_to else "", f"max {max_len}" if max_len else "")
        if p
    )
    return CapacityChange(
        before=capacity, after=replace(after, label=label), changes=tuple(changes)
    )


def standard_what_ifs(
    capacity: Capacity, *, kv_from: str = "f16", kv_to: str = "fp8", max_len: int | None = None
) -> tuple[CapacityChange, ...]:
    """The course's three changes: an 8-bit cache, a shorter max length, and both together."""
    shorter = max_len if max_len is not None else capacity.max_len // 2
    if shorter <= 0:
        raise SizingError("the max model length is too short to halve")
    from_name = capacity.kv_dtype or kv_from
    results = []
    if kv_dtype(from_name) != kv_dtype(kv_to):
        results.append(what_if(capacity, kv_from=from_name, kv_to=kv_to))
    results.append(what_if(capacity, max_len=shorter))
    if kv_dtype(from_name) != kv_dtype(kv_to):
        results.append(what_if(capacity, kv_from=from_name, kv_to=kv_to, max_len=shorter))
    return tuple(results)
