"""Reading a model's shape from config.json, safetensors headers, GGUF files and the known table."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFWriter
from safetensors.numpy import save_file

from felab_core.sizing import SizingError, kv
from felab_core.sizing.gguf_shape import from_gguf
from felab_core.sizing.hf_config import from_hf_config
from felab_core.sizing.known_models import KNOWN_MODELS, known_model
from felab_core.sizing.model_shape import resolve_shape

LLAMA_31_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
}


def write_gguf(
    path: Path,
    *,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | Sequence[int] = 2,
    hidden: int = 64,
    experts: int | None = None,
    used: int | None = None,
    key_length: int | None = None,
    arch: str = "llama",
    tensors: dict[str, Any] | None = None,
    every_block: bool = True,
) -> Path:
    """A small GGUF written with the gguf package's own writer; each block the tensors leave
    out gets its norm (`every_block`), as llama.cpp loads only a file holding every block."""
    w = GGUFWriter(str(path), arch)
    w.add_name("test-model")
    w.add_block_count(layers)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)  # type: ignore[arg-type]
    w.add_embedding_length(hidden)
    w.add_context_length(2048)
    if key_length is not None:
        w.add_key_length(key_length)
        w.add_value_length(key_length)
    if experts is not None and used is not None:
        w.add_expert_count(experts)
        w.add_expert_used_count(used)
    if tensors is None:
        tensors = {"blk.0.attn_q.weight": np.zeros((hidden, hidden), np.float32)}
    if tensors and every_block:
        named = {n.split(".")[1] for n in tensors if n.startswith("blk.")}
        tensors = {
            **tensors,
            **{
                f"blk.{i}.attn_norm.weight": np.zeros((hidden,), np.float32)
                for i in range(layers)
                if str(i) not in named
            },
        }
    for name, array in tensors.items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# ---------------------------------------------------------------- config.json


def test_llama_config_gives_128_kib_per_token(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B_CONFIG))
    shape = from_hf_config(tmp_path)
    assert (shape.n_layers, shape.n_kv_heads, shape.head_dim_k) == (32, 8, 128)
    assert shape.query_heads_per_kv_head == 4
    assert kv.kv_bytes_per_token(shape).bytes == 131_072
    assert shape.name == "meta-llama/Llama-3.1-8B-Instruct"
    assert "4 query heads share each KV head" in shape.describe()


def test_explicit_head_dim_overrides_hidden_over_heads() -> None:
    cfg = {
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "hidden_size": 2560,
        "head_dim": 256,
    }
    assert from_hf_config(cfg).head_dim_k == 256  # not 2560 / 8 = 320


def test_multimodal_config_reads_the_text_model() -> None:
    cfg = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "text_config": {
            "num_hidden_layers": 34,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "hidden_size": 2560,
            "head_dim": 256,
        },
    }
    shape = from_hf_config(cfg)
    assert shape.n_layers == 34 and shape.n_kv_heads == 4


def test_no_kv_head_count_means_no_gqa_and_says_so() -> None:
    shape = from_hf_config({"n_layer": 12, "n_head": 12, "n_embd": 768})
    assert shape.n_kv_heads == 12 and shape.head_dim_k == 64
    assert any("no grouped-query" in n for n in shape.notes)


def test_mla_config_uses_the_latent_size() -> None:
    cfg = {
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
    }
    shape = from_hf_config(cfg)
    assert kv.kv_bytes_per_token(shape, "bf16").bytes == 61 * 576 * 2


def test_missing_fields_are_named(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"vocab_size": 32000, "bos_token_id": 1}))
    with pytest.raises(
        SizingError, match=r"lacks num_hidden_layers, num_attention_heads, head_dim"
    ):
        from_hf_config(path)


def test_bad_json_and_wrong_values_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(SizingError, match="not valid JSON"):
        from_hf_config(path)
    with pytest.raises(SizingError, match="num_hidden_layers is 0"):
        from_hf_config({"num_hidden_layers": 0, "num_attention_heads": 8, "hidden_size": 512})
    with pytest.raises(SizingError, match="more KV heads than query heads"):
        from_hf_config(
            {
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 8,
                "hidden_size": 512,
            }
        )
    with pytest.raises(SizingError, match="does not exist"):
        from_hf_config(tmp_path / "nowhere")


def test_safetensors_headers_give_weights_and_active_experts(tmp_path: Path) -> None:
    cfg = {
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "hidden_size": 8,
        "num_local_experts": 4,
        "num_experts_per_tok": 1,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    save_file(
        {
            "model.layers.0.self_attn.q_proj.weight": np.zeros((8, 8), np.float32),  # 256 bytes
            "model.layers.0.block_sparse_moe.experts.0.w1.weight": np.zeros((4, 8), np.float32),
            "model.layers.0.block_sparse_moe.experts.1.w1.weight": np.zeros((4, 8), np.float32),
            "model.layers.0.block_sparse_moe.experts.2.w1.weight": np.zeros((4, 8), np.float32),
            "model.layers.0.block_sparse_moe.experts.3.w1.weight": np.zeros((4, 8), np.float32),
        },
        str(tmp_path / "model.safetensors"),
    )
    shape = from_hf_config(tmp_path)
    assert shape.weights_bytes == 256 + 4 * 128
    assert shape.active_weights_bytes == 256 + 128  # one of four experts per token
    assert shape.weights_read_per_token() == 384


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ([1, 2], "it is a JSON list, not an object of tensors"),
        ({"w": {"data_offsets": "ab"}}, "tensor w has data_offsets ab, not [start, end]"),
        ({"w": {"data_offsets": None}}, "tensor w has data_offsets None"),
        ({"w": {"data_offsets": [1]}}, "tensor w has data_offsets [1]"),
        ({"w": {"data_offsets": [9, 1]}}, "tensor w has data_offsets [9, 1]"),
        ({"w": {"data_offsets": ["0", "4900000000"]}}, "data_offsets ['0', '4900000000']"),
    ],
)
def test_a_damaged_safetensors_header_is_said(tmp_path: Path, header: object, said: str) -> None:
    """Fifteenth sweep H3: a list header or odd offsets crashed (AttributeError, TypeError)."""
    cfg = {"num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 8}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    body = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(len(body).to_bytes(8, "little") + body)
    with pytest.raises(SizingError, match="cannot read the safetensors header") as caught:
        from_hf_config(tmp_path)
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"kv_lora_rank": 512, "qk_rope_head_dim": "abc"}, "qk_rope_head_dim is 'abc'"),
        ({"kv_lora_rank": 512, "qk_rope_head_dim": -100_000}, "qk_rope_head_dim is -100000"),
        ({"kv_lora_rank": 512, "qk_rope_head_dim": [64]}, "qk_rope_head_dim is an array of 1 item"),
        ({"num_local_experts": 8, "num_experts_per_tok": 100}, "100 experts used per token, but"),
        ({"num_local_experts": -8, "num_experts_per_tok": 2}, "num_local_experts is -8"),
        ({"max_position_embeddings": "lots"}, "max_position_embeddings is 'lots'"),
    ],
)
def test_a_config_field_no_model_has_is_refused(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    """Fifteenth sweep H2/M2 (and fourteenth L3): a rope size "abc" crashed, a negative one gave
    a -26 GB cache, "100 of 8 experts" set a speed limit, a length "lots" was dropped silently."""
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_31_8B_CONFIG, **change}))
    with pytest.raises(SizingError, match=re.escape(said)):
        from_hf_config(tmp_path)


@pytest.mark.parametrize(
    "name", ["\x1b[31mred\x1b[0m", "line1\nerror: fake", {"a": 1}, "x" * 301, "\ud800"]
)
def test_a_config_name_that_is_no_name_gives_way_to_the_folder(tmp_path: Path, name: Any) -> None:
    """Fifteenth sweep H15/M8: escape codes and forged "error:" lines from _name_or_path reached
    the terminal and the memo; the folder's name is shown instead, as for a GGUF's name."""
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**LLAMA_31_8B_CONFIG, "_name_or_path": name}))
    assert from_hf_config(folder).name == "my-model"


def test_a_folder_name_that_is_not_utf8_is_shown_with_a_question_mark(tmp_path: Path) -> None:
    """Eighteenth sweep (c H2): a config folder named with byte 0xFF became the model's name and
    its source, and the memo stopped on writing it (exit 70)."""
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/\xffhf"))
    folder.mkdir()
    unnamed = {k: v for k, v in LLAMA_31_8B_CONFIG.items() if k != "_name_or_path"}
    (folder / "config.json").write_text(json.dumps(unnamed))
    shape = from_hf_config(folder)
    assert shape.name == "?hf"
    assert "?hf" in shape.source and shape.source.encode("utf-8")


# ---------------------------------------------------------------- GGUF


def test_gguf_shape_and_weight_bytes(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf")
    shape = from_gguf(path)
    assert (shape.n_layers, shape.n_heads, shape.n_kv_heads, shape.head_dim_k) == (2, 4, 2, 16)
    assert shape.context_length == 2048
    assert shape.weights_bytes == 64 * 64 * 4 + 64 * 4  # blk.1's norm beside blk.0's q
    assert kv.kv_bytes_per_token(shape, "f16").bytes == 2 * 2 * 2 * 16 * 2


def test_gguf_moe_reads_only_the_used_experts(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "moe.gguf",
        experts=8,
        used=2,
        tensors={
            "blk.0.attn_q.weight": np.zeros((64, 64), np.float32),
            "blk.0.ffn_gate_exps.weight": np.zeros((8, 16, 64), np.float32),
            "blk.0.ffn_gate_shexp.weight": np.zeros((16, 64), np.float32),
        },
    )
    shape = from_gguf(path)
    experts = 8 * 16 * 64 * 4
    other = 64 * 64 * 4 + 16 * 64 * 4 + 64 * 4  # the shared expert, blk.1's norm: always read
    assert shape.is_moe
    assert shape.weights_bytes == experts + other
    assert shape.active_weights_bytes == other + Fraction(experts * 2, 8)


def test_gguf_key_length_and_per_layer_kv_heads(tmp_path: Path) -> None:
    q = {"blk.0.attn_q.weight": np.zeros((4 * 32, 64), np.float32)}  # 4 heads of 32
    path = write_gguf(tmp_path / "k.gguf", layers=3, kv_heads=[2, 0, 2], key_length=32, tensors=q)
    shape = from_gguf(path)
    assert shape.head_dim_k == 32
    assert shape.kv_heads_by_layer == (2, 0, 2)
    assert kv.kv_bytes_per_token(shape, "f16").bytes == 4 * 64 * 2


def test_unreadable_gguf_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a gguf file at all")
    with pytest.raises(SizingError, match=r"cannot read .* as a GGUF model"):
        from_gguf(bad)
    with pytest.raises(SizingError, match="does not exist"):
        from_gguf(tmp_path / "missing.gguf")


def test_gguf_without_shape_keys_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "adapter.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_name("lora")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(SizingError, match=r"lacks llama.block_count, llama.attention.head_count"):
        from_gguf(path)


# ---------------------------------------------------------------- known models


@pytest.mark.parametrize(
    "name", ["Llama 3.1 8B", "llama3.1:8b", "llama-3.1-8b-instruct", "LLAMA_3.1_8B"]
)
def test_known_model_aliases(name: str) -> None:
    assert known_model(name).name == "Llama 3.1 8B"


def test_every_known_model_has_a_source_and_sane_shape() -> None:
    for row in KNOWN_MODELS:
        s = row.shape
        assert "config.json" in s.source
        assert s.n_heads % s.n_kv_heads == 0
        assert (s.params_active or 0) <= (s.params_total or 0)
        assert s.is_moe == (s.params_active != s.params_total)


def test_unknown_model_and_ambiguous_sources_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SizingError, match="not in felab's table"):
        known_model("gpt-7")
    with pytest.raises(SizingError, match="exactly one way"):
        resolve_shape()
    with pytest.raises(SizingError, match="exactly one way"):
        resolve_shape(model="llama-3.1-8b", gguf=tmp_path / "x.gguf")


QWEN25 = Path(__file__).parent / "fixtures" / "qwen2.5-7b-instruct"


def test_a_switched_off_sliding_window_warns_nothing(tmp_path: Path) -> None:
    """Qwen2.5 names a window size beside "use_sliding_window": false: no layer slides."""
    shape = from_hf_config(QWEN25)
    assert (shape.n_layers, shape.n_kv_heads, shape.head_dim_k) == (28, 4, 128)
    assert not any("sliding" in n for n in shape.notes)
    config = json.loads((QWEN25 / "config.json").read_text())

    def notes(**changes: Any) -> tuple[str, ...]:
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**config, **changes}))
        return from_hf_config(path).notes

    assert any("sliding" in n for n in notes(use_sliding_window=True))
    full = ["full_attention"] * 28
    assert not any("sliding" in n for n in notes(layer_types=full))  # newer configs list them
    mixed = ["sliding_attention", *full[1:]]
    assert any("sliding" in n for n in notes(layer_types=mixed, use_sliding_window=True))
    mistral = {k: v for k, v in config.items() if k != "use_sliding_window"}
    (tmp_path / "config.json").write_text(json.dumps({**mistral, "sliding_window": 4096}))
    assert any("sliding" in n for n in from_hf_config(tmp_path / "config.json").notes)


@pytest.mark.parametrize("length", [-1, 0])
def test_a_trained_context_below_one_token_is_refused(tmp_path: Path, length: int) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({**LLAMA_31_8B_CONFIG, "max_position_embeddings": length})
    )
    with pytest.raises(SizingError, match="max_position_embeddings is"):
        from_hf_config(tmp_path)


def test_a_config_key_given_twice_is_refused(tmp_path: Path) -> None:
    """Ninth sweep: num_hidden_layers 2, then 64: the last was used without a word."""
    (tmp_path / "config.json").write_text(
        '{"num_hidden_layers": 2, "num_hidden_layers": 64, "num_attention_heads": 4, '
        '"hidden_size": 64}'
    )
    with pytest.raises(SizingError, match="gives num_hidden_layers twice"):
        from_hf_config(tmp_path)


@pytest.mark.parametrize(
    "change, said",
    [
        ({"head_dim": 9_999_999}, "head_dim is 9,999,999 numbers per head"),
        ({"hidden_size": 9_999_872, "head_dim": None}, "hidden_size 9,999,872 over 32 heads"),
        ({"kv_lora_rank": 100_000}, "kv_lora_rank is 100,000 numbers per head"),
    ],
)
def test_a_head_wider_than_any_model_s_is_refused(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    """Twentieth sweep (c) C2: a head of 9,999,999 numbers priced 9.54 GiB per token."""
    config = {k: v for k, v in {**LLAMA_31_8B_CONFIG, **change}.items() if v is not None}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SizingError, match=re.escape(said)):
        from_hf_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA_31_8B_CONFIG, "head_dim": 256}))
    assert from_hf_config(tmp_path).head_dim_k == 256  # Gemma's width still reads


def test_a_gguf_head_wider_than_any_model_s_is_refused(tmp_path: Path) -> None:
    """Twentieth sweep (c) C2: key_length 9,999,999 in a GGUF was priced too."""
    path = write_gguf(tmp_path / "wide.gguf", key_length=9_999_999)
    with pytest.raises(SizingError, match=r"key_length is 9,999,999 numbers per head"):
        from_gguf(path)


def test_llama_4_scout_s_ten_million_token_context_reads(tmp_path: Path) -> None:
    """Twentieth sweep (c) C1: Scout's published 10,485,760 was called beyond any model."""
    config = {**LLAMA_31_8B_CONFIG, "max_position_embeddings": 10_485_760}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert from_hf_config(tmp_path).context_length == 10_485_760
    config["max_position_embeddings"] = 10**12
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SizingError, match="far beyond any model"):
        from_hf_config(tmp_path)


def test_experts_without_a_count_a_token_uses_are_said(tmp_path: Path) -> None:
    """Twentieth sweep (c) C6: num_local_experts 8 without num_experts_per_tok was read as a
    dense model without a word."""
    (tmp_path / "config.json").write_text(
        json.dumps({**LLAMA_31_8B_CONFIG, "num_local_experts": 8})
    )
    shape = from_hf_config(tmp_path)
    notes = " ".join(shape.notes)
    assert "num_local_experts says 8 experts, but no key says how many a token uses" in notes
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_31_8B_CONFIG))
    assert "experts" not in " ".join(from_hf_config(tmp_path).notes)
