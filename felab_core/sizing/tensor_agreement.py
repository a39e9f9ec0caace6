"""A model's shape held to the tensors that carry it: the layer count, the width, the heads.

A config.json (or GGUF metadata) says how many layers a model has, how wide it is and how many
KV heads of what size each layer caches; the tensors beside it say the same things again, in
their names (`model.layers.31.`, `blk.31.`) and shapes (k_proj's rows are KV heads x head size).
Each had been read from the config alone: 2 layers of width 2,048 priced beside 32 layers of
width 4,096 of weights, 1 KV head beside k_proj tensors of 8 (the cache 8x too small). Every
comparison goes through `shape_agreement.hold_together`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from felab_core.sizing.errors import SizingError
from felab_core.sizing.shape_agreement import Reading, hold_together
from felab_core.text import with_hidden_shown

if TYPE_CHECKING:
    from felab_core.sizing.shape import ModelShape

Tensors = Sequence[tuple[str, tuple[int, ...]]]

#: A decoder layer's tensors: Hugging Face's `model.layers.N.` (`transformer.h.N.`, a
#: multimodal model's `language_model.model.layers.N.`; a vision tower's `visual.blocks.N.` is
#: not the language model's), llama.cpp's `blk.N.`.
_LAYER_HF = re.compile(
    r"^(?:(?:model|transformer|language_model|backbone|decoder)\.)*(?:layers|h|blocks)\.(\d+)\."
)
_LAYER_GGUF = re.compile(r"^blk\.(\d+)\.")
#: The final norm (1-D, the width; never quantized) and the token embeddings ([vocab, width]).
_NORM_HF = re.compile(
    r"^(?:(?:model|transformer|language_model)\.)*(?:norm|ln_f|final_layernorm|norm_f)\.weight$"
)
_EMBED_HF = re.compile(
    r"^(?:(?:model|transformer|language_model)\.)*"
    r"(?:embed_tokens|wte|word_embeddings|tok_embeddings)\.weight$"
)
#: Hugging Face's separate projections (fused qkv_proj / query_key_value are not read: their
#: rows mix the three, and the parts are the config's to say).
_PROJ_HF = re.compile(
    r"\.(?:layers|h|blocks)\.(\d+)\.(?:self_attn|attention|attn)\.([qkv])_proj\.weight$"
)
_PROJ_GGUF = re.compile(r"^blk\.(\d+)\.attn_([qkv])\.weight$")
#: A layer's feed-forward (or experts) under the names converters give it (Nemotron-H keeps
#: its MLP under `mixer.up_proj`, GPT-2 under `mlp.c_fc`, Falcon under `dense_h_to_4h`).
_FEED_FORWARD = re.compile(
    r"(?:^|\.)(?:mlp|feed_forward|ffn_\w+|block_sparse_moe|experts|switch_mlp|moe)[._]"
    r"|(?:^|\.)(?:up_proj|down_proj|gate_proj|gate_up_proj|fc1|fc2|c_fc|w1|w2|w3"
    r"|dense_h_to_4h|dense_4h_to_h)\."
)
#: An attention projection: a transformer's layers, where a feed-forward comes with them (a
#: Mamba's intermediate_size is its mixer's width, and it holds no q_proj: not checked).
_ATTENTION = re.compile(r"(?:^|\.)(?:[qkv]_proj|attn_[qkv]|qkv_proj|query_key_value)\.")


@dataclass(frozen=True)
class ShapeKeys:
    """The keys the shape's figures were read from, for a refusal to name."""

    layers: str
    hidden: str
    heads: str
    kv_heads: str
    head_dim: str
    where: str


_THEN = (
    "the shape and the weights are two models': give the config (or GGUF) that came with these "
    "weights, or name the model with --model"
)


def _held(
    figure: str,
    said: int,
    said_shown: str,
    keys_where: str,
    found: int,
    found_shown: str,
    tensors_from: str,
    *,
    high: float = 1,
) -> None:
    hold_together(
        figure,
        Reading(said, said_shown, keys_where),
        Reading(found, found_shown, tensors_from),
        high=high,
        room="one model's files give one figure",
        then=_THEN,
    )


def layers_held(tensors: Tensors, *, gguf: bool) -> int | None:
    """The highest layer number the tensors hold, plus one; None when no tensor is a layer's."""
    found = layers_named(tensors, gguf=gguf)
    return max(found) + 1 if found else None


def layers_named(tensors: Tensors, *, gguf: bool) -> set[int]:
    """The layer numbers the tensors name (`blk.N.`, `model.layers.N.`), each once."""
    pattern = _LAYER_GGUF if gguf else _LAYER_HF
    return {int(hit[1]) for name, _ in tensors if (hit := pattern.match(name)) is not None}


def _layers_shown(found: set[int]) -> str:
    """The layers found: "layers 0 to 7", or "2 layers (0 to 31)" where some between are missing."""
    low, high = min(found), max(found)
    if len(found) == high + 1:
        return f"layers 0 to {high:,}"
    return f"{len(found):,} layer{'' if len(found) == 1 else 's'} ({low:,} to {high:,})"


def width_held(tensors: Tensors, *, gguf: bool, quantized: bool = False) -> tuple[int, str] | None:
    """The width the final norm (or the embeddings) carries, and the tensor's name."""
    by_name = dict(tensors)
    if gguf:
        for name in ("output_norm.weight", "token_embd.weight"):
            dims = by_name.get(name)
            if dims:
                return dims[0], name
        return None
    for name, dims in tensors:
        if _NORM_HF.match(name) and len(dims) == 1:
            return dims[0], name
    if quantized:  # mlx and others pack the embeddings' width axis
        return None
    for name, dims in tensors:
        if _EMBED_HF.match(name) and len(dims) == 2:
            return dims[1], name
    return None


def check_layers_and_width(
    shape: ModelShape,
    tensors: Tensors,
    keys: ShapeKeys,
    tensors_from: str,
    *,
    gguf: bool,
    extra_layers: int = 0,
    missing_layers: int = 0,
    quantized: bool = False,
) -> None:
    """The layer count against the layers the tensors name, each counted once (plus DeepSeek's
    and GLM's multi-token-prediction layers, `extra_layers`; a GGUF converted without them may
    lack them, `missing_layers`), the width against the norm's. A GGUF of 2 blocks beside a
    block_count of 32 had been priced as 32 layers (llama.cpp refuses to load it)."""
    found = layers_named(tensors, gguf=gguf)
    if found:
        held = max(found) + 1
        fewest = shape.n_layers - missing_layers
        if not (fewest <= len(found) and held <= shape.n_layers + extra_layers):
            counted = len(found) if held <= shape.n_layers + extra_layers else held
            _held(
                "the number of layers",
                shape.n_layers,
                f"{keys.layers} {shape.n_layers:,}",
                keys.where,
                counted,
                _layers_shown(found),
                tensors_from,
            )
    width = width_held(tensors, gguf=gguf, quantized=quantized)
    if width is not None and shape.hidden_size is not None:
        _held(
            "the model's width",
            shape.hidden_size,
            f"{keys.hidden} {shape.hidden_size:,}",
            keys.where,
            width[0],
            f"{width[0]:,} ({with_hidden_shown(width[1][:80])})",
            tensors_from,
        )


def check_heads(
    shape: ModelShape,
    tensors: Tensors,
    keys: ShapeKeys,
    tensors_from: str,
    *,
    gguf: bool,
    check_queries: bool = True,
) -> None:
    """k_proj's (attn_k's) rows against KV heads x head size, v's likewise, q's against heads x
    head size (or twice it: Qwen3-Next's q_proj holds each head's output gate too). Latent (MLA)
    attention caches no per-head keys, and a fused qkv tensor mixes the three: neither is read.
    A projection packed by a quantizer (its input axis not the width) is not read either."""
    if shape.latent_cache_dim is not None or shape.hidden_size is None:
        return
    pattern = _PROJ_GGUF if gguf else _PROJ_HF
    for name, dims in tensors:
        hit = pattern.search(name)
        if hit is None or len(dims) != 2:
            continue
        width_axis, rows = (dims[0], dims[1]) if gguf else (dims[1], dims[0])
        if width_axis != shape.hidden_size:
            continue
        layer, which = int(hit[1]), hit[2]
        if which == "q":
            if not check_queries:
                continue
            said, shown = (
                shape.n_heads * shape.head_dim_k,
                f"{keys.heads} {shape.n_heads:,} x {keys.head_dim} {shape.head_dim_k:,}",
            )
            if rows == 2 * said:
                continue
        else:
            kv = shape.n_kv_heads
            if shape.kv_heads_by_layer is not None and layer < len(shape.kv_heads_by_layer):
                kv = shape.kv_heads_by_layer[layer]
            head = shape.head_dim_k if which == "k" else shape.head_dim_v
            said, shown = kv * head, f"{keys.kv_heads} {kv:,} x {keys.head_dim} {head:,}"
        _held(
            f"layer {layer:,}'s {'query' if which == 'q' else 'key' if which == 'k' else 'value'} "
            "width",
            said,
            f"{shown} = {said:,}",
            keys.where,
            rows,
            f"{rows:,} rows in {with_hidden_shown(name[:80])}",
            tensors_from,
        )


def check_feed_forward(
    key: str, value: int | None, where: str, tensors: Tensors, tensors_from: str
) -> None:
    """A config giving each layer a feed-forward (intermediate_size) beside layer tensors that
    hold none: attention alone had been priced as an 8B model, the speed ceiling 6x too high."""
    if value is None or not tensors:
        return
    layered = [n for n, _ in tensors if _LAYER_HF.match(n) or _LAYER_GGUF.match(n)]
    if not any(_ATTENTION.search(n) for n in layered):
        return
    if not any(_FEED_FORWARD.search(n) for n in layered):
        raise SizingError(
            f"the feed-forward disagrees: {key} {value:,} from {where} gives each layer one, but "
            f"{tensors_from} hold no layer's feed-forward (mlp, experts) weights, only "
            f"{len(layered):,} attention and norm tensors; the weights are cut short or another "
            "model's: give the weights that came with this config"
        )
