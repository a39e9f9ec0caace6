"""A model's shape, the few numbers the KV cache and the speed limit depend on: the one place a
command's model source is picked and read.

Read from a Hugging Face `config.json` with its safetensors headers (hf_config.py), from a GGUF
file's metadata and tensor list (gguf_shape.py), or from felab's table of well-known models
(known_models.py); the checks the two file readers share live in shape_values.py.
"""

from __future__ import annotations

from pathlib import Path

from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.hf_config import from_hf_config
from felab_core.sizing.known_models import known_model
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import both_ways


def resolve_shape(
    *, config: str | Path | None = None, gguf: str | Path | None = None, model: str | None = None
) -> ModelShape:
    """Pick the one model source a command was given, refusing none or several."""
    given = [x for x in (config, gguf, model) if x is not None]
    if len(given) != 1:
        raise SizingError(
            "name the model exactly one way: --config PATH (Hugging Face config.json), "
            "--gguf PATH (a GGUF file) or --model NAME (felab's table)"
        )
    if config is not None:
        return from_hf_config(config)
    if gguf is not None:
        return from_gguf(gguf)
    assert model is not None
    return known_model(model)


def weights_summary(shape: ModelShape) -> str:
    """Plain words for the weights a token reads, when they are known."""
    read = shape.weights_read_per_token()
    if read is None:
        return "weight bytes unknown"
    left_out = f" ({shape.weights_left_out})" if shape.weights_left_out else ""
    if shape.is_moe and shape.weights_bytes is not None:
        return (
            f"{both_ways(read)} of the {both_ways(shape.weights_bytes)} of weights are read per "
            f"token ({shape.n_experts_used} of {shape.n_experts} experts){left_out}"
        )
    return f"{both_ways(read)} of weights, all read for every token{left_out}"
