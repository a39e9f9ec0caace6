"""Sweep 24 (t2): a mixture of experts' config.json beside --model-bytes is read at the active
share its shapes give (H1: Mixtral's whole file was the speed limit, and believable speeds were
called impossible); a share felab cannot know makes the limit a lower bound, above which a speed
is unverified, not impossible; and a vLLM log of another model is refused (M1)."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.reports.memo import MachineSpec, MemoError, build_memo, render_markdown
from felab_core.sizing import speed_limit
from felab_core.sizing.hf_config import from_hf_config
from felab_core.sizing.known_models import known_model
from felab_core.sizing.vllm_log import parse_log
from tests.reports.conftest import MAC_INPUTS, SAMPLE_CSV, blank_row

runner = CliRunner()

MIXTRAL = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 32768,
    "sliding_window": None,
    "vocab_size": 32000,
    "torch_dtype": "bfloat16",
}
QWEN3_MOE = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "max_position_embeddings": 40960,
}
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_attention_heads": 128,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
}
QWEN25 = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
    "vocab_size": 152064,
    "torch_dtype": "bfloat16",
}
LLAMA_LOG = (
    "INFO 05-06 10:11:20 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: "
    "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=None, "
    "tokenizer='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=32768, "
    "tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, kv_cache_dtype=auto, "
    "device_config=cuda, seed=0, served_model_name=meta-llama/Llama-3.1-8B-Instruct, "
    "enable_prefix_caching=True\n"
    "INFO 05-06 10:11:40 [gpu_model_runner.py:1347] Model loading took 14.9889 GiB and 5.1 s\n"
    "INFO 05-06 10:11:50 [kv_cache_utils.py:634] GPU KV cache size: 463,328 tokens\n"
    "INFO 05-06 10:11:50 [kv_cache_utils.py:637] Maximum concurrency for 32,768 tokens per "
    "request: 14.14x\n"
)


def _config(tmp_path: Path, name: str, cfg: dict[str, object]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def _rows(*speeds: str) -> list[dict[str, str]]:
    return [
        blank_row(
            timestamp=f"2026-12-06T06:2{i}:00+00:00",
            host="vm",
            target=server,
            server=server,
            model="mixtral",
            preset="day2",
            concurrency="1",
            requests="5",
            ok="5",
            failed="0",
            ttft_p50_s="0.2",
            ttft_p95_s="0.3",
            writing_tps_p50=tps,
        )
        for i, (server, tps) in enumerate(zip(("ollama", "llamacpp"), speeds, strict=False))
    ]


def _mixtral_inputs(folder: Path):
    return replace(
        MAC_INPUTS,
        machines=(MachineSpec(chip="M4 Max (16-core CPU)"),),
        model=None,
        config=folder,
        model_bytes="26GB",
    )


def test_a_mixtral_config_beside_model_bytes_reads_the_active_share(tmp_path: Path) -> None:
    memo = build_memo(_rows("45"), _mixtral_inputs(_config(tmp_path, "mixtral", MIXTRAL)))
    shape = known_model("mixtral-8x7b")
    assert shape.params_active and shape.params_total
    table_share = Fraction(shape.params_active, shape.params_total)
    share = memo.weights / (26 * 10**9)
    assert abs(share - table_share) < Fraction(1, 100)  # 27.6 % as the table's 12.9B of 46.7B
    limit = memo.machines[0].limit.tokens_per_second
    assert 74 < limit < 78  # 546 GB/s ÷ 7.2 GB, not 546 ÷ 26 = 21
    assert not memo.impossible
    assert "2 of 8 experts" in memo.weights_note
    text = render_markdown(memo, charts=None)
    assert "cannot be right" not in text and "**impossible**" not in text


@pytest.mark.parametrize(
    ("cfg", "table"),
    [(QWEN3_MOE, "qwen3-30b-a3b")],
    ids=["qwen3-moe"],
)
def test_other_mixtures_configs_count_as_their_model_cards(
    tmp_path: Path, cfg: dict[str, object], table: str
) -> None:
    shape = from_hf_config(_config(tmp_path, "m", cfg))
    known = known_model(table)
    assert shape.params_total and shape.params_active and known.params_total
    assert abs(shape.params_total / known.params_total - 1) < 0.05
    assert (
        abs(
            Fraction(shape.params_active, shape.params_total)
            - (speed_limit.active_share(known) or 0)
        )
        < 0.01
    )


def test_deepseek_v3_config_counts_its_latent_attention_and_shared_expert(tmp_path: Path) -> None:
    shape = from_hf_config(_config(tmp_path, "dsv3", DEEPSEEK_V3))
    assert shape.params_total and shape.params_active
    assert 660e9 < shape.params_total < 690e9  # 671B
    assert 36e9 < shape.params_active < 39e9  # 37B active


def test_an_unknown_share_makes_the_limit_a_floor_not_a_verdict_of_impossible(
    tmp_path: Path,
) -> None:
    cfg = {k: v for k, v in MIXTRAL.items() if k != "num_experts_per_tok"}  # share unknown
    memo = build_memo(_rows("45", "50"), _mixtral_inputs(_config(tmp_path, "mix", cfg)))
    assert memo.machines[0].limit.lower_bound
    assert not memo.impossible
    assert all(r.check is not None and r.check.unverified for r in memo.rows)
    text = render_markdown(memo, charts=None)
    assert "at least about 21 tokens per second" in text
    assert "cannot be right" not in text and "**impossible**" not in text
    assert "unverified" in text


def test_size_limit_calls_a_speed_above_a_floor_unverified(tmp_path: Path) -> None:
    cfg = {k: v for k, v in MIXTRAL.items() if k != "num_experts_per_tok"}
    folder = _config(tmp_path, "mix", cfg)
    shape = from_hf_config(folder)
    reads = speed_limit.bytes_per_token(
        26 * 10**9, weights_at_most=speed_limit.share_unknown(shape)
    )
    limit = speed_limit.ceiling(546 * 10**9, reads)
    check = speed_limit.check_speed(45, limit)
    assert not check.impossible and check.unverified
    mixtral = _config(tmp_path, "mixtral", MIXTRAL)
    result = runner.invoke(
        app,
        [
            "size",
            "limit",
            "--chip",
            "M4 Max (16-core CPU)",
            "--config",
            str(mixtral),
            "--bits-per-weight",
            "4.5",
            "--measured",
            "50",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "typical" in result.output and "75" in result.output  # 12.9B active x 4.5 bits


def test_the_vllm_log_names_its_model() -> None:
    assert parse_log(LLAMA_LOG).model == "meta-llama/Llama-3.1-8B-Instruct"
    newer = "INFO non-default args: {'model': 'Qwen/Qwen2.5-7B', 'max_model_len': 8192}\n"
    assert parse_log(newer + "INFO GPU KV cache size: 100,000 tokens\n").model == "Qwen/Qwen2.5-7B"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "qwen2 Qwen2ForCausalLM", False),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2", True),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral", True),
        ("openai/gpt-oss-20b", "gpt_oss", True),
        ("/models/my-finetune", "qwen2", True),  # names no family: not judged
        ("cognitivecomputations/dolphin-2.9", "qwen2", True),  # 'dolphin' is no Phi
    ],
)
def test_families_of_names(a: str, b: str, same: bool) -> None:
    from felab_core.sizing.model_family import families  # new with the fix

    fa, fb = families(a), families(b)
    assert (not fa or not fb or bool(fa & fb)) is same


def _memo_cli(tmp_path: Path, *flags: str) -> tuple[int, str]:
    log = tmp_path / "v1.log"
    log.write_text(LLAMA_LOG)
    result = runner.invoke(
        app,
        ["memo", "--csv", str(SAMPLE_CSV), "--chip", "H100 SXM", "--vllm-log", str(log),
         "--no-charts", "-o", "-", *flags],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    return result.exit_code, " ".join((result.stderr or "").split()) + result.stdout


def test_a_vllm_log_of_another_model_is_refused(tmp_path: Path) -> None:
    folder = _config(tmp_path, "qwen", QWEN25)
    code, said = _memo_cli(tmp_path, "--config", str(folder), "--model-bytes", "15GB")
    assert code == 2, said
    assert "meta-llama/Llama-3.1-8B-Instruct" in said and "qwen" in said
    code, said = _memo_cli(tmp_path, "--model", "qwen2.5-7b", "--model-bytes", "15GB")
    assert code == 2, said
    assert "Qwen2.5 7B" in said


def test_the_vllm_log_of_the_same_model_is_read(tmp_path: Path) -> None:
    code, said = _memo_cli(tmp_path, "--model", "llama-3.1-8b", "--model-bytes", "16GB")
    assert code == 0, said
    assert "463,328 tokens" in said


def test_build_memo_refuses_the_mismatch_too(tmp_path: Path) -> None:
    log = tmp_path / "v1.log"
    log.write_text(LLAMA_LOG)
    inputs = replace(
        MAC_INPUTS,
        machines=(MachineSpec(chip="H100 SXM"),),
        model="qwen2.5-7b",
        model_bytes="15GB",
        kv_memory=None,
        vllm_log=log,
    )
    with pytest.raises(MemoError, match="another model"):
        build_memo(_rows("45"), inputs)
