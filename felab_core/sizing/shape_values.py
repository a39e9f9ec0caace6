"""What the config.json and GGUF readers hold each figure of a shape to, so that both refuse a
broken file in the same words: whole numbers within what any model has, head widths, expert
counts, query heads grouped evenly over KV heads, and the share of the weights a token reads.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from felab_core.sizing.errors import SizingError
from felab_core.sizing.shape import ModelShape

#: Larger than any model's layer count, head count or width by far (the largest today have
#: ~100 layers, ~128 heads, widths of ~30,000): past it a config is broken, not big.
SHAPE_LIMIT = 10_000_000

#: Wider than any attention head or latent cache by far: most heads hold 64 to 256 numbers,
#: DeepSeek's latent keys 576. A head of 9,999,999 had priced 9.54 GiB per token.
_HEAD_LIMIT = 4_096

#: Longer than any model's trained context by far: the longest today read 10,485,760 tokens
#: (Llama 4 Scout), past the shape limit that had refused it.
CONTEXT_LIMIT = 100_000_000


def shown_value(value: Any) -> str:
    """A file's value for an error: an array by its length (4,000 numbers had been echoed as
    a 23 kB line), anything else repr'd and cut to 40 characters (escape codes written out)."""
    if isinstance(value, list | tuple):
        if not value:
            return "an empty array"
        return f"an array of {len(value):,} item{'' if len(value) == 1 else 's'}"
    text = repr(value[:40] if isinstance(value, str) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def positive_int(value: Any, key: str, where: str, limit: int = SHAPE_LIMIT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SizingError(
            f"{where}: {key} is {shown_value(value)}, but it must be a whole number above zero; "
            "check that the file is the model's own config"
        )
    if value > limit:
        raise SizingError(
            f"{where}: {key} is {value:,}, far beyond any model (at most {limit:,}); "
            "check that the file is the model's own config"
        )
    return value


def head_width(value: Any, key: str, where: str) -> int:
    """A head's (or latent cache's) width in numbers, held to what attention heads hold."""
    width = positive_int(value, key, where)
    if width > _HEAD_LIMIT:
        raise SizingError(
            f"{where}: {key} is {width:,} numbers per head, wider than any model's attention "
            f"heads (most hold 64 to 256, DeepSeek's latent keys 576; felab takes at most "
            f"{_HEAD_LIMIT:,}); check that the file is the model's own config"
        )
    return width


def _expert_count(hit: tuple[str, Any] | None, where: str) -> int | None:
    """An expert count: 0 is a dense model's (Granite-4.0-H's dense configs ship
    num_local_experts 0), read as no mixture; a negative or a non-number is refused."""
    if hit is None:
        return None
    key, value = hit
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SizingError(
            f"{where}: {key} is {shown_value(value)}, but it must be a whole number, 0 for a "
            "dense model; check that the file is the model's own config"
        )
    return 0 if value == 0 else positive_int(value, key, where)


def expert_counts(
    experts: tuple[str, Any] | None, used: tuple[str, Any] | None, where: str
) -> tuple[int | None, int | None]:
    """The experts and the experts a token uses, None for a dense model (no key, or 0 of 0, as
    llama.cpp reads it); 2 of 0, or 0 of 8, is refused (read as dense without a word before)."""
    n_experts, n_used = _expert_count(experts, where), _expert_count(used, where)
    _experts_fit(n_experts, n_used, where)
    if n_experts and n_used == 0 and used is not None:
        raise SizingError(
            f"{where}: {used[0]} is 0, but the model has {n_experts:,} experts: a token uses 1 "
            f"to {n_experts:,} of them (0 is a dense model's, beside 0 experts); check that the "
            "file is the model's own config"
        )
    return n_experts or None, n_used or None


def _experts_fit(n_experts: int | None, n_used: int | None, where: str) -> None:
    """A token uses some of the experts, never more than there are ("100 of 8" was printed)."""
    if n_experts is not None and n_used is not None and n_used > n_experts:
        raise SizingError(
            f"{where}: {n_used} experts used per token, but the model has {n_experts}; check "
            "that the file is the model's own config"
        )


def check_groups(n_heads: int, n_kv: int, where: str) -> None:
    """Grouped-query attention shares each KV head among the same number of query heads, so
    the query heads are a whole multiple of the KV heads; anything else is a damaged shape."""
    if n_kv and n_heads % n_kv:
        raise SizingError(
            f"{where}: {n_heads} query heads cannot share {n_kv} KV heads evenly (grouped-query "
            "attention gives each KV head the same number of query heads); check "
            "num_key_value_heads against num_attention_heads"
        )


def active_bytes(total: int, expert: int, shape: ModelShape) -> Fraction:
    """Weights one token reads: everything but the experts, plus the used share of the experts."""
    if shape.is_moe and expert:
        assert shape.n_experts and shape.n_experts_used
        return Fraction(total - expert) + Fraction(expert * shape.n_experts_used, shape.n_experts)
    return Fraction(total)
