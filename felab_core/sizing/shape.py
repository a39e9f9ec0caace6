"""The shape of a model as sizing reads it (layers, heads, experts, weights) and where each
figure came from. Apart from the readers that fill it (hf_config.py, gguf_shape.py,
known_models.py), so that the checks holding its figures to the files (shape_agreement.py,
tensor_agreement.py) read the shape without reading the readers back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from felab_core.sizing.units import tidy_text


@dataclass(frozen=True)
class ModelShape:
    """What sizing needs to know about a model, and where each number came from."""

    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim_k: int
    head_dim_v: int
    source: str
    kv_heads_by_layer: tuple[int, ...] | None = None
    latent_cache_dim: int | None = None
    hidden_size: int | None = None
    context_length: int | None = None
    n_experts: int | None = None
    n_experts_used: int | None = None
    params_total: int | None = None
    params_active: int | None = None
    weights_bytes: int | None = None
    active_weights_bytes: Fraction | None = None
    weights_dtype: str | None = None
    notes: tuple[str, ...] = field(default=())
    #: Where weights_bytes was summed from ("the tensors listed in ..."), for a refusal to name
    #: the file at fault: a folder's safetensors, not its config.json, list the tensors.
    weights_from: str | None = None
    #: Why the weights beside a config cannot be read (Git LFS pointers): said when they are
    #: needed, so the KV cache, which needs none, is still priced.
    weights_unreadable: str | None = None
    #: Files beside the config that hold a second copy of the weights and were left out.
    weights_left_out: str | None = None
    #: The architecture the file names (config.json's model_type, a GGUF's general.architecture),
    #: to tell which family of models it is beside a server's own name for its model.
    kind: str | None = None
    #: Of a hybrid model (Jamba, Qwen3-Next, Granite-4.0-H), the layers that keep a KV cache;
    #: None when every layer does. The rest keep a fixed state per sequence, not per token.
    attention_layers: int | None = None

    @property
    def cache_layers(self) -> int:
        """The layers whose keys and values the cache holds for every token."""
        return self.attention_layers if self.attention_layers is not None else self.n_layers

    @property
    def is_moe(self) -> bool:
        return bool(self.n_experts and self.n_experts > 1 and self.n_experts_used)

    @property
    def query_heads_per_kv_head(self) -> Fraction:
        """How many query heads share one KV head (1 = no sharing; 4 for Llama 3.1 8B)."""
        return Fraction(self.n_heads, self.n_kv_heads)

    def describe(self) -> str:
        """The shape in plain words, with the grouped-query saving spelled out."""
        parts = [f"{self.name}: {self.n_layers} layers, {self.n_heads} query heads"]
        if self.latent_cache_dim is not None:
            parts.append(
                f"a compressed (latent) KV cache of {self.latent_cache_dim} numbers per layer "
                "instead of full keys and values"
            )
        else:
            if self.kv_heads_by_layer is not None:
                low, high = min(self.kv_heads_by_layer), max(self.kv_heads_by_layer)
                kv = f"{low} to {high} KV heads per layer"
            else:
                kv = f"{self.n_kv_heads} KV heads"
            if self.head_dim_k == self.head_dim_v:
                parts.append(f"{kv} of {self.head_dim_k} numbers each")
            else:
                parts.append(
                    f"{kv} with keys of {self.head_dim_k} and values of {self.head_dim_v} numbers"
                )
            group = self.query_heads_per_kv_head
            if group > 1:
                parts.append(
                    f"grouped-query attention: {tidy_text(group)} query heads share each KV head, "
                    f"so the cache is {tidy_text(group)} times smaller than without it"
                )
        if self.is_moe:
            parts.append(
                f"mixture of experts: {self.n_experts_used} of {self.n_experts} experts work on "
                "each token"
            )
        return "; ".join(parts) + "."

    def weights_read_per_token(self) -> Fraction | None:
        """Bytes of weights one decoding step reads: all, or for MoE only the active share."""
        if self.active_weights_bytes is not None:
            return self.active_weights_bytes
        if self.weights_bytes is not None and not self.is_moe:
            return Fraction(self.weights_bytes)
        return None
