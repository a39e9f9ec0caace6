"""A hybrid model's GGUF keeps KV only for its attention layers, read the way llama.cpp reads
it (sweep 25, left over from H1: hybrid layouts were read from config.json only, so a
Qwen3-Next GGUF was sized at every layer, 4 times its cache); `size kv` shows "4 of 32
(attention only)" for a hybrid's layers; the expert-count refusals say that 0 is a dense
model's (M1: 0 was accepted while the message said "above zero")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFWriter
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing import SizingError, kv
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.hf_config import from_hf_config
from tests.sizing.test_hybrid_kv_sweep25_fx115 import JAMBA
from tests.sizing.test_model_shape import LLAMA_31_8B_CONFIG

HIDDEN, HEADS = 64, 4  # heads of 16 numbers


def hybrid_gguf(
    path: Path,
    arch: str,
    layers: int,
    kv_heads: int | list[int],
    extra: dict[str, Any] | None = None,
) -> Path:
    """A small GGUF from the gguf package's own writer, with `extra` keys (under the
    architecture's name) as llama.cpp's converters write them; every block holds a norm."""
    w = GGUFWriter(str(path), arch)
    w.add_name("test-hybrid")
    w.add_block_count(layers)
    w.add_head_count(HEADS)
    w.add_head_count_kv(kv_heads)  # type: ignore[arg-type]
    w.add_embedding_length(HIDDEN)
    w.add_context_length(2048)
    for suffix, value in (extra or {}).items():
        key = f"{arch}.{suffix}"
        if isinstance(value, list):
            w.add_array(key, value)
        else:
            w.add_uint32(key, value)
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros((HIDDEN,), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


PER_LAYER_HEAD = 2 * 16 * 2  # keys and values of 16 numbers, 2 bytes each (f16)


@pytest.mark.parametrize(
    ("arch", "layers", "kv_heads", "extra", "kept"),
    [
        # Jamba: attention at 4 of every 8, Mamba between (head_count_kv 0)
        ("jamba", 16, [2 if i % 8 == 4 else 0 for i in range(16)], None, 2),
        # Granite-4.0-H, LFM2: attention layers named by their KV heads, the rest 0
        ("granitehybrid", 10, [2 if i in (3, 8) else 0 for i in range(10)], None, 2),
        ("lfm2", 8, [0, 0, 2, 0, 0, 2, 0, 2], None, 3),
        # Qwen3-Next: every 4th layer full attention, linear attention between
        ("qwen3next", 16, 2, {"full_attention_interval": 4}, 4),
        ("qwen3next", 16, 2, None, 4),  # llama.cpp takes 4 when the key is absent
        ("qwen3next", 12, 2, {"full_attention_interval": 3}, 4),
        # the multi-token-prediction block past the trunk is attention
        ("qwen3next", 9, 2, {"full_attention_interval": 4, "nextn_predict_layers": 1}, 3),
        # an explicit true/false array: true marks a layer without a KV cache
        ("qwen35", 8, 2, {"attention.recurrent_layers": [True, True, True, False] * 2}, 2),
    ],
)
def test_a_hybrid_gguf_counts_only_the_layers_that_keep_a_cache(
    tmp_path: Path,
    arch: str,
    layers: int,
    kv_heads: int | list[int],
    extra: dict[str, Any] | None,
    kept: int,
) -> None:
    shape = from_gguf(hybrid_gguf(tmp_path / "m.gguf", arch, layers, kv_heads, extra))
    per_token = kv.kv_bytes_per_token(shape, "f16")
    assert per_token.bytes == kept * 2 * PER_LAYER_HEAD
    assert shape.attention_layers == kept
    assert shape.cache_layers == kept
    assert shape.n_layers == layers  # the weights still count every layer
    note = f"{kept} of {layers} layers keep a KV cache"
    assert any(n.startswith(note) for n in shape.notes)
    assert not any("differs from layer to layer" in n for n in shape.notes)
    assert f"each of its {kept} attention layers" in per_token.explanation


@pytest.mark.parametrize(
    ("arch", "kv_heads", "extra"),
    [
        ("llama", 2, None),
        ("gemma3", 2, {"attention.sliding_window": 512, "attention.sliding_window_pattern": 2}),
        ("qwen3next", 2, {"full_attention_interval": 1}),  # every layer full attention
    ],
)
def test_a_gguf_whose_layers_all_keep_a_cache_is_unchanged(
    tmp_path: Path, arch: str, kv_heads: int, extra: dict[str, Any] | None
) -> None:
    """Sliding-window layers keep a cache too (of fewer tokens): all 8 layers count."""
    shape = from_gguf(hybrid_gguf(tmp_path / "m.gguf", arch, 8, kv_heads, extra))
    assert shape.attention_layers is None
    assert kv.kv_bytes_per_token(shape, "f16").bytes == 8 * 2 * PER_LAYER_HEAD
    assert not any("keep a KV cache" in n for n in shape.notes)


def test_heads_that_differ_between_attention_layers_still_say_so(tmp_path: Path) -> None:
    shape = from_gguf(hybrid_gguf(tmp_path / "m.gguf", "nemotron_h", 4, [0, 2, 0, 4]))
    assert shape.attention_layers == 2
    assert kv.kv_bytes_per_token(shape, "f16").bytes == 6 * PER_LAYER_HEAD
    assert any("differs from layer to layer" in n for n in shape.notes)


@pytest.mark.parametrize("interval", [0, [4, 4]])
def test_a_full_attention_interval_that_is_not_a_count_is_refused(
    tmp_path: Path, interval: Any
) -> None:
    path = hybrid_gguf(
        tmp_path / "m.gguf", "qwen3next", 8, 2, {"full_attention_interval": interval}
    )
    with pytest.raises(SizingError, match=r"qwen3next\.full_attention_interval is .*whole number"):
        from_gguf(path)


def _size_kv(*args: str) -> str:
    result = CliRunner().invoke(app, ["size", "kv", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return re.sub(r"[ \t]+", " ", result.output)


def test_size_kv_shows_a_hybrids_attention_layers_of_its_layers(tmp_path: Path) -> None:
    path = hybrid_gguf(tmp_path / "q.gguf", "qwen3next", 16, 2, {"full_attention_interval": 4})
    assert "4 of 16 (attention only)" in _size_kv("--gguf", str(path))
    (tmp_path / "config.json").write_text(json.dumps(JAMBA))
    assert "4 of 32 (attention only)" in _size_kv("--config", str(tmp_path))


def test_size_kv_shows_a_dense_models_layers_alone(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B_CONFIG))
    shown = _size_kv("--config", str(tmp_path))
    assert re.search(r"layers\W+32\W", shown)
    assert "attention only" not in shown


@pytest.mark.parametrize("experts", [-1, "lots", 2.5])
def test_an_expert_count_refusal_says_0_is_a_dense_model(tmp_path: Path, experts: Any) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({**LLAMA_31_8B_CONFIG, "num_local_experts": experts})
    )
    with pytest.raises(SizingError) as caught:
        from_hf_config(tmp_path)
    assert "num_local_experts is" in str(caught.value)
    assert "must be a whole number, 0 for a dense model" in str(caught.value)
    assert "above zero" not in str(caught.value)


def test_experts_used_0_beside_experts_is_refused(tmp_path: Path) -> None:
    """0 used of 8 experts had been read as "no key says how many a token uses"."""
    cfg = {**LLAMA_31_8B_CONFIG, "num_local_experts": 8, "num_experts_per_tok": 0}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SizingError, match="num_experts_per_tok is 0, but the model has 8 experts"):
        from_hf_config(tmp_path)
