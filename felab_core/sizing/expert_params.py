"""A mixture of experts' parameters, counted from its config.json's shapes: all of them and the
ones a token uses, so that a model file's size given beside a config is read at the active
share, as a GGUF's or safetensors' tensors and the table's parameter counts are (sweep 24 H1:
a Mixtral config beside --model-bytes 26GB divided by the whole file, a limit 3.6x low, and
called believable speeds impossible).

The count follows the rule the tensor readers use (shape_values.active_bytes): everything but
the routed experts is read for every token, and of the experts the used share. Layouts it
does not know (layers that are not attention, such as Mamba's) give None, and the share stays
unknown: the speed limit is then said to be a lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from felab_core.sizing.hybrid_layers import is_hybrid
from felab_core.sizing.shape import ModelShape

#: A feed-forward block's matrices: gate, up and down (every current mixture's experts).
_FFN_MATRICES = 3


def _count(cfg: Mapping[str, Any], key: str) -> int | None:
    value = cfg.get(key)
    return value if type(value) is int and value > 0 else None


def _moe_layers(cfg: Mapping[str, Any], layers: int) -> int | None:
    """How many of the layers route to experts (DeepSeek's first dense layers, Qwen's sparse
    step and MLP-only layers, Llama 4's interleave step); None for a layout not understood."""
    dense_first = cfg.get("first_k_dense_replace", 0)
    if type(dense_first) is not int or not 0 <= dense_first <= layers:
        return None
    step = cfg.get("decoder_sparse_step") or cfg.get("interleave_moe_layer_step") or 1
    freq = cfg.get("moe_layer_freq") or 1
    if type(step) is not int or type(freq) is not int or step < 1 or freq < 1:
        return None
    only_mlp = cfg.get("mlp_only_layers") or []
    if not isinstance(only_mlp, list) or not all(type(i) is int for i in only_mlp):
        return None
    return sum(
        1
        for i in range(dense_first, layers)
        if (i + 1) % step == 0 and i % freq == 0 and i not in only_mlp
    )


def _attention(cfg: Mapping[str, Any], shape: ModelShape, hidden: int) -> int | None:
    """One layer's attention weights: query, key, value and output (DeepSeek's latent form)."""
    heads = shape.n_heads
    if shape.latent_cache_dim is None:
        width = shape.head_dim_k
        return hidden * width * (2 * heads + 2 * shape.n_kv_heads)
    rank, rope = _count(cfg, "kv_lora_rank"), cfg.get("qk_rope_head_dim") or 0
    nope, v_dim = _count(cfg, "qk_nope_head_dim"), _count(cfg, "v_head_dim")
    if rank is None or nope is None or v_dim is None or type(rope) is not int:
        return None
    q_rank = _count(cfg, "q_lora_rank")
    q_width = heads * (nope + rope)
    query = hidden * q_rank + q_rank * q_width if q_rank else hidden * q_width
    return query + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden


def moe_params(cfg: Mapping[str, Any], shape: ModelShape) -> tuple[int, int] | None:
    """(all parameters, those one token uses) of a mixture of experts from its config's shapes;
    None for a dense model or a layout whose shapes the config does not all give."""
    # hybrid layers (Mamba, linear attention) and Jamba's expert period are not counted here
    if not shape.is_moe or "expert_layer_period" in cfg or is_hybrid(cfg):
        return None
    assert shape.n_experts and shape.n_experts_used
    hidden, vocab = shape.hidden_size, _count(cfg, "vocab_size")
    expert_width = _count(cfg, "moe_intermediate_size") or _count(cfg, "intermediate_size")
    moe_layers = _moe_layers(cfg, shape.n_layers)
    attention = _attention(cfg, shape, hidden) if hidden else None
    if not hidden or vocab is None or expert_width is None or moe_layers is None or not attention:
        return None
    dense_layers = shape.n_layers - moe_layers
    dense_width = (
        _count(cfg, "intermediate_size_mlp") or _count(cfg, "intermediate_size")
        if dense_layers
        else 0
    )
    if dense_width is None:
        return None
    shared_width = _count(cfg, "shared_expert_intermediate_size") or 0
    shared_width += (_count(cfg, "n_shared_experts") or 0) * expert_width
    one_expert = _FFN_MATRICES * hidden * expert_width
    always = (
        vocab * hidden * (1 if cfg.get("tie_word_embeddings") is True else 2)
        + shape.n_layers * attention
        + dense_layers * _FFN_MATRICES * hidden * dense_width
        + moe_layers * (_FFN_MATRICES * hidden * shared_width + hidden * shape.n_experts)
    )
    total = always + moe_layers * shape.n_experts * one_expert
    active = always + moe_layers * shape.n_experts_used * one_expert
    return total, active
