"""Which layers of a hybrid model keep a KV cache: Jamba, Qwen3-Next, Granite-4.0-H, Nemotron-H
and the like mix attention layers with Mamba or linear-attention ones, which keep a fixed state
per sequence rather than keys and values per token (sweep 25 H1: a Jamba config had been sized
at every layer, 8 times its cache, and the memo said 30 conversations where about 240 fit).

One reading of the layout keys, for the KV cache (hf_config.py) and for the parameter count of
a mixture (expert_params.py), so that the two agree on what a hybrid is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Keys only hybrid layouts give (Jamba's attention period, Granite's and Zamba's block types,
#: Mamba's state size, Nemotron-H's pattern, Qwen3-Next's full-attention interval).
HYBRID_KEYS = (
    "attn_layer_period",
    "layers_block_type",
    "mamba_d_state",
    "ssm_cfg",
    "hybrid_override_pattern",
    "full_attention_interval",
)


def _keeps_cache(kind: Any) -> bool:
    """A layer type that keeps keys and values per token: full, sliding or chunked attention,
    or Zamba's hybrid block (Mamba with a shared attention block); not Mamba, linear attention
    or a convolution."""
    text = str(kind).lower()
    return ("attention" in text and "linear" not in text) or text == "hybrid"


def _listed(types: Any, n_layers: int) -> int | None:
    if not isinstance(types, list) or len(types) != n_layers:
        return None
    return sum(1 for kind in types if _keeps_cache(kind))


def cache_layers(cfg: Mapping[str, Any], n_layers: int) -> int | None:
    """How many of `n_layers` keep a KV cache, or None when all do (or the layout is one whose
    layers all hold attention, such as Falcon-H1's, attention and Mamba side by side)."""
    counted: int | None = None
    for key in ("layer_types", "layers_block_type"):
        counted = _listed(cfg.get(key), n_layers)
        if counted is not None:
            break
    pattern = cfg.get("hybrid_override_pattern")
    if counted is None and isinstance(pattern, str) and len(pattern) == n_layers:
        counted = pattern.count("*")  # Nemotron-H: M Mamba, - feed-forward, * attention
    period, offset = cfg.get("attn_layer_period"), cfg.get("attn_layer_offset", 0)
    if counted is None and type(period) is int and type(offset) is int and 0 <= offset < period:
        counted = sum(1 for i in range(n_layers) if i % period == offset)  # Jamba
    interval = cfg.get("full_attention_interval")
    if counted is None and type(interval) is int and interval > 0:
        counted = n_layers // interval  # Qwen3-Next: every interval-th layer, linear between
    return counted if counted is not None and 0 < counted < n_layers else None


def is_hybrid(cfg: Mapping[str, Any]) -> bool:
    """Whether the config's layers are not all attention + feed-forward."""
    if any(key in cfg for key in HYBRID_KEYS):
        return True
    types = cfg.get("layer_types")
    return isinstance(types, list) and not all(_keeps_cache(kind) for kind in types)


def cache_layers_note(kept: int, n_layers: int) -> str:
    return (
        f"{kept} of {n_layers} layers keep a KV cache (the rest are Mamba/linear attention: a "
        "fixed state per sequence, not counted per token)"
    )
