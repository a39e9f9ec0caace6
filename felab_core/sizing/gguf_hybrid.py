"""Which layers of a hybrid model's GGUF keep a KV cache, read from its metadata the way
llama.cpp reads it (sweep 25: hybrid_layers.py read this from config.json only, so a Qwen3-Next
GGUF was sized at every layer, 4 times its cache).

llama.cpp's converters say the layout in one of three ways:

- `<arch>.attention.head_count_kv` as a per-layer array, 0 for a layer without attention
  (Jamba, Granite-4.0-H, Nemotron-H, LFM2: llama.cpp marks a layer recurrent when its KV head
  count is 0);
- `<arch>.attention.recurrent_layers`, a per-layer true/false array (true: no KV cache);
- `<arch>.full_attention_interval` (Qwen3-Next, Qwen3.5): every interval-th layer is full
  attention, linear attention between; llama.cpp takes 4 when the key is absent, and the
  `<arch>.nextn_predict_layers` blocks at the end (multi-token prediction) are attention.

Sliding-window layers (`<arch>.attention.sliding_window_pattern`) keep a KV cache, of fewer
tokens: they are not left out here, as hybrid_layers.py does not leave them out either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from felab_core.sizing.errors import SizingError

#: Architectures whose loader in llama.cpp assumes a full-attention interval of 4 when the file
#: gives none (llama-model.cpp: `uint32_t full_attn_interval = 4;`).
_INTERVAL_4_BY_DEFAULT = frozenset({"qwen3next", "qwen35", "qwen35moe"})


def kv_zeros_mark_layers(kv_by_layer: tuple[int, ...] | None) -> bool:
    """Whether a per-layer KV head count differs only by layers without attention (0): the
    layers that keep a cache all keep the same heads, so "differs from layer to layer" would
    say less than the layer count does."""
    if kv_by_layer is None or 0 not in kv_by_layer:
        return False
    return len({v for v in kv_by_layer if v}) == 1


def _interval(value: Any, name: str, where: str) -> int:
    if type(value) is not int or value <= 0:
        shown = repr(value) if not isinstance(value, list) else f"an array of {len(value):,}"
        raise SizingError(
            f"{where}: {name} is {shown[:40]}, but it must be a whole number above zero (every "
            "how many layers one is full attention); check that the file is a model's GGUF"
        )
    return value


def _nextn(value: Any, n_layers: int) -> int:
    """The multi-token-prediction blocks counted in block_count (0 when not said or odd)."""
    return value if type(value) is int and 0 <= value < n_layers else 0


def gguf_cache_layers(
    key: Callable[[str], Any],
    arch: str,
    n_layers: int,
    kv_by_layer: tuple[int, ...] | None,
    where: str,
) -> int | None:
    """How many of `n_layers` keep a KV cache, or None when all do. `key(suffix)` gives the
    value of `<arch>.<suffix>` (None when absent); `kv_by_layer` is head_count_kv per layer,
    already checked (its length is the layer count, no count below 0)."""
    counted: int | None = None
    if kv_by_layer is not None and 0 in kv_by_layer:
        counted = sum(1 for v in kv_by_layer if v)
    recurrent = key("attention.recurrent_layers")
    if (
        counted is None
        and isinstance(recurrent, list)
        and len(recurrent) == n_layers
        and all(type(r) is bool for r in recurrent)
    ):
        counted = recurrent.count(False)
    interval = key("full_attention_interval")
    name = f"{arch}.full_attention_interval"
    if interval is None and arch in _INTERVAL_4_BY_DEFAULT:
        interval = 4
    if counted is None and interval is not None:
        every = _interval(interval, name, where)
        nextn = _nextn(key("nextn_predict_layers"), n_layers)
        trunk = n_layers - nextn
        counted = sum(1 for i in range(trunk) if (i + 1) % every == 0) + nextn
    return counted if counted is not None and 0 < counted < n_layers else None
