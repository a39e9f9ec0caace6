"""A hybrid model's KV cache counts only the layers that keep one (sweep 25 H1: Jamba, Qwen3-Next
and Granite-4.0-H configs had been sized as if every layer were attention, 4-10x high, and the
memo said 30 conversations where about 240 fit), and 0 experts is a dense model (sweep 25 M1)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing import SizingError, kv
from felab_core.sizing.expert_params import moe_params
from felab_core.sizing.hf_config import from_hf_config
from tests.reports.conftest import SAMPLE_CSV
from tests.sizing.test_model_shape import LLAMA_31_8B_CONFIG

JAMBA: dict[str, Any] = {
    "architectures": ["JambaForCausalLM"],
    "model_type": "jamba",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "attn_layer_period": 8,
    "attn_layer_offset": 4,
    "expert_layer_period": 2,
    "expert_layer_offset": 1,
    "num_experts": 16,
    "num_experts_per_tok": 2,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_dt_rank": 256,
    "max_position_embeddings": 262144,
    "vocab_size": 65536,
    "torch_dtype": "bfloat16",
}
QWEN3_NEXT: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "intermediate_size": 5120,
    "num_attention_heads": 16,
    "num_hidden_layers": 48,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "full_attention_interval": 4,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "max_position_embeddings": 262144,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
}
GRANITE_H: dict[str, Any] = {
    "architectures": ["GraniteMoeHybridForCausalLM"],
    "model_type": "granitemoehybrid",
    "hidden_size": 1536,
    "intermediate_size": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 40,
    "num_key_value_heads": 4,
    "layer_types": ["attention" if i in (5, 15, 25, 35) else "mamba" for i in range(40)],
    "mamba_d_state": 128,
    "max_position_embeddings": 131072,
    "vocab_size": 100352,
    "torch_dtype": "bfloat16",
}


def _folder(tmp_path: Path, name: str, cfg: dict[str, Any]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def _per_token(cfg: dict[str, Any], tmp_path: Path) -> kv.KvPerToken:
    return kv.kv_bytes_per_token(from_hf_config(_folder(tmp_path, "m", cfg)), "bf16")


@pytest.mark.parametrize(
    ("cfg", "expected", "kept", "layers"),
    [
        (JAMBA, 16_384, 4, 32),  # attention at 4, 12, 20, 28
        (QWEN3_NEXT, 24_576, 12, 48),
        (
            {**QWEN3_NEXT, "layer_types": ["linear_attention"] * 3 * 12 + ["full_attention"] * 12},
            24_576,
            12,
            48,
        ),
        (
            {
                **{k: v for k, v in JAMBA.items() if not k.startswith("attn_layer")},
                "layers_block_type": ["attention" if i % 8 == 4 else "mamba" for i in range(32)],
            },
            16_384,
            4,
            32,
        ),
        (GRANITE_H, 8_192, 4, 40),
        (
            {**LLAMA_31_8B_CONFIG, "num_hidden_layers": 8, "hybrid_override_pattern": "M-M*M-M*"},
            2 * 2 * 8 * 128 * 2,
            2,
            8,
        ),
    ],
)
def test_a_hybrid_counts_only_the_layers_that_keep_a_cache(
    tmp_path: Path, cfg: dict[str, Any], expected: int, kept: int, layers: int
) -> None:
    per_token = _per_token(cfg, tmp_path)
    assert per_token.bytes == expected
    assert f"2 x {kept} layers" in per_token.formula
    note = f"{kept} of {layers} layers keep a KV cache"
    assert any(n.startswith(note) for n in per_token.shape.notes)
    assert "Mamba/linear attention" in per_token.explanation
    assert per_token.shape.n_layers == layers  # the weights still count every layer


@pytest.mark.parametrize(
    "cfg",
    [
        LLAMA_31_8B_CONFIG,
        {**LLAMA_31_8B_CONFIG, "layer_types": ["sliding_attention", "full_attention"] * 16},
        {**LLAMA_31_8B_CONFIG, "layer_types": ["full_attention"] * 32},
    ],
)
def test_a_model_of_attention_layers_only_is_unchanged(tmp_path: Path, cfg: dict[str, Any]) -> None:
    per_token = _per_token(cfg, tmp_path)
    assert per_token.bytes == 131_072
    assert per_token.formula.startswith("2 x 32 layers x 8 KV heads")
    assert per_token.shape.attention_layers is None
    assert not any("keep a KV cache" in n for n in per_token.shape.notes)
    assert "in every layer" in per_token.explanation


def test_qwen3_next_is_not_counted_as_an_attention_mixture(tmp_path: Path) -> None:
    """Its linear-attention layers' weights are not the attention formula's: share unknown."""
    shape = from_hf_config(_folder(tmp_path, "q", QWEN3_NEXT))
    assert moe_params(QWEN3_NEXT, shape) is None


def test_size_kv_of_jamba_prints_the_attention_layers_only(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "jamba", JAMBA)
    result = CliRunner().invoke(
        app, ["size", "kv", "--config", str(folder)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "16,384" in result.output
    assert "131,072" not in result.output
    assert "4 of 32 layers keep a KV cache" in re.sub(r"\s+", " ", result.output)


def test_the_memo_fits_eight_times_the_conversations_of_jamba(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "jamba", JAMBA)
    args = ["memo", "--csv", str(SAMPLE_CSV), "--chip", "H200", "--config", str(folder)]
    args += ["--model-bytes", "100GB", "--kv-memory", "30GiB", "--out", "-"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "**240 conversations at once**" in result.output
    assert "30 conversations" not in result.output


@pytest.mark.parametrize("used", [0, None])
def test_zero_experts_is_a_dense_model(tmp_path: Path, used: int | None) -> None:
    cfg = {**GRANITE_H, "num_local_experts": 0}
    if used is not None:
        cfg["num_experts_per_tok"] = used
    shape = from_hf_config(_folder(tmp_path, "g", cfg))
    assert not shape.is_moe
    assert shape.n_experts is None
    assert kv.kv_bytes_per_token(shape, "bf16").bytes == 8_192


@pytest.mark.parametrize(
    ("experts", "used", "words"),
    [(-1, 2, "num_local_experts is -1"), (0, 2, "2 experts used per token, but the model has 0")],
)
def test_negative_experts_or_more_used_than_there_are_is_refused(
    tmp_path: Path, experts: int, used: int, words: str
) -> None:
    cfg = {**LLAMA_31_8B_CONFIG, "num_local_experts": experts, "num_experts_per_tok": used}
    with pytest.raises(SizingError, match=words):
        from_hf_config(_folder(tmp_path, "bad", cfg))
