"""KV cache bytes: per token (2 x layers x KV heads x head size x bytes each) and for N tokens.

Cache element types cover what vLLM and llama.cpp offer: f32, f16, bf16, fp8 (one byte) and
llama.cpp's block-quantised q8_0 and q4_0, whose per-element size includes the block's scale
(34 bytes per 32 numbers and 18 bytes per 32), so those sizes are fractions of a byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from felab_core.sizing.errors import SizingError
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import (
    binary_size_text,
    bytes_text,
    mib_text,
    require_whole,
    size_text,
    whole_text,
)


@dataclass(frozen=True)
class KvDtype:
    """One way of storing cache numbers, with its exact size per number."""

    name: str
    bytes_per_element: Fraction
    words: str


KV_DTYPES: dict[str, KvDtype] = {
    "f32": KvDtype("f32", Fraction(4), "32-bit floats, 4 bytes each"),
    "f16": KvDtype("f16", Fraction(2), "16-bit floats, 2 bytes each"),
    "bf16": KvDtype("bf16", Fraction(2), "16-bit brain floats, 2 bytes each"),
    "fp8": KvDtype("fp8", Fraction(1), "8-bit floats, 1 byte each"),
    "q8_0": KvDtype(
        "q8_0", Fraction(34, 32), "8-bit blocks of 32 with a 2-byte scale, 34 bytes per 32"
    ),
    "q4_0": KvDtype(
        "q4_0", Fraction(18, 32), "4-bit blocks of 32 with a 2-byte scale, 18 bytes per 32"
    ),
    # The rest of llama.cpp's -ctk/-ctv choices, sized from ggml's block layouts.
    "q4_1": KvDtype(
        "q4_1",
        Fraction(20, 32),
        "4-bit blocks of 32 with a 2-byte scale and a 2-byte minimum, 20 bytes per 32",
    ),
    "q5_0": KvDtype(
        "q5_0",
        Fraction(22, 32),
        "5-bit blocks of 32 with a 2-byte scale, 22 bytes per 32",
    ),
    "q5_1": KvDtype(
        "q5_1",
        Fraction(24, 32),
        "5-bit blocks of 32 with a 2-byte scale and a 2-byte minimum, 24 bytes per 32",
    ),
    "iq4_nl": KvDtype(
        "iq4_nl",
        Fraction(18, 32),
        "4-bit non-linear blocks of 32 with a 2-byte scale, 18 bytes per 32",
    ),
}

_ALIASES = {
    "float32": "f32",
    "fp32": "f32",
    "float": "f32",
    "float16": "f16",
    "fp16": "f16",
    "half": "f16",
    "auto": "f16",
    "bfloat16": "bf16",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "fp8_inc": "fp8",
    "float8": "fp8",
}


def kv_dtype(name: str) -> KvDtype:
    """Look up a cache type by any of the names vLLM or llama.cpp use for it."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    found = KV_DTYPES.get(key)
    if found is None:
        raise SizingError(
            f"unknown KV cache type {name!r}: use one of {', '.join(KV_DTYPES)} "
            "(vLLM's --kv-cache-dtype auto means the model's own 16-bit type, f16 or bf16)"
        )
    return found


#: The cache types vLLM's --kv-cache-dtype stores (auto is the model's own 16 or 32 bits).
VLLM_KV_DTYPES = ("f32", "f16", "bf16", "fp8")


def vllm_kv_dtype(name: str, flag: str) -> KvDtype:
    """A cache type vLLM can run, or a SizingError naming the flag: q4_0 and the other block
    types are llama.cpp's (-ctk/-ctv), and a vLLM cache of them had been sized as a what-if."""
    found = kv_dtype(name)
    if found.name not in VLLM_KV_DTYPES:
        raise SizingError(
            f"{flag} {name.strip()[:40]!r} is llama.cpp's cache type (-ctk/-ctv), not vLLM's: "
            f"vLLM's --kv-cache-dtype stores {', '.join(VLLM_KV_DTYPES)} (auto is the model's "
            "own 16-bit type); for llama.cpp use felab size slots"
        )
    return found


@dataclass(frozen=True)
class KvPerToken:
    """Cache bytes one token takes, with the multiplication written out."""

    shape: ModelShape
    key_dtype: KvDtype
    value_dtype: KvDtype
    bytes: Fraction

    @property
    def formula(self) -> str:
        """The sum as the course writes it: 2 x 32 x 8 x 128 x 2 = 131,072 bytes."""
        s = self.shape
        k, v = self.key_dtype, self.value_dtype
        if s.latent_cache_dim is not None:
            return (
                f"{s.cache_layers} layers x {s.latent_cache_dim} numbers x "
                f"{bytes_text(k.bytes_per_element)} = {bytes_text(self.bytes)}"
            )
        if s.kv_heads_by_layer is None and s.head_dim_k == s.head_dim_v and k == v:
            return (
                f"2 x {s.cache_layers} layers x {s.n_kv_heads} KV heads x {s.head_dim_k} numbers x "
                f"{bytes_text(k.bytes_per_element)} = {bytes_text(self.bytes)}"
            )
        heads = sum(s.kv_heads_by_layer) if s.kv_heads_by_layer else s.cache_layers * s.n_kv_heads
        return (
            f"{heads} KV heads over all layers x ({s.head_dim_k} key numbers x "
            f"{bytes_text(k.bytes_per_element)} + {s.head_dim_v} value numbers x "
            f"{bytes_text(v.bytes_per_element)}) = {bytes_text(self.bytes)}"
        )

    @property
    def explanation(self) -> str:
        dtype = (
            self.key_dtype.words
            if self.key_dtype == self.value_dtype
            else f"keys as {self.key_dtype.words}, values as {self.value_dtype.words}"
        )
        where = (
            "every layer"
            if self.shape.attention_layers is None
            else f"each of its {self.shape.cache_layers} attention layers"
        )
        text = (
            f"Each token of conversation leaves notes (keys and values) in {where}. For "
            f"{self.shape.name}, stored as {dtype}: {self.formula}"
            + (f" ({binary_size_text(self.bytes)})" if self.bytes >= 1024 else "")
            + " per token."
        )
        for note in self.shape.notes:
            text += f" Note: {note}."
        return text


def kv_bytes_per_token(
    shape: ModelShape, dtype: str = "f16", value_dtype: str | None = None
) -> KvPerToken:
    """Bytes of KV cache per token; llama.cpp lets keys and values differ (-ctk, -ctv)."""
    k = kv_dtype(dtype)
    v = kv_dtype(value_dtype) if value_dtype is not None else k
    if k != v and "fp8" in (k.name, v.name):
        raise SizingError(
            f"keys as {k.name} and values as {v.name}: fp8 is vLLM's cache type, for keys and "
            "values alike; different types for keys and values are llama.cpp's (-ctk, -ctv: "
            "f16, q8_0, q4_0 ...)"
        )
    s = shape
    if s.latent_cache_dim is not None:
        total = Fraction(s.cache_layers * s.latent_cache_dim) * k.bytes_per_element
    else:
        heads = sum(s.kv_heads_by_layer) if s.kv_heads_by_layer else s.cache_layers * s.n_kv_heads
        total = heads * (s.head_dim_k * k.bytes_per_element + s.head_dim_v * v.bytes_per_element)
    return KvPerToken(shape=shape, key_dtype=k, value_dtype=v, bytes=total)


#: More memory than any one machine has (eight of the largest accelerators hold 2.3 TB, the
#: largest CPU servers a few TB of RAM): a cache past it is a slip in a count, or a server's
#: figure that cannot be real.
MOST_MACHINE_BYTES = Fraction(16 * 2**40)


@dataclass(frozen=True)
class KvMemory:
    """Cache memory for a number of tokens, shown in both unit systems."""

    tokens: int
    per_token: KvPerToken
    bytes: Fraction

    @property
    def explanation(self) -> str:
        mib, binary = mib_text(self.bytes), binary_size_text(self.bytes)
        also = f" ({binary})" if binary != mib else ""  # 125 MiB twice said nothing
        said = (
            f"{whole_text(self.tokens)} tokens x "
            f"{binary_size_text(self.per_token.bytes)} per token "
            f"= {mib}{also} = {size_text(self.bytes, 2)} "
            f"of cache for {self.per_token.shape.name}."
        )
        if self.bytes > MOST_MACHINE_BYTES:  # C23: 119 TiB priced without a word
            said += (
                f" No machine holds that ({binary_size_text(MOST_MACHINE_BYTES)} is already "
                "more than the largest servers have): check the token count (-c) or the "
                "server's figures."
            )
        return said


def past_trained_context(tokens: int, shape: ModelShape) -> str | None:
    """What pricing more tokens than the model was trained on says (C3): a server holds at
    most that many in one sequence unless it stretches the context (RoPE scaling)."""
    if not shape.context_length or tokens <= shape.context_length:
        return None
    return (
        f"{tokens:,} tokens is longer than {shape.name} reads ({shape.context_length:,} "
        "tokens): one sequence holds at most that unless the server stretches the context "
        "(RoPE scaling); more tokens are many sequences (slots, concurrent requests)"
    )


def kv_memory(tokens: int, per_token: KvPerToken) -> KvMemory:
    """Memory the cache needs for `tokens` tokens (llama.cpp reserves all of -c at startup)."""
    require_whole("the number of tokens", tokens, "Give the cache length, for example -c 8192.")
    return KvMemory(tokens=tokens, per_token=per_token, bytes=tokens * per_token.bytes)
