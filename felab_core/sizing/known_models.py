"""felab's table of well-known models, their shapes as published in each model's config.json,
and whether a file's size can hold a model named from it (or whose name gives its size).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from felab_core.sizing.errors import SizingError
from felab_core.sizing.model_names import NAME_ROUNDING, params_in_name, table_names
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import decimal_size_text


@dataclass(frozen=True)
class KnownModel:
    """One row of the table: a model's published shape and where it was read."""

    key: str
    shape: ModelShape
    aliases: tuple[str, ...] = ()


def _known(
    key: str,
    name: str,
    layers: int,
    heads: int,
    kv: int,
    head_dim: int,
    hidden: int,
    context: int,
    params: int,
    source: str,
    *,
    active: int | None = None,
    experts: int | None = None,
    used: int | None = None,
    aliases: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
) -> KnownModel:
    return KnownModel(
        key=key,
        aliases=aliases,
        shape=ModelShape(
            name=name,
            n_layers=layers,
            n_heads=heads,
            n_kv_heads=kv,
            head_dim_k=head_dim,
            head_dim_v=head_dim,
            hidden_size=hidden,
            context_length=context,
            params_total=params,
            params_active=active if active is not None else params,
            n_experts=experts,
            n_experts_used=used,
            weights_dtype="bf16",
            source=f"felab's table of well-known models ({source})",
            notes=notes,
        ),
    )


_HF = "the model's config.json on Hugging Face"
_SWA = ("half of the layers use a sliding window and keep fewer tokens; this is the upper bound",)

KNOWN_MODELS: tuple[KnownModel, ...] = (
    _known(
        "llama-3.1-8b",
        "Llama 3.1 8B",
        layers=32,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=131072,
        params=8_030_261_248,
        source=f"{_HF}, meta-llama/Llama-3.1-8B-Instruct",
        aliases=("llama3.1:8b", "llama-3.1-8b-instruct", "llama3.1-8b", "llama-3-8b"),
    ),
    _known(
        "llama-3.1-70b",
        "Llama 3.1 70B",
        layers=80,
        heads=64,
        kv=8,
        head_dim=128,
        hidden=8192,
        context=131072,
        params=70_553_706_496,
        source=f"{_HF}, meta-llama/Llama-3.1-70B-Instruct",
        aliases=("llama3.1:70b", "llama-3.3-70b", "llama3.3:70b", "llama-3.1-70b-instruct"),
    ),
    _known(
        "llama-3.2-1b",
        "Llama 3.2 1B",
        layers=16,
        heads=32,
        kv=8,
        head_dim=64,
        hidden=2048,
        context=131072,
        params=1_235_814_400,
        source=f"{_HF}, meta-llama/Llama-3.2-1B-Instruct",
        aliases=("llama3.2:1b",),
    ),
    _known(
        "llama-3.2-3b",
        "Llama 3.2 3B",
        layers=28,
        heads=24,
        kv=8,
        head_dim=128,
        hidden=3072,
        context=131072,
        params=3_212_749_824,
        source=f"{_HF}, meta-llama/Llama-3.2-3B-Instruct",
        aliases=("llama3.2:3b", "llama3.2"),
    ),
    _known(
        "mistral-7b",
        "Mistral 7B v0.3",
        layers=32,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=32768,
        params=7_248_023_552,
        source=f"{_HF}, mistralai/Mistral-7B-Instruct-v0.3",
        aliases=("mistral:7b", "mistral"),
    ),
    _known(
        "mixtral-8x7b",
        "Mixtral 8x7B",
        layers=32,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=32768,
        params=46_702_792_704,
        source=f"{_HF}, mistralai/Mixtral-8x7B-Instruct-v0.1; 12.9B active per the model card",
        active=12_900_000_000,
        experts=8,
        used=2,
        aliases=("mixtral:8x7b", "mixtral"),
    ),
    _known(
        "qwen2.5-7b",
        "Qwen2.5 7B",
        layers=28,
        heads=28,
        kv=4,
        head_dim=128,
        hidden=3584,
        context=32768,
        params=7_615_616_512,
        source=f"{_HF}, Qwen/Qwen2.5-7B-Instruct",
        aliases=("qwen2.5:7b",),
    ),
    _known(
        "qwen3-8b",
        "Qwen3 8B",
        layers=36,
        heads=32,
        kv=8,
        head_dim=128,
        hidden=4096,
        context=40960,
        params=8_190_735_360,
        source=f"{_HF}, Qwen/Qwen3-8B",
        aliases=("qwen3:8b",),
    ),
    _known(
        "qwen3-30b-a3b",
        "Qwen3 30B-A3B",
        layers=48,
        heads=32,
        kv=4,
        head_dim=128,
        hidden=2048,
        context=40960,
        params=30_532_122_624,
        source=f"{_HF}, Qwen/Qwen3-30B-A3B; 3.3B active per the model card",
        active=3_300_000_000,
        experts=128,
        used=8,
        aliases=("qwen3:30b", "qwen3:30b-a3b"),
    ),
    _known(
        "gemma-2-9b",
        "Gemma 2 9B",
        layers=42,
        heads=16,
        kv=8,
        head_dim=256,
        hidden=3584,
        context=8192,
        params=9_241_705_984,
        source=f"{_HF}, google/gemma-2-9b-it",
        aliases=("gemma2:9b",),
        notes=_SWA,
    ),
    _known(
        "gpt-oss-20b",
        "gpt-oss-20b",
        layers=24,
        heads=64,
        kv=8,
        head_dim=64,
        hidden=2880,
        context=131072,
        params=20_914_757_184,
        source=f"{_HF}, openai/gpt-oss-20b; 3.6B active per the model card",
        active=3_600_000_000,
        experts=32,
        used=4,
        aliases=("gpt-oss:20b",),
        notes=_SWA,
    ),
    _known(
        "gpt-oss-120b",
        "gpt-oss-120b",
        layers=36,
        heads=64,
        kv=8,
        head_dim=64,
        hidden=2880,
        context=131072,
        params=116_829_156_672,
        source=f"{_HF}, openai/gpt-oss-120b; 5.1B active per the model card",
        active=5_100_000_000,
        experts=128,
        used=4,
        aliases=("gpt-oss:120b",),
        notes=_SWA,
    ),
)


def _normalise(name: str) -> str:
    return re.sub(r"[\s_\-./:]+", "", name.lower()).removesuffix("instruct")


def known_model(name: str) -> ModelShape:
    """Look a model up in the table by key, display name or Ollama-style tag."""
    wanted = _normalise(name)
    for row in KNOWN_MODELS:
        names = (row.key, row.shape.name, *row.aliases)
        if any(_normalise(n) == wanted for n in names):
            return row.shape
    choices = ", ".join(row.key for row in KNOWN_MODELS)
    raise SizingError(
        f"{name!r} is not in felab's table of well-known models ({choices}); give the model's "
        "config.json with --config or its GGUF file with --gguf instead"
    )


#: Bits per weight a model file can hold: from llama.cpp's 1.5-bit quants (a little under, for
#: the rounding of a typed size) to 32-bit floats with the embeddings and metadata a file adds.
_FILE_BITS_LOW, _FILE_BITS_HIGH = Fraction(14, 10), Fraction(34)


def file_size_problem(name: str, size_bytes: int) -> str | None:
    """Why a file of `size_bytes` cannot hold `name`, a model from the table (by its key, tag
    or Hugging Face id) or one whose name gives its size; None when it can, or when neither
    says. A size typed 1000x off (1MB for an 8B
    model) would raise the speed limit 1000x and hide every impossible figure."""
    shape = None
    for each in table_names(name):  # a Hugging Face id too, as vLLM and mlx_lm report it
        try:
            shape = known_model(each)
            break
        except SizingError:
            continue
    if shape is None:
        return _named_size_problem(name, size_bytes)
    params = shape.params_total
    if not params:
        return None
    bits = Fraction(size_bytes * 8, params)
    if _FILE_BITS_LOW <= bits <= _FILE_BITS_HIGH:
        return None
    low, high = params * _FILE_BITS_LOW / 8, params * _FILE_BITS_HIGH / 8
    return (
        f"{decimal_size_text(size_bytes)} cannot hold {shape.name}: its {params / 1e9:.1f}B "
        f"weights make files of {decimal_size_text(low)} to {decimal_size_text(high)} (1.4 to "
        f"34 bits a weight), and this is {float(bits):.3g} bits a weight; write the size "
        "`ollama list` or `ls -l` shows, such as 4.9GB"
    )


def _named_size_problem(name: str, size_bytes: int) -> str | None:
    """A model outside the table whose name gives its size (mystery-7b, Qwen2.5-0.5B): a file
    past 34 bits for each of its weights, with room for the name's rounding, is not it."""
    params = params_in_name(name)
    if params is None:
        return None
    most = params * NAME_ROUNDING * float(_FILE_BITS_HIGH) / 8
    if size_bytes <= most:
        return None
    return (
        f"{decimal_size_text(size_bytes)} cannot hold {name[:80]}: its name says about "
        f"{params / 1e9:g}B weights, which make files of at most about "
        f"{decimal_size_text(int(most))} (34 bits a weight); write the size `ollama list` or "
        "`ls -l` shows, such as 4.9GB"
    )
