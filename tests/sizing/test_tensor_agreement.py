"""A model's shape held to its own tensors (twenty-second sweep (c) C1-C3, C7-C10, C13, C14,
C16, C18, C23): each figure the config (or GGUF metadata) gives, and the tensors give again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.hf_config import from_hf_config
from tests.sizing.test_model_shape import write_gguf

F = np.float32


def _llama(layers: int, hidden: int, heads: int, kv: int, ff: int = 0) -> dict[str, Any]:
    """A Llama's tensors (Hugging Face names), every layer's attention and feed-forward."""
    hd = hidden // heads
    ff = ff or 2 * hidden
    t: dict[str, Any] = {
        "model.embed_tokens.weight": np.zeros((32, hidden), F),
        "model.norm.weight": np.zeros((hidden,), F),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = np.zeros((heads * hd, hidden), F)
        t[p + "self_attn.k_proj.weight"] = np.zeros((kv * hd, hidden), F)
        t[p + "self_attn.v_proj.weight"] = np.zeros((kv * hd, hidden), F)
        t[p + "self_attn.o_proj.weight"] = np.zeros((hidden, heads * hd), F)
        t[p + "mlp.up_proj.weight"] = np.zeros((ff, hidden), F)
        t[p + "mlp.down_proj.weight"] = np.zeros((hidden, ff), F)
    return t


def _cfg(layers: int, hidden: int, heads: int, kv: int, **more: Any) -> dict[str, Any]:
    return {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": 2 * hidden,
        **more,
    }


def _hf(folder: Path, cfg: dict[str, Any], tensors: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def _refused(read: Any, path: Path) -> str:
    with pytest.raises(SizingError) as caught:
        read(path)
    return str(caught.value)


def test_an_honest_folder_reads(tmp_path: Path) -> None:
    shape = from_hf_config(_hf(tmp_path / "m", _cfg(8, 256, 4, 2), _llama(8, 256, 4, 2)))
    assert (shape.n_layers, shape.hidden_size, shape.n_kv_heads) == (8, 256, 2)


def test_a_config_s_layers_and_width_are_held_to_the_tensors(tmp_path: Path) -> None:
    """C1: 2 layers of width 2,048 had been priced beside 32 layers of width 4,096."""
    message = _refused(
        from_hf_config, _hf(tmp_path / "a", _cfg(2, 256, 4, 2), _llama(8, 256, 4, 2))
    )
    assert "the number of layers disagrees: num_hidden_layers 2 from" in message
    assert "layers 0 to 7 from the tensors listed in" in message
    message = _refused(
        from_hf_config, _hf(tmp_path / "b", _cfg(8, 128, 4, 2), _llama(8, 256, 4, 2))
    )
    assert "the model's width disagrees: hidden_size 128" in message
    assert "256 (model.norm.weight)" in message


def test_kv_heads_and_head_size_are_held_to_k_proj_and_q_proj(tmp_path: Path) -> None:
    """C2: 1 KV head beside k_proj rows of 8 (the cache 8x too small); a head_dim of 16 beside
    q_proj rows of heads x 128."""
    message = _refused(
        from_hf_config, _hf(tmp_path / "a", _cfg(8, 256, 4, 1), _llama(8, 256, 4, 2))
    )
    assert "key width disagrees: num_key_value_heads 1 x head size 64 = 64" in message
    assert "128 rows in model.layers.0.self_attn.k_proj.weight" in message
    cfg = _cfg(8, 256, 4, 2, head_dim=16)
    message = _refused(from_hf_config, _hf(tmp_path / "b", cfg, _llama(8, 256, 4, 2)))
    assert "width disagrees: num_key_value_heads 2 x head_dim 16 = 32" in message


def test_a_single_gguf_s_metadata_is_held_to_its_own_blocks_and_width(tmp_path: Path) -> None:
    """C3: block_count 2 beside blk.0 to blk.31 had priced 2 layers."""
    blocks = {f"blk.{i}.attn_norm.weight": np.zeros((64,), F) for i in range(4)}
    message = _refused(from_gguf, write_gguf(tmp_path / "a.gguf", layers=2, tensors=blocks))
    assert "llama.block_count 2 from the metadata of" in message and "layers 0 to 3" in message
    wide = {"blk.0.attn_norm.weight": np.zeros((64,), F), "output_norm.weight": np.zeros((256,), F)}
    message = _refused(from_gguf, write_gguf(tmp_path / "b.gguf", tensors=wide))
    assert "the model's width disagrees: llama.embedding_length 64" in message
    k = {"blk.0.attn_k.weight": np.zeros((64, 64), F)}  # 4 heads of 16: 64 rows are 4 KV heads
    message = _refused(from_gguf, write_gguf(tmp_path / "c.gguf", kv_heads=2, tensors=k))
    assert "llama.attention.head_count_kv 2 x head size 16 = 32" in message


def test_experts_are_counted_not_numbered(tmp_path: Path) -> None:
    """C7: experts 0 and 63 alone had been read as 64. C8: a mixture beside no experts."""
    cfg = _cfg(1, 64, 4, 2, num_local_experts=64, num_experts_per_tok=1)
    t = {f"model.layers.0.mlp.experts.{i}.up_proj.weight": np.zeros((64, 64), F) for i in (0, 63)}
    message = _refused(from_hf_config, _hf(tmp_path / "a", cfg, t))
    assert "num_local_experts 64 from" in message and "but 2 experts from" in message
    cfg = _cfg(8, 256, 4, 2, num_local_experts=8, num_experts_per_tok=2)
    message = _refused(from_hf_config, _hf(tmp_path / "b", cfg, _llama(8, 256, 4, 2)))
    assert "hold no experts' tensors (a dense model's)" in message


def test_aliases_of_one_figure_are_held_together(tmp_path: Path) -> None:
    """C13: n_layer 2 beside num_hidden_layers 32; a top level beside its text_config."""
    message = _refused(from_hf_config, _hf(tmp_path / "a", _cfg(8, 256, 4, 2, n_layer=2), {}))
    assert "num_hidden_layers 8 from" in message and "n_layer 2 from" in message
    cfg = {**_cfg(2, 256, 4, 2), "text_config": _cfg(8, 256, 4, 2)}
    message = _refused(from_hf_config, _hf(tmp_path / "b", cfg, {}))
    assert "(its text_config)" in message
    honest = {**_cfg(8, 256, 4, 2), "text_config": _cfg(8, 256, 4, 2), "n_layer": 8}
    assert from_hf_config(_hf(tmp_path / "c", honest, {})).n_layers == 8


def test_an_index_naming_half_its_own_shards_is_refused(tmp_path: Path) -> None:
    """C14: shard 2 of 2 had been left out as Mistral's "second copy"."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_cfg(2, 256, 4, 2)))
    t = _llama(2, 256, 4, 2)
    one = {k: v for k, v in t.items() if "layers.1." not in k}
    save_file(one, str(folder / "model-00001-of-00002.safetensors"))
    save_file(
        {k: v for k, v in t.items() if k not in one},
        str(folder / "model-00002-of-00002.safetensors"),
    )
    index = {"weight_map": dict.fromkeys(one, "model-00001-of-00002.safetensors")}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    message = _refused(from_hf_config, folder)
    assert "names 1 of the 2 shards" in message and "model-00002-of-00002" in message


def test_a_gguf_named_as_a_shard_without_split_count_is_refused(tmp_path: Path) -> None:
    """C9: NAME-00001-of-00002.gguf without split.count had been priced alone."""
    path = write_gguf(tmp_path / "m-00001-of-00002.gguf")
    message = _refused(from_gguf, path)
    assert "its name says shard 1 of 2, but its metadata gives no split.count" in message


def _split(path: Path, no: int, tensors: dict[str, Any], hidden: int = 64) -> None:
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "llama")
    if no == 0:
        w.add_name("m")
        w.add_block_count(2)
        w.add_head_count(4)
        w.add_head_count_kv(2)
        w.add_embedding_length(hidden)
    w.add_uint16("split.no", no)
    w.add_uint16("split.count", 2)
    for name, array in tensors.items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_shards_repeating_a_tensor_are_refused(tmp_path: Path) -> None:
    """C10: two shards listing one tensor had been summed twice."""
    t = {"blk.0.attn_norm.weight": np.zeros((64,), F)}
    _split(tmp_path / "m-00001-of-00002.gguf", 0, t)
    _split(tmp_path / "m-00002-of-00002.gguf", 1, t)
    message = _refused(from_gguf, tmp_path / "m-00001-of-00002.gguf")
    assert "a model's shards hold each tensor once" in message


def test_a_shard_s_width_is_read_from_any_tensor_carrying_it(tmp_path: Path) -> None:
    """C23: another model's shard without norm tensors had been added (only attn_norm read)."""
    _split(tmp_path / "m-00001-of-00002.gguf", 0, {"blk.0.attn_norm.weight": np.zeros((64,), F)})
    _split(tmp_path / "m-00002-of-00002.gguf", 1, {"blk.1.ffn_up.weight": np.zeros((512, 256), F)})
    message = _refused(from_gguf, tmp_path / "m-00001-of-00002.gguf")
    assert "the model's width disagrees" in message and "blk.1.ffn_up.weight" in message


def test_attention_alone_is_not_a_model_with_a_feed_forward(tmp_path: Path) -> None:
    """C18: an 8B config beside its attention tensors alone had been priced as the model."""
    t = {k: v for k, v in _llama(8, 256, 4, 2).items() if "mlp" not in k}
    message = _refused(from_hf_config, _hf(tmp_path / "a", _cfg(8, 256, 4, 2), t))
    assert "intermediate_size 512 from" in message and "hold no layer's feed-forward" in message


def test_the_size_refusal_advises_a_flag_every_command_takes(tmp_path: Path) -> None:
    """C16: "--model-bytes" was advised to size kv and size slots, which have no such flag."""
    cfg = _cfg(8, 256, 4, 2, _name_or_path="meta-llama/Llama-3.1-70B")
    message = _refused(from_hf_config, _hf(tmp_path / "a", cfg, _llama(8, 256, 4, 2)))
    assert "the model's size disagrees" in message and "--model-bytes" not in message
    assert "--model instead of its files" in message


def test_feed_forwards_under_other_names_and_attention_free_models_read() -> None:
    """Nemotron-H's MLP under `mixer.up_proj`, GPT-2's `mlp.c_fc`; a Mamba's intermediate_size
    is its mixer's width and it holds no attention: none is refused."""
    from felab_core.sizing.tensor_agreement import check_feed_forward

    hybrid = [
        ("backbone.layers.0.mixer.q_proj.weight", (8, 8)),
        ("backbone.layers.1.mixer.up_proj.weight", (8, 8)),
    ]
    mamba = [("backbone.layers.0.mixer.in_proj.weight", (8, 8))]
    gpt2 = [("h.0.attn.c_attn.weight", (8, 8)), ("h.0.mlp.c_fc.weight", (8, 8))]
    for tensors in (hybrid, mamba, gpt2):
        check_feed_forward("intermediate_size", 16, "config.json", tensors, "the tensors")


def test_another_set_s_shard_beside_an_index_is_said_not_called_a_copy(tmp_path: Path) -> None:
    """C14: a shard of another set the index does not name is left out, and said as such."""
    from felab_core.sizing.model_shape import weights_summary

    folder = _hf(tmp_path / "m", _cfg(2, 256, 4, 2), _llama(2, 256, 4, 2))
    index = {"weight_map": dict.fromkeys(_llama(2, 256, 4, 2), "model.safetensors")}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    save_file({"x": np.zeros((4,), F)}, str(folder / "old-00001-of-00001.safetensors"))
    summary = weights_summary(from_hf_config(folder))
    assert "old-00001-of-00001.safetensors is a shard of another set" in summary
    assert "second copy" not in summary


def test_explicit_head_sizes_tied_embeddings_and_gated_queries_read(tmp_path: Path) -> None:
    """Qwen3's and Gemma's head_dim beside a width it does not divide into (4 x 128 = 512 over
    256), tied embeddings (no lm_head), Qwen3-Next's q_proj holding each head's gate (2x)."""
    t = _llama(2, 256, 4, 2)
    for i in range(2):
        p = f"model.layers.{i}.self_attn."
        t[p + "q_proj.weight"] = np.zeros((4 * 128, 256), F)
        t[p + "k_proj.weight"] = np.zeros((2 * 128, 256), F)
        t[p + "v_proj.weight"] = np.zeros((2 * 128, 256), F)
    cfg = _cfg(2, 256, 4, 2, head_dim=128, tie_word_embeddings=True)
    assert from_hf_config(_hf(tmp_path / "qwen3", cfg, t)).head_dim_k == 128
    for i in range(2):
        t[f"model.layers.{i}.self_attn.q_proj.weight"] = np.zeros((2 * 4 * 128, 256), F)
    assert from_hf_config(_hf(tmp_path / "next", cfg, t)).n_heads == 4
