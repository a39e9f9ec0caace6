"""Two readings of one figure held to each other (the twenty-second sweep): the experts a config
names and the tensors hold, the tensors' size and the shape or name, heads x head size and the
width, a split GGUF's shards. Published shapes keep reading."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFWriter
from safetensors.numpy import save_file

from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.hf_config import from_hf_config
from tests.sizing.test_model_shape import write_gguf

SMALL = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
MB = np.zeros((512, 512), np.float32)  # 1 MiB


def _hf(folder: Path, cfg: dict[str, Any], tensors: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def _refused(read: Any, path: Path) -> str:
    with pytest.raises(SizingError) as caught:
        read(path)
    return str(caught.value)


# ---------------------------------------------------------------- experts


def test_a_config_s_expert_count_is_held_to_the_experts_the_tensors_hold(tmp_path: Path) -> None:
    """1,000 experts named over tensors of 8 (125x) had been read, a token's share 1/500."""
    cfg = {
        **SMALL,
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "num_local_experts": 1000,
        "num_experts_per_tok": 2,
    }
    experts = {f"model.layers.0.mlp.experts.{i}.up_proj.weight": MB for i in range(8)}
    message = _refused(from_hf_config, _hf(tmp_path / "m", cfg, experts))
    assert "the number of experts disagrees" in message
    assert "num_local_experts 1,000 from" in message
    assert "8 experts from the tensors listed in" in message and "model.safetensors" in message
    cfg["num_local_experts"] = 8  # the honest count reads
    assert from_hf_config(_hf(tmp_path / "m", cfg, experts)).n_experts == 8


def test_a_gguf_s_expert_count_is_held_to_its_expert_tensors(tmp_path: Path) -> None:
    tensors = {"blk.0.ffn_gate_exps.weight": np.zeros((8, 64, 512), np.float32)}
    path = write_gguf(tmp_path / "m.gguf", experts=1000, used=2, tensors=tensors)
    message = _refused(from_gguf, path)
    assert (
        "llama.expert_count 1,000" in message and "8 experts from the tensors listed in" in message
    )


# ---------------------------------------------------------------- the weights' size


def test_tensors_far_too_small_for_the_shape_are_refused(tmp_path: Path) -> None:
    """2 MB of tensors had been read as a 70B's weights (a speed limit thousands of times high)."""
    cfg = {
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "hidden_size": 8192,
    }
    folder = _hf(tmp_path / "m", cfg, {"a": MB, "b": MB})
    message = _refused(from_hf_config, folder)
    assert "the model's size disagrees" in message and "2.1 MB" in message
    assert "80 layers of width 8,192" in message and "config.json" in message


def test_tensors_far_from_the_size_the_name_gives_are_refused(tmp_path: Path) -> None:
    cfg = {**SMALL, "hidden_size": 64, "_name_or_path": "meta-llama/Llama-3.1-70B-Instruct"}
    message = _refused(from_hf_config, _hf(tmp_path / "m", cfg, {"a": MB, "b": MB}))
    assert "from its name 'meta-llama/Llama-3.1-70B-Instruct'" in message
    assert "about 70B weights" in message and "2.1 MB" in message
    cfg["_name_or_path"] = "tiny-0.0005B"  # 500k weights: 2 MB is 32 bits each
    assert from_hf_config(_hf(tmp_path / "m", cfg, {"a": MB, "b": MB})).weights_bytes


def test_a_mixture_named_by_its_active_weights_reads(tmp_path: Path) -> None:
    """Llama-4-Scout-17B-16E names 17B active of 109B: its bf16 files are 13 bits per named
    weight over 34, within the 16 experts' room."""
    cfg = {
        **SMALL,
        "num_hidden_layers": 1,  # the tensors hold layer 0 alone
        "hidden_size": 64,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "_name_or_path": "scout-0.0001B-16E",
    }
    experts = {"model.layers.0.feed_forward.experts.gate_up_proj": np.zeros((16, 64, 256), "f4")}
    assert from_hf_config(_hf(tmp_path / "m", cfg, experts)).n_experts == 16


# ---------------------------------------------------------------- attention width


@pytest.mark.parametrize(
    "cfg",
    [
        # published config.json shapes (Hugging Face), heads x head_dim against hidden_size
        {"hidden_size": 3584, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256},
        {
            "hidden_size": 5376,
            "num_attention_heads": 32,
            "num_key_value_heads": 16,
            "head_dim": 128,
        },
        {"hidden_size": 2560, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128},
        {"hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128},
        {"hidden_size": 4096, "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128},
        {"hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64},
        {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64},
        {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "multi_query_group_num": 2,
            "kv_channels": 128,
        },
    ],
    ids=[
        "gemma2-9b",
        "gemma3-27b",
        "qwen3-4b",
        "qwen3-0.6b",
        "glm45-air",
        "gpt-oss",
        "falcon-h1-0.5b",
        "chatglm",
    ],
)
def test_published_head_sizes_read(cfg: dict[str, Any]) -> None:
    assert from_hf_config({"num_hidden_layers": 2, **cfg}).n_heads == cfg["num_attention_heads"]


def test_a_head_size_far_from_the_width_is_refused() -> None:
    """head_dim 4,096 x 32 heads beside hidden_size 4,096 (32x) had priced a 32x cache."""
    cfg = {**SMALL, "num_attention_heads": 32, "hidden_size": 4096, "head_dim": 4096}
    with pytest.raises(SizingError) as caught:
        from_hf_config(cfg)
    message = str(caught.value)
    assert "the attention width disagrees" in message
    assert (
        "32 heads x 4,096 = 131,072" in message
        and "but 4,096 from hidden_size (32 times apart" in message
    )


def test_a_gguf_key_length_far_from_the_width_is_refused(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", heads=32, kv_heads=8, hidden=64, key_length=4096)
    message = _refused(from_gguf, path)
    assert "llama.attention.key_length" in message and "llama.embedding_length" in message


def test_a_latent_cache_is_not_held_to_the_width() -> None:
    """DeepSeek-V3's config: 128 heads beside 7,168 hidden and no head_dim (MLA)."""
    cfg = {
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "n_routed_experts": 256,
        "num_experts_per_tok": 8,
    }
    assert from_hf_config(cfg).latent_cache_dim == 576


# ---------------------------------------------------------------- split GGUF shards


def _shard(
    path: Path, no: int, *, arch: str = "llama", hidden: int = 64, block: int = 0, count: int = 4
) -> Path:
    w = GGUFWriter(str(path), arch)
    if no == 0:
        w.add_block_count(2)
        w.add_head_count(4)
        w.add_head_count_kv(2)
        w.add_embedding_length(64)
    w.add_uint16("split.no", no)
    w.add_uint16("split.count", 2)
    w.add_int32("split.tensors.count", count)  # the whole model's, in every shard
    w.add_tensor(f"blk.{block}.attn_norm.weight", np.zeros(hidden, np.float32))
    w.add_tensor(f"blk.{block}.ffn.weight", MB)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize(
    ("other", "said"),
    [
        ({"arch": "qwen2"}, "general.architecture disagrees"),
        ({"hidden": 8192, "block": 1}, "the model's width disagrees"),
        ({"block": 40}, "holds blk.40.attn_norm.weight, but the first shard"),
        ({"block": 1, "count": 700}, "split.tensors.count disagrees: 4 from the first shard"),
    ],
    ids=["architecture", "width", "blocks", "tensor-count"],
)
def test_a_shard_of_another_model_is_refused(
    tmp_path: Path, other: dict[str, Any], said: str
) -> None:
    """Another model's second shard beside the first had been added to its weights."""
    first = _shard(tmp_path / "m-00001-of-00002.gguf", 0)
    _shard(tmp_path / "m-00002-of-00002.gguf", 1, **other)
    message = _refused(from_gguf, first)
    assert said in message, message
    assert "m-00001-of-00002.gguf" in message and "m-00002-of-00002.gguf" in message


def test_shards_that_hold_fewer_tensors_than_their_count_are_refused(tmp_path: Path) -> None:
    """llama.cpp refuses the split whose shards list fewer tensors than split.tensors.count."""
    first = _shard(tmp_path / "m-00001-of-00002.gguf", 0, count=9)
    _shard(tmp_path / "m-00002-of-00002.gguf", 1, block=1, count=9)
    message = _refused(from_gguf, first)
    assert "tensor count disagrees: split.tensors.count 9 from" in message
    assert "4 tensors from its 2 shards together" in message


def test_one_model_s_shards_read_together(tmp_path: Path) -> None:
    first = _shard(tmp_path / "m-00001-of-00002.gguf", 0)
    _shard(tmp_path / "m-00002-of-00002.gguf", 1, block=1)
    assert from_gguf(first).weights_bytes == 2 * (MB.nbytes + 64 * 4)


# ---------------------------------------------------------------- expert tensors' names


def test_experts_not_named_experts_are_counted_as_experts(tmp_path: Path) -> None:
    """mlx_lm's switch_mlp and llama.cpp's older one-tensor-per-expert GGUFs had been read as
    dense: every expert counted for every token (C19)."""
    cfg = {
        **SMALL,
        "num_hidden_layers": 1,
        "hidden_size": 64,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
    }
    tensors = {"model.layers.0.mlp.switch_mlp.up_proj.weight": np.zeros((4, 256, 256), "f4")}
    shape = from_hf_config(_hf(tmp_path / "m", cfg, tensors))
    assert shape.active_weights_bytes == Fraction(shape.weights_bytes or 0, 4)
    old = {f"blk.0.ffn_gate.{i}.weight": np.zeros((256, 256), np.float32) for i in range(4)}
    path = write_gguf(tmp_path / "m.gguf", layers=1, experts=4, used=1, tensors=old)
    shape = from_gguf(path)
    assert shape.active_weights_bytes == Fraction(shape.weights_bytes or 0, 4)
    old["blk.0.ffn_gate.7.weight"] = old.pop("blk.0.ffn_gate.3.weight")  # experts 0 to 7?
    assert "8 experts from" in _refused(
        from_gguf, write_gguf(tmp_path / "n.gguf", experts=4, used=1, tensors=old)
    )


def test_size_kv_says_the_disagreement_with_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from felab.cli.main import app

    cfg = {**SMALL, "num_attention_heads": 32, "hidden_size": 4096, "head_dim": 4096}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    result = CliRunner().invoke(app, ["size", "kv", "--config", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "the attention width disagrees" in " ".join(result.output.split())
    assert "Traceback" not in result.output
